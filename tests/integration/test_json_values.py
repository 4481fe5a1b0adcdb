"""Values that the fast JSON path (baton.jsontext) must keep exactly, through PostgreSQL."""

from __future__ import annotations

from baton.engine.batch_ops import BatchResult
from baton.engine.service import Engine

from tests.support.helpers import one_step

BIG = 123456789012345678901234567890


def test_integers_past_64_bits_survive_start_complete_and_batch(engine: Engine) -> None:
    engine.register_definition(one_step("big-ints", "bi"))
    first = engine.start_instance(definition_name="big-ints", input={"big": BIG})[0]["id"]
    second = engine.start_instance(definition_name="big-ints", input={"big": -BIG})[0]["id"]
    jobs = {j["instanceId"]: j for j in engine.poll("w", ["bi"], 2)}
    a, b = jobs[second], jobs[first]
    engine.complete_job(b["id"], "w", {"out": BIG + 1, "text": "é ✓"})
    engine.complete_batch([BatchResult(a["id"], "w", 1, output={"out": -BIG - 1})])
    got = engine.get_instance(first)
    assert got["input"] == {"big": BIG}
    assert got["variables"] == {"out": BIG + 1, "text": "é ✓"}
    assert type(got["variables"]["out"]) is int
    assert engine.get_instance(second)["variables"] == {"out": -BIG - 1}
