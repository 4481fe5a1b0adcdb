"""``baton definitions`` (workflow definitions) and ``baton taskdefs`` (task definitions)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from baton_worker.cli.graph import add_definition_graph
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


def _definitions_delete(client: BatonClient, args: argparse.Namespace) -> None:
    deleted = client.delete_definition(args.name, version=args.version)
    show(args, deleted, lambda d: f"deleted definition {d['name']} version {d['version']}")


# --- task definitions --------------------------------------------------------------------------

# A cell or a field left out ("-" in a table) is not set: the step's own value, or the engine's
# default, applies.
TASKDEF_HEADERS = [
    "name",
    "retry",
    "timeout",
    "poll",
    "response",
    "on timeout",
    "concurrency",
    "rate",
    "updated",
]
# What the compact renderings below cover; any other field is shown as the API spells it.
_TASKDEF_SHOWN = frozenset(
    {
        "name",
        "description",
        "retryCount",
        "retryLogic",
        "retryDelaySeconds",
        "maxRetryDelaySeconds",
        "timeoutSeconds",
        "pollTimeoutSeconds",
        "responseTimeoutSeconds",
        "timeoutPolicy",
        "concurrentExecLimit",
        "rateLimitPerFrequency",
        "rateLimitFrequencyInSeconds",
        "inputKeys",
        "outputKeys",
        "inputTemplate",
        "ownerEmail",
        "createdAt",
        "updatedAt",
    }
)


def _seconds(value: Any) -> str | None:
    return None if value is None else f"{value}s"


def _retry(t: Mapping[str, Any]) -> str | None:
    """``3 EXPONENTIAL_BACKOFF 2s..60s``: retries, their logic, the delay (up to its maximum)."""
    delay = _seconds(t.get("retryDelaySeconds"))
    if t.get("maxRetryDelaySeconds") is not None:
        delay = f"{delay or '-'}..{t['maxRetryDelaySeconds']}s"
    parts = [t.get("retryCount"), t.get("retryLogic"), delay]
    return " ".join(str(p) for p in parts if p is not None) or None


def _rate(t: Mapping[str, Any], per: str = "/") -> str | None:
    """``100/60s``: at most 100 jobs handed out per 60 seconds."""
    count, window = t.get("rateLimitPerFrequency"), t.get("rateLimitFrequencyInSeconds")
    if count is None and window is None:
        return None
    return f"{cell(count)}{per}{_seconds(window) or '-'}"


def _taskdef_rows(task_defs: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    return [
        [
            t.get("name"),
            _retry(t),
            _seconds(t.get("timeoutSeconds")),
            _seconds(t.get("pollTimeoutSeconds")),
            _seconds(t.get("responseTimeoutSeconds")),
            t.get("timeoutPolicy"),
            t.get("concurrentExecLimit"),
            _rate(t),
            when(t.get("updatedAt")),
        ]
        for t in task_defs
    ]


def _render_task_def(t: Mapping[str, Any]) -> str:
    return fields(
        [
            ("name", t.get("name")),
            ("description", t.get("description")),
            ("retry", _retry(t)),
            ("timeout", _seconds(t.get("timeoutSeconds"))),
            ("poll timeout", _seconds(t.get("pollTimeoutSeconds"))),
            ("response timeout", _seconds(t.get("responseTimeoutSeconds"))),
            ("on timeout", t.get("timeoutPolicy")),
            ("concurrency", t.get("concurrentExecLimit")),
            ("rate limit", _rate(t, per=" per ")),
            ("input keys", t.get("inputKeys")),
            ("output keys", t.get("outputKeys")),
            ("input template", t.get("inputTemplate")),
            ("owner", t.get("ownerEmail")),
            *[(k, v) for k, v in t.items() if k not in _TASKDEF_SHOWN],
            ("created", when(t.get("createdAt"))),
            ("updated", when(t.get("updatedAt"))),
        ]
    )


def _taskdefs_put(client: BatonClient, args: argparse.Namespace) -> None:
    saved = client.put_task_def(args.name, _json_file(args.file, "the task definition"))
    show(args, saved, _render_task_def)


def _taskdefs_get(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.get_task_def(args.name), _render_task_def)


def _taskdefs_list(client: BatonClient, args: argparse.Namespace) -> None:
    found = list(client.iter_task_defs())
    show(args, {"taskDefs": found}, lambda _: table(TASKDEF_HEADERS, _taskdef_rows(found)))


def _taskdefs_delete(client: BatonClient, args: argparse.Namespace) -> None:
    deleted = client.delete_task_def(args.name)
    show(args, deleted, lambda t: f"deleted task definition {t.get('name', args.name)}")


def add_commands(commands: Subparsers) -> None:
    """Add ``definitions`` and ``taskdefs``."""
    sub = group(commands, "definitions", "register, list, show and delete workflow definitions")
    p = leaf(sub, "create", "register a definition from a JSON file", _definitions_create)
    p.add_argument("file", metavar="FILE", help="the definition's JSON file, or - for stdin")
    leaf(sub, "list", "list definitions (latest version of each)", _definitions_list)
    p = leaf(sub, "get", "show a definition (latest version unless --version)", _definitions_get)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", type=int, help="a specific version")
    p = leaf(
        sub,
        "delete",
        "delete one version of a definition (running instances finish on their copy; --json "
        "prints it)",
        _definitions_delete,
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", type=int, required=True, help="the version to delete")
    add_definition_graph(sub)

    sub = group(commands, "taskdefs", "create, list, show and delete task definitions")
    p = leaf(sub, "put", "create or replace a task definition", _taskdefs_put)
    p.add_argument("name", metavar="NAME", help="the job type it applies to")
    p.add_argument("file", metavar="FILE", help="its JSON file, or - for stdin")
    p = leaf(sub, "get", "show a task definition", _taskdefs_get)
    p.add_argument("name", metavar="NAME")
    leaf(sub, "list", "list task definitions", _taskdefs_list)
    p = leaf(
        sub,
        "delete",
        "delete a task definition (running instances keep their copy; --json prints it)",
        _taskdefs_delete,
    )
    p.add_argument("name", metavar="NAME")
