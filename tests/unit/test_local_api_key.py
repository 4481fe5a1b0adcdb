"""The key of ``baton dev``: generated once, kept in the data directory (0600), found by clients;
a key chosen with BATON_API_KEY is written there too: the file never disagrees with the server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from baton.local.datadir import resolve_api_key
from baton.local.options import DevOptions, OptionError
from baton_worker.env import api_key_from_env, local_api_key


def test_first_start_generates_a_key_kept_private_and_later_starts_reuse_it(
    tmp_path: Path,
) -> None:
    options = DevOptions(data_dir=tmp_path / "data")
    first = resolve_api_key(options)
    path = tmp_path / "data" / "api-key"
    assert path.read_text().strip() == first.value
    assert path.stat().st_mode & 0o777 == 0o600
    assert "generated" in first.source and str(path) in first.source
    again = resolve_api_key(options)
    assert again.value == first.value
    assert "kept in" in again.source


def test_environment_key_wins_and_is_written_to_the_key_file(tmp_path: Path) -> None:
    path = tmp_path / "data" / "api-key"
    options = DevOptions(data_dir=tmp_path / "data", api_key="mine-0123456789")
    key = resolve_api_key(options)
    assert key.value == "mine-0123456789"
    assert path.read_text().strip() == "mine-0123456789"
    assert path.stat().st_mode & 0o777 == 0o600
    assert "BATON_API_KEY" in key.source and f"written to {path}" in key.source


def test_environment_key_replaces_a_kept_key_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "api-key"
    path.write_text("generated-earlier-key\n")
    os.chmod(path, 0o644)
    key = resolve_api_key(DevOptions(data_dir=tmp_path, api_key="dev-key"))
    assert path.read_text() == "dev-key\n"  # short keys chosen by hand are fine
    assert path.stat().st_mode & 0o777 == 0o600
    assert "replacing the key kept there" in key.source
    again = resolve_api_key(DevOptions(data_dir=tmp_path, api_key="dev-key"))
    assert f"kept in {path}" in again.source


@pytest.mark.parametrize("bad", ["has space", "tab\tkey", "line\nbreak", "é-accent"])
def test_an_environment_key_that_cannot_be_a_line_of_the_file_is_refused(
    tmp_path: Path, bad: str
) -> None:
    with pytest.raises(OptionError, match="visible ASCII"):
        resolve_api_key(DevOptions(data_dir=tmp_path, api_key=bad))
    assert not (tmp_path / "api-key").exists()


def test_a_kept_key_readable_by_others_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "api-key"
    path.write_text("hand-written-key\n")
    os.chmod(path, 0o644)
    assert resolve_api_key(DevOptions(data_dir=tmp_path)).value == "hand-written-key"
    assert path.stat().st_mode & 0o777 == 0o600


def test_an_unusable_kept_key_is_refused_with_the_remedy(tmp_path: Path) -> None:
    (tmp_path / "api-key").write_text("has spaces in it\n")
    with pytest.raises(OptionError, match="delete the file"):
        resolve_api_key(DevOptions(data_dir=tmp_path))


def test_an_empty_key_file_is_replaced_by_a_generated_key(tmp_path: Path) -> None:
    (tmp_path / "api-key").write_text("\n")
    key = resolve_api_key(DevOptions(data_dir=tmp_path))
    assert len(key.value) >= 16


# --- the client's side ---------------------------------------------------------------------------


def test_client_finds_the_key_in_the_data_directory_for_a_local_url(tmp_path: Path) -> None:
    (tmp_path / "api-key").write_text("local-key-123\n")
    env = {"BATON_DATA_DIR": str(tmp_path)}
    for url in ("http://127.0.0.1:8080", "http://localhost:9000/", "http://[::1]:8080"):
        assert local_api_key(url, env) == "local-key-123"
        assert api_key_from_env(url, env) == "local-key-123"


def test_client_default_data_directory_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".baton" / "data").mkdir(parents=True)
    (tmp_path / ".baton" / "data" / "api-key").write_text("cwd-key-123\n")
    monkeypatch.chdir(tmp_path)
    assert api_key_from_env("http://127.0.0.1:8080", {}) == "cwd-key-123"


def test_environment_key_wins_and_remote_hosts_never_get_the_local_key(tmp_path: Path) -> None:
    (tmp_path / "api-key").write_text("local-key-123\n")
    env = {"BATON_DATA_DIR": str(tmp_path)}
    assert api_key_from_env("http://127.0.0.1:8080", {**env, "BATON_API_KEY": "k"}) == "k"
    assert api_key_from_env("https://abc.execute-api.us-east-1.amazonaws.com/prod", env) is None
    missing = {"BATON_DATA_DIR": str(tmp_path / "x")}
    assert api_key_from_env("http://127.0.0.1:8080", missing) is None
