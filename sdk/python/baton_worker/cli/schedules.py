"""``baton schedules``: create, inspect (with a preview of the next fire times), pause, unpause,
trigger, backfill and delete schedules."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from baton_worker.cli.options import Subparsers, json_object_arg, leaf
from baton_worker.cli.options import group as command_group
from baton_worker.cli.output import fields, show, table, when

if TYPE_CHECKING:
    from baton_worker.client import BatonClient

POLICIES = ("SKIP", "BUFFER_ONE", "BUFFER_ALL", "CANCEL_OTHER", "TERMINATE_OTHER", "ALLOW_ALL")


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if args.cron:
        spec["cron"] = args.cron
    if args.every is not None:
        spec["interval"] = {"everySeconds": args.every, "offsetSeconds": args.offset}
    for key, value in (
        ("timeZone", args.time_zone),
        ("jitterSeconds", args.jitter),
        ("startAt", args.start_at),
        ("endAt", args.end_at),
    ):
        if value is not None:
            spec[key] = value
    return spec


def _render(s: dict[str, Any]) -> str:
    spec = s["spec"]
    lines = fields(
        [
            ("id", s["id"]),
            (
                "definition",
                f"{s['definitionName']}"
                + (f" v{s['definitionVersion']}" if s.get("definitionVersion") else ""),
            ),
            ("cron", ", ".join(spec.get("cron") or []) or None),
            ("interval", spec.get("interval")),
            ("time zone", spec.get("timeZone", "UTC")),
            ("overlap", s["overlapPolicy"]),
            ("catch-up", f"{s['catchupWindowSeconds']} s"),
            ("paused", s["paused"]),
            ("note", s.get("note")),
        ]
    )
    upcoming = "\n".join(f"  {when(t)}" for t in s.get("nextFireTimes", []))
    out = f"{lines}\nnext fire times:\n{upcoming or '  (none)'}"
    actions = s.get("recentActions")
    if actions is not None:
        rows = [
            [when(a["slotTime"]), a["kind"], a["outcome"], a.get("instanceId"), a.get("detail")]
            for a in actions
        ]
        out += "\nrecent actions:\n" + table(
            ["slot", "kind", "outcome", "instance", "detail"], rows
        )
    return out


def _create(client: BatonClient, args: argparse.Namespace) -> None:
    body: dict[str, Any] = {
        "definitionName": args.definition,
        "spec": _spec(args),
        "overlapPolicy": args.overlap,
        "pauseOnFailure": args.pause_on_failure,
        "paused": args.paused,
    }
    if args.id:
        body["id"] = args.id
    if args.version is not None:
        body["definitionVersion"] = args.version
    if args.input is not None:
        body["input"] = json_object_arg(args.input, "--input")
    if args.catchup is not None:
        body["catchupWindowSeconds"] = args.catchup
    if args.dry_run:
        body["dryRun"] = True
        shown = client.create_schedule(body)
        show(args, shown, lambda s: "a dry run: nothing was created\n" + _render(s))
        return
    show(args, client.create_schedule(body), _render)


def _list(client: BatonClient, args: argparse.Namespace) -> None:
    found = list(client.iter_schedules())
    rows = [
        [
            s["id"],
            s["definitionName"],
            ", ".join(s["spec"].get("cron") or [])
            or f"every {s['spec'].get('interval', {}).get('everySeconds')} s",
            s["overlapPolicy"],
            "yes" if s["paused"] else "",
            when(s["nextFireTimes"][0]) if s["nextFireTimes"] else "",
        ]
        for s in found
    ]
    headers = ["id", "definition", "spec", "overlap", "paused", "next fire"]
    show(args, {"schedules": found}, lambda _: table(headers, rows))


def _get(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.get_schedule(args.id), _render)


def _pause(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.pause_schedule(args.id, note=args.note), _render)


def _unpause(client: BatonClient, args: argparse.Namespace) -> None:
    show(args, client.unpause_schedule(args.id), _render)


def _trigger(client: BatonClient, args: argparse.Namespace) -> None:
    result = client.trigger_schedule(args.id)
    show(args, result, lambda r: f"slot {', '.join(r['slotTimes'])} of {args.id} fires now")


def _backfill(client: BatonClient, args: argparse.Namespace) -> None:
    result = client.backfill_schedule(args.id, start=args.start, end=args.end)
    show(
        args,
        result,
        lambda r: (
            f"{r['added']} of {r['slots']} slot(s) of {args.id} added; the duty loop "
            "fires them in order"
        ),
    )


def _delete(client: BatonClient, args: argparse.Namespace) -> None:
    result = client.delete_schedule(args.id)
    show(args, result, lambda r: f"deleted schedule {r['id']}")


def _schedule_arguments(p: argparse.ArgumentParser) -> None:
    """The definition and options a schedule is created with."""
    p.add_argument("definition", metavar="DEFINITION", help="the definition to start")
    p.add_argument("--id", help="the schedule's id (default: a UUID)")
    p.add_argument("--version", type=int, help="the definition version (default: the latest)")
    p.add_argument(
        "--cron",
        action="append",
        metavar="EXPR",
        help="a cron expression (5 fields, 6 with seconds first, @daily...); repeatable",
    )
    p.add_argument("--every", type=int, metavar="SECONDS", help="an interval, aligned to the epoch")
    p.add_argument("--offset", type=int, default=0, metavar="SECONDS", help="the interval's offset")
    p.add_argument("--time-zone", metavar="TZ", help="an IANA time zone (default UTC)")
    p.add_argument("--jitter", type=int, metavar="SECONDS", help="delay each slot up to this")
    p.add_argument("--start-at", metavar="TIME", help="no slot before (ISO 8601)")
    p.add_argument("--end-at", metavar="TIME", help="no slot after (ISO 8601)")
    p.add_argument(
        "--overlap",
        choices=POLICIES,
        default="SKIP",
        type=str.upper,
        help="when the last run is still going (default SKIP)",
    )
    p.add_argument(
        "--catchup",
        type=int,
        metavar="SECONDS",
        help="missed slots this recent fire after downtime (default 60)",
    )
    p.add_argument("--pause-on-failure", action="store_true", help="pause after a failed run")
    p.add_argument("--paused", action="store_true", help="create it paused")
    p.add_argument(
        "--input",
        metavar="JSON",
        help="the input object (or @file.json); may read ${schedule.time}, ${schedule.id}",
    )


def add_commands(commands: Subparsers) -> None:
    """Add ``schedules``."""
    sub = command_group(commands, "schedules", "start workflows on a cron or interval schedule")
    p = leaf(sub, "create", "create a schedule; prints its next ten fire times", _create)
    _schedule_arguments(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check it and print its next ten fire times; create nothing",
    )
    p = leaf(
        sub,
        "preview",
        "the next ten fire times of a schedule, checked by the server; nothing is created "
        "(create's options)",
        _create,
    )
    _schedule_arguments(p)
    p.set_defaults(dry_run=True)
    leaf(sub, "list", "list schedules with their next fire time", _list)
    for name, text, body in (
        ("get", "a schedule, its next ten fire times and last ten actions", _get),
        ("unpause", "unpause a schedule: it fires from now on", _unpause),
        ("trigger", "fire a schedule now (its overlap policy applies)", _trigger),
        ("delete", "delete a schedule (its instances are kept)", _delete),
    ):
        p = leaf(sub, name, text, body)
        p.add_argument("id", metavar="ID")
    p = leaf(sub, "pause", "pause a schedule", _pause)
    p.add_argument("id", metavar="ID")
    p.add_argument("--note", help="why (shown by get)")
    p = leaf(sub, "backfill", "fire the slots of a past range, in order", _backfill)
    p.add_argument("id", metavar="ID")
    p.add_argument("--from", dest="start", required=True, metavar="TIME", help="ISO 8601")
    p.add_argument("--to", dest="end", required=True, metavar="TIME", help="ISO 8601")
