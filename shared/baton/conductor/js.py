"""Conductor's JavaScript conditions (a SWITCH's ``javascript``/``graaljs`` expression, a
DO_WHILE's ``loopCondition``) translated to JSONata, for the simple comparisons that have an exact
equivalent: ``$.a.b == 'x' && $.n > 3``, optionally wrapped in ``if (…) { true; } else { false; }``.
Anything else raises ``ValueError``; nothing is ever evaluated."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

_WRAPPED = re.compile(
    r"^\s*if\s*\((?P<cond>.*)\)\s*\{\s*(?:return\s+)?true\s*;?\s*\}\s*"
    r"else\s*\{\s*(?:return\s+)?false\s*;?\s*\}\s*;?\s*$",
    re.DOTALL,
)
_TOKEN = re.compile(
    r"\s*(?:(?P<path>\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\s*'[A-Za-z0-9_]+'\s*\]"
    r"|\[\s*\"[A-Za-z0-9_]+\"\s*\])+)"
    r"|(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<num>-?\d+(?:\.\d+)?)"
    r"|(?P<word>true|false|null)"
    r"|(?P<op>===|!==|==|!=|<=|>=|<|>|&&|\|\||!|\(|\)))"
)
_OPS = {
    "===": "=",
    "==": "=",
    "!==": "!=",
    "!=": "!=",
    "<=": "<=",
    ">=": ">=",
    "<": "<",
    ">": ">",
    "&&": "and",
    "||": "or",
    "(": "(",
    ")": ")",
}
_KEY = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*['\"]([A-Za-z0-9_]+)['\"]\s*\]")


def to_jsonata(script: str, resolve: Callable[[list[str]], str]) -> str:
    """JSONata for ``script``; ``resolve`` turns a ``$.a.b`` path (as keys) into JSONata."""
    m = _WRAPPED.match(script)
    text = m.group("cond") if m else script.strip().rstrip(";")
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        t = _TOKEN.match(text, pos)
        if t is None or t.end() == pos:
            raise ValueError(f"cannot translate {text[pos : pos + 20]!r} to JSONata")
        pos = t.end()
        if t.group("path"):
            keys = [a or b for a, b in _KEY.findall(t.group("path")[1:])]
            if not keys:
                raise ValueError("a bare $ cannot be translated")
            out.append(resolve(keys))
        elif t.group("str"):
            raw = t.group("str")
            out.append(json.dumps(raw[1:-1].replace("\\'", "'").replace('\\"', '"')))
        elif t.group("num") or t.group("word"):
            out.append(t.group("num") or t.group("word"))
        else:
            op = t.group("op")
            out.append("$not" if op == "!" else _OPS[op])
    if not out:
        raise ValueError("empty condition")
    for i, token in enumerate(out):
        if token == "$not" and (i + 1 == len(out) or out[i + 1] != "("):
            raise ValueError("'!' is translated only before a parenthesis: !( … )")
    text = ""
    for i, token in enumerate(out):
        glued = i == 0 or token == ")" or out[i - 1] in ("(", "$not")
        text += token if glued else " " + token
    return text


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
