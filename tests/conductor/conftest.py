"""A ``baton dev`` on the real functions for the Conductor-compatibility tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import LocalServer, _session_server


@pytest.fixture(scope="module")
def conductor_server(
    tmp_path_factory: pytest.TempPathFactory, e2e_database_url: str | None
) -> Iterator[LocalServer]:
    yield from _session_server(
        LocalServer, tmp_path_factory, "conductor-server", None, e2e_database_url
    )
