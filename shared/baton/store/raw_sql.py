"""Hot statements sent in PostgreSQL's own ``$n`` form, converted once.

psycopg turns a query's ``%(name)s`` placeholders into ``$n`` at every execute, and caches the
conversion only for texts of up to 4,096 bytes; the claim (with its state) and the batch write
are longer, so each of their executions ran psycopg's placeholder scan over the whole text again
(a regular expression over 5-7 kB and the parts it finds, on every poll and every batch). A
:class:`RawStatement` is converted here once and executed through psycopg's ``RawCursor``, which
sends the text as it is, with the parameters in order: the same statement for the server (same
text every time), none of the per-execute work. It is prepared at its first run where the
connection prepares at all (psycopg would send it unprepared five times first, each parsed and
planned again: ~1 ms of server time each for the claim), never where it does not.

:func:`unsized_array` is the other half of keeping a prepared statement's plan: a list parameter
written so that PostgreSQL keeps one generic plan for it whatever the list's length.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import scalar_row

from baton.store.db import Conn

_PARAM = re.compile(r"%\((\w+)\)s")


def unsized_array(name: str, element: str) -> str:
    """The array parameter ``%(name)s`` (of ``element[]``) in a form whose length the planner
    does not read: ``(SELECT %(name)s::element[])::element[]``, evaluated once per run (an
    InitPlan). Write ``col = ANY(<this>)`` where a statement takes a list of ids of any length.

    Why: of a prepared statement, PostgreSQL plans the first five runs for their parameters
    (custom plans), then keeps a generic plan if it is not estimated costlier than their
    average. ``= ANY($1)`` is ten elements to a generic plan and the real count to a custom one,
    so with a long history the custom plan of a short list (1-9 ids) always looks cheaper, and
    such a statement was planned anew at every run, forever. Measured with 200,000 finished
    workflows: the batch read of 1-5 jobs cost the server 300-365 µs per run planned anew,
    70-125 µs on its generic plan. Behind the InitPlan both plans count alike (the estimate of
    an array not known when planning) and the generic one is kept; the index still probes each
    id, the array being known when the scan starts."""
    if not (name.isidentifier() and element.isidentifier()):
        raise ValueError(f"a parameter name and a type name, not {name!r} and {element!r}")
    return f"(SELECT %({name})s::{element}[])::{element}[]"


def unsized(sql: str, **elements: str) -> str:
    """``sql`` with each ``ANY(%(name)s::element[])`` it has, for each ``name=element`` given,
    written in the form of :func:`unsized_array` (for statements whose lists are mostly short)."""
    for name, element in elements.items():
        sql = sql.replace(f"ANY(%({name})s::{element}[])", f"ANY({unsized_array(name, element)})")
    return sql


class RawStatement:
    """A statement written with ``%(name)s`` placeholders, sent as ``$n``."""

    __slots__ = ("names", "query")

    def __init__(self, sql: str) -> None:
        names: list[str] = []

        def number(m: re.Match[str]) -> str:
            if m.group(1) not in names:
                names.append(m.group(1))
            return f"${names.index(m.group(1)) + 1}"

        text = _PARAM.sub(number, sql)
        if "%" in text:
            raise ValueError("a raw statement takes only %(name)s placeholders (no other %)")
        self.query = text.encode()
        self.names = tuple(names)

    def execute(self, conn: Conn, params: Mapping[str, Any]) -> psycopg.Cursor[dict[str, Any]]:
        """Execute with ``params`` (by name) on ``conn``; the cursor, to fetch from."""
        cur: psycopg.Cursor[dict[str, Any]] = psycopg.RawCursor(conn)
        # Prepared at once where the connection prepares at all (not behind RDS Proxy).
        prepare = True if conn.prepare_threshold is not None else None
        return cur.execute(self.query, [params[n] for n in self.names], prepare=prepare)

    def scalar(self, conn: Conn, params: Mapping[str, Any]) -> Any:
        """Execute with ``params`` (by name) on ``conn``: the first column of its first row
        (None: no row)."""
        cur = psycopg.RawCursor(conn, row_factory=scalar_row)
        prepare = True if conn.prepare_threshold is not None else None
        return cur.execute(self.query, [params[n] for n in self.names], prepare=prepare).fetchone()
