"""The client commands of the ``baton`` CLI: definitions, task definitions, instances, jobs,
queues, and ``worker run``. They talk to a Baton API over HTTP through the worker SDK
(``baton_worker``), imported inside each command so ``baton dev`` and ``baton --help`` stay light.

Every command takes ``--url`` (``$BATON_URL``, default ``http://127.0.0.1:8080``) and
``--api-key`` (``$BATON_API_KEY``), prints a table (``--json``: the API's JSON, for scripts), and
on failure prints one line on stderr (``error: 404 Not found: definition 'x' not found``) and
exits non-zero: 1 when the API or the network failed, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from baton import settings as env_names

if TYPE_CHECKING:
    from baton_worker.client import BatonClient
    from baton_worker.registry import Registry

Command = Callable[[argparse.Namespace], int]
ClientCommand = Callable[["BatonClient", argparse.Namespace], Any]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

# The API key variable is the server's own (``baton dev`` reads it too); the URL is client-only.
ENV_URL = "BATON_URL"
ENV_API_KEY = env_names.ENV_API_KEY
DEFAULT_URL = "http://127.0.0.1:8080"
INSTANCE_STATUSES = ("RUNNING", "COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED")
CELL_WIDTH = 60  # free-text cells (titles, errors, inputs) are cut to this in tables

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A bad argument value found after parsing (unreadable file, invalid JSON...)."""


# --- output ------------------------------------------------------------------------------------


def _cell(value: Any, width: int | None = None) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, int | float):
        text = str(value)
    else:
        text = json.dumps(value, separators=(",", ":"), default=str)
    text = text.replace("\n", " ")
    if width is not None and len(text) > width:
        text = text[: width - 3] + "..."
    return text


def _when(value: Any) -> str:
    """An API timestamp, to the second: ``2026-01-02T03:04:05Z``."""
    if not isinstance(value, str):
        return _cell(value)
    head, dot, _rest = value.partition(".")
    return head + "Z" if dot and value.endswith("Z") else value


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """An aligned text table; an empty one says so."""
    body = [[_cell(c) for c in row] for row in rows]
    if not body:
        return "(none)"
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    lines = [[h.upper() for h in headers], *body]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines
    )


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """``key: value`` lines, aligned; pairs whose value is None are left out."""
    shown = [(k, v) for k, v in pairs if v is not None]
    width = max((len(k) for k, _ in shown), default=0)
    return "\n".join(f"{k + ':':<{width + 1}} {_cell(v)}" for k, v in shown)


def _print(args: argparse.Namespace, data: Any, render: Callable[[Any], str]) -> None:
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print(render(data))


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


# --- inputs ------------------------------------------------------------------------------------


def _read_text(source: str, what: str) -> str:
    """``-`` for stdin, else a file path."""
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{what}: cannot read {source}: {e.strerror or e}") from None


def _json_arg(value: str | None, what: str) -> Any:
    """A JSON argument: inline text, ``@path`` for a file, ``@-`` for stdin."""
    if value is None:
        return None
    text = _read_text(value[1:], what) if value.startswith("@") else value
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{what} is not valid JSON: {e}") from None


def _json_object_arg(value: str | None, what: str) -> dict[str, Any] | None:
    parsed = _json_arg(value, what)
    if parsed is not None and not isinstance(parsed, dict):
        raise UsageError(f"{what} must be a JSON object")
    return parsed


# --- plumbing ----------------------------------------------------------------------------------


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection and output")
    group.add_argument(
        "--url", help=f"the API's base URL (${ENV_URL}, default {DEFAULT_URL})", metavar="URL"
    )
    group.add_argument("--api-key", help=f"sent as x-api-key (${ENV_API_KEY})", metavar="KEY")
    group.add_argument(
        "--iam",
        action="store_true",
        help="sign requests with AWS SigV4 (an IAM-protected API Gateway; needs "
        "baton-worker[iam] and AWS credentials)",
    )
    group.add_argument(
        "--timeout", type=float, default=30.0, help="seconds per request (default 30)"
    )
    group.add_argument("--json", action="store_true", help="print the API's JSON, not a table")
    return common


def make_client(args: argparse.Namespace) -> BatonClient:
    """A client from the options; explicit option > environment variable > default."""
    from baton_worker.client import BatonClient

    url = args.url or os.environ.get(ENV_URL) or DEFAULT_URL
    if args.iam:
        from baton_worker.auth import AwsSigV4Auth

        return BatonClient(url, auth=AwsSigV4Auth(), timeout=args.timeout)
    api_key = args.api_key or os.environ.get(ENV_API_KEY) or None
    return BatonClient(url, api_key=api_key, timeout=args.timeout)


def _run_client_command(fn: ClientCommand) -> Command:
    """Wrap a command body: build the client, map every failure to a line and an exit code."""

    def command(args: argparse.Namespace) -> int:
        from baton_worker.errors import BatonError

        try:
            client = make_client(args)
        except (ImportError, ValueError) as e:
            _error(str(e))
            return EXIT_USAGE
        try:
            result = fn(client, args)
            return int(result) if isinstance(result, int) else EXIT_OK
        except UsageError as e:
            _error(str(e))
            return EXIT_USAGE
        except BatonError as e:
            _error(str(e))
            return EXIT_FAILED
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        finally:
            client.close()

    return command


def _group(
    commands: Subparsers, name: str, help: str
) -> tuple[argparse.ArgumentParser, Subparsers]:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help, description=help)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    def usage(_: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    parser.set_defaults(command=usage)
    return parser, sub


def _leaf(
    sub: Subparsers,
    name: str,
    help: str,
    common: argparse.ArgumentParser,
    body: ClientCommand,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=help, parents=[common]
    )
    parser.set_defaults(command=_run_client_command(body))
    return parser


# --- definitions and task definitions ----------------------------------------------------------


def _definition_rows(definitions: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    return [
        [d.get("name"), d.get("version"), len(d.get("steps") or []), _when(d.get("createdAt"))]
        for d in definitions
    ]


def _render_definition(d: Mapping[str, Any]) -> str:
    head = fields(
        [
            ("name", d.get("name")),
            ("version", d.get("version")),
            ("description", d.get("description")),
            ("created", _when(d.get("createdAt"))),
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
                _cell(s.get("input") or None, CELL_WIDTH),
            ]
            for s in d.get("steps") or []
        ],
    )
    return f"{head}\n\n{steps}"


def _definitions_create(client: BatonClient, args: argparse.Namespace) -> None:
    definition = _json_arg("@" + args.file, "the definition")
    if not isinstance(definition, dict):
        raise UsageError("the definition must be a JSON object")
    created = client.register_definition(definition)
    _print(
        args,
        created,
        lambda d: table(["name", "version", "steps", "created"], _definition_rows([d])),
    )


def _definitions_list(client: BatonClient, args: argparse.Namespace) -> None:
    found = list(client.iter_definitions())
    _print(
        args,
        {"definitions": found},
        lambda _: table(["name", "version", "steps", "created"], _definition_rows(found)),
    )


def _definitions_get(client: BatonClient, args: argparse.Namespace) -> None:
    _print(args, client.get_definition(args.name, version=args.version), _render_definition)


def _taskdefs_put(client: BatonClient, args: argparse.Namespace) -> None:
    body = _json_arg("@" + args.file, "the task definition")
    if not isinstance(body, dict):
        raise UsageError("the task definition must be a JSON object")
    saved = client.put_task_def(args.name, body)
    _print(args, saved, lambda t: fields(list(t.items())))


def _taskdefs_get(client: BatonClient, args: argparse.Namespace) -> None:
    _print(args, client.get_task_def(args.name), lambda t: fields(list(t.items())))


def _taskdefs_list(client: BatonClient, args: argparse.Namespace) -> None:
    page = client.list_task_defs(limit=100)
    rows = [
        [
            t.get("name"),
            t.get("retryCount"),
            t.get("responseTimeoutSeconds"),
            _when(t.get("updatedAt")),
        ]
        for t in page["taskDefs"]
    ]
    _print(args, page, lambda _: table(["name", "retries", "lease s", "updated"], rows))


def _add_definitions(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    _, sub = _group(commands, "definitions", "register, list and show workflow definitions")
    p = _leaf(sub, "create", "register a definition from a JSON file", common, _definitions_create)
    p.add_argument("file", metavar="FILE", help="the definition's JSON file, or - for stdin")
    _leaf(sub, "list", "list definitions (latest version of each)", common, _definitions_list)
    p = _leaf(
        sub, "get", "show a definition (latest version unless --version)", common, _definitions_get
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--version", type=int, help="a specific version")

    _, sub = _group(commands, "taskdefs", "create, list and show task definitions")
    p = _leaf(sub, "put", "create or replace a task definition", common, _taskdefs_put)
    p.add_argument("name", metavar="NAME", help="the job type it applies to")
    p.add_argument("file", metavar="FILE", help="its JSON file, or - for stdin")
    p = _leaf(sub, "get", "show a task definition", common, _taskdefs_get)
    p.add_argument("name", metavar="NAME")
    _leaf(sub, "list", "list task definitions", common, _taskdefs_list)


# --- instances ---------------------------------------------------------------------------------


def _instance_rows(instances: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    return [
        [
            i.get("id"),
            i.get("definitionName"),
            i.get("definitionVersion"),
            i.get("status"),
            i.get("correlationId"),
            _when(i.get("createdAt")),
        ]
        for i in instances
    ]


INSTANCE_HEADERS = ["id", "definition", "version", "status", "correlation id", "created"]


def _render_instance(i: Mapping[str, Any]) -> str:
    head = fields(
        [
            ("id", i.get("id")),
            ("definition", f"{i.get('definitionName')} v{i.get('definitionVersion', '-')}"),
            ("status", i.get("status")),
            ("reason", i.get("reason")),
            ("correlation id", i.get("correlationId")),
            ("input", _cell(i.get("input"), 200)),
            ("variables", _cell(i.get("variables"), 200)),
            ("output", None if i.get("output") is None else _cell(i.get("output"), 200)),
            ("created", _when(i.get("createdAt"))),
            ("updated", _when(i.get("updatedAt"))),
            ("completed", None if i.get("completedAt") is None else _when(i.get("completedAt"))),
        ]
    )
    steps = i.get("steps")
    if steps is None:
        return head
    rows = [
        [
            s.get("stepId"),
            s.get("type"),
            s.get("status"),
            s.get("attempt"),
            s.get("workerId"),
            _cell(s.get("error"), CELL_WIDTH) if s.get("error") else None,
        ]
        for s in steps
    ]
    return head + "\n\n" + table(["step", "type", "status", "attempt", "worker", "error"], rows)


def _instances_start(client: BatonClient, args: argparse.Namespace) -> None:
    started = client.start_instance(
        args.name,
        definition_version=args.version,
        input=_json_object_arg(args.input, "--input"),
        correlation_id=args.correlation_id,
        idempotency_key=args.idempotency_key,
    )
    _print(args, started, _render_instance)


def _instances_get(client: BatonClient, args: argparse.Namespace) -> None:
    _print(args, client.get_instance(args.id), _render_instance)


def _instances_list(client: BatonClient, args: argparse.Namespace) -> None:
    page = client.search_instances(
        status=args.status,
        definition_name=args.definition,
        correlation_id=args.correlation_id,
        limit=args.limit,
        page_token=args.page_token,
    )

    def render(_: Any) -> str:
        text = table(INSTANCE_HEADERS, _instance_rows(page["instances"]))
        token = page.get("nextPageToken")
        return text + (f"\n(more: --page-token {token})" if token else "")

    _print(args, page, render)


def _instances_cancel(client: BatonClient, args: argparse.Namespace) -> None:
    _print(args, client.cancel_instance(args.id, reason=args.reason), _render_instance)


def _instances_complete_task(client: BatonClient, args: argparse.Namespace) -> None:
    variables = _json_object_arg(args.variables, "--variables")
    done = client.complete_user_task(args.id, args.step, variables=variables)
    _print(args, done, _render_instance)


def _instances_signal(client: BatonClient, args: argparse.Namespace) -> None:
    done = client.signal(args.id, args.step, payload=_json_arg(args.payload, "--payload"))
    _print(args, done, _render_instance)


def _add_instances(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    _, sub = _group(commands, "instances", "start, inspect, list and cancel workflow instances")
    p = _leaf(sub, "start", "start an instance of a definition", common, _instances_start)
    p.add_argument("name", metavar="NAME", help="the definition's name")
    p.add_argument("--version", type=int, help="a specific definition version (default: latest)")
    p.add_argument("--input", metavar="JSON", help="the input object (or @file.json)")
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument("--idempotency-key", metavar="KEY", help="a repeat returns the first instance")
    p = _leaf(sub, "get", "show an instance and its steps", common, _instances_get)
    p.add_argument("id", metavar="ID")
    p = _leaf(sub, "list", "search instances, newest first", common, _instances_list)
    p.add_argument("--status", choices=INSTANCE_STATUSES, type=str.upper)
    p.add_argument("--definition", metavar="NAME", help="only instances of this definition")
    p.add_argument("--correlation-id", metavar="ID")
    p.add_argument("--limit", type=int, default=20, help="at most this many (default 20, max 100)")
    p.add_argument("--page-token", metavar="TOKEN", help="continue a previous listing")
    p = _leaf(sub, "cancel", "cancel a running instance", common, _instances_cancel)
    p.add_argument("id", metavar="ID")
    p.add_argument("--reason")
    p = _leaf(
        sub, "complete-task", "complete a waiting user task", common, _instances_complete_task
    )
    p.add_argument("id", metavar="ID")
    p.add_argument("step", metavar="STEP", help="the user task's step id")
    p.add_argument("--variables", metavar="JSON", help="variables to set (or @file.json)")
    p = _leaf(sub, "signal", "deliver a signal to a waiting step", common, _instances_signal)
    p.add_argument("id", metavar="ID")
    p.add_argument("step", metavar="STEP", help="the signal step's id")
    p.add_argument("--payload", metavar="JSON", help="the signal's payload (or @file.json)")


# --- jobs --------------------------------------------------------------------------------------


def _jobs_poll(client: BatonClient, args: argparse.Namespace) -> None:
    from baton_worker.runner import default_worker_id

    worker = args.worker or default_worker_id()
    jobs = client.poll_jobs(worker_id=worker, job_types=args.type, max_jobs=args.max, retry=None)
    rows = [
        [
            j["id"],
            j["jobType"],
            j["instanceId"],
            j["stepId"],
            j["attempt"],
            j["retriesRemaining"],
            _when(j["lockExpiresAt"]),
            _cell(j.get("input"), CELL_WIDTH),
        ]
        for j in jobs
    ]
    headers = ["id", "type", "instance", "step", "attempt", "retries left", "lock expires", "input"]

    def render(_: Any) -> str:
        return table(headers, rows) + (f"\n(claimed by worker {worker})" if jobs else "")

    _print(args, {"workerId": worker, "jobs": jobs}, render)


def _jobs_complete(client: BatonClient, args: argparse.Namespace) -> None:
    variables = _json_object_arg(args.variables, "--variables")
    result = client.complete_job(args.job_id, worker_id=args.worker, variables=variables)
    _print(args, result, lambda r: fields(list(r.items())))


def _jobs_fail(client: BatonClient, args: argparse.Namespace) -> None:
    result = client.fail_job(
        args.job_id,
        worker_id=args.worker,
        error_message=args.message,
        retryable=not args.non_retryable,
    )
    _print(args, result, lambda r: fields(list(r.items())))


def _add_jobs(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    _, sub = _group(commands, "jobs", "claim and settle jobs by hand (debugging)")
    p = _leaf(sub, "poll", "claim jobs as a worker would (they stay locked)", common, _jobs_poll)
    p.add_argument(
        "--type", action="append", required=True, metavar="TYPE", help="a job type (repeatable)"
    )
    p.add_argument("--max", type=int, default=1, help="at most this many jobs (default 1)")
    p.add_argument("--worker", metavar="ID", help="the worker id (default: <host>-<pid>)")
    p = _leaf(sub, "complete", "complete a claimed job", common, _jobs_complete)
    p.add_argument("job_id", metavar="JOB_ID")
    p.add_argument("--worker", required=True, metavar="ID", help="the worker that claimed it")
    p.add_argument("--variables", metavar="JSON", help="variables to set (or @file.json)")
    p = _leaf(sub, "fail", "fail a claimed job", common, _jobs_fail)
    p.add_argument("job_id", metavar="JOB_ID")
    p.add_argument("--worker", required=True, metavar="ID", help="the worker that claimed it")
    p.add_argument("--message", required=True, help="the error message")
    p.add_argument("--non-retryable", action="store_true", help="skip the remaining retries")


# --- queues ------------------------------------------------------------------------------------


def _queues_push(client: BatonClient, args: argparse.Namespace) -> None:
    pushed = client.push(
        args.name,
        title=args.title,
        body=args.body,
        priority=args.priority,
        max_retries=args.max_retries,
    )
    _print(args, pushed, lambda p: fields(list(p.items())))


def _queues_stats(client: BatonClient, args: argparse.Namespace) -> None:
    stats = client.queue_stats(args.name)
    keys = ["pending", "processing", "completed", "failed", "dead"]
    _print(args, stats, lambda s: table(keys, [[s.get(k) for k in keys]]))


def _queues_peek(client: BatonClient, args: argparse.Namespace) -> None:
    tasks = client.peek(args.name, limit=args.limit)
    rows = [
        [
            t["id"],
            t["priority"],
            f"{t['retryCount']}/{t['maxRetries']}",
            _cell(t["title"], CELL_WIDTH),
            _when(t["createdAt"]),
        ]
        for t in tasks
    ]
    _print(
        args,
        {"tasks": tasks},
        lambda _: table(["id", "priority", "retries", "title", "created"], rows),
    )


def _queues_purge(client: BatonClient, args: argparse.Namespace) -> None:
    result = client.purge(args.name)
    _print(args, result, lambda r: f"deleted {r['deleted']} task(s) from {args.name}")


def _add_queues(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    _, sub = _group(commands, "queues", "push to named queues and inspect them")
    p = _leaf(sub, "push", "push a task onto a queue", common, _queues_push)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--title", required=True)
    p.add_argument("--body", default="", help="the task's payload text (JSON or anything)")
    p.add_argument("--priority", type=int, default=0, help="higher first (default 0)")
    p.add_argument("--max-retries", type=int, help="attempts before dead letter (default 3)")
    p = _leaf(sub, "stats", "task counts by state", common, _queues_stats)
    p.add_argument("name", metavar="NAME")
    p = _leaf(sub, "peek", "pending tasks, in dequeue order, not claimed", common, _queues_peek)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--limit", type=int, default=10, help="at most this many (default 10, max 100)")
    p = _leaf(
        sub, "purge", "delete every task of a queue, whatever its state", common, _queues_purge
    )
    p.add_argument("name", metavar="NAME")


# --- worker ------------------------------------------------------------------------------------


def load_registry(spec: str) -> Registry:
    """The registry named by ``module:attribute`` (or ``path/to/file.py:attribute``).

    The attribute defaults to ``registry``; it may be a ``Registry`` or a ``Runner`` (whose
    registry is used). The current directory is importable, as with ``python -m``.
    """
    from baton_worker.registry import Registry
    from baton_worker.runner import Runner

    target, _, attribute = spec.partition(":")
    attribute = attribute or "registry"
    if not target:
        raise UsageError(f"{spec!r}: expected module:attribute, e.g. myapp.worker:registry")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if target.endswith(".py") or os.sep in target:
            path = Path(target).resolve()
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            if module_spec is None or module_spec.loader is None:
                raise UsageError(f"cannot import {target}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[path.stem] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except (ImportError, FileNotFoundError) as e:
        raise UsageError(f"cannot import {target}: {e}") from None
    try:
        found = getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"{target} has no attribute {attribute!r}") from None
    if isinstance(found, Runner):
        return found.registry
    if not isinstance(found, Registry):
        raise UsageError(f"{spec} is a {type(found).__name__}, not a baton_worker Registry")
    return found


def _worker_run(client: BatonClient, args: argparse.Namespace) -> int:
    from baton_worker.logs import configure_logging
    from baton_worker.runner import Runner, RunnerOptions

    registry = load_registry(args.target)
    configure_logging(args.log_level.upper(), json_lines=args.json_logs)
    try:
        options = RunnerOptions(
            worker_id=args.worker_id,
            job_types=args.type,
            parallelism=args.parallelism,
            max_jobs_per_poll=args.max_jobs,
            poll_interval=args.poll_interval,
            max_poll_interval=max(args.poll_interval, args.max_poll_interval),
        )
        runner = Runner(registry, client=client, options=options)
        runner.run()
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    return EXIT_OK


def _add_worker(commands: Subparsers, common: argparse.ArgumentParser) -> None:
    _, sub = _group(commands, "worker", "run job handlers")
    p = _leaf(
        sub,
        "run",
        "poll for jobs and run the handlers of a registry until SIGINT/SIGTERM (then drain)",
        common,
        _worker_run,
    )
    p.add_argument(
        "target",
        metavar="MODULE:REGISTRY",
        help="where the handlers are, e.g. examples.order_fulfilment.worker:registry",
    )
    p.add_argument("--worker-id", metavar="ID", help="default: <host>-<pid>")
    p.add_argument(
        "--type", action="append", metavar="TYPE", help="poll only this job type (repeatable)"
    )
    p.add_argument("--parallelism", type=int, default=8, help="jobs at once (default 8)")
    p.add_argument("--max-jobs", type=int, default=10, help="jobs per poll at most (default 10)")
    p.add_argument(
        "--poll-interval", type=float, default=0.5, help="seconds after an empty poll (default 0.5)"
    )
    p.add_argument(
        "--max-poll-interval",
        type=float,
        default=2.0,
        help="the cap as empty polls back off (default 2)",
    )
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO (default), WARNING...")
    p.add_argument("--json-logs", action="store_true", help="one JSON object per log line")


# --- entry points ------------------------------------------------------------------------------


def register(subparsers: Subparsers) -> None:
    """Add the client commands to the ``baton`` command's subparsers."""
    common = _common_options()
    _add_definitions(subparsers, common)
    _add_instances(subparsers, common)
    _add_jobs(subparsers, common)
    _add_queues(subparsers, common)
    _add_worker(subparsers, common)


def build_parser() -> argparse.ArgumentParser:
    """A parser with only the client commands (``baton.cli`` adds them next to ``dev``)."""
    parser = argparse.ArgumentParser(prog="baton", description="Baton's API client commands.")
    register(parser.add_subparsers(title="commands", metavar="COMMAND"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one client command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command: Command | None = getattr(args, "command", None)
    if command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return command(args)


if __name__ == "__main__":
    sys.exit(main())
