"""How the client commands print: aligned tables, ``key: value`` fields, or the API's JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

CELL_WIDTH = 60  # free-text cells (titles, errors, inputs) are cut to this in tables


def cell(value: Any, width: int | None = None) -> str:
    """One value as table text: ``-`` for None, ``yes``/``no``, compact JSON for structures."""
    if value is None:
        text = "-"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, int | float):
        text = str(value)
    else:
        text = json.dumps(value, separators=(",", ":"), default=str)
    text = text.replace("\n", " ")
    if width is not None and len(text) > width:
        text = text[: width - 3] + "..."
    return text


def when(value: Any) -> str:
    """An API timestamp, to the second: ``2026-01-02T03:04:05Z``."""
    if not isinstance(value, str):
        return cell(value)
    head, dot, _rest = value.partition(".")
    return head + "Z" if dot and value.endswith("Z") else value


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An aligned text table; an empty one says so."""
    body = [[cell(c) for c in row] for row in rows]
    if not body:
        return "(none)"
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    lines = [[h.upper() for h in headers], *body]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines
    )


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """``key: value`` lines, aligned; pairs whose value is None are left out."""
    shown = [(k, v) for k, v in pairs if v is not None]
    width = max((len(k) for k, _ in shown), default=0)
    return "\n".join(f"{k + ':':<{width + 1}} {cell(v)}" for k, v in shown)


def show(args: argparse.Namespace, data: Any, render: Callable[[Any], str]) -> None:
    """Print ``data`` as the API's JSON under ``--json``, else as ``render`` makes it."""
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print(render(data))


def error(message: str) -> None:
    """The one line a failed command prints on stderr."""
    print(f"error: {message}", file=sys.stderr)


__all__ = ["CELL_WIDTH", "cell", "error", "fields", "show", "table", "when"]
