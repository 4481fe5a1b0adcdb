"""The engine's side of the ``baton`` command: ``baton dev``.

One ``baton`` command, from whichever packages are installed: every entry point of the group
``baton.commands`` names a function ``register(parser, commands)`` that adds its commands. This
package registers ``dev`` (:func:`register`); the worker SDK (``baton-worker``) registers the
client commands and assembles the command from the whole group (``baton_worker.cli``), once for
both packages, neither importing the other. :func:`main` (the engine's ``baton`` script and
``python -m baton.cli``) hands over to that command, found as the installed ``baton`` console
script; an engine installed without the SDK serves ``dev`` alone. Heavy modules are imported
inside each command, so ``baton --help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import TypeAlias

from baton import __version__
from baton import settings as env_names

DISTRIBUTION = "baton"
DESCRIPTION = "Baton, a workflow orchestration engine on PostgreSQL."
EXIT_USAGE = 2

Command = Callable[[argparse.Namespace], int]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


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
            grpc_port=args.grpc_port,
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
        "--grpc-port",
        type=int,
        help=f"native gRPC port, the WorkflowEngine service (${env_names.ENV_GRPC_PORT}, "
        "default 9090; 0: off)",
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


def _assembled() -> Callable[[Sequence[str] | None], int] | None:
    """The ``main`` of the installed ``baton`` command that is not this one (the SDK's, which
    assembles every plugin of ``baton.commands``), or None without the SDK."""
    for script in entry_points(group="console_scripts", name="baton"):
        if script.value.split(":")[0] != "baton.cli":  # not this module (nor itself as __main__)
            try:
                found: Callable[[Sequence[str] | None], int] = script.load()
            except Exception as e:  # a broken SDK must not take baton dev down
                print(f"baton: warning: cannot load {script.value}: {e}", file=sys.stderr)
                continue
            return found
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``baton`` command; returns the exit code."""
    command = _assembled()
    if command is not None:
        return command(argv)
    # The engine alone (no worker SDK installed): its own commands, nothing to assemble.
    parser = argparse.ArgumentParser(prog="baton", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"{DISTRIBUTION} {__version__}")
    register(parser, parser.add_subparsers(title="commands", metavar="COMMAND"))
    args = parser.parse_args(argv)
    run: Command | None = getattr(args, "command", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
