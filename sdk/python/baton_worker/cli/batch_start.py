"""``baton instances start --batch FILE.jsonl``: many starts, 100 per request.

Each line of the file is one start as ``POST /v1/instances`` takes it (``{"definitionName":
"x", "input": {...}, "idempotencyKey": "..."}``; blank lines are skipped). Progress goes to stderr
after each request, then a summary; each item that did not start is named on stderr with its line
and why. The exit code is 1 if any item did not start (EXISTING, a repeated idempotency key, is a
success), so a script can re-run the file with idempotency keys and start only what is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from baton_worker.cli.options import EXIT_FAILED, EXIT_OK, UsageError, read_text

if TYPE_CHECKING:
    from baton_worker.client import BatonClient

BATCH_SIZE = 100  # the server's limit per request
SUCCESS = ("STARTED", "EXISTING")


def read_starts(source: str) -> list[tuple[int, dict[str, Any]]]:
    """The starts of a JSON Lines file (``-``: stdin), each with its line number."""
    starts: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(read_text(source, "--batch").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(f"--batch {source}, line {number}: not valid JSON: {e}") from None
        if not isinstance(item, dict):
            raise UsageError(f"--batch {source}, line {number}: a start is a JSON object")
        starts.append((number, item))
    if not starts:
        raise UsageError(f"--batch {source}: no starts in the file")
    return starts


def _chunks(
    starts: list[tuple[int, dict[str, Any]]],
) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    for k in range(0, len(starts), BATCH_SIZE):
        yield starts[k : k + BATCH_SIZE]


def start_batch(client: BatonClient, args: argparse.Namespace) -> int:
    """Start every line of ``args.batch``; print one line per item (or the API's JSON)."""
    if args.name or args.input or args.version or args.correlation_id or args.idempotency_key:
        raise UsageError("--batch takes the starts from the file: give no NAME or start options")
    starts = read_starts(args.batch)
    counts: Counter[str] = Counter()
    answers: list[dict[str, Any]] = []
    for chunk in _chunks(starts):
        results = client.start_instances([item for _, item in chunk])
        for (line, _), result in zip(chunk, results, strict=True):
            counts[result["outcome"]] += 1
            answers.append({"line": line, **result})
            if result["outcome"] not in SUCCESS:
                print(
                    f"line {line}: {result['outcome']}: {result.get('error', '')}",
                    file=sys.stderr,
                )
        done = sum(counts.values())
        failed = done - counts["STARTED"] - counts["EXISTING"]
        print(f"{done}/{len(starts)} sent, {failed} not started", file=sys.stderr)
    if args.json:
        print(json.dumps(answers, indent=2, default=str))
    else:
        for a in answers:
            instance = a.get("instance") or {}
            print(f"{a['line']}\t{a['outcome']}\t{instance.get('id', '-')}")
    summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
    print(f"{len(starts)} starts: {summary}", file=sys.stderr)
    return EXIT_OK if all(a["outcome"] in SUCCESS for a in answers) else EXIT_FAILED
