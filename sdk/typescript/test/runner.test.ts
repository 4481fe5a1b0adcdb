import assert from "node:assert/strict";
import { afterEach, beforeEach, test } from "node:test";
import {
  BatonClient,
  JobError,
  NonRetryableError,
  Registry,
  Runner,
  type RunnerOptions,
  retryPolicy,
  silentLogger,
} from "../src/index.js";
import { applyAll, FakeBaton, holdLongPolls, job, type Seen, waitUntil } from "./fake.js";

let fake: FakeBaton;
let queue: Record<string, unknown>[];

beforeEach(async () => {
  fake = await new FakeBaton().start();
  queue = [];
  fake.on("POST /v1/jobs/poll", (req) => ({ body: { jobs: queue.splice(0, req.body.maxJobs) } }));
  fake.on("POST /v1/jobs/complete-batch", applyAll);
  fake.on("POST /v1/workers/stop", (req) => ({ body: { workerId: req.body.workerId } }));
  fake.on("GET /v1/config", () => ({
    body: { payloadLimits: { stepOutput: { softLimitBytes: 100_000, hardLimitBytes: 1_000_000 } } },
  }));
});
// Every runner a test made is stopped afterwards, so a failed assertion cannot leave one polling
// (and the test process hanging); drainTimeout bounds a handler a failed test never released.
const made: Runner[] = [];
afterEach(async () => {
  await Promise.all(made.splice(0).map((r) => r.stop()));
  await fake.close();
});

function runner(registry: Registry, options: RunnerOptions = {}): Runner {
  const r = new Runner(registry, {
    client: new BatonClient({ url: fake.url, apiKey: "k", retry: null }),
    workerId: "w1",
    pollInterval: 0.01,
    maxPollInterval: 0.02,
    longPollWait: 0,
    logger: silentLogger,
    drainTimeout: 2,
    ...options,
  });
  made.push(r);
  return r;
}

function items(): { jobId: string; failure?: Record<string, unknown>; [k: string]: unknown }[] {
  return fake.calls("/v1/jobs/complete-batch").flatMap((s) => s.body.results);
}

test("results of fast jobs go out in batches, with the attempt; handlers see the job", async () => {
  for (let i = 0; i < 20; i++) queue.push(job(`j${i}`, { attempt: 2 }));
  const seen: string[] = [];
  const registry = new Registry();
  registry.register("t", async (j) => {
    seen.push(`${j.jobId}/${j.attempt}/${j.retriesRemaining}/${j.instanceId}/${j.input.n}`);
    return { done: j.jobId };
  });
  const stop = new AbortController();
  const r = runner(registry, { parallelism: 8, maxJobsPerPoll: 10, flushInterval: 0.02 });
  const done = r.run({ signal: stop.signal });
  await waitUntil(() => items().length === 20, 5, "20 results");
  stop.abort();
  await done;
  assert.equal(seen.length, 20);
  assert.ok(seen.includes("j3/2/2/i-j3/1"));
  const flushes = fake.calls("/v1/jobs/complete-batch").length;
  assert.ok(flushes < 20, `20 results in ${flushes} flushes`);
  for (const item of items()) {
    assert.equal(item.attempt, 2);
    assert.equal(item.workerId, "w1");
    assert.deepEqual(item.variablesToSet, { done: item.jobId });
  }
  assert.equal(fake.calls("/v1/jobs/complete").length, 0);
});

test("a poll never asks for more jobs than there are free slots", async () => {
  for (let i = 0; i < 30; i++) queue.push(job(`j${i}`));
  let running = 0;
  let most = 0;
  const registry = new Registry();
  registry.register("t", async () => {
    running += 1;
    most = Math.max(most, running);
    await new Promise((r) => setTimeout(r, 20));
    running -= 1;
    return {};
  });
  const stop = new AbortController();
  const r = runner(registry, { parallelism: 3, prefetch: 0, maxJobsPerPoll: 10 });
  const done = r.run({ signal: stop.signal });
  await waitUntil(() => items().length === 30, 10, "30 results");
  stop.abort();
  await done;
  assert.ok(most <= 3, `at most 3 ran at once (saw ${most})`);
  for (const poll of fake.calls("/v1/jobs/poll"))
    assert.ok(poll.body.maxJobs <= 3, `asked ${poll.body.maxJobs}`);
});

test("outcomes: non-retryable, retry delay, any other error, and an output that is not JSON", async () => {
  queue.push(job("nr"), job("delay"), job("boom"), job("nan"), job("list"));
  const registry = new Registry();
  registry.register("t", async (j) => {
    if (j.jobId === "nr") throw new NonRetryableError("card declined");
    if (j.jobId === "delay") throw new JobError("rate limited", { nextRetryDelaySeconds: 30 });
    if (j.jobId === "boom") throw new RangeError("off by one");
    if (j.jobId === "list") return [1, 2] as unknown as Record<string, unknown>;
    return { ratio: Number.NaN };
  });
  const stop = new AbortController();
  const done = runner(registry).run({ signal: stop.signal });
  await waitUntil(() => items().length === 5, 5, "5 results");
  stop.abort();
  await done;
  const failure = (id: string) => items().find((i) => i.jobId === id)?.failure;
  assert.deepEqual(failure("nr"), { errorMessage: "card declined", retryable: false });
  assert.deepEqual(failure("delay"), {
    errorMessage: "rate limited",
    retryable: true,
    nextRetryDelaySeconds: 30,
  });
  assert.deepEqual(failure("boom"), { errorMessage: "RangeError: off by one", retryable: true });
  assert.deepEqual(failure("nan"), {
    errorMessage: "the handler's result cannot be sent: $.ratio is NaN, which is not JSON",
    retryable: false,
  });
  assert.deepEqual(failure("list"), {
    errorMessage: "the handler of t returned an array; return an object of variables, or nothing",
    retryable: false,
  });
});

/** A logger keeping each warning as `message: fields.error`. */
function warnings(): { logger: typeof silentLogger; warned: string[] } {
  const warned: string[] = [];
  const logger = {
    ...silentLogger,
    warn: (m: string, f?: Record<string, unknown>) => warned.push(`${m}: ${f?.error}`),
  };
  return { logger, warned };
}

const LEFT_OUT = "failure output left out; the failure is sent without it";

test("a JobError's output goes with its failure; one that cannot go is left out, with a warning", async () => {
  const cycle: Record<string, unknown> = { a: 1 };
  cycle.self = cycle;
  const outputs: Record<string, Record<string, unknown> | undefined> = {
    kept: { code: 42, detail: ["a", { b: null }], when: new Date(0) },
    retryable: { code: 7 },
    nan: { ratio: Number.NaN },
    infinity: { n: [1, Number.POSITIVE_INFINITY] },
    bigint: { n: 10n },
    cycle,
    fn: { f: () => 1 },
    big: { blob: "x".repeat(100_001) }, // the fake server's soft limit is 100 000 bytes
    none: undefined,
  };
  for (const id of Object.keys(outputs)) queue.push(job(id));
  const registry = new Registry();
  registry.register("t", async (j) => {
    const output = outputs[j.jobId];
    if (j.jobId === "retryable") throw new JobError("busy", { nextRetryDelaySeconds: 5, output });
    if (j.jobId === "none") throw new JobError("no output");
    throw new NonRetryableError(`refused ${j.jobId}`, output === undefined ? {} : { output });
  });
  const { logger, warned } = warnings();
  const stop = new AbortController();
  const done = runner(registry, { logger }).run({ signal: stop.signal });
  await waitUntil(() => items().length === 9, 5, "9 failures");
  stop.abort();
  await done;
  const failure = (id: string) => items().find((i) => i.jobId === id)?.failure;
  assert.deepEqual(failure("kept"), {
    errorMessage: "refused kept",
    retryable: false,
    output: { code: 42, detail: ["a", { b: null }], when: "1970-01-01T00:00:00.000Z" },
  });
  assert.deepEqual(failure("retryable"), {
    errorMessage: "busy",
    retryable: true,
    nextRetryDelaySeconds: 5,
    output: { code: 7 },
  });
  // The failure goes whatever its output; an output the server could not take is left out.
  for (const id of ["nan", "infinity", "bigint", "cycle", "fn", "big"]) {
    assert.deepEqual(failure(id), { errorMessage: `refused ${id}`, retryable: false }, id);
  }
  assert.deepEqual(failure("none"), { errorMessage: "no output", retryable: true });
  assert.deepEqual(warned.filter((w) => w.startsWith(LEFT_OUT)).sort(), [
    `${LEFT_OUT}: $.f is a function, which is not JSON`,
    `${LEFT_OUT}: $.n is a BigInt, which is not JSON (convert it to a string or a number)`,
    `${LEFT_OUT}: $.n[1] is Infinity, which is not JSON`,
    `${LEFT_OUT}: $.ratio is NaN, which is not JSON`,
    `${LEFT_OUT}: $.self contains itself (a circular reference), which is not JSON`,
    `${LEFT_OUT}: its JSON is 100012 bytes, above the 100000-byte limit`,
  ]);
});

test("a failure's output goes on /v1/jobs/fail too, at most 256 KiB when the server sets no limit", async () => {
  fake.on("GET /v1/config", () => ({ body: {} })); // no soft limit known
  const fails: Seen[] = [];
  fake.on("POST /v1/jobs/fail", (req) => {
    fails.push(req);
    return { body: { jobId: req.body.jobId, status: "FAILED", applied: true } };
  });
  const under = "x".repeat(256 * 1024 - 20); // {"blob":"..."} is 11 bytes more
  const outputs: Record<string, Record<string, unknown>> = {
    small: { code: 42 },
    under: { blob: under },
    over: { blob: `${under}${"x".repeat(10)}` },
  };
  for (const id of Object.keys(outputs)) queue.push(job(id));
  queue.push(job("none"));
  const registry = new Registry();
  registry.register("t", async (j) => {
    const output = outputs[j.jobId];
    throw new NonRetryableError(`refused ${j.jobId}`, output === undefined ? {} : { output });
  });
  const { logger, warned } = warnings();
  const stop = new AbortController();
  const done = runner(registry, { batchResults: false, logger }).run({ signal: stop.signal });
  await waitUntil(() => fails.length === 4, 5, "4 failures");
  stop.abort();
  await done;
  assert.equal(fake.calls("/v1/jobs/complete-batch").length, 0);
  const sent = (id: string) => fails.find((f) => f.body.jobId === id)?.body;
  assert.deepEqual(sent("small"), {
    jobId: "small",
    workerId: "w1",
    errorMessage: "refused small",
    retryable: false,
    attempt: 1,
    output: { code: 42 },
  });
  assert.deepEqual(sent("under")?.output, { blob: under });
  assert.equal(sent("over")?.output, undefined);
  assert.equal(sent("over")?.errorMessage, "refused over");
  assert.equal("output" in (sent("none") ?? {}), false);
  assert.deepEqual(
    warned.filter((w) => w.startsWith(LEFT_OUT)),
    [`${LEFT_OUT}: its JSON is 262145 bytes, above the 262144-byte limit`],
  );
});

test("a server without batches gets each failure on /v1/jobs/fail with its output", async () => {
  fake.on("POST /v1/jobs/complete-batch", () => ({ status: 404, body: { title: "Not found" } }));
  const fails: Seen[] = [];
  fake.on("POST /v1/jobs/fail", (req) => {
    fails.push(req);
    return { body: { jobId: req.body.jobId, status: "FAILED", applied: true } };
  });
  queue.push(job("a"), job("b"));
  const registry = new Registry();
  registry.register("t", async (j) => {
    if (j.jobId === "a") throw new NonRetryableError("no", { output: { code: 42, n: j.input.n } });
    throw new JobError("no output", { nextRetryDelaySeconds: 1 });
  });
  const stop = new AbortController();
  const done = runner(registry).run({ signal: stop.signal });
  await waitUntil(() => fails.length === 2, 5, "2 failures");
  stop.abort();
  await done;
  const sent = (id: string) => fails.find((f) => f.body.jobId === id)?.body;
  assert.deepEqual(sent("a"), {
    jobId: "a",
    workerId: "w1",
    errorMessage: "no",
    retryable: false,
    attempt: 1,
    output: { code: 42, n: 1 },
  });
  assert.deepEqual(sent("b"), {
    jobId: "b",
    workerId: "w1",
    errorMessage: "no output",
    retryable: true,
    nextRetryDelaySeconds: 1,
    attempt: 1,
  });
});

test("a failure the server refuses for its output goes again without it", async () => {
  // As the engine does with an output it cannot keep (above its inline limit, say).
  const refuse = (body: { output?: unknown }) => body.output !== undefined;
  fake.on("POST /v1/jobs/complete-batch", (req) => ({
    body: {
      results: req.body.results.map((r: { jobId: string; failure: { output?: unknown } }) =>
        refuse(r.failure)
          ? { jobId: r.jobId, outcome: "INVALID", error: "results[0].failure.output: too deep" }
          : { jobId: r.jobId, outcome: "APPLIED", status: "FAILED" },
      ),
    },
  }));
  const fails: Seen[] = [];
  fake.on("POST /v1/jobs/fail", (req) => {
    fails.push(req);
    if (refuse(req.body)) {
      return { status: 422, body: { title: "Unprocessable", status: 422, detail: "too deep" } };
    }
    return { body: { jobId: req.body.jobId, status: "FAILED", applied: true } };
  });
  const registry = new Registry();
  registry.register("t", async (j) => {
    throw new NonRetryableError(`refused ${j.jobId}`, { output: { deep: [[[[1]]]] } });
  });
  for (const batchResults of [true, false]) {
    queue.push(job(batchResults ? "batched" : "single"));
    const { logger, warned } = warnings();
    const stop = new AbortController();
    const done = runner(registry, { batchResults, logger }).run({ signal: stop.signal });
    if (batchResults) await waitUntil(() => items().length === 2, 5, "the failure twice");
    else await waitUntil(() => fails.length === 2, 5, "the failure twice");
    stop.abort();
    await done;
    const sent = batchResults ? items().map((i) => i.failure) : fails.map((f) => f.body);
    assert.deepEqual(
      sent.map((f) => f?.output),
      [{ deep: [[[[1]]]] }, undefined],
    );
    assert.equal(sent[1]?.errorMessage, batchResults ? "refused batched" : "refused single");
    const resent = warned.filter((w) => w.startsWith("the server refused the failure"));
    assert.equal(resent.length, 1);
    assert.match(
      resent[0] ?? "",
      /^the server refused the failure with its output; sending it without: .*too deep/,
    );
  }
});

test("a JobError's output is an object (or nothing)", () => {
  assert.deepEqual(new NonRetryableError("no", { output: { code: 1 } }).output, { code: 1 });
  assert.equal(new NonRetryableError("no", { output: { code: 1 } }).nonRetryable, true);
  assert.equal(new JobError("no").output, undefined);
  for (const output of [[1, 2], "text", 42]) {
    assert.throws(
      () => new JobError("no", { output: output as unknown as Record<string, unknown> }),
      /output must be an object \(a Record<string, unknown>\), not (an array|a string|a number)/,
    );
  }
});

test("a long handler is heartbeaten at half its lease, with its attempt; a lost lease aborts its signal", async () => {
  queue.push(job("long", { attempt: 3, lockExpiresAt: new Date(Date.now() + 400).toISOString() }));
  const beats: Seen[] = [];
  fake.on("POST /v1/jobs/heartbeat", (req) => {
    beats.push(req);
    if (beats.length >= 3)
      return { status: 409, body: { title: "Conflict", status: 409, detail: "job taken" } };
    return { body: { jobId: "long", lockExpiresAt: new Date(Date.now() + 400).toISOString() } };
  });
  let reason: unknown;
  const registry = new Registry();
  registry.register("t", async (j) => {
    await new Promise<void>((resolve) =>
      j.signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    reason = j.signal.reason;
    return { stoppedEarly: true };
  });
  const stop = new AbortController();
  const done = runner(registry).run({ signal: stop.signal });
  await waitUntil(() => reason !== undefined, 5, "the lease to be lost");
  stop.abort();
  await done;
  assert.equal(beats.length, 3);
  for (const b of beats) assert.deepEqual(b.body, { jobId: "long", workerId: "w1", attempt: 3 });
  const gap = (beats[1]?.at ?? 0) - (beats[0]?.at ?? 0);
  assert.ok(gap >= 100 && gap < 400, `heartbeats ~200 ms apart (${gap})`);
  assert.equal((reason as Error).name, "LeaseLostError");
});

test("polls back off on 503 and on a refused connection, then carry on", async () => {
  let n = 0;
  fake.on("POST /v1/jobs/poll", (req) => {
    n += 1;
    if (n <= 3) return { status: 503, body: { title: "Unavailable", status: 503 } };
    return { body: { jobs: queue.splice(0, req.body.maxJobs) } };
  });
  queue.push(job("after"));
  const registry = new Registry();
  registry.register("t", async () => ({ ok: true }));
  const stop = new AbortController();
  const r = runner(registry, {
    pollErrors: retryPolicy({
      initialInterval: 0.05,
      maximumInterval: 0.2,
      maximumAttempts: undefined,
      jitter: 0,
    }),
  });
  const done = r.run({ signal: stop.signal });
  await waitUntil(() => items().length === 1, 5, "the job after the errors");
  stop.abort();
  await done;
  const polls = fake.calls("/v1/jobs/poll").map((p) => p.at);
  // 0.05, 0.1, 0.2 s between the failed polls: backed off, not hammered.
  assert.ok((polls[3] ?? 0) - (polls[0] ?? 0) >= 300, `${(polls[3] ?? 0) - (polls[0] ?? 0)} ms`);
});

test("stop drains: the running handler finishes and its result is sent; nothing more is claimed", async () => {
  queue.push(job("slow"));
  let release: () => void = () => {};
  let started = false;
  const registry = new Registry();
  registry.register("t", async (j) => {
    started = true;
    await new Promise<void>((r) => {
      release = r;
    });
    return { shuttingDown: j.shuttingDown };
  });
  const r = runner(registry);
  const done = r.run();
  await waitUntil(() => started, 5, "the handler to start");
  queue.push(job("never"));
  assert.equal(r.inFlight, 1);
  const stopped = r.stop();
  const pollsAtStop = fake.calls("/v1/jobs/poll").length;
  let resolved = false;
  void stopped.then(() => {
    resolved = true;
  });
  await new Promise((res) => setTimeout(res, 50));
  assert.equal(resolved, false, "stop waits for the handler");
  release();
  await stopped;
  await done;
  assert.deepEqual(items(), [
    { jobId: "slow", workerId: "w1", attempt: 1, variablesToSet: { shuttingDown: true } },
  ]);
  assert.equal(fake.calls("/v1/jobs/poll").length, pollsAtStop, "no poll after the stop");
  assert.deepEqual(
    fake.calls("/v1/workers/stop").map((s) => s.body),
    [{ workerId: "w1" }],
    "the stop signal, once polling is over",
  );
  assert.equal(queue.length, 1);
});

test("a stop during a long-poll sends the stop signal at once and takes the answer it ends", async () => {
  holdLongPolls(fake);
  const registry = new Registry();
  registry.register("t", async () => ({}));
  const r = runner(registry, { longPollWait: 10 });
  const done = r.run();
  await waitUntil(
    () => fake.calls("/v1/jobs/poll").some((p) => p.body.waitSeconds === 10),
    5,
    "a long-poll",
  );
  assert.equal(r.inFlight, 0, "slots reserved for a poll are not jobs in flight");
  await r.stop();
  await done;
  const polls = fake.calls("/v1/jobs/poll");
  const held = polls.at(-1);
  assert.equal(held?.body.waitSeconds, 10);
  assert.equal(await held?.hungUp, false, "the long-poll was answered, not abandoned");
  const signals = fake.calls("/v1/workers/stop");
  assert.deepEqual(
    signals.map((s) => s.body),
    [{ workerId: "w1" }],
    "one stop signal",
  );
  assert.ok(
    (signals[0]?.at ?? Infinity) <= (held?.answeredAt ?? 0),
    "the stop signal went out while the poll was held (it is what ended the wait)",
  );
  assert.equal(fake.calls("/v1/jobs/poll").length, polls.length, "no poll after the stop");
});

test("a job the held long-poll had claimed at the stop runs in the drain and its result is sent", async () => {
  const claimedAtStop = job("late");
  holdLongPolls(fake, { atStop: () => [claimedAtStop] });
  const ran: { jobId: string; shuttingDown: boolean }[] = [];
  const registry = new Registry();
  registry.register("t", async (j) => {
    ran.push({ jobId: j.jobId, shuttingDown: j.shuttingDown });
    return { ranAfterStop: true };
  });
  const r = runner(registry, { longPollWait: 10 });
  const done = r.run();
  await waitUntil(
    () => fake.calls("/v1/jobs/poll").some((p) => p.body.waitSeconds === 10),
    5,
    "a long-poll",
  );
  const pollsAtStop = fake.calls("/v1/jobs/poll").length;
  await r.stop();
  await done;
  assert.deepEqual(ran, [{ jobId: "late", shuttingDown: true }]);
  assert.deepEqual(items(), [
    { jobId: "late", workerId: "w1", attempt: 1, variablesToSet: { ranAfterStop: true } },
  ]);
  assert.equal(r.inFlight, 0);
  assert.equal(fake.calls("/v1/jobs/poll").length, pollsAtStop, "no poll after the stop");
  assert.deepEqual(
    fake.calls("/v1/workers/stop").map((s) => s.body),
    [{ workerId: "w1" }],
  );
});

test("a long-poll that does not answer the stop signal is abandoned after the grace, with a warning", async () => {
  holdLongPolls(fake, { ignoreStop: true });
  const warned: Record<string, unknown>[] = [];
  const logger = {
    ...silentLogger,
    warn: (message: string, fields?: Record<string, unknown>) =>
      warned.push({ message, ...fields }),
  };
  const registry = new Registry();
  registry.register("t", async () => ({}));
  // The grace is STOP_POLL_GRACE, never more than drainTimeout: short here.
  const r = runner(registry, { longPollWait: 10, drainTimeout: 0.2, logger });
  const done = r.run();
  await waitUntil(
    () => fake.calls("/v1/jobs/poll").some((p) => p.body.waitSeconds === 10),
    5,
    "a long-poll",
  );
  await r.stop();
  await done;
  assert.equal(await fake.calls("/v1/jobs/poll").at(-1)?.hungUp, true, "the poll was aborted");
  assert.equal(warned.length, 1);
  assert.match(String(warned[0]?.message), /did not answer the stop signal; abandoning it/);
  assert.equal(warned[0]?.workerId, "w1");
  assert.deepEqual(
    fake.calls("/v1/workers/stop").map((s) => s.body),
    [{ workerId: "w1" }, { workerId: "w1" }],
    "at the stop, and again when the poll is abandoned (for a wait that missed the first)",
  );
});

test("a large output is uploaded (POST /v1/payloads + presigned PUT with its headers)", async () => {
  const puts: Seen[] = [];
  fake.on("POST /v1/payloads", (req) => ({
    body: {
      path: "payloads/step-output/abc",
      uploadUrl: `${fake.url}/s3/abc`,
      uploadHeaders: { "x-amz-checksum": "yes" },
      sizeReq: req.body.sizeBytes,
    },
  }));
  fake.on("PUT /s3/abc", (req) => {
    puts.push(req);
    return { body: {} };
  });
  fake.on("GET /s3/input", () => ({ body: { blob: "y".repeat(10) } }));
  queue.push(
    job("big", { input: { bytes: 200_000 } }),
    job("in", { input: null, inputPayloadPath: "p", inputDownloadUrl: `${fake.url}/s3/input` }),
  );
  const registry = new Registry();
  registry.register("t", async (j) =>
    j.jobId === "big"
      ? { blob: "x".repeat(Number(j.input.bytes)) }
      : { length: String(j.input.blob).length },
  );
  const stop = new AbortController();
  const done = runner(registry).run({ signal: stop.signal });
  await waitUntil(() => items().length === 2, 5, "2 results");
  stop.abort();
  await done;
  const big = items().find((i) => i.jobId === "big");
  assert.equal(big?.outputPayloadPath, "payloads/step-output/abc");
  assert.equal(big?.variablesToSet, undefined);
  assert.equal(puts[0]?.headers["x-amz-checksum"], "yes");
  assert.equal(puts[0]?.headers["x-api-key"], undefined, "no API key on a presigned URL");
  assert.deepEqual(JSON.parse(puts[0]?.raw ?? "{}"), { blob: "x".repeat(200_000) });
  assert.equal(
    fake.calls("/v1/payloads")[0]?.body.sizeBytes,
    Buffer.byteLength(puts[0]?.raw ?? ""),
  );
  assert.deepEqual(items().find((i) => i.jobId === "in")?.variablesToSet, { length: 10 });
});

test("a poll refused with 403 is logged with where the key came from, and retried slowly", async () => {
  fake.on("POST /v1/jobs/poll", () => ({ status: 403, body: { title: "Forbidden", status: 403 } }));
  const logged: string[] = [];
  const logger = {
    ...silentLogger,
    error: (m: string, f?: Record<string, unknown>) => logged.push(`${m}: ${f?.error}`),
  };
  const registry = new Registry();
  registry.register("t", async () => ({}));
  const r = new Runner(registry, {
    client: new BatonClient({ url: fake.url, apiKey: "wrong", retry: null }),
    logger,
    longPollWait: 0,
    pollErrors: retryPolicy({
      initialInterval: 0.01,
      maximumInterval: 0.02,
      maximumAttempts: undefined,
    }),
  });
  made.push(r);
  const done = r.run();
  await waitUntil(() => logged.length >= 2, 5, "two refusals");
  await r.stop();
  await done;
  assert.equal(
    logged[0],
    "poll refused; backing off: 403 Forbidden (the API key came from the apiKey option)",
  );
});

test("a batch refused per item: INVALID fails the job non-retryably with the server's reason", async () => {
  fake.on("POST /v1/jobs/complete-batch", (req) => ({
    body: {
      results: req.body.results.map((r: { jobId: string; failure?: unknown }) =>
        r.failure
          ? { jobId: r.jobId, outcome: "APPLIED", status: "FAILED" }
          : { jobId: r.jobId, outcome: "INVALID", error: "too deep" },
      ),
    },
  }));
  queue.push(job("deep"));
  const registry = new Registry();
  registry.register("t", async () => ({ a: 1 }));
  const stop = new AbortController();
  const done = runner(registry).run({ signal: stop.signal });
  await waitUntil(() => items().length === 2, 5, "the completion and then the failure");
  stop.abort();
  await done;
  assert.deepEqual(items()[1]?.failure, {
    errorMessage: "the server refused the handler's result: too deep",
    retryable: false,
  });
});

test("a runner takes credentials other than an API key, or a client, not both", () => {
  const registry = new Registry();
  registry.register("t", async () => ({}));
  const auth = { headers: () => ({ authorization: "Bearer x" }), source: "a test" };
  const r = new Runner(registry, { url: fake.url, auth, logger: silentLogger });
  assert.equal(r.client.auth, auth);
  const client = new BatonClient({ url: fake.url, apiKey: "k" });
  assert.throws(() => new Runner(registry, { client, auth }), /not both/);
});

test("by default a poll asks for every free slot: the handlers' and the prefetch's", async () => {
  const registry = new Registry();
  registry.register("t", async () => ({}));
  const r = runner(registry, { parallelism: 16 });
  const done = r.run();
  await waitUntil(() => fake.calls("/v1/jobs/poll").length > 0, 5, "a poll");
  await r.stop();
  await done;
  assert.equal(fake.calls("/v1/jobs/poll")[0]?.body.maxJobs, 32, "16 slots + 16 prefetched");
});

test("by default up to 100 waiting results go in one batch", async () => {
  for (let i = 0; i < 150; i++) queue.push(job(`j${i}`));
  let started = 0;
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const registry = new Registry();
  registry.register("t", async () => {
    started += 1;
    if (started === 150) open();
    await gate; // every result is handed over at once
    return { ok: true };
  });
  const r = runner(registry, { parallelism: 150, prefetch: 0, flushInterval: 0.5 });
  const done = r.run();
  await waitUntil(() => items().length === 150, 10, "150 results");
  await r.stop();
  await done;
  const sizes = fake.calls("/v1/jobs/complete-batch").map((s) => s.body.results.length);
  assert.deepEqual(sizes, [100, 50]);
});
