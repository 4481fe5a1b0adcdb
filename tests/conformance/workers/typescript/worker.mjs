// The TypeScript SDK's conformance worker (tests/conformance/README.md): one handler per row of
// the table, registered as <prefix><name>; READY once polling, STOPPED after a graceful drain.
// The wire is BATON_PROTOCOL (rest or connect), which the SDK's client reads itself.
import { JobError, NonRetryableError, Registry, Runner } from "../../../../sdk/typescript/dist/index.js";

const env = process.env;
const prefix = env.CONFORMANCE_JOB_PREFIX ?? "";
const registry = new Registry();
const on = (name, handler) => registry.register(`${prefix}${name}`, handler);
const pause = (seconds, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, seconds * 1000);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });

on("echo", async (job) => ({ echoed: job.input }));
on("fail-once", async (job) => {
  if (job.attempt === 1) throw new JobError("fail-once: attempt 1");
  return { attempt: job.attempt };
});
on("non-retryable", async () => {
  throw new NonRetryableError("non-retryable: refused");
});
on("fail-with-output", async (job) => {
  throw new NonRetryableError("fail-with-output: refused", { output: { code: 42, input: job.input } });
});
on("retry-delay", async (job) => {
  if (job.attempt === 1) {
    throw new JobError("retry-delay: attempt 1", { nextRetryDelaySeconds: Number(job.input.delaySeconds) });
  }
  return { attempt: job.attempt };
});
on("job-info", async (job) => ({
  jobId: job.jobId,
  instanceId: job.instanceId,
  stepId: job.stepId,
  jobType: job.jobType,
  attempt: job.attempt,
  retriesRemaining: job.retriesRemaining,
}));
on("heartbeat", async (job) => {
  await pause(Number(job.input.sleepSeconds), job.signal);
  return { slept: job.input.sleepSeconds };
});
on("slow", async (job) => {
  await pause(Number(job.input.sleepSeconds), job.signal);
  return { slept: job.input.sleepSeconds };
});
on("big-output", async (job) => ({ blob: "x".repeat(Number(job.input.bytes)) }));
on("big-input", async (job) => ({ length: String(job.input.blob ?? "").length }));
on("bad-output", async () => ({ ratio: Number.NaN }));

const runner = new Runner(registry, {
  workerId: env.CONFORMANCE_WORKER_ID,
  parallelism: Number(env.CONFORMANCE_PARALLELISM || 4),
});
// SIGTERM and SIGINT start the graceful stop; a repeated signal changes nothing (the stop is
// under way), as in the Python conformance worker.
const stop = new AbortController();
for (const name of ["SIGTERM", "SIGINT"]) process.on(name, () => stop.abort());
const done = runner.run({ signal: stop.signal });
process.stdout.write("READY\n");
await done;
process.stdout.write("STOPPED\n");
