"""What the database did besides the metered backends during a timed phase: its own processes'
CPU (autovacuum, WAL writer, checkpointer), the autovacuum runs on a few tables, their dead rows
at the end, and what the busy backends were waiting on (sampled ten times a second from
``pg_stat_activity``). Used where one phase adds work beside another's (archiving beside a
drain) to tell "the drain was slowed by the database" from "the drain lost CPU share"."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from support.cpu import _TICK, postmaster_pid, server_cpu_seconds

SAMPLE_SECONDS = 0.1


@dataclass
class DbSide:
    url: str
    tables: Sequence[str]
    # Every server process over the phase, backends and the autovacuum workers that came and
    # went included (the postmaster reaps them: its children's CPU).
    server_cpu: float | None = None
    autovacuums: dict[str, int] = field(default_factory=dict)
    dead_rows: dict[str, int] = field(default_factory=dict)
    waits: Counter[str] = field(default_factory=Counter)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _postmaster: int | None = None
    _cpu0: float | None = None
    _vac0: dict[str, int] = field(default_factory=dict)

    def start(self) -> None:
        self._postmaster = postmaster_pid(self.url)
        self._cpu0 = _server_total(self._postmaster)
        self._vac0 = {t: n for t, n, _ in self._table_stats()}
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        cpu = _server_total(self._postmaster)
        self.server_cpu = None if cpu is None or self._cpu0 is None else cpu - self._cpu0
        for table, vacuums, dead in self._table_stats():
            self.autovacuums[table] = vacuums - self._vac0.get(table, 0)
            self.dead_rows[table] = dead

    def summary(self, top: int = 4) -> str:
        vac = ", ".join(f"{t} {n}" for t, n in self.autovacuums.items())
        dead = ", ".join(f"{t} {n:,}" for t, n in self.dead_rows.items())
        waited = ", ".join(
            f"{w} {100 * n / max(self.samples, 1):.0f}%" for w, n in self.waits.most_common(top)
        )
        return (
            f"autovacuum runs: {vac}; dead rows at the end: {dead}; "
            f"backends waiting (per sample): {waited or 'none'}"
        )

    def _table_stats(self) -> list[tuple[str, int, int]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT relname, autovacuum_count, n_dead_tup FROM pg_stat_user_tables"
                " WHERE relname = ANY(%s) ORDER BY relname",
                (list(self.tables),),
            ).fetchall()
        return [(str(r[0]), int(r[1]), int(r[2])) for r in rows]

    def _sample(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(SAMPLE_SECONDS):
                rows = conn.execute(
                    "SELECT wait_event_type || ':' || wait_event FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    " AND state = 'active' AND wait_event IS NOT NULL"
                ).fetchall()
                self.samples += 1
                self.waits.update(str(r[0]) for r in rows)


def _server_total(postmaster: int | None) -> float | None:
    """CPU seconds of the server so far: the postmaster, its children alive now, and those it
    has reaped (``cutime``/``cstime``)."""
    if postmaster is None:
        return None
    alive = server_cpu_seconds(postmaster)  # the postmaster and its children alive now
    try:
        stat = Path(f"/proc/{postmaster}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    reaped = (int(fields[13]) + int(fields[14])) / _TICK  # cutime, cstime
    return None if alive is None else alive + reaped
