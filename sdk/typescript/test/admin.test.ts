import assert from "node:assert/strict";
import { after, before, beforeEach, test } from "node:test";
import {
  BatonClient,
  MAX_BATCH_STARTS,
  retryPolicy,
  ServerError,
  UnavailableError,
} from "../src/index.js";
import { FakeBaton } from "./fake.js";

const fast = retryPolicy({ initialInterval: 0.001, maximumInterval: 0.005, maximumAttempts: 3 });
let fake: FakeBaton;
let client: BatonClient;
before(async () => {
  fake = await new FakeBaton().start();
  client = new BatonClient({ url: fake.url, apiKey: "k", retry: fast });
});
after(() => fake.close());
beforeEach(() => {
  fake.routes.clear();
  fake.seen.length = 0;
});

const echo = (req: { body: unknown }) => ({ body: req.body ?? {} });

test("task definitions: put names the type in path and body; delete is not repeated on a 500", async () => {
  fake.on("PUT /v1/taskdefs/charge%20card", echo);
  const put = await client.putTaskDef("charge card", { retryCount: 3, responseTimeoutSeconds: 30 });
  assert.deepEqual(put, { retryCount: 3, responseTimeoutSeconds: 30, name: "charge card" });

  fake.on("DELETE /v1/taskdefs/gone", () => ({
    status: 500,
    body: { title: "boom", status: 500 },
  }));
  await assert.rejects(client.deleteTaskDef("gone"), ServerError);
  assert.equal(fake.calls("/v1/taskdefs/gone").length, 1, "a lost answer may hide a deletion");
  fake.on("GET /v1/taskdefs/flaky", () => ({ status: 500, body: { title: "boom", status: 500 } }));
  await assert.rejects(client.getTaskDef("flaky"), ServerError);
  assert.equal(fake.calls("/v1/taskdefs/flaky").length, 3, "a read is retried");
});

test("iterators follow page tokens and pass the page size", async () => {
  const all = ["a", "b", "c", "d", "e"];
  fake.on("GET /v1/taskdefs", (req) => {
    const limit = Number(req.query.get("limit"));
    const start = Number(req.query.get("pageToken") ?? 0);
    const next = start + limit;
    return {
      body: {
        taskDefs: all.slice(start, next).map((name) => ({ name })),
        ...(next < all.length ? { nextPageToken: String(next) } : {}),
      },
    };
  });
  const names: string[] = [];
  for await (const t of client.iterTaskDefs({ pageSize: 2 })) names.push(t.name ?? "");
  assert.deepEqual(names, all);
  assert.deepEqual(
    fake.calls("/v1/taskdefs").map((s) => s.query.toString()),
    ["limit=2", "limit=2&pageToken=2", "limit=2&pageToken=4"],
  );
});

test("queues: push, dequeue, ack, nack and redrive send the API's bodies", async () => {
  fake.on("POST /v1/queues/*", (req) => ({
    body: req.path.endsWith("/dequeue") ? { tasks: [{ id: "t1", receipt: "r1" }] } : {},
  }));
  fake.on("GET /v1/queues/emails/stats", () => ({ body: { pending: 2 } }));
  fake.on("GET /v1/queues/emails/peek", () => ({ body: { tasks: [{ id: "t2" }] } }));
  fake.on("DELETE /v1/queues/emails", () => ({ body: { purged: "2" } }));
  await client.push("emails", { title: "hi", priority: 5 });
  const [task] = await client.dequeue("emails", { consumerId: "c1", visibilityTimeoutSecs: 30 });
  assert.equal(task?.receipt, "r1");
  await client.ack("emails", "t1", "r1");
  await client.nack("emails", "t1", { receipt: "r1", error: "smtp down" });
  await client.redrive("emails", { taskIds: ["t9"] });
  assert.deepEqual(await client.queueStats("emails"), { pending: 2 });
  assert.deepEqual(await client.peek("emails", { limit: 5 }), [{ id: "t2" }]);
  assert.deepEqual(await client.purge("emails"), { purged: "2" });
  const bodies = Object.fromEntries(
    fake.seen.filter((s) => s.method === "POST").map((s) => [s.path, s.body]),
  );
  assert.deepEqual(bodies, {
    "/v1/queues/emails/push": { title: "hi", body: "", priority: 5 },
    "/v1/queues/emails/dequeue": { consumerId: "c1", maxTasks: 1, visibilityTimeoutSecs: 30 },
    "/v1/queues/emails/tasks/t1/ack": { receipt: "r1" },
    "/v1/queues/emails/tasks/t1/nack": { receipt: "r1", error: "smtp down", retryable: true },
    "/v1/queues/emails/redrive": { taskIds: ["t9"] },
  });
  assert.equal(fake.calls("/v1/queues/emails/peek")[0]?.query.get("limit"), "5");
});

test("schedules: create, pause with a note, trigger and backfill a range", async () => {
  fake.on("POST /v1/schedules", (req) => ({ status: 201, body: { id: "nightly", ...req.body } }));
  fake.on("POST /v1/schedules/*", (req) => ({ body: { id: "nightly", seen: req.body } }));
  fake.on("PUT /v1/schedules/nightly", echo);
  fake.on("DELETE /v1/schedules/nightly", () => ({ body: { id: "nightly" } }));
  const made = await client.createSchedule({
    id: "nightly",
    definitionName: "report",
    spec: { cron: ["0 2 * * *"], timeZone: "Europe/Paris" },
    overlapPolicy: "SKIP",
  });
  assert.equal(made.id, "nightly");
  await client.pauseSchedule("nightly", { note: "maintenance" });
  await client.unpauseSchedule("nightly");
  await client.triggerSchedule("nightly");
  await client.backfillSchedule("nightly", {
    from: new Date("2026-01-01T00:00:00Z"),
    to: "2026-01-03T00:00:00Z",
  });
  await client.replaceSchedule("nightly", {
    definitionName: "report",
    spec: { cron: ["0 3 * * *"] },
  });
  await client.deleteSchedule("nightly");
  const posts = fake.seen.filter((s) => s.method === "POST").map((s) => [s.path, s.body]);
  assert.deepEqual(posts, [
    [
      "/v1/schedules",
      {
        id: "nightly",
        definitionName: "report",
        spec: { cron: ["0 2 * * *"], timeZone: "Europe/Paris" },
        overlapPolicy: "SKIP",
      },
    ],
    ["/v1/schedules/nightly/pause", { note: "maintenance" }],
    ["/v1/schedules/nightly/unpause", {}],
    ["/v1/schedules/nightly/trigger", {}],
    [
      "/v1/schedules/nightly/backfill",
      { from: "2026-01-01T00:00:00.000Z", to: "2026-01-03T00:00:00Z" },
    ],
  ]);
  assert.deepEqual(
    fake.seen.filter((s) => s.method !== "POST").map((s) => `${s.method} ${s.path}`),
    ["PUT /v1/schedules/nightly", "DELETE /v1/schedules/nightly"],
  );
});

test("startInstances: one outcome per request, in order; bad items do not stop the rest", async () => {
  fake.on("POST /v1/instances/batch", (req) => ({
    body: {
      results: req.body.instances.map((inst: { definitionName: string }, index: number) =>
        inst.definitionName === "missing"
          ? { index, outcome: "NOT_FOUND", error: "no definition missing" }
          : { index, outcome: "STARTED", instance: { id: `i${index}`, status: "RUNNING" } },
      ),
    },
  }));
  const results = await client.startInstances([
    { definitionName: "order", input: { n: 1 }, correlationId: "c1" },
    { definitionName: "missing" },
    { definitionName: "order", idempotencyKey: "k3" },
  ]);
  assert.deepEqual(
    results.map((r) => [r.index, r.outcome, r.instance?.id]),
    [
      [0, "STARTED", "i0"],
      [1, "NOT_FOUND", undefined],
      [2, "STARTED", "i2"],
    ],
  );
  assert.deepEqual(fake.calls("/v1/instances/batch")[0]?.body, {
    instances: [
      { definitionName: "order", input: { n: 1 }, correlationId: "c1" },
      { definitionName: "missing" },
      { definitionName: "order", idempotencyKey: "k3" },
    ],
  });
});

test("startInstances refuses an empty or too long list before sending anything", async () => {
  await assert.rejects(client.startInstances([]), RangeError);
  const many = Array.from({ length: MAX_BATCH_STARTS + 1 }, () => ({ definitionName: "d" }));
  await assert.rejects(client.startInstances(many), /1 to 100 requests, not 101/);
  assert.equal(fake.seen.length, 0);
});

test("startInstances is repeated after a 500 only when every item has an idempotency key", async () => {
  let calls = 0;
  fake.on("POST /v1/instances/batch", () => {
    calls += 1;
    return calls === 1
      ? { status: 500, body: { title: "boom", status: 500 } }
      : { body: { results: [{ index: 0, outcome: "EXISTING" }] } };
  });
  const keyed = await client.startInstances([{ definitionName: "d", idempotencyKey: "k" }]);
  assert.equal(keyed[0]?.outcome, "EXISTING");
  assert.equal(calls, 2);
  calls = 0;
  await assert.rejects(
    client.startInstances([{ definitionName: "d", idempotencyKey: "k" }, { definitionName: "d" }]),
    ServerError,
  );
  assert.equal(calls, 1, "an item without a key could start twice");
  fake.on("POST /v1/instances/batch", () => ({
    status: 503,
    body: { title: "busy", status: 503 },
  }));
  await assert.rejects(client.startInstances([{ definitionName: "d" }]), UnavailableError);
  assert.equal(fake.calls("/v1/instances/batch").length, 3 + 3, "503 means not done: retried");
});

test("startInstances uploads an input above the soft limit and sends its path", async () => {
  const big = new BatonClient({ url: fake.url, apiKey: "k", retry: fast });
  fake.on("GET /v1/config", () => ({
    body: { payloadLimits: { workflowInput: { softLimitBytes: 70_000, hardLimitBytes: 1e7 } } },
  }));
  fake.on("POST /v1/payloads", () => ({
    body: {
      path: "payloads/x.json",
      uploadUrl: `${fake.url}/upload`,
      uploadHeaders: { "content-type": "application/json" },
    },
  }));
  fake.on("PUT /upload", () => ({ status: 200 }));
  fake.on("POST /v1/instances/batch", () => ({ body: { results: [] } }));
  await big.startInstances([
    { definitionName: "d", input: { blob: "x".repeat(80_000) } },
    { definitionName: "d", input: { small: true } },
  ]);
  const sent = fake.calls("/v1/instances/batch")[0]?.body.instances;
  assert.deepEqual(sent, [
    { definitionName: "d", inputPayloadPath: "payloads/x.json" },
    { definitionName: "d", input: { small: true } },
  ]);
  assert.equal(
    fake.calls("/upload")[0]?.raw.length,
    JSON.stringify({ blob: "x".repeat(80_000) }).length,
  );
});

test("instances: delete is not repeated on a 500, restart can take the latest definition", async () => {
  fake.on("DELETE /v1/instances/i1", () => ({ status: 500, body: { title: "boom", status: 500 } }));
  await assert.rejects(client.deleteInstance("i1"), ServerError);
  assert.equal(fake.calls("/v1/instances/i1").length, 1);
  fake.on("DELETE /v1/definitions/order/versions/2", () => ({
    body: { name: "order", version: 2 },
  }));
  assert.equal((await client.deleteDefinition("order", 2)).version, 2);
  fake.on("POST /v1/instances/i1/restart", echo);
  assert.deepEqual(await client.restartInstance("i1", { useLatestDefinition: true }), {
    useLatestDefinition: true,
  });
  assert.deepEqual(await client.restartInstance("i1"), {});
});

test("instances: rerun sends only what it is given", async () => {
  fake.on("POST /v1/instances/i1/rerun", echo);
  assert.deepEqual(
    await client.rerunInstance("i1", {
      fromStepExecutionId: "s1",
      stepInput: { k: 1 },
      correlationId: "c",
      atJoin: true,
    }),
    { fromStepExecutionId: "s1", stepInput: { k: 1 }, correlationId: "c", atJoin: true },
  );
  assert.deepEqual(await client.rerunInstance("i1"), {});
  assert.deepEqual(await client.rerunInstance("i1", { atJoin: false, input: {} }), { input: {} });
});
