"""``baton instances graph ID`` and ``baton definitions graph NAME``: a workflow as a Mermaid
flowchart, for terminals and docs (paste it into any Mermaid renderer, or a Markdown file between
```` ```mermaid ```` fences).

The builder is pure: a definition's step tree (and, for a run, its step executions) in, Mermaid
text out. Each step is a node labelled with its id and type; a run's nodes carry their status as a
class (``COMPLETED``, ``IN_PROGRESS``, ..., ``NONE`` for a step that did not run), with a
``classDef`` colour per status. SWITCH cases and PARALLEL branches fan out from the operator and
join again; MAP and DO_WHILE bodies sit in a subgraph with a dashed edge back to their first step;
a SUB_WORKFLOW names its child run.

No ``--svg``: rendering Mermaid to SVG needs a JavaScript renderer (mermaid-cli pulls a browser
from the network), which this CLI does not ship.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from baton_worker.cli.options import Subparsers, leaf

if TYPE_CHECKING:
    from baton_worker.client import BatonClient

# Fill and stroke per status (the page's palette); NONE: the step has not run.
STATUS_STYLES: dict[str, str] = {
    "COMPLETED": "fill:#dafbe1,stroke:#1a7f37",
    "IN_PROGRESS": "fill:#ddf4ff,stroke:#0b57d0",
    "SCHEDULED": "fill:#fff8c5,stroke:#7a5c00",
    "FAILED": "fill:#ffebe9,stroke:#b3261e",
    "TIMED_OUT": "fill:#fff1e5,stroke:#bc4c00",
    "CANCELLED": "fill:#eaeef2,stroke:#57606a",
    "SKIPPED": "fill:#f6f8fa,stroke:#8c959f",
    "NONE": "fill:#ffffff,stroke:#8c959f",
}
_WAITING = ("IN_PROGRESS", "SCHEDULED")


def step_status(executions: Sequence[Mapping[str, Any]]) -> str:
    """One status for all the executions of a step (items of a MAP, iterations, retries):
    work still open wins, else the newest execution's status; NONE when it never ran."""
    if not executions:
        return "NONE"
    for waiting in _WAITING:
        if any(e.get("status") == waiting for e in executions):
            return waiting
    newest = max(executions, key=lambda e: str(e.get("createdAt") or ""))
    return str(newest.get("status") or "NONE")


def child_lists(step: Mapping[str, Any]) -> list[tuple[str, list[Mapping[str, Any]], bool]]:
    """The nested step lists of an operator: (edge label, steps, is a loop body)."""
    kind = step.get("type")
    if kind == "PARALLEL":
        branches = step.get("branches") or []
        return [(f"branch {i}", list(b or []), False) for i, b in enumerate(branches)]
    if kind == "SWITCH":
        cases = step.get("cases") or {}
        out: list[tuple[str, list[Mapping[str, Any]], bool]] = []
        if isinstance(cases, Mapping):
            out = [(str(k), list(v or []), False) for k, v in cases.items()]
        elif isinstance(cases, list):
            out = [
                (str(c.get("condition") or f"case {i}"), list(c.get("steps") or []), False)
                for i, c in enumerate(cases)
                if isinstance(c, Mapping)
            ]
        if step.get("default") is not None:
            out.append(("default", list(step.get("default") or []), False))
        return out
    if kind == "MAP":
        return [("each item", list(step.get("steps") or []), True)]
    if kind == "DO_WHILE":
        return [("loop", list(step.get("steps") or []), True)]
    return []


def _text(value: Any, limit: int = 60) -> str:
    """A label safe inside Mermaid's double quotes."""
    s = " ".join(str(value).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return (
        s.replace("&", "#amp;")
        .replace('"', "#quot;")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
        .replace("|", "#124;")
    )


@dataclass
class _Builder:
    executions: Mapping[str, Sequence[Mapping[str, Any]]] | None
    lines: list[str] = field(default_factory=list)
    classes: dict[str, list[str]] = field(default_factory=dict)
    count: int = 0

    def new_id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def node(self, step: Mapping[str, Any], indent: str) -> str:
        nid = self.new_id("s")
        sid, kind = step.get("id", "?"), str(step.get("type", "?"))
        execs = (self.executions or {}).get(str(sid), [])
        label = f"{_text(sid)}<br/>{_text(kind)}"
        if len(execs) > 1:
            label += f" x{len(execs)}"
        child = next((e.get("childInstanceId") for e in execs if e.get("childInstanceId")), None)
        if kind == "SUB_WORKFLOW":
            target = child or step.get("definitionName") or "inline"
            label += f"<br/>→ {_text(target)}"
        elif kind == "JQ":
            label += f"<br/>{_text(step.get('query', ''), 40)}"
        elif kind == "START_WORKFLOW":
            request = step.get("request")
            if isinstance(request, Mapping):
                target = request.get("name") or request.get("definitionName") or ""
                label += f"<br/>→ {_text(str(target))}"
        elif kind == "EVENT":
            label += f"<br/>→ {_text(str(step.get('sink', '')), 40)}"
        elif kind in ("HTTP", "HTTP_POLL"):
            request = step.get("request")
            if isinstance(request, Mapping):
                method = str(request.get("method") or "GET").upper()
                label += f"<br/>{_text(method)} {_text(str(request.get('uri', '')), 40)}"
        elif kind == "SWITCH" and step.get("script"):
            label += "<br/>by script"
        elif kind == "DO_WHILE" and step.get("whileLanguage") == "javascript":
            label += "<br/>while (JavaScript)"
        shapes = {
            "SWITCH": ('{"', '"}'),
            "SUB_WORKFLOW": ('[["', '"]]'),
            "TIMER": ('(["', '"])'),
            "TERMINATE": ('(("', '"))'),
        }
        left, right = shapes.get(kind, ('["', '"]'))
        self.lines.append(f"{indent}{nid}{left}{label}{right}")
        if self.executions is not None:
            self.classes.setdefault(step_status(execs), []).append(nid)
        return nid

    def steps(self, steps: Iterable[Mapping[str, Any]], indent: str) -> tuple[str, str] | None:
        """Draws a list; its (first node, last node), or None when empty."""
        first = last = None
        for step in steps:
            if not isinstance(step, Mapping):
                continue
            entry, exit_ = self.step(step, indent)
            if last is not None:
                self.lines.append(f"{indent}{last} --> {entry}")
            first = first or entry
            last = exit_
        return (first, last) if first and last else None

    def step(self, step: Mapping[str, Any], indent: str) -> tuple[str, str]:
        nid = self.node(step, indent)
        lists = child_lists(step)
        if not lists:
            return nid, nid
        join = self.new_id("j")
        self.lines.append(f'{indent}{join}(("&nbsp;"))')
        for label, body, loop in lists:
            if loop:
                sub = self.new_id("g")
                self.lines.append(f'{indent}subgraph {sub}["{_text(step.get("id"))}: {label}"]')
                ends = self.steps(body, indent + "  ")
                self.lines.append(f"{indent}end")
                if ends:
                    again = "next item" if step.get("type") == "MAP" else "repeat"
                    self.lines.append(f"{indent}{nid} --> {ends[0]}")
                    self.lines.append(f"{indent}{ends[1]} -.->|{again}| {ends[0]}")
                    self.lines.append(f"{indent}{ends[1]} --> {join}")
                continue
            ends = self.steps(body, indent)
            if ends:
                self.lines.append(f'{indent}{nid} -->|"{_text(label, 40)}"| {ends[0]}')
                self.lines.append(f"{indent}{ends[1]} --> {join}")
            else:
                self.lines.append(f'{indent}{nid} -->|"{_text(label, 40)}"| {join}')
        return nid, join


def mermaid(
    steps: Sequence[Mapping[str, Any]],
    executions: Iterable[Mapping[str, Any]] | None = None,
    *,
    title: str | None = None,
) -> str:
    """A Mermaid flowchart of a definition's ``steps``; with ``executions`` (a run's step
    executions), each node gets its status as a class."""
    by_step: dict[str, list[Mapping[str, Any]]] | None = None
    if executions is not None:
        by_step = {}
        for e in executions:
            by_step.setdefault(str(e.get("stepId")), []).append(e)
    b = _Builder(by_step)
    head = [f"---\ntitle: {_text(title, 120)}\n---"] if title else []
    b.lines.append("  start((start))")
    ends = b.steps(steps, "  ")
    b.lines.append("  finish((end))")
    if ends:
        b.lines.append(f"  start --> {ends[0]}")
        b.lines.append(f"  {ends[1]} --> finish")
    else:
        b.lines.append("  start --> finish")
    if by_step is not None:
        for status, style in STATUS_STYLES.items():
            b.lines.append(f"  classDef {status} {style}")
        for status, ids in sorted(b.classes.items()):
            if status not in STATUS_STYLES:  # a status this CLI does not know yet: no colour
                b.lines.append(f"  classDef {status} fill:#ffffff")
            b.lines.append(f"  class {','.join(ids)} {status}")
    return "\n".join([*head, "flowchart TD", *b.lines]) + "\n"


# --- the commands ------------------------------------------------------------------------------


def _all_steps(client: BatonClient, instance: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A run's step executions, paged through ``/steps`` when the instance view truncates them."""
    if instance.get("stepsTruncated"):
        return list(client.iter_steps(str(instance["id"])))
    return list(instance.get("steps") or [])


def _instance_graph(client: BatonClient, args: argparse.Namespace) -> None:
    instance = client.get_instance(args.id)
    definition = client.get_definition(
        str(instance["definitionName"]), version=instance.get("definitionVersion")
    )
    title = f"{instance['definitionName']} run {instance['id']} ({instance['status']})"
    print(mermaid(definition.get("steps") or [], _all_steps(client, instance), title=title), end="")


def _definition_graph(client: BatonClient, args: argparse.Namespace) -> None:
    d = client.get_definition(args.name, version=args.version)
    print(mermaid(d.get("steps") or [], title=f"{d['name']} v{d['version']}"), end="")


def _add(
    sub: Subparsers, help: str, body: Callable[[BatonClient, argparse.Namespace], None]
) -> argparse.ArgumentParser:
    return leaf(sub, "graph", help, body)


def add_instance_graph(sub: Subparsers) -> None:
    """``baton instances graph ID``."""
    p = _add(sub, "print a run as a Mermaid flowchart, steps coloured by status", _instance_graph)
    p.add_argument("id", metavar="ID")


def add_definition_graph(sub: Subparsers) -> None:
    """``baton definitions graph NAME [--version N]``."""
    p = _add(sub, "print a definition as a Mermaid flowchart", _definition_graph)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", type=int, help="a specific version (default: latest)")


__all__ = ["STATUS_STYLES", "add_definition_graph", "add_instance_graph", "mermaid", "step_status"]
