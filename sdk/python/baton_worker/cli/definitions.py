"""``baton definitions`` (workflow definitions) and ``baton taskdefs`` (task definitions)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from baton_worker.cli.options import Subparsers, UsageError, group, json_arg, leaf
from baton_worker.cli.output import CELL_WIDTH, cell, fields, show, table, when

if TYPE_CHECKING:
    from baton_worker.client import BatonClient

DEFINITION_HEADERS = ["name", "version", "steps", "created"]


def _definition_rows(definitions: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    return [
        [d.get("name"), d.get("version"), len(d.get("steps") or []), when(d.get("createdAt"))]
        for d in definitions
    ]


def _render_definition(d: Mapping[str, Any]) -> str:
    head = fields(
        [
            ("name", d.get("name")),
            ("version", d.get("version")),
            ("description", d.get("description")),
            ("created", when(d.get("createdAt"))),
            ("trigger", d.get("trigger")),
        ]
    )
    steps = table(
        ["step", "type", "job type", "retries", "input"],
        [
            [
                s.get("id"),
                s.get("type"),
                s.get("jobType"),
                s.get("retryCount"),
                cell(s.get("input") or None, CELL_WIDTH),
            ]
            for s in d.get("steps") or []
        ],
    )
    return f"{head}\n\n{steps}"


def _json_file(path: str, what: str) -> dict[str, Any]:
    body = json_arg("@" + path, what)
    if not isinstance(body, dict):
        raise UsageError(f"{what} must be a JSON object")
    return body


# --- definitions -------------------------------------------------------------------------------


def _definitions_create(client: BatonClient, args: argparse.Namespace) -> None:
    created = client.register_definition(_json_file(args.file, "the definition"))
    show(args, created, lambda d: table(DEFINITION_HEADERS, _definition_rows([d])))


def _definitions_list(client: BatonClient, args: argparse.Namespace) -> None:
    found = list(client.iter_definitions())
    show(
        args,
        {"definitions": found},
        lambda _: table(DEFINITION_HEADERS, _definition_rows(found)),
    )


def _definitions_get(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.get_definition(args.name, version=args.version), _render_definition)


# --- task definitions --------------------------------------------------------------------------


def _taskdefs_put(client: BatonClient, args: argparse.Namespace) -> None:
    saved = client.put_task_def(args.name, _json_file(args.file, "the task definition"))
    show(args, saved, lambda t: fields(list(t.items())))


def _taskdefs_get(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.get_task_def(args.name), lambda t: fields(list(t.items())))


def _taskdefs_list(client: BatonClient, args: argparse.Namespace) -> None:
    page = client.list_task_defs(limit=100)
    rows = [
        [
            t.get("name"),
            t.get("retryCount"),
            t.get("responseTimeoutSeconds"),
            when(t.get("updatedAt")),
        ]
        for t in page["taskDefs"]
    ]
    show(args, page, lambda _: table(["name", "retries", "lease s", "updated"], rows))


def add_commands(commands: Subparsers) -> None:
    """Add ``definitions`` and ``taskdefs``."""
    sub = group(commands, "definitions", "register, list and show workflow definitions")
    p = leaf(sub, "create", "register a definition from a JSON file", _definitions_create)
    p.add_argument("file", metavar="FILE", help="the definition's JSON file, or - for stdin")
    leaf(sub, "list", "list definitions (latest version of each)", _definitions_list)
    p = leaf(sub, "get", "show a definition (latest version unless --version)", _definitions_get)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", type=int, help="a specific version")

    sub = group(commands, "taskdefs", "create, list and show task definitions")
    p = leaf(sub, "put", "create or replace a task definition", _taskdefs_put)
    p.add_argument("name", metavar="NAME", help="the job type it applies to")
    p.add_argument("file", metavar="FILE", help="its JSON file, or - for stdin")
    p = leaf(sub, "get", "show a task definition", _taskdefs_get)
    p.add_argument("name", metavar="NAME")
    leaf(sub, "list", "list task definitions", _taskdefs_list)
