"""The ``baton`` command. Each subcommand is a function taking the parsed arguments and returning
an exit code; heavy modules are imported inside it, so ``baton --help`` stays instant."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from baton import __version__, cli_client
from baton import settings as env_names

Command = Callable[[argparse.Namespace], int]


def _dev(args: argparse.Namespace) -> int:
    from baton.local.runtime import DevOptions, OptionError, run

    try:
        options = DevOptions.from_env(
            host=args.host,
            port=args.port,
            data_dir=args.data_dir,
            tick_seconds=args.tick_seconds,
            functions_dir=args.functions_dir,
        )
    except OptionError as e:
        print(f"baton dev: error: {e}", file=sys.stderr)
        return 2
    try:
        return run(options)
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        return 130


def _add_dev(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        help=f"where the database and payloads live (${env_names.ENV_DATA_DIR}, "
        "default ./.baton/data)",
    )
    p.add_argument(
        "--tick-seconds",
        type=float,
        help="seconds between runs of the scheduled functions "
        f"(${env_names.ENV_TICK_SECONDS}, default 1.0)",
    )
    p.add_argument(
        "--functions-dir",
        type=Path,
        help=f"folder of functions/<name>/handler.py (${env_names.ENV_FUNCTIONS_DIR}, "
        "default the repository's functions/)",
    )
    p.set_defaults(command=_dev)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="baton", description="Baton, a workflow orchestration engine on PostgreSQL."
    )
    parser.add_argument("--version", action="version", version=f"baton {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    _add_dev(commands)
    cli_client.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command: Command | None = getattr(args, "command", None)
    if command is None:
        parser.print_help(sys.stderr)
        return 2
    return command(args)


if __name__ == "__main__":
    sys.exit(main())
