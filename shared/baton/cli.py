"""The engine's side of the ``baton`` command: ``baton dev``.

One ``baton`` command, from whichever packages are installed: every entry point of the group
``baton.commands`` names a function ``register(parser, commands)`` that adds its commands to
``commands`` (the top-level subparsers; each command sets a ``command`` default, a function of
the parsed arguments returning the exit code) and may add options to ``parser``. This package
registers ``dev``; the worker SDK (``baton-worker``) registers ``client``, the commands that talk
to an API. Both install a ``baton`` script whose :func:`main` builds the parser from the whole
group, so the command is the same whichever script an installation keeps, and neither package
imports the other. Heavy modules are imported inside each command, so ``baton --help`` stays
instant.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import TypeAlias

from baton import __version__
from baton import settings as env_names

COMMANDS_GROUP = "baton.commands"
PLUGIN = "dev"  # this package's entry point in the group
DISTRIBUTION = "baton"
DESCRIPTION = "Baton, a workflow orchestration engine on PostgreSQL."
EXIT_USAGE = 2

Command = Callable[[argparse.Namespace], int]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Register = Callable[[argparse.ArgumentParser, Subparsers], None]


def _dev(args: argparse.Namespace) -> int:
    from baton.local.runtime import DevOptions, OptionError, run
    from baton.settings import Settings, SettingsError

    try:
        Settings.from_env()  # what every function will read: refused now, not at each tick
    except SettingsError as e:
        print(f"baton dev: error: {e}", file=sys.stderr)
        return 2
    try:
        options = DevOptions.from_env(
            host=args.host,
            port=args.port,
            data_dir=args.data_dir,
            tick_seconds=args.tick_seconds,
            functions_dir=args.functions_dir,
            concurrency=args.concurrency,
        )
    except OptionError as e:
        print(f"baton dev: error: {e}", file=sys.stderr)
        return 2
    try:
        return run(options)
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        return 130


def register(parser: argparse.ArgumentParser, commands: Subparsers) -> None:
    """Add ``baton dev`` to the ``baton`` command (the ``dev`` plugin)."""
    p = commands.add_parser(
        "dev",
        help="serve the API locally (embedded PostgreSQL, local S3, scheduled functions)",
        description="Serve Baton's Lambda handlers over HTTP on this machine. Options override "
        "the environment variables named in their help, which override the defaults.",
    )
    p.add_argument("--host", help=f"interface to bind (${env_names.ENV_HOST}, default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, help=f"port to listen on (${env_names.ENV_PORT}, default 8080)"
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        help=f"where the database, payloads and API key live (${env_names.ENV_DATA_DIR}, "
        "default ./.baton/data)",
    )
    p.add_argument(
        "--tick-seconds",
        type=float,
        help="seconds between runs of the scheduled functions "
        f"(${env_names.ENV_TICK_SECONDS}, default 1.0)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        help="requests each function serves at once, as Lambda's concurrency; a long-poll holds "
        f"one while it waits (${env_names.ENV_LOCAL_CONCURRENCY}, default 100)",
    )
    p.add_argument(
        "--functions-dir",
        type=Path,
        help=f"folder of functions/<name>/handler.py (${env_names.ENV_FUNCTIONS_DIR}, "
        "default the repository's functions/)",
    )
    p.set_defaults(command=_dev)


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


if __name__ == "__main__":
    sys.exit(main())
