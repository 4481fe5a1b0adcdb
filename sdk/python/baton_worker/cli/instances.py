"""``baton instances``: start, inspect (with its history), list, cancel, retry, rerun, restart,
pause and resume workflow instances; user tasks, signals."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from baton_worker.cli.batch_start import start_batch
from baton_worker.cli.graph import add_instance_graph
from baton_worker.cli.options import (
    EXIT_OK,
    Subparsers,
    UsageError,
    group,
    json_arg,
    json_object_arg,
    leaf,
)
from baton_worker.cli.output import CELL_WIDTH, cell, fields, show, table, when

if TYPE_CHECKING:
    from baton_worker.client import BatonClient

INSTANCE_STATUSES = ("RUNNING", "PAUSED", "COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED")
INSTANCE_HEADERS = ["id", "definition", "version", "status", "correlation id", "created"]


def _instance_rows(instances: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    return [
        [
            i.get("id"),
            i.get("definitionName"),
            i.get("definitionVersion"),
            i.get("status"),
            i.get("correlationId"),
            when(i.get("createdAt")),
        ]
        for i in instances
    ]


def _render_instance(i: Mapping[str, Any]) -> str:
    head = fields(
        [
            ("id", i.get("id")),
            ("definition", f"{i.get('definitionName')} v{i.get('definitionVersion', '-')}"),
            ("status", i.get("status")),
            ("run", i.get("run") if (i.get("run") or 1) > 1 else None),
            ("parent", i.get("parentInstanceId")),
            ("reason", i.get("reason")),
            ("correlation id", i.get("correlationId")),
            ("input", cell(i.get("input"), 200)),
            ("variables", cell(i.get("variables"), 200)),
            ("output", None if i.get("output") is None else cell(i.get("output"), 200)),
            ("created", when(i.get("createdAt"))),
            ("updated", when(i.get("updatedAt"))),
            ("completed", None if i.get("completedAt") is None else when(i.get("completedAt"))),
        ]
    )
    steps = i.get("steps")
    if steps is None:
        return head
    depth = _depths(steps)
    rows = [
        [
            "  " * depth.get(s.get("id", ""), 0) + str(s.get("stepId")) + _place(s),
            s.get("type"),
            s.get("status"),
            _attempts(s),
            s.get("workerId") or s.get("childInstanceId"),
            cell(s.get("error"), CELL_WIDTH) if s.get("error") else None,
        ]
        for s in steps
    ]
    headers = ["step", "type", "status", "attempt", "worker / child", "error"]
    more = ""
    if i.get("stepsTruncated"):
        more = "\n(more steps than one response holds: baton instances steps ID --all)"
    return head + "\n\n" + table(headers, rows) + more


def _attempts(s: Mapping[str, Any]) -> Any:
    """``2/3``: on attempt 2, 3 handed out (a lapsed lease's too); the attempt alone otherwise."""
    attempts = s.get("attempts")
    if attempts is None or attempts == s.get("attempt"):
        return s.get("attempt")
    return f"{s.get('attempt')}/{attempts}"


def _depths(steps: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How deep each step execution sits inside operators (for indenting the table)."""
    parent = {s.get("id", ""): s.get("parentStepExecutionId") for s in steps}
    depth: dict[str, int] = {}
    for sid in parent:
        n, at = 0, parent.get(sid)
        while at is not None and n < 64:
            n, at = n + 1, parent.get(at)
        depth[sid] = n
    return depth


def _place(s: Mapping[str, Any]) -> str:
    """Where a step execution sits in its operator: [b1] branch, [i7] item, [k3] iteration."""
    for key, label in (("branch", "b"), ("itemIndex", "i"), ("iteration", "k")):
        if s.get(key) is not None:
            return f" [{label}{s[key]}]"
    return ""


def _start(client: BatonClient, args: argparse.Namespace) -> int:
    if args.batch is not None:
        return start_batch(client, args)
    if args.name is None:
        raise UsageError("give the definition's NAME (or --batch FILE)")
    started = client.start_instance(
        args.name,
        definition_version=args.version,
        input=json_object_arg(args.input, "--input"),
        correlation_id=args.correlation_id,
        idempotency_key=args.idempotency_key,
    )
    show(args, started, _render_instance)
    return EXIT_OK


def _get(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.get_instance(args.id, include_steps=not args.no_steps), _render_instance)


HISTORY_HEADERS = ["seq", "at", "event", "step", "attempt", "worker", "message"]


def _history_rows(events: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    return [
        [
            e.get("seq"),
            when(e.get("at")),
            e.get("type"),
            e.get("stepId"),
            e.get("attempt"),
            e.get("workerId"),
            cell(e.get("message"), CELL_WIDTH) if e.get("message") else None,
        ]
        for e in events
    ]


def _history(client: BatonClient, args: argparse.Namespace) -> None:
    if args.all:
        events = list(client.iter_history(args.id))
        show(args, {"events": events}, lambda _: table(HISTORY_HEADERS, _history_rows(events)))
        return
    page = client.get_history(args.id, limit=args.limit, page_token=args.page_token)

    def render(_: Any) -> str:
        text = table(HISTORY_HEADERS, _history_rows(page["events"]))
        token = page.get("nextPageToken")
        return text + (f"\n(more: --page-token {token}, or --all)" if token else "")

    show(args, page, render)


STEP_HEADERS = ["seq", "step", "type", "status", "attempt", "worker / child", "error"]


def _steps(client: BatonClient, args: argparse.Namespace) -> None:
    if args.all:
        steps = list(client.iter_steps(args.id))
        page: Mapping[str, Any] = {"steps": steps}
    else:
        page = client.list_steps(args.id, limit=args.limit, page_token=args.page_token)

    def render(_: Any) -> str:
        rows = [
            [
                n,
                str(s.get("stepId")) + _place(s),
                s.get("type"),
                s.get("status"),
                _attempts(s),
                s.get("workerId") or s.get("childInstanceId"),
                cell(s.get("error"), CELL_WIDTH) if s.get("error") else None,
            ]
            for n, s in enumerate(page["steps"], 1)
        ]
        token = page.get("nextPageToken")
        more = f"\n(more: --page-token {token}, or --all)" if token else ""
        return table(STEP_HEADERS, rows) + more

    show(args, page, render)


def _list(client: BatonClient, args: argparse.Namespace) -> None:
    page = client.search_instances(
        status=args.status,
        definition_name=args.definition,
        correlation_id=args.correlation_id,
        created_after=args.created_after,
        created_before=args.created_before,
        limit=args.limit,
        page_token=args.page_token,
    )

    def render(_: Any) -> str:
        text = table(INSTANCE_HEADERS, _instance_rows(page["instances"]))
        token = page.get("nextPageToken")
        return text + (f"\n(more: --page-token {token})" if token else "")

    show(args, page, render)


def _cancel(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.cancel_instance(args.id, reason=args.reason), _render_instance)


def _retry(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.retry_instance(args.id), _render_instance)


def _restart(client: BatonClient, args: argparse.Namespace) -> None:
    restarted = client.restart_instance(args.id, use_latest_definition=args.latest)
    show(args, restarted, _render_instance)


def _rerun(client: BatonClient, args: argparse.Namespace) -> None:
    again = client.rerun_instance(
        args.id,
        from_step_execution_id=args.step_execution,
        input=json_object_arg(args.input, "--input"),
        step_input=json_object_arg(args.step_input, "--step-input"),
        correlation_id=args.correlation_id,
        at_join=args.at_join,
    )
    show(args, again, _render_instance)


def _pause(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.pause_instance(args.id), _render_instance)


def _resume(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.resume_instance(args.id), _render_instance)


def _delete(client: BatonClient, args: argparse.Namespace) -> None:
    deleted = client.delete_instance(args.id)
    show(
        args,
        deleted,
        lambda d: (
            f"deleted instance {d['id']} ({d['status']}): {d['stepExecutions']} step "
            f"execution(s), {d['jobs']} job(s), {d['historyEvents']} history event(s)"
        ),
    )


def _complete_task(client: BatonClient, args: argparse.Namespace) -> None:
    variables = json_object_arg(args.variables, "--variables")
    done = client.complete_user_task(
        args.id, args.step, variables=variables, step_execution_id=args.execution
    )
    show(args, done, _render_instance)


def _signal(client: BatonClient, args: argparse.Namespace) -> None:
    done = client.signal(
        args.id,
        args.step,
        payload=json_arg(args.payload, "--payload"),
        step_execution_id=args.execution,
    )
    show(args, done, _render_instance)


def add_commands(commands: Subparsers) -> None:
    """Add ``instances``."""
    sub = group(
        commands,
        "instances",
        "start, inspect, history, list, cancel, retry, rerun, restart, pause, resume, delete",
    )
    p = leaf(sub, "start", "start an instance of a definition (or many: --batch)", _start)
    p.add_argument("name", metavar="NAME", nargs="?", help="the definition's name")
    p.add_argument(
        "--batch",
        metavar="FILE",
        help="start every line of a JSON Lines file (- for stdin), each a start body such as "
        '{"definitionName": "x", "input": {...}}, 100 per request; exits 1 if any did not start',
    )
    p.add_argument("--version", type=int, help="a specific definition version (default: latest)")
    p.add_argument("--input", metavar="JSON", help="the input object (or @file.json)")
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument("--idempotency-key", metavar="KEY", help="a repeat returns the first instance")
    p = leaf(sub, "get", "show an instance and its steps", _get)
    p.add_argument("id", metavar="ID")
    p.add_argument("--no-steps", action="store_true", help="the instance alone, without steps")
    p = leaf(sub, "history", "what happened to an instance, in order (every attempt)", _history)
    p.add_argument("id", metavar="ID")
    p.add_argument("--limit", type=int, default=100, help="at most this many (max 1000)")
    p.add_argument("--page-token", metavar="TOKEN", help="continue a previous listing")
    p.add_argument("--all", action="store_true", help="every event, following page tokens")
    p = leaf(sub, "steps", "an instance's step executions, a page at a time", _steps)
    p.add_argument("id", metavar="ID")
    p.add_argument("--limit", type=int, default=100, help="at most this many (max 1000)")
    p.add_argument("--page-token", metavar="TOKEN", help="continue a previous listing")
    p.add_argument("--all", action="store_true", help="every step execution")
    p = leaf(sub, "list", "search instances, newest first", _list)
    p.add_argument("--status", choices=INSTANCE_STATUSES, type=str.upper)
    p.add_argument("--definition", metavar="NAME", help="only instances of this definition")
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument("--created-after", metavar="TIME", help="created at or after (ISO-8601)")
    p.add_argument("--created-before", metavar="TIME", help="created before (ISO-8601)")
    p.add_argument("--limit", type=int, default=20, help="at most this many (default 20, max 100)")
    p.add_argument("--page-token", metavar="TOKEN", help="continue a previous listing")
    p = leaf(sub, "cancel", "cancel a running or paused instance", _cancel)
    p.add_argument("id", metavar="ID")
    p.add_argument("--reason")
    p = leaf(
        sub,
        "delete",
        "delete a finished instance with its steps, jobs and history (a running one is a 409)",
        _delete,
    )
    p.add_argument("id", metavar="ID")
    p = leaf(sub, "retry", "run a failed or cancelled instance again from what did not end", _retry)
    p.add_argument("id", metavar="ID")
    p = leaf(sub, "restart", "run an ended instance again from the start", _restart)
    p.add_argument("id", metavar="ID")
    p.add_argument("--latest", action="store_true", help="run the newest version of its definition")
    p = leaf(sub, "rerun", "run an ended instance again from one of its steps", _rerun)
    p.add_argument("id", metavar="ID")
    p.add_argument(
        "step_execution",
        metavar="STEP_EXECUTION_ID",
        nargs="?",
        help="the step execution to run again from (default: the start)",
    )
    p.add_argument("--input", metavar="JSON", help="the instance's new input (or @file.json)")
    p.add_argument("--step-input", metavar="JSON", help="the step's input (or @file.json)")
    p.add_argument("--correlation-id", metavar="ID", help="the instance's new correlation id")
    p.add_argument(
        "--at-join",
        action="store_true",
        help="a PARALLEL or MAP keeps its branches as they ended and joins them again",
    )
    p = leaf(sub, "pause", "pause a running instance (no new work until resumed)", _pause)
    p.add_argument("id", metavar="ID")
    p = leaf(sub, "resume", "resume a paused instance", _resume)
    p.add_argument("id", metavar="ID")
    execution_help = "which waiting execution (inside a MAP or a loop); default: the oldest"
    p = leaf(sub, "complete-task", "complete a waiting user task", _complete_task)
    p.add_argument("id", metavar="ID")
    p.add_argument("step", metavar="STEP", help="the user task's step id")
    p.add_argument("--variables", metavar="JSON", help="variables to set (or @file.json)")
    p.add_argument("--execution", metavar="STEP_EXECUTION_ID", help=execution_help)
    p = leaf(sub, "signal", "deliver a signal to a waiting step", _signal)
    p.add_argument("id", metavar="ID")
    p.add_argument("step", metavar="STEP", help="the signal step's id")
    p.add_argument("--payload", metavar="JSON", help="the signal's payload (or @file.json)")
    p.add_argument("--execution", metavar="STEP_EXECUTION_ID", help=execution_help)
    add_instance_graph(sub)
