"""What resolving ``${…}`` costs for a plain path next to the JSONPath forms (``baton.jsonpath``),
in CPU time per template, in this process (no database: expressions are pure).

    .venv/bin/python bench/expression_paths.py --rounds 5 --count 20000

Each template holds four expressions over the same step output (20 line items). The kinds run in
turn, round after round, so the machine's noise hits all alike; printed per kind: the best
round's CPU µs per template and its ratio to the plain one. The plain path is the common case
and must stay as cheap as before the JSONPath forms existed (it never enters their machinery).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from baton import expressions
from support.reporting import log, table

OUTPUT = {
    "order": {
        "items": [
            {"sku": f"sku-{i}", "price": 3 + i, "qty": 1 + i % 3, "tags": ["a", "b"]}
            for i in range(20)
        ],
        "id": "o-1",
    }
}
KINDS: dict[str, dict[str, str]] = {
    "plain": {
        "a": "${t.output.order.items[3].price}",
        "b": "${t.output.order['id']}",
        "c": "id-${t.output.order.id}",
        "d": "${t.output.order.items.length()}",
    },
    "wildcard": {k: "${t.output.order.items[*].sku}" for k in "abcd"},
    "filter": {k: "${t.output.order.items[?(@.price > 10 && @.qty == 2)].sku}" for k in "abcd"},
    "descent": {k: "${t.output..price}" for k in "abcd"},
}


def _cpu_per_template(template: dict[str, str], scope: expressions.Scope, count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        expressions.resolve(template, scope)
    return (time.process_time() - started) / count * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=20_000)
    args = parser.parse_args(argv)
    scope = expressions.Scope(workflow={"input": {}}, step_output=lambda _step: OUTPUT)
    best: dict[str, float] = {}
    for n in range(args.rounds):
        for kind, template in KINDS.items():
            us = _cpu_per_template(template, scope, args.count)
            best[kind] = min(best.get(kind, us), us)
        log(
            f"round {n + 1}/{args.rounds}: " + ", ".join(f"{k} {v:.1f} µs" for k, v in best.items())
        )
    rows: list[Sequence[Any]] = [
        (kind, f"{us:.1f}", f"{us / best['plain']:.2f}") for kind, us in best.items()
    ]
    print(table(("template of 4", "CPU µs (best round)", "x plain"), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
