"""BATON_DISPATCH_MODE: polling unless set to outbox; anything else is refused at the edge."""

from __future__ import annotations

import pytest
from baton.settings import ENV_DISPATCH_MODE, Settings, SettingsError


@pytest.mark.parametrize(
    ("raw", "mode", "outbox"),
    [
        (None, "polling", False),
        ("", "polling", False),
        ("polling", "polling", False),
        (" Outbox ", "outbox", True),
    ],
)
def test_dispatch_mode_from_the_environment(raw: str | None, mode: str, outbox: bool) -> None:
    env = {} if raw is None else {ENV_DISPATCH_MODE: raw}
    engine = Settings.from_env(env).engine
    assert engine.dispatch_mode == mode and engine.outbox is outbox


def test_an_unknown_dispatch_mode_is_refused() -> None:
    with pytest.raises(SettingsError, match="BATON_DISPATCH_MODE"):
        Settings.from_env({ENV_DISPATCH_MODE: "kafka"})


def test_queue_url_and_endpoint_come_from_the_environment() -> None:
    s = Settings.from_env(
        {"BATON_DISPATCH_QUEUE_URL": "https://sqs/q.fifo", "BATON_SQS_ENDPOINT": "http://x"}
    )
    assert s.dispatch_queue_url == "https://sqs/q.fifo" and s.sqs_endpoint == "http://x"


def test_the_claimed_state_cache_is_sized_from_the_environment() -> None:
    from baton.settings import ENV_CLAIMED_STATES

    assert Settings.from_env({}).engine.claimed_states == 4096
    assert Settings.from_env({ENV_CLAIMED_STATES: "0"}).engine.claimed_states == 0
    assert Settings.from_env({ENV_CLAIMED_STATES: " 100 "}).engine.claimed_states == 100
    with pytest.raises(SettingsError, match="BATON_CLAIMED_STATES"):
        Settings.from_env({ENV_CLAIMED_STATES: "-1"})


@pytest.mark.parametrize(
    ("name", "value"), [("BATON_CLAIMED_STATES", "abc"), ("BATON_DISPATCH_MODE", "kafka")]
)
def test_baton_dev_refuses_bad_engine_settings_before_it_starts(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import baton.local.runtime
    from baton.cli import main

    monkeypatch.setenv(name, value)
    monkeypatch.setattr(baton.local.runtime, "run", lambda options: 0)  # would serve: not here
    assert main(["dev", "--port", "0"]) == 2
    assert f"baton dev: error: {name}" in capsys.readouterr().err
