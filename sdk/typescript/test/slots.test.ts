import assert from "node:assert/strict";
import { test } from "node:test";
import { gatherEnough } from "../src/slots.js";

// Waiting for half of a poll of 100 with 32 slots would make every poll wait the whole gather
// interval: a gathering poll waits for half of a poll or of all the slots, the fewer.
test("a gathering poll waits for half of a poll or of the slots, the fewer", () => {
  assert.equal(gatherEnough(100, 32), 16);
  assert.equal(gatherEnough(10, 32), 5);
  assert.equal(gatherEnough(100, 1), 1);
  assert.equal(gatherEnough(1, 16), 1);
});
