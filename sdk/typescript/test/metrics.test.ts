import assert from "node:assert/strict";
import { afterEach, beforeEach, test } from "node:test";
import {
  BatonClient,
  InMemoryMetrics,
  type Logger,
  type MetricsHook,
  NonRetryableError,
  Registry,
  Runner,
  retryPolicy,
  silentLogger,
} from "../src/index.js";
import { applyAll, FakeBaton, job, waitUntil } from "./fake.js";

let fake: FakeBaton;
let queue: Record<string, unknown>[];
beforeEach(async () => {
  fake = await new FakeBaton().start();
  queue = [];
  fake.on("POST /v1/jobs/poll", (req) => ({ body: { jobs: queue.splice(0, req.body.maxJobs) } }));
  fake.on("POST /v1/workers/stop", (req) => ({ body: { workerId: req.body.workerId } }));
  fake.on("GET /v1/config", () => ({ body: {} }));
});
afterEach(() => fake.close());

function runner(registry: Registry, metrics: MetricsHook, logger: Logger = silentLogger): Runner {
  return new Runner(registry, {
    client: new BatonClient({ url: fake.url, apiKey: "k", retry: null }),
    workerId: "w1",
    pollInterval: 0.01,
    maxPollInterval: 0.02,
    longPollWait: 0,
    logger,
    metrics,
    drainTimeout: 2,
  });
}

function registry(): Registry {
  const r = new Registry();
  r.register("t", async (j) => {
    if (j.input.n === 2) throw new NonRetryableError("card declined");
    if (j.input.n === 3) throw new Error("try again");
    return { ok: true };
  });
  return r;
}

test("the runner reports polls, handler calls and outcomes to its metrics hook", async () => {
  fake.on("POST /v1/jobs/complete-batch", (req) => {
    const answer = applyAll(req);
    const results = answer.body as { results: { jobId: string; outcome: string }[] };
    for (const r of results.results) if (r.jobId === "gone") r.outcome = "CONFLICT";
    return answer;
  });
  queue.push(
    job("a", { input: { n: 1 } }),
    job("b", { input: { n: 2 } }),
    job("c", { input: { n: 3 } }),
    job("gone", { input: { n: 1 } }),
  );
  const metrics = new InMemoryMetrics();
  const r = runner(registry(), metrics);
  const done = r.run();
  await waitUntil(() => metrics.outcomesUnreported.get("t") === 1 && metrics.polls > 1, 5);
  await r.stop();
  await done;
  const s = metrics.snapshot();
  assert.deepEqual(s.jobsStarted, { t: 4 });
  assert.deepEqual(s.jobsCompleted, { t: 1 });
  assert.deepEqual(s.jobsFailed, { t: 2 });
  assert.deepEqual(s.jobsFailedNonRetryable, { t: 1 });
  assert.deepEqual(s.outcomesUnreported, { t: 1 }, "the CONFLICT answer");
  assert.ok(s.emptyPolls >= 1 && s.polls > s.emptyPolls, JSON.stringify(s));
  assert.ok((s.handlerSeconds.t ?? -1) >= 0);
  assert.equal(s.pollErrors, 0);
});

test("a failed poll is counted; a hook that throws is logged and changes nothing", async () => {
  let polls = 0;
  fake.on("POST /v1/jobs/poll", () => {
    polls += 1;
    if (polls === 1) return { status: 503, body: { title: "busy", status: 503 } };
    return { body: { jobs: polls === 2 ? [job("a", { input: { n: 1 } })] : [] } };
  });
  fake.on("POST /v1/jobs/complete-batch", applyAll);
  const logged: string[] = [];
  const logger: Logger = {
    ...silentLogger,
    error: (message: string, fields?: Record<string, unknown>) => {
      logged.push(`${message} ${String(fields?.hook)}`);
    },
  };
  const counted = new InMemoryMetrics();
  const broken: MetricsHook = {
    pollFailed: () => counted.pollFailed(),
    jobStarted: () => {
      throw new Error("sink down");
    },
    jobCompleted: (e) => counted.jobCompleted(e),
  };
  const r = new Runner(registry(), {
    client: new BatonClient({ url: fake.url, apiKey: "k", retry: null }),
    workerId: "w1",
    pollInterval: 0.01,
    longPollWait: 0,
    pollErrors: retryPolicy({
      initialInterval: 0.01,
      maximumInterval: 0.02,
      maximumAttempts: undefined,
    }),
    logger,
    metrics: broken,
  });
  const done = r.run();
  await waitUntil(() => counted.jobsCompleted.get("t") === 1, 5, "the job completed");
  await r.stop();
  await done;
  assert.equal(counted.pollErrors, 1);
  assert.ok(logged.includes("metrics hook failed jobStarted"), logged.join("\n"));
});
