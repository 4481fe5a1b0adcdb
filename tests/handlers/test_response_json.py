"""An answer's body is written by orjson where it can, and means what json.dumps wrote."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class _Point:
    x: int


@pytest.mark.parametrize(
    "body",
    [
        {"jobs": [{"id": str(uuid.uuid4()), "attempt": 1, "input": {"n": 1.5, "ok": True}}]},
        {"name": "José", "emoji": "\U0001f600", "nested": [None, [], {}]},
        {
            "at": dt.datetime(2026, 11, 26, 13, 40, 45, 231000, tzinfo=dt.UTC),
            "day": dt.date(2026, 1, 2),
        },
        {"id": uuid.UUID(int=7), "point": _Point(3)},
        {"big": 2**70, "small": -(2**63)},  # past 64 bits: json.dumps writes it
        {1: "a non-string key"},
        {"bad": "\ud835 lone surrogate"},  # echoed in a refusal
        {"floats": [0.1, 1e16, 1e-7, -0.0, 123456789.125]},
    ],
)
def test_a_body_means_what_json_dumps_wrote(body: Any) -> None:
    from baton_lambda.http import _dumps

    text = _dumps(body)
    expected = json.dumps(body, separators=(",", ":"), default=str)
    assert json.loads(text) == json.loads(expected)
