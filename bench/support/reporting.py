"""What a benchmark prints: progress lines stamped with the seconds since the run started, and
its results as plain aligned tables (no colours, no terminal tricks) so that output pasted into
an issue or ``docs/performance.md`` reads the same as on the terminal."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

_T0 = time.perf_counter()


def log(message: str) -> None:
    """A progress line, prefixed with the seconds since the benchmark started."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {message}", flush=True)


def rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def fmt_num(value: float | int | str | None, decimals: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:,.{decimals}f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """An aligned text table: first column left-aligned, the others right-aligned."""
    body = [list(map(str, r)) for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        out = [c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells)]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, body)])


class Progress:
    """Prints ``what: done/total (pct)`` each time another ``step`` fraction is reached."""

    def __init__(self, what: str, total: int, *, step: float = 0.2) -> None:
        self.what, self.total, self.step = what, total, step
        self._next = step

    def update(self, done: int) -> None:
        if self.total <= 0:
            return
        frac = done / self.total
        if frac + 1e-9 >= self._next:
            while self._next <= frac + 1e-9:
                self._next += self.step
            log(f"  {self.what}: {done:,}/{self.total:,} ({frac:.0%})")
