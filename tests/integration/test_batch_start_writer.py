"""A batch start writes its instances' first decisions in one set-based statement
(``batch_sql.START_DECISIONS``) and leaves exactly the rows single starts leave: the same
definitions started with the same inputs, once one by one and once in one batch, end in the same
instances, steps, jobs, audit trails and events, with and without idempotency keys, whether the
first decision waits on a worker, a timer or a child, runs steps inline or ends the instance."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from baton.engine import writer
from baton.engine.service import Engine
from baton.engine.start_batch import StartItem
from baton.settings import EngineSettings
from baton.store.db import Database
from baton.store.raw_sql import RawStatement

from tests.integration.test_batch_writer import _definitions as batch_writer_definitions
from tests.support.helpers import service_step
from tests.support.rows import cohort_rows


def _definitions(cohort: str) -> list[dict[str, Any]]:
    """test_batch_writer's workflows (a sequence, a PARALLEL, a MAP, a sub-workflow...), and
    first decisions that run steps inline, wait on a timer or end the instance."""
    return [
        *batch_writer_definitions(cohort),
        {
            "name": f"inline-{cohort}",
            "timeoutSeconds": 600,
            "steps": [
                {"id": "v", "type": "SET_VARIABLE", "variables": {"got": "${workflow.input.n}"}},
                {
                    "id": "js",
                    "type": "SCRIPT",
                    "script": "({twice: $.n * 2})",
                    "input": {"n": "${workflow.input.n}"},
                },
                service_step("b", f"b-{cohort}", input={"twice": "${js.output.result.twice}"}),
            ],
        },
        {
            "name": f"done-{cohort}",
            "steps": [{"id": "v", "type": "SET_VARIABLE", "variables": {"x": "${workflow.input}"}}],
            "outputParameters": {"x": "${workflow.variables.x}"},
        },
        {
            "name": f"stop-{cohort}",
            "steps": [{"id": "end", "type": "TERMINATE", "status": "FAILED", "reason": "no"}],
        },
        {"name": f"nap-{cohort}", "steps": [{"id": "t", "type": "TIMER", "duration": "PT1H"}]},
    ]


def _items(cohort: str) -> list[StartItem]:
    """Every definition started at least once, the inputs numbered (the rows' order), some
    with a correlation id, every third with an idempotency key of the cohort's own."""
    names = [
        "seq",
        "inline",
        "par",
        "map",
        "done",
        "stop",
        "nap",
        "parent",
        "join",
        "inline",
        "map",
    ]
    items = []
    for n, name in enumerate(names, start=1):
        given: dict[str, Any] = {"n": n, "text": "é\u2028"}
        if name == "map":
            given["items"] = ["a", "b", "c"][: n % 3 + 1]
        items.append(
            StartItem(
                definition_name=f"{name}-{cohort}",
                input=given,
                correlation_id=f"c-{n}" if n % 2 else None,
                idempotency_key=f"{cohort}-{n}" if n % 3 == 0 else None,
            )
        )
    return items


# A timestamp the rows hold as such (a timeout, a timer): the two cohorts started apart.
_DATETIME = re.compile(r"datetime\.datetime\([^()]*(\([^()]*\))?\)")


def _rows(database_url: str, cohort: str) -> list[str]:
    return [_DATETIME.sub("<datetime>", line) for line in cohort_rows(database_url, cohort)]


class _Counted:
    """START_DECISIONS, counting its runs."""

    def __init__(self, statement: RawStatement) -> None:
        self.statement, self.runs = statement, 0

    def execute(self, conn: Any, params: Any) -> Any:
        self.runs += 1
        return self.statement.execute(conn, params)


def _start_both(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> int:
    """Start the single cohort one by one and the batch cohort in one batch; the runs of the
    set statement."""
    for cohort in ("single", "batch"):
        for definition in _definitions(cohort):
            engine.register_definition(definition)
    for item in _items("single"):
        _, created = engine.start_instance(
            definition_name=item.definition_name,
            input=item.input,
            correlation_id=item.correlation_id,
            idempotency_key=item.idempotency_key,
        )
        assert created
    counted = _Counted(writer.START_DECISIONS)
    monkeypatch.setattr(writer, "START_DECISIONS", counted)
    answers = engine.start_instances(_items("batch"))
    assert [a.outcome for a in answers] == ["STARTED"] * len(answers)
    return counted.runs


def test_a_batch_start_leaves_the_rows_single_starts_leave(
    engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _start_both(engine, monkeypatch)
    assert runs == 1  # every decision but the sub-workflow's, in one statement
    single, batch = _rows(database_url, "single"), _rows(database_url, "batch")
    text = "\n".join(single)
    for seen in ("'RUNNING'", "'COMPLETED'", "'FAILED'", "'UNLOCKED'", "'twice': 20", "<dat"):
        assert seen in text, seen
    assert batch == single
    with psycopg.connect(database_url) as conn:
        # The timeout and the timer: set alike (to the second: the two starts ran apart).
        got = conn.execute(
            """SELECT definition_name, count(*) FILTER (WHERE timeout_at IS NOT NULL),
                      count(*) FILTER (WHERE status = 'RUNNING')
                 FROM instance WHERE definition_name LIKE 'inline-%%' OR definition_name LIKE
                      'nap-%%' GROUP BY 1 ORDER BY 1"""
        ).fetchall()
    assert got == [
        ("inline-batch", 2, 2),
        ("inline-single", 2, 2),
        ("nap-batch", 0, 1),
        ("nap-single", 0, 1),
    ]


def test_a_batch_start_in_the_outbox_mode_writes_its_jobs_outbox_rows(
    db: Database, database_url: str
) -> None:
    engine = Engine(db, EngineSettings(dispatch_mode="outbox"))
    engine.register_definition({"name": "ob-start", "steps": [service_step("a", "ob-start")]})
    answers = engine.start_instances([StartItem(definition_name="ob-start") for _ in range(3)])
    assert [a.outcome for a in answers] == ["STARTED"] * 3
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            """SELECT j.dispatch_outbox, count(o.job_id) FROM job j
                 LEFT JOIN dispatch_outbox o ON o.job_id = j.id
                WHERE j.job_type = 'ob-start' GROUP BY j.id, j.dispatch_outbox"""
        ).fetchall()
    assert rows == [(True, 1)] * 3
