"""Whether a long DO_WHILE's iterations cost the same at its end as at its start: the wall time
per iteration of the last window of a long loop against its first window, for the loop forms
Conductor users write, over a history of other finished workflows (so PostgreSQL plans as a
deployment's would).

    .venv/bin/python bench/loop_iterations.py --iterations 3000 --window 250

Each iteration is one SERVICE_TASK job, claimed and completed by this process (one at a time),
so the figure is the engine's whole cost of an iteration: the claim, the completion and its
decision (the loop condition, the next iteration). Printed per form: ms per iteration in the
first and the last window and their ratio, which stays near 1.0 when an iteration's cost does not
grow with the iterations before it. (Before the reads were bounded, a JavaScript loopCondition
read every earlier iteration's outputs after each one: 6 ms per iteration at the 500th, 40 ms at
the 3,000th, a ratio of about 6.5; docs/architecture.md, DO_WHILE.)
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Sequence
from typing import Any

from support.library import open_engine
from support.postgres import fresh_database, postgres_server, settle
from support.reporting import Progress, log, table

# The loop forms: a Baton loop with a JSONata condition; Conductor's DO_WHILE (a JavaScript
# loopCondition, iterationOutputs) reading only its iteration; and one keeping its last two
# iterations (keepLastN 2) whose condition reads the last iteration's output.
FORMS: dict[str, dict[str, Any]] = {
    "jsonata while": {"while": "loop.iteration < {n}"},
    "javascript, iteration only": {
        "while": "$.loop.iteration < {n}",
        "whileLanguage": "javascript",
        "iterationOutputs": True,
    },
    "javascript, keepLastN 2, reads output": {
        "while": "$.loop.iteration < {n} && $.loop[String($.loop.iteration)].work.ok",
        "whileLanguage": "javascript",
        "iterationOutputs": True,
        "keepLastIterations": 2,
    },
}


def _definition(name: str, form: dict[str, Any], iterations: int) -> dict[str, Any]:
    loop = {
        "id": "loop",
        "type": "DO_WHILE",
        "maxIterations": iterations + 1,
        "steps": [{"id": "work", "type": "SERVICE_TASK", "jobType": name}],
        **{k: v.format(n=iterations) if k == "while" else v for k, v in form.items()},
    }
    return {"name": name, "steps": [loop]}


def _history(url: str, count: int) -> None:
    """``count`` finished one-step workflows (not timed)."""
    from baton.engine.batch_ops import BatchResult
    from baton.engine.start_batch import StartItem

    engine = open_engine(url)
    try:
        engine.register_definition(
            {"name": "history", "steps": [{"id": "w", "type": "SERVICE_TASK", "jobType": "h"}]}
        )
        for start in range(0, count, 100):
            items = [StartItem(definition_name="history", input={"n": i}) for i in range(100)]
            engine.start_instances(items[: min(100, count - start)])
        while jobs := engine.poll("h", ["h"], 100):
            engine.complete_batch(
                [BatchResult(j["id"], "h", j["attempt"], output={}) for j in jobs]
            )
    finally:
        engine.db.close()
    settle(url, "instance", "step_execution", "job", "audit_log")


def _run(url: str, name: str, form: dict[str, Any], iterations: int, window: int) -> list[float]:
    """ms per iteration of each window of ``window`` iterations."""
    from baton.engine.batch_ops import BatchResult

    engine = open_engine(url)
    try:
        engine.register_definition(_definition(name, form, iterations))
        engine.start_instance(definition_name=name, input={})
        progress = Progress(name, iterations)
        done, marks = 0, [time.perf_counter()]
        while done < iterations:
            jobs = engine.poll("w", [name], 1)
            if not jobs:
                continue
            engine.complete_batch(
                [BatchResult(j["id"], "w", j["attempt"], output={"ok": 1}) for j in jobs]
            )
            done += 1
            progress.update(done)
            if done % window == 0:
                marks.append(time.perf_counter())
    finally:
        engine.db.close()
    return [(b - a) / window * 1000 for a, b in itertools.pairwise(marks)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--window", type=int, default=250)
    parser.add_argument("--history", type=int, default=5000, help="finished workflows first")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args(argv)
    if not 2 * args.window <= args.iterations <= 10_000:
        parser.error("--iterations must be from 2 windows to 10000")
    rows = []
    with postgres_server(args.database_url) as server, fresh_database(server, "loops") as url:
        log(f"{args.history:,} finished workflows first")
        _history(url, args.history)
        for n, (label, form) in enumerate(FORMS.items()):
            windows = _run(url, f"loop{n}", form, args.iterations, args.window)
            first, last = windows[0], windows[-1]
            rows.append([label, f"{first:.2f}", f"{last:.2f}", f"{last / first:.2f}"])
            log(f"{label}: {first:.2f} -> {last:.2f} ms per iteration")
    print()
    print(f"{args.iterations:,} iterations, windows of {args.window:,}:")
    print(table(["loop", "first window ms/it", "last window ms/it", "last/first"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
