import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ConflictError,
  type Job,
  JobEnvironment,
  LeaseLostError,
  NonRetryableError,
  RejectedResult,
} from "../src/index.js";

async function charge(job: Job) {
  if (job.input.amount === 0) throw new NonRetryableError("nothing to charge");
  await job.heartbeat();
  return { receipt: `R-${job.attempt}-${job.input.amount}`, jobId: job.jobId };
}

test("a handler runs with the fake job's fields and its result comes back", async () => {
  const env = new JobEnvironment({ input: { amount: 42 }, attempt: 2, jobId: "j1" });
  assert.deepEqual(await env.run(charge), { receipt: "R-2-42", jobId: "j1" });
  assert.equal(env.heartbeats.length, 1);
  assert.equal(env.job?.retriesRemaining, 0);
  assert.equal(env.job?.workerId, "test-worker");
  assert.ok((env.job?.lockExpiresAt.getTime() ?? 0) > Date.now() + 25_000);
  await assert.rejects(new JobEnvironment({ input: { amount: 0 } }).run(charge), NonRetryableError);
});

test("a result the runner would refuse rejects with RejectedResult", async () => {
  const env = new JobEnvironment();
  await assert.rejects(
    env.run(async () => ({ ratio: Number.NaN })),
    RejectedResult,
  );
  await assert.rejects(env.run((() => [1, 2]) as never), /returned an array/);
  const lenient = new JobEnvironment({ checkResult: false });
  assert.deepEqual(await lenient.run(async () => ({ ratio: Number.NaN })), { ratio: Number.NaN });
});

test("losing the lease aborts the job's signal and fails later heartbeats", async () => {
  const env = new JobEnvironment({
    onHeartbeat: () => env.loseLease(), // taken away at the first heartbeat
  });
  let reason: unknown;
  await assert.rejects(
    env.run(async (job) => {
      try {
        await job.heartbeat();
      } finally {
        reason = job.signal.reason;
      }
    }),
    ConflictError,
  );
  assert.ok(reason instanceof LeaseLostError);
  assert.ok(env.job?.signal.aborted);
  // A run after the lease was lost starts with the signal aborted.
  const aborted = await env.run(async (job) => ({ aborted: job.signal.aborted }));
  assert.deepEqual(aborted, { aborted: true });
});

test("requestShutdown turns job.shuttingDown true, also during a run", async () => {
  const env = new JobEnvironment();
  const seen: boolean[] = [];
  await env.run(async (job) => {
    seen.push(job.shuttingDown);
    env.requestShutdown();
    seen.push(job.shuttingDown);
  });
  assert.deepEqual(seen, [false, true]);
});
