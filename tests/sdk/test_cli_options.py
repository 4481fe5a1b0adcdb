"""The client commands' shared pieces without a server: where the connection and output options
may be typed, JSON arguments, and the table and field formatting."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
from baton_worker.cli import build_parser
from baton_worker.cli.options import UsageError, json_arg, json_object_arg
from baton_worker.cli.output import cell, fields, table, when


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "instances", "list"],
        ["instances", "--json", "list"],
        ["instances", "list", "--json"],
    ],
)
def test_json_works_before_between_and_after_the_command(argv: list[str]) -> None:
    assert parse(*argv).json is True


@pytest.mark.parametrize(
    "argv",
    [
        ["--url", "http://api", "--api-key", "k", "queues", "stats", "q"],
        ["queues", "stats", "q", "--url", "http://api", "--api-key", "k"],
        ["--url", "http://api", "queues", "stats", "q", "--api-key", "k"],
    ],
)
def test_url_and_api_key_work_wherever_they_are_typed(argv: list[str]) -> None:
    args = parse(*argv)
    assert (args.url, args.api_key) == ("http://api", "k")


def test_a_command_does_not_clobber_what_was_typed_before_it() -> None:
    args = parse("--json", "--timeout", "5", "--iam", "worker", "run", "m:registry")
    assert (args.json, args.timeout, args.iam) == (True, 5.0, True)


def test_the_option_typed_last_wins() -> None:
    assert parse("--url", "http://a", "instances", "list", "--url", "http://b").url == "http://b"


def test_defaults_when_no_option_is_given() -> None:
    args = parse("instances", "list")
    assert (args.url, args.api_key, args.iam, args.timeout, args.json) == (
        None,
        None,
        False,
        30.0,
        False,
    )


def test_json_arguments_inline_from_a_file_and_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert json_arg('{"a": 1}', "--input") == {"a": 1}
    (tmp_path / "in.json").write_text("[1, 2]")
    assert json_arg(f"@{tmp_path / 'in.json'}", "--input") == [1, 2]
    monkeypatch.setattr("sys.stdin", io.StringIO('"text"'))
    assert json_arg("@-", "--payload") == "text"
    assert json_arg(None, "--input") is None
    with pytest.raises(UsageError, match="--input must be a JSON object"):
        json_object_arg("[1]", "--input")
    with pytest.raises(UsageError, match="--input is not valid JSON"):
        json_arg("{nope", "--input")


def test_table_aligns_columns_and_says_when_empty() -> None:
    text = table(["id", "status"], [["a", "RUNNING"], ["bbbb", None]])
    assert text.splitlines() == ["ID    STATUS", "a     RUNNING", "bbbb  -"]
    assert table(["id"], []) == "(none)"


def test_cells_fields_and_timestamps() -> None:
    assert cell(True) == "yes"
    assert cell({"a": [1, 2]}) == '{"a":[1,2]}'
    assert cell("x" * 100, 10) == "x" * 7 + "..."
    assert cell("two\nlines") == "two lines"
    assert when("2026-01-02T03:04:05.123456Z") == "2026-01-02T03:04:05Z"
    assert fields([("name", "n"), ("skipped", None), ("version", 2)]) == "name:    n\nversion: 2"
