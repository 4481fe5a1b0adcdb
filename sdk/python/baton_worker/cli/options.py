"""What every client command shares: the connection and output options, JSON arguments, the
client they build, and the mapping of failures to one line on stderr and an exit code."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from baton_worker.cli.output import error
from baton_worker.env import DEFAULT_URL, ENV_API_KEY, ENV_DATA_DIR, ENV_URL
from baton_worker.origins import CLI, resolve

if TYPE_CHECKING:
    from baton_worker.client import BatonClient

Command = Callable[[argparse.Namespace], int]
ClientCommand = Callable[["BatonClient", argparse.Namespace], Any]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A bad argument value found after parsing (unreadable file, invalid JSON...)."""


# --- arguments ---------------------------------------------------------------------------------


def read_text(source: str, what: str) -> str:
    """``-`` for stdin, else a file path."""
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{what}: cannot read {source}: {e.strerror or e}") from None


def json_arg(value: str | None, what: str) -> Any:
    """A JSON argument: inline text, ``@path`` for a file, ``@-`` for stdin."""
    if value is None:
        return None
    text = read_text(value[1:], what) if value.startswith("@") else value
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{what} is not valid JSON: {e}") from None


def json_object_arg(value: str | None, what: str) -> dict[str, Any] | None:
    """A JSON argument that must be an object (or absent)."""
    parsed = json_arg(value, what)
    if parsed is not None and not isinstance(parsed, dict):
        raise UsageError(f"{what} must be a JSON object")
    return parsed


# --- connection and output ---------------------------------------------------------------------


def add_connection_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """Add ``--url``, ``--api-key``, ``--iam``, ``--timeout`` and ``--json`` to ``parser``.

    The top-level ``baton`` parser has them with their defaults; the groups and commands below
    it have them too, so they may be typed anywhere, but without defaults (``SUPPRESS``): a
    command that is not given an option leaves the value typed before it (or the default) alone,
    and one typed later wins.
    """

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    options = parser.add_argument_group("connection and output")
    options.add_argument(
        "--url",
        default=default(None),
        help=f"the API's base URL (${ENV_URL}, default {DEFAULT_URL})",
        metavar="URL",
    )
    options.add_argument(
        "--api-key",
        default=default(None),
        help=f"sent as x-api-key (${ENV_API_KEY}; for a server on this machine, else the key "
        f"baton dev keeps in ${ENV_DATA_DIR}/api-key, default .baton/data/api-key)",
        metavar="KEY",
    )
    options.add_argument(
        "--iam",
        action="store_true",
        default=default(False),
        help="sign requests with AWS SigV4 (an IAM-protected API Gateway; needs "
        "baton-worker[iam] and AWS credentials)",
    )
    options.add_argument(
        "--timeout",
        type=float,
        default=default(30.0),
        help="seconds per request (default 30)",
    )
    options.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="print the API's JSON, not a table",
    )


@functools.cache
def _below_top_level() -> argparse.ArgumentParser:
    """The parent parser of every group and command: the options without defaults."""
    parent = argparse.ArgumentParser(add_help=False)
    add_connection_options(parent, defaults=False)
    return parent


def make_client(args: argparse.Namespace) -> BatonClient:
    """A client from the options; explicit option > environment variable > default."""
    from baton_worker.client import BatonClient, key_auth

    url, api_key, origins = resolve(args.url, args.api_key, options=CLI, find_key=not args.iam)
    if args.iam:
        from baton_worker.auth import AwsSigV4Auth

        return BatonClient(url, auth=AwsSigV4Auth(), timeout=args.timeout, origins=origins)
    return BatonClient(url, auth=key_auth(api_key, origins), timeout=args.timeout, origins=origins)


def client_command(body: ClientCommand) -> Command:
    """Wrap a command body: build the client, map every failure to a line and an exit code."""

    def command(args: argparse.Namespace) -> int:
        from baton_worker.errors import BatonError

        try:
            client = make_client(args)
        except (ImportError, ValueError) as e:
            error(str(e))
            return EXIT_USAGE
        try:
            result = body(client, args)
            return int(result) if isinstance(result, int) else EXIT_OK
        except UsageError as e:
            error(str(e))
            return EXIT_USAGE
        except BatonError as e:
            error(str(e))
            return EXIT_FAILED
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        finally:
            client.close()

    return command


# --- the command tree --------------------------------------------------------------------------


def group(commands: Subparsers, name: str, help: str) -> Subparsers:
    """A command group (``baton instances ...``); alone, it prints its help and exits 2."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=help, description=help, parents=[_below_top_level()]
    )
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    def usage(_: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    parser.set_defaults(command=usage)
    return sub


def leaf(sub: Subparsers, name: str, help: str, body: ClientCommand) -> argparse.ArgumentParser:
    """A client command of a group, with the connection and output options."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=help, parents=[_below_top_level()]
    )
    parser.set_defaults(command=client_command(body))
    return parser


__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "ClientCommand",
    "Command",
    "Subparsers",
    "UsageError",
    "add_connection_options",
    "client_command",
    "group",
    "json_arg",
    "json_object_arg",
    "leaf",
    "make_client",
    "read_text",
]
