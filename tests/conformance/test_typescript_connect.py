"""The conformance scenarios (scenarios.py) with the TypeScript SDK's worker on the Connect protocol
(BATON_PROTOCOL=connect: every call as its RPC, binary protobuf): the same runner behaviour as
over REST."""

from tests.conformance.scenarios import (  # noqa: F401 (collected by pytest)
    conformance,
    test_a_killed_worker_loses_no_job,
    test_every_handler_ends_its_instance_as_the_table_says,
    test_sigterm_finishes_the_running_handler_and_claims_nothing_more,
)

LANGUAGE = "typescript"
PROTOCOL = "connect"
