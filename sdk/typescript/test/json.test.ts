import assert from "node:assert/strict";
import { test } from "node:test";
import { jsonProblem } from "../src/json.js";

test("strict JSON problems name where they are", () => {
  assert.equal(jsonProblem({ a: 1, b: [true, null, "x"] }), undefined);
  assert.equal(jsonProblem({ ratio: Number.NaN }), "$.ratio is NaN, which is not JSON");
  assert.equal(jsonProblem({ a: [1, -Infinity] }), "$.a[1] is -Infinity, which is not JSON");
  assert.equal(
    jsonProblem({ "a b": 10n }),
    '$["a b"] is a BigInt, which is not JSON (convert it to a string or a number)',
  );
  assert.match(jsonProblem({ s: "a\u0000b" }) ?? "", /\$\.s contains a NUL character/);
  assert.match(jsonProblem({ m: new Map() }) ?? "", /\$\.m is a Map, which is not JSON/);
  assert.match(jsonProblem({ f: [() => 1] }) ?? "", /\$\.f\[0\] is a function/);
  const loop: Record<string, unknown> = {};
  loop.self = loop;
  assert.match(jsonProblem(loop) ?? "", /circular/);
  // What JSON.stringify sends faithfully is fine: a Date becomes its ISO text, undefined members drop.
  assert.equal(jsonProblem({ when: new Date(0), gone: undefined }), undefined);
});
