"""The conformance scenarios (scenarios.py) with the Go SDK's worker on the Connect protocol
(BATON_PROTOCOL=connect: every call as its RPC, binary protobuf): the same runner behaviour as
over REST."""

from tests.conformance.scenarios import (  # noqa: F401 (collected by pytest)
    Conformance,
    conformance,
    test_a_killed_worker_loses_no_job,
    test_every_handler_ends_its_instance_as_the_table_says,
    test_sigterm_finishes_the_running_handler_and_claims_nothing_more,
)

LANGUAGE = "go"
PROTOCOL = "connect"


def test_the_go_worker_takes_its_wire_from_baton_protocol(
    conformance: Conformance,  # noqa: F811 (the fixture imported above)
) -> None:
    """BATON_PROTOCOL=connect reaches the Go client: the worker says which wire it uses (without
    the setting honoured, every scenario above would pass over REST and prove nothing)."""
    worker = conformance.worker()
    assert " over connect" in worker.log(), worker.log()
