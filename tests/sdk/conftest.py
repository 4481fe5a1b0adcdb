"""Fixtures shared by the SDK's end-to-end tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from baton_worker import Registry, Runner


@pytest.fixture
def runners() -> Iterator[Callable[..., Runner]]:
    """Make runners; any still running at the end of the test are stopped (and must drain)."""
    made: list[Runner] = []

    def make(registry: Registry, **kwargs: Any) -> Runner:
        runner = Runner(registry, **kwargs)
        made.append(runner)
        return runner

    yield make
    for runner in made:
        assert runner.stop(timeout=30), "a runner did not drain within 30 s"
