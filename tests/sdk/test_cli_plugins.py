"""One ``baton`` command from two packages, assembled once: the SDK's ``main`` builds the parser
from the ``baton.commands`` entry points; the engine's ``main`` hands over to it (or, with no SDK
installed, serves ``dev`` alone). Neither package imports the other."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import baton.cli as engine_cli
import pytest
from baton_worker import cli as sdk_cli

ROOT = Path(__file__).resolve().parents[2]
CLIENT_COMMANDS = {"definitions", "taskdefs", "instances", "jobs", "queues", "schedules", "worker"}


def commands_of(parser: argparse.ArgumentParser) -> set[str]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def only(*entries: EntryPoint) -> object:
    """A stand-in for ``importlib.metadata.entry_points`` that knows only ``entries``."""
    return lambda group: [e for e in entries if e.group == group]


DEV = EntryPoint("dev", "baton.cli:register", "baton.commands")
CLIENT = EntryPoint("client", "baton_worker.cli:register", "baton.commands")


def test_both_packages_main_give_the_same_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert commands_of(sdk_cli.build_parser()) == CLIENT_COMMANDS | {"dev"}
    helps = []
    for main in (engine_cli.main, sdk_cli.main):
        with pytest.raises(SystemExit):
            main(["--help"])
        helps.append(capsys.readouterr().out)
    assert helps[0] == helps[1]
    assert "dev" in helps[0] and "instances" in helps[0]


def test_version_names_every_installed_package(capsys: pytest.CaptureFixture[str]) -> None:
    for main in (engine_cli.main, sdk_cli.main):
        with pytest.raises(SystemExit):
            main(["--version"])
        assert capsys.readouterr().out.strip() == "baton 0.1.0, baton-worker 0.1.0"


def test_the_command_is_assembled_in_one_place() -> None:
    """Only the SDK reads the ``baton.commands`` group; the engine only registers into it."""
    readers = [
        path
        for folder in (ROOT / "shared" / "baton", ROOT / "sdk" / "python" / "baton_worker")
        for path in folder.rglob("*.py")
        if "baton.commands" in path.read_text(encoding="utf-8").replace("``baton.commands``", "")
    ]
    assert readers == [ROOT / "sdk" / "python" / "baton_worker" / "cli" / "__init__.py"]
    assert not hasattr(engine_cli, "build_parser")


def test_sdk_alone_offers_the_client_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_cli, "entry_points", only(CLIENT))
    assert commands_of(sdk_cli.build_parser()) == CLIENT_COMMANDS
    monkeypatch.setattr(sdk_cli, "entry_points", only())  # not even installed: still itself
    assert commands_of(sdk_cli.build_parser()) == CLIENT_COMMANDS


def test_engine_alone_offers_dev(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the SDK the only ``baton`` script is the engine's own: it serves ``dev``."""
    own = EntryPoint("baton", "baton.cli:main", "console_scripts")
    monkeypatch.setattr(engine_cli, "entry_points", lambda group, name: [own])
    with pytest.raises(SystemExit):
        engine_cli.main(["--help"])
    out = capsys.readouterr().out
    assert "dev" in out and "instances" not in out
    assert engine_cli.main([]) == 2


def test_a_broken_plugin_is_reported_and_the_rest_works(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = EntryPoint("zzz", "no_such_module_anywhere:register", "baton.commands")
    monkeypatch.setattr(sdk_cli, "entry_points", only(DEV, CLIENT, broken))
    assert commands_of(sdk_cli.build_parser()) == CLIENT_COMMANDS | {"dev"}
    err = capsys.readouterr().err
    assert "baton: warning: cannot load no_such_module_anywhere:register" in err


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert sdk_cli.main([]) == 2
    assert "commands:" in capsys.readouterr().err


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=ROOT
    ).stdout
    return set(out.split())


@pytest.mark.parametrize("module", ["baton.cli", "baton_worker.cli"])
def test_help_loads_neither_httpx_nor_the_engine(module: str) -> None:
    loaded = _loaded_after(
        f"import contextlib, io\nfrom {module} import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'])"
    )
    heavy = {"httpx", "psycopg", "pydantic", "baton_worker.runner", "baton.engine"}
    assert not heavy & loaded


def test_python_m_baton_cli_serves_both_sides() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "baton.cli", "--help"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    assert "dev" in out and "instances" in out


def _imported_modules(folder: Path) -> set[tuple[str, str]]:
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {(str(path), alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add((str(path), node.module))
    return found


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def test_the_engine_never_imports_the_sdk() -> None:
    offending = {
        (p, m) for p, m in _imported_modules(ROOT / "shared" / "baton") if _top(m) == "baton_worker"
    }
    assert not offending


def test_the_sdk_never_imports_the_engine() -> None:
    offending = {
        (p, m)
        for p, m in _imported_modules(ROOT / "sdk" / "python" / "baton_worker")
        if _top(m) == "baton"
    }
    assert not offending
