"""The client side of the ``baton`` command: definitions, task definitions, instances, jobs,
queues, and ``worker run``, talking to a Baton API over HTTP.

One ``baton`` command, from whichever packages are installed, assembled here and only here:
every entry point of the group ``baton.commands`` names a function ``register(parser,
commands)`` that adds its commands to ``commands`` (the top-level subparsers; each command sets
a ``command`` default, a function of the parsed arguments returning the exit code) and may add
options to ``parser``. This package registers ``client`` (these commands); the engine package
registers ``dev``, and its own ``baton`` script hands over to :func:`main` when this package is
installed. Neither package imports the other.

Every client command takes ``--url`` (``$BATON_URL``, default ``http://127.0.0.1:8080``),
``--api-key`` (``$BATON_API_KEY``) and ``--json`` (the API's JSON rather than a table), before or
after the command's name. On failure it prints one line on stderr (``error: 404 Not found:
definition 'x' not found``) and exits non-zero: 1 when the API or the network failed, 2 for bad
arguments. Heavy modules (httpx, the runner) are imported inside each command, so ``baton
--help`` stays instant.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

from baton_worker.cli import definitions, instances, jobs, queues, schedules, worker
from baton_worker.cli.options import EXIT_USAGE, Command, Subparsers, add_connection_options
from baton_worker.version import __version__

COMMANDS_GROUP = "baton.commands"
PLUGIN = "client"  # this package's entry point in the group
DISTRIBUTION = "baton-worker"
DESCRIPTION = "Baton, a workflow orchestration engine on PostgreSQL."

Register = Callable[[argparse.ArgumentParser, Subparsers], None]


def register(parser: argparse.ArgumentParser, commands: Subparsers) -> None:
    """Add the client commands to the ``baton`` command (the ``client`` plugin), and their
    connection and output options to ``baton`` itself (``baton --json instances list``)."""
    add_connection_options(parser, defaults=True)
    definitions.add_commands(commands)
    instances.add_commands(commands)
    jobs.add_commands(commands)
    queues.add_commands(commands)
    schedules.add_commands(commands)
    worker.add_commands(commands)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build_parser() -> argparse.ArgumentParser:
    """The ``baton`` parser, with the commands of every plugin of ``baton.commands``."""
    plugins: dict[str, Register] = {PLUGIN: register}
    versions = {DISTRIBUTION: __version__}
    for entry in entry_points(group=COMMANDS_GROUP):
        if entry.dist is not None:
            versions[_canonical(entry.dist.name)] = entry.dist.version
        if entry.name in plugins:
            continue
        try:
            plugins[entry.name] = entry.load()
        except Exception as e:  # a broken plugin must not take the other commands down
            print(f"baton: warning: cannot load {entry.value}: {e}", file=sys.stderr)
    parser = argparse.ArgumentParser(prog="baton", description=DESCRIPTION)
    version = ", ".join(f"{name} {v}" for name, v in sorted(versions.items()))
    parser.add_argument("--version", action="version", version=version)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name in sorted(plugins):
        plugins[name](parser, commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``baton`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command: Command | None = getattr(args, "command", None)
    if command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return command(args)


__all__ = ["COMMANDS_GROUP", "build_parser", "main", "register"]
