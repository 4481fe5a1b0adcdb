"""The parent side of the sandbox: a small pool of child processes (``_child``) that run
JavaScript and jq for the engine, each call bounded in time, memory, stack and results.

Why processes: QuickJS's own time limit is coarse (a 0.05 s limit fired at 0.12 s, at over a
second on a busy machine), jq has none at all, and neither releases the interpreter while it
runs. A child can be killed, and its address space capped, so a runaway program costs one child
(started again on the next call) and fails its task with a reason; the engine's threads and
memory are never at stake. A call costs one pipe round trip (~0.1 ms) on top of the program.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from baton.errors import BatonError, Unavailable

_HEADER = struct.Struct(">I")
_START_SECONDS = 30.0  # a cold child imports QuickJS and jq
# How long a call waits for a busy pool to free a child (each call is bounded by its limits).
_TAKE_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one program may use. ``time_seconds`` is wall time for the whole call (the child is
    killed past it plus ``grace_seconds``); ``memory_bytes`` is QuickJS's heap;
    ``process_bytes`` caps the child's whole address space (jq's memory too)."""

    time_seconds: float = 1.0
    grace_seconds: float = 0.5
    memory_bytes: int = 64 << 20
    stack_bytes: int = 512 << 10
    process_bytes: int = 1 << 30
    max_results: int = 10_000
    max_output_bytes: int = 4 << 20


class ScriptFailed(BatonError):
    """A user's program failed: ``kind`` is timeout, memory, stack, syntax, script, results,
    output or crashed; the message says what happened in the user's terms."""

    title = "Script failed"

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class SandboxUnavailable(Unavailable):
    """The sandbox itself cannot serve (a child process would not start, or every child stayed
    busy): the engine's fault, not the program's, so a 503 to retry, never a failed task or a
    refused definition."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"the script sandbox is unavailable: {detail}", retry_after_seconds=5)


class _Child:
    """One sandbox process and its pipes."""

    def __init__(self, limits: SandboxLimits) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "baton.scripting._child", str(limits.process_bytes)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError as e:
            raise SandboxUnavailable(f"its process could not be started ({e})") from None
        self.buffer = b""
        try:
            self.call_frame(_START_SECONDS)  # its ready frame
        except ScriptFailed as e:
            raise SandboxUnavailable(f"its process did not start ({e.kind})") from None

    def send(self, request: dict[str, Any]) -> None:
        data = json.dumps(request).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(_HEADER.pack(len(data)) + data)
        self.process.stdin.flush()

    def call_frame(self, timeout: float) -> dict[str, Any]:
        """The next answer, or ScriptFailed when it is late (the child is then killed) or the
        child died (its memory ceiling, a crash)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self.buffer)
                if len(self.buffer) >= _HEADER.size + size:
                    frame = self.buffer[_HEADER.size : _HEADER.size + size]
                    self.buffer = self.buffer[_HEADER.size + size :]
                    return json.loads(frame)  # type: ignore[no-any-return]
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ScriptFailed("timeout", "the program ran out of time")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self.kill()
                raise ScriptFailed(
                    "crashed", "the program's sandbox ended (it ran out of memory or crashed)"
                )
            self.buffer += chunk

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


class Sandbox:
    """A pool of up to ``size`` sandbox processes, started on first use."""

    def __init__(self, limits: SandboxLimits | None = None, *, size: int = 4) -> None:
        self.limits = limits or SandboxLimits()
        self._idle: queue.LifoQueue[_Child] = queue.LifoQueue()
        self._lock = threading.Lock()
        self._started = 0
        self._size = size

    def javascript(self, script: str, bindings: Any) -> Any:
        """The completion value of ``script`` with ``$`` bound to ``bindings`` (as Conductor's
        javascript/graaljs evaluators give it); ScriptFailed if it fails or overruns."""
        return self._run("js", script, bindings)

    def jq(self, program: str, value: Any) -> list[Any]:
        """Every result of the jq ``program`` on ``value``; ScriptFailed if it fails or
        overruns."""
        results = self._run("jq", program, value)
        assert isinstance(results, list)
        return results

    def check(self, language: str, code: str) -> None:
        """Parse ``code`` (``language`` javascript or jq) without running it; ScriptFailed
        (kind ``syntax``) with the parser's message if it does not parse. A check that cannot
        finish (the sandbox would not start, or its child died or overran on a mere parse) is
        the engine's trouble, not the code's: SandboxUnavailable."""
        try:
            self._run("js-check" if language == "javascript" else "jq-check", code, None)
        except ScriptFailed as e:
            if e.kind == "syntax":
                raise
            raise SandboxUnavailable(f"the check did not finish ({e})") from None

    def close(self) -> None:
        """Stop every idle child (a busy one is stopped when its call returns)."""
        while True:
            try:
                self._idle.get_nowait().kill()
            except queue.Empty:
                return

    def _run(self, lang: str, code: str, value: Any) -> Any:
        limits = self.limits
        request = {
            "lang": lang,
            "code": code,
            "input": json.dumps(value, allow_nan=False),
            "time": limits.time_seconds,
            "memory": limits.memory_bytes,
            "stack": limits.stack_bytes,
            "results": limits.max_results,
        }
        child = self._take()
        try:
            child.send(request)
            answer = child.call_frame(limits.time_seconds + limits.grace_seconds)
        except OSError as e:  # a broken pipe: the child had died
            child.kill()
            raise ScriptFailed("crashed", f"the program's sandbox ended ({e})") from None
        finally:
            self._give_back(child)  # a child killed above frees its place
        if not answer["ok"]:
            raise ScriptFailed(answer["kind"], answer["error"])
        text = answer["value"]
        if len(text) > limits.max_output_bytes:
            raise ScriptFailed(
                "output",
                f"the program's result is {len(text):,} bytes of JSON, more than the "
                f"{limits.max_output_bytes:,} allowed",
            )
        return json.loads(text)

    def _take(self) -> _Child:
        """An idle child, a new one while the pool has room, else the next one freed within
        ``_TAKE_SECONDS`` (SandboxUnavailable past it)."""
        wait = 0.0
        deadline = time.monotonic() + _TAKE_SECONDS
        while True:
            try:
                child = self._idle.get(timeout=wait) if wait else self._idle.get_nowait()
            except queue.Empty:
                child = None
            if child is not None:
                if child.alive:
                    return child
                self._give_back(child)  # died while idle: its place frees
                continue
            with self._lock:
                start = self._started < self._size
                if start:
                    self._started += 1
            if start:
                try:
                    return _Child(self.limits)
                except BaseException:
                    with self._lock:
                        self._started -= 1
                    raise
            if time.monotonic() >= deadline:
                raise SandboxUnavailable(
                    f"all {self._size} sandbox processes stayed busy for {_TAKE_SECONDS:g} s"
                )
            wait = 0.1  # every child is busy: wait for one (or for a place to free)

    def _give_back(self, child: _Child) -> None:
        if child.alive:
            self._idle.put(child)
            return
        child.kill()  # reaps it and closes its pipes
        with self._lock:
            self._started -= 1


@functools.cache
def default_sandbox() -> Sandbox:
    """The process's shared sandbox pool (created on first use)."""
    return Sandbox()


@functools.cache
def shared_sandbox(limits: SandboxLimits) -> Sandbox:
    """The process's one sandbox pool with ``limits`` (an engine's; created on first use, its
    children started on first call)."""
    return default_sandbox() if limits == SandboxLimits() else Sandbox(limits)
