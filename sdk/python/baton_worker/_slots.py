"""The runner's parallelism semaphore, in the shape the poll loop needs.

A poll asks for as many jobs as there are free slots, so the slots are reserved *before* the poll
(``acquire_up_to``) and the unused ones handed back when fewer jobs come (``release``). Every job
holds one slot from its dispatch until its outcome is reported.
"""

from __future__ import annotations

import threading
import time


class Slots:
    """``capacity`` slots; thread-safe."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._in_use = 0
        self._cond = threading.Condition()
        self._interrupted = False

    @property
    def in_use(self) -> int:
        with self._cond:
            return self._in_use

    @property
    def free(self) -> int:
        with self._cond:
            return self.capacity - self._in_use

    def acquire_up_to(
        self, n: int, *, timeout: float | None = None, gather: float = 0.0, enough: int = 1
    ) -> int:
        """Wait until at least one slot is free, then take up to ``n`` of them. With ``gather``:
        while fewer than ``enough`` are free and others are in use (they will free up), wait up
        to ``gather`` seconds more for them, so that one poll asks for more jobs.

        Returns how many were taken: 0 after ``timeout`` seconds or after :meth:`interrupt`.
        """
        if n < 1:
            raise ValueError("n must be at least 1")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._in_use >= self.capacity and not self._interrupted:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return 0
                self._cond.wait(remaining)
            if gather > 0:
                until = time.monotonic() + gather
                while (
                    self.capacity - self._in_use < min(enough, n)
                    and self._in_use
                    and not self._interrupted
                ):
                    remaining = until - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
            if self._interrupted:
                return 0
            taken = min(n, self.capacity - self._in_use)
            self._in_use += taken
            return taken

    def release(self, n: int = 1) -> None:
        """Give back ``n`` slots."""
        with self._cond:
            if n < 0 or n > self._in_use:
                raise ValueError(f"cannot release {n} slots: {self._in_use} in use")
            self._in_use -= n
            self._cond.notify_all()

    def interrupt(self) -> None:
        """Wake every waiter of :meth:`acquire_up_to`, which then takes nothing (shutdown)."""
        with self._cond:
            self._interrupted = True
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no slot is in use; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._in_use:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True
