import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { BatonClient, TransportError } from "../src/index.js";
import { FakeBaton } from "./fake.js";

let fake: FakeBaton;
before(async () => {
  fake = await new FakeBaton().start();
  fake.on("GET /v1/instances/slow", () => ({ delayMs: 400, body: { id: "slow" } }));
  fake.on("GET /v1/instances/fast", () => ({ body: { id: "fast" } }));
});
after(() => fake.close());

test("a request without an answer in time fails as timed out", async () => {
  const client = new BatonClient({ url: fake.url, apiKey: "k", retry: null, timeoutSeconds: 0.05 });
  await assert.rejects(client.getInstance("slow"), (e: unknown) => {
    assert.ok(e instanceof TransportError);
    assert.match(e.message, /timed out/);
    return true;
  });
  client.close();
});

test("the caller's signal aborts a request in flight, or before it is sent", async () => {
  const client = new BatonClient({ url: fake.url, apiKey: "k", retry: null, timeoutSeconds: 30 });
  const abort = new AbortController();
  const call = client.getInstance("slow", {}, { signal: abort.signal });
  setTimeout(() => abort.abort(), 20);
  await assert.rejects(
    call,
    (e: unknown) => e instanceof TransportError && /aborted/.test(e.message),
  );
  const sent = fake.calls("/v1/instances/slow").length;
  await assert.rejects(client.getInstance("slow", {}, { signal: abort.signal }), TransportError);
  assert.equal(fake.calls("/v1/instances/slow").length, sent, "an aborted signal sends nothing");
  assert.deepEqual(await client.getInstance("fast"), { id: "fast" });
  client.close();
});
