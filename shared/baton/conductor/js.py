"""A native Baton loop's JSONata condition shown as the Conductor script it would be
(``a.b = "x" and n > 3`` → ``$.p0 == "x" && $.p1 > 3``), for Baton definitions read through
``/api``. Conductor's own conditions are never translated the other way: they run as JavaScript,
whose comparisons coerce where JSONata's do not. Nothing is ever evaluated here."""

from __future__ import annotations

import re

_JSONATA_TOKEN = re.compile(
    r"\s*(?:(?P<str>\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<num>-?\d+(?:\.\d+)?)"
    r"|(?P<word>true|false|null|and|or)\b"
    r"|(?P<not>\$not\()"
    r"|(?P<path>[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*)"
    r"|(?P<op>!=|<=|>=|=|<|>|\(|\)))"
)
_BACK_OPS = {"=": "==", "and": "&&", "or": "||"}


def from_jsonata(condition: str, params: dict[str, object]) -> str:
    """The Conductor script for a condition :func:`to_jsonata` made, reading each path through
    an input parameter of ``params`` (an existing one holding ``${path}``, else a new ``pN``,
    added to ``params``). Raises ``ValueError`` for JSONata outside that subset."""
    out: list[str] = []
    pos = 0
    text = condition.strip()
    while pos < len(text):
        t = _JSONATA_TOKEN.match(text, pos)
        if t is None or t.end() == pos:
            raise ValueError(f"cannot show {text[pos : pos + 20]!r} as JavaScript")
        pos = t.end()
        if t.group("str") or t.group("num"):
            out.append(t.group("str") or t.group("num"))
        elif t.group("word"):
            w = t.group("word")
            out.append(_BACK_OPS.get(w, w))
        elif t.group("not"):
            out.append("!(")
        elif t.group("path"):
            ref = "${" + t.group("path") + "}"
            key = next((k for k, v in params.items() if v == ref), None)
            if key is None:
                key = f"p{len(params)}"
                params[key] = ref
            out.append(f"$.{key}")
        else:
            op = t.group("op")
            out.append(_BACK_OPS.get(op, op))
    return " ".join(out).replace("!( ", "!(").replace("( ", "(").replace(" )", ")")
