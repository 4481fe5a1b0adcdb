"""A sandbox process: reads requests, runs each as JavaScript (QuickJS) or jq, answers.

Frames on stdin/stdout are a 4-byte big-endian length and that many bytes of JSON. A request is
``{"lang": "js"|"jq"|"js-check"|"jq-check", "code": str, "input": <json text>, "time": s,
"memory": bytes, "stack": bytes, "results": n}`` (a check parses without running); an answer
``{"ok": true, "value": <json text>}`` or ``{"ok": false, "kind": "...", "error": "..."}``. The
parent kills this process when an answer is late; the process's address space is capped, so a
program that allocates without bound ends here, not in the engine.
"""

from __future__ import annotations

import json
import re
import resource
import struct
import sys
from collections import OrderedDict
from typing import Any, BinaryIO

_HEADER = struct.Struct(">I")
_COMPILED: OrderedDict[str, Any] = OrderedDict()
_CACHE_SIZE = 256

# The script runs inside an IIFE-free indirect eval so that its completion value is the result,
# as Conductor's evaluators give it (``$.a + 1``, ``(function(){...})()``, ``function e(){} e()``);
# a script that is a function (``function() { return $.n < 3; }``, as Conductor's loopConditions
# are often written, or an arrow function) is called and its value is the result.
_JS_RUN = (
    "globalThis.$ = JSON.parse(__baton_input, __baton_java ? __baton_revive : undefined);"
    "var __baton_result = (0, eval)(__baton_script);"
    "if (typeof __baton_result === 'function') __baton_result = __baton_result();"
    "__baton_result === undefined ? 'null' : JSON.stringify(__baton_result)"
)
# Conductor binds ``$`` to its Java Map with host access, so scripts written for it call
# java.util.List and Map methods on the input (``$.list.get(0)``, ``$.items.size()``,
# ``$.map.containsKey('k')``, ``$.map.keySet()``) as well as JavaScript's own. The input's arrays
# and objects (only those: the script's own stay plain) get a prototype with the same methods,
# non-enumerable (JSON.stringify, for-in and Object.keys do not see them) and below their own
# properties (a key named ``size`` is still read as that key).
_JAVA_COLLECTIONS = r"""
var __baton_revive = (function () {
  function same(a, b) { return a === b || (a !== a && b !== b); }
  function has(o, k) { return Object.prototype.hasOwnProperty.call(o, String(k)); }
  function methods(proto, table) {
    var descriptors = {};
    Object.keys(table).forEach(function (name) {
      descriptors[name] = {value: table[name], writable: true, configurable: true};
    });
    return Object.create(proto, descriptors);
  }
  var list = methods(Array.prototype, {
    get: function (i) {
      if (!(i >= 0 && i < this.length)) {
        throw new RangeError('Index ' + i + ' out of bounds for length ' + this.length);
      }
      return this[i];
    },
    size: function () { return this.length; },
    isEmpty: function () { return this.length === 0; },
    contains: function (x) { return this.some(function (y) { return same(x, y); }); },
    add: function (x) { this.push(x); return true; },
    set: function (i, x) { var old = this.get(i); this[i] = x; return old; }
  });
  var map = methods(Object.prototype, {
    get: function (k) { return has(this, k) ? this[k] : null; },
    getOrDefault: function (k, d) { return has(this, k) ? this[k] : d; },
    containsKey: function (k) { return has(this, k); },
    containsValue: function (v) {
      var o = this;
      return Object.keys(o).some(function (k) { return same(o[k], v); });
    },
    keySet: function () { return Object.keys(this); },
    values: function () { var o = this; return Object.keys(o).map(function (k) { return o[k]; }); },
    entrySet: function () {
      var o = this;
      return Object.keys(o).map(function (k) {
        return {key: k, value: o[k], getKey: function () { return k; },
                getValue: function () { return o[k]; }};
      });
    },
    size: function () { return Object.keys(this).length; },
    isEmpty: function () { return Object.keys(this).length === 0; },
    put: function (k, v) { var old = has(this, k) ? this[k] : null; this[k] = v; return old; }
  });
  return function (key, value) {
    if (value !== null && typeof value === 'object') {
      Object.setPrototypeOf(value, Array.isArray(value) ? list : map);
    }
    return value;
  };
})();
"""
_JAVA_METHOD = re.compile(
    r"\b(?:get|getOrDefault|size|isEmpty|contains|containsKey|containsValue|keySet|values"
    r"|entrySet|add|put|set)\b"
)
# Parses without running: a script's grammar is a function body's, less a top-level return.
_JS_CHECK = "new Function(__baton_script); 'null'"
# An anonymous function is no statement: given alone, it is the function expression it means.
_ANONYMOUS_FUNCTION = re.compile(r"^\s*(?:async\s+)?function\s*\(")


def script_text(code: str) -> str:
    """``code`` as it is evaluated: an anonymous function alone becomes its expression."""
    if _ANONYMOUS_FUNCTION.match(code):
        return "(" + code.strip().rstrip(";").rstrip() + ")"
    return code


def _read(stream: BinaryIO) -> dict[str, Any] | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    return json.loads(stream.read(size))  # type: ignore[no-any-return]


def _write(stream: BinaryIO, answer: dict[str, Any]) -> None:
    data = json.dumps(answer).encode()
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


# A fresh context for each script (no state is shared between runs), made ahead of the request
# while the process waits: creating one is most of a short script's cost (~80 of ~110 µs).
_contexts: list[Any] = []


def _new_context() -> Any:
    import quickjs

    context = quickjs.Context()
    context.eval(_JAVA_COLLECTIONS)
    return context


def _prepare() -> None:
    if not _contexts:
        _contexts.append(_new_context())


def _javascript(request: dict[str, Any]) -> dict[str, Any]:
    context = _contexts.pop() if _contexts else _new_context()
    context.set_memory_limit(int(request["memory"]))
    context.set_max_stack_size(int(request["stack"]))
    context.set_time_limit(float(request["time"]))
    context.set("__baton_input", request["input"])
    context.set("__baton_script", script_text(request["code"]))
    # Giving the input its Java methods costs ~0.4 µs per array and object: done only for a
    # script that names one of them (the result is the same either way).
    context.set("__baton_java", _JAVA_METHOD.search(request["code"]) is not None)
    import quickjs

    try:
        value = context.eval(_JS_CHECK if request["lang"] == "js-check" else _JS_RUN)
    except quickjs.StackOverflow as e:
        return {"ok": False, "kind": "stack", "error": _first_line(e) or "stack overflow"}
    except quickjs.JSException as e:
        text = _first_line(e)
        if text in ("", "null", "None") or "out of memory" in text:
            # QuickJS's out-of-memory comes without a message, or as an InternalError
            limit = int(request["memory"]) >> 20
            error = f"the script ran out of memory (its limit is {limit} MiB)"
            return {"ok": False, "kind": "memory", "error": error}
        if "interrupted" in text:
            return {"ok": False, "kind": "timeout", "error": "the script ran out of time"}
        kind = (
            "syntax"
            if request["lang"] == "js-check" or text.startswith("SyntaxError")
            else "script"
        )
        return {"ok": False, "kind": kind, "error": text}
    if not isinstance(value, str):  # JSON.stringify gave undefined: a function, a symbol
        return {"ok": True, "value": "null"}
    return {"ok": True, "value": value}


def _jq(request: dict[str, Any]) -> dict[str, Any]:
    import jq

    code = request["code"]
    if request["lang"] == "jq-check":
        try:
            jq.compile(code)
        except ValueError as e:
            return {"ok": False, "kind": "syntax", "error": _first_line(e)}
        return {"ok": True, "value": "null"}
    program = _COMPILED.get(code)
    if program is None:
        try:
            program = jq.compile(code)
        except ValueError as e:
            return {"ok": False, "kind": "syntax", "error": _first_line(e)}
        _COMPILED[code] = program
        if len(_COMPILED) > _CACHE_SIZE:
            _COMPILED.popitem(last=False)
    else:
        _COMPILED.move_to_end(code)
    limit = int(request["results"])
    results: list[Any] = []
    try:
        for value in program.input_text(request["input"]):
            if len(results) == limit:
                return {
                    "ok": False,
                    "kind": "results",
                    "error": f"the jq program gave more than {limit} results",
                }
            results.append(value)
    except ValueError as e:
        return {"ok": False, "kind": "script", "error": _first_line(e)}
    return {"ok": True, "value": json.dumps(results)}


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def main() -> None:
    ceiling = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if ceiling:
        resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Both interpreters are loaded and a context made before the ready frame, within the
    # parent's start deadline: a first call's program time is the program's alone (a cold
    # import on a loaded machine, or a Lambda's cold start, took more than a script's second).
    import jq  # noqa: F401
    import quickjs  # noqa: F401

    _prepare()
    _write(stdout, {"ok": True, "value": "null"})  # ready
    while (request := _read(stdin)) is not None:
        try:
            run = _javascript if request["lang"].startswith("js") else _jq
            answer = run(request)
        except MemoryError:
            answer = {"ok": False, "kind": "memory", "error": "the program ran out of memory"}
        except RecursionError:
            answer = {"ok": False, "kind": "stack", "error": "the program nested too deeply"}
        _write(stdout, answer)
        if request["lang"].startswith("js"):
            _prepare()  # while the parent reads the answer


if __name__ == "__main__":
    main()
