/**
 * Run a handler in a unit test, without a server: a fake job, the {@link Job} the runner would
 * give it, and a record of what the handler did with it (like Temporal's `MockActivityEnvironment`).
 *
 * ```ts
 * const env = new JobEnvironment({ input: { amount: 42 }, attempt: 2 });
 * assert.deepEqual(await env.run(chargeCard), { receipt: "R-1001" }); // or it rejects as the handler did
 * assert.equal(env.heartbeats.length, 1); // the heartbeats it sent
 * ```
 *
 * `requestShutdown()` and `loseLease()` simulate the runner being stopped and the job being taken
 * away, before the run or during it (from `onHeartbeat`, or a timer).
 */
import { randomUUID } from "node:crypto";
import type { JsonObject } from "./client.js";
import { ConflictError } from "./errors.js";
import type { JobJson } from "./gen/workflow/v1/engine_pb.js";
import { type Job, RunningJob } from "./job.js";
import { resultProblem } from "./json.js";
import { type Logger, silentLogger, withFields } from "./log.js";
import type { Handler, HandlerResult } from "./registry.js";

/**
 * The handler returned something the runner would not send; the runner would fail the job,
 * non-retryable, with this message (an array, a string, NaN, a value that is not JSON...).
 */
export class RejectedResult extends Error {
  override name = "RejectedResult";
}

export interface JobEnvironmentOptions {
  input?: JsonObject;
  jobType?: string;
  attempt?: number;
  retriesRemaining?: number;
  stepId?: string;
  workerId?: string;
  /** Random UUIDs when not given. */
  jobId?: string;
  instanceId?: string;
  /** How far each heartbeat moves `job.lockExpiresAt` (default 30). */
  leaseSeconds?: number;
  /** Called at each `job.heartbeat()` before it answers (it may call loseLease or requestShutdown). */
  onHeartbeat?: (job: Job) => void;
  /** Default: silent. */
  logger?: Logger;
  /** Check the result as the runner would, rejecting with {@link RejectedResult} (default true). */
  checkResult?: boolean;
}

/** A fake job to run handlers with, as the runner would run them. */
export class JobEnvironment {
  /** The job as a poll would have returned it. */
  readonly raw: JobJson;
  readonly workerId: string;
  /** When each `job.heartbeat()` was sent, over every run. */
  readonly heartbeats: Date[] = [];
  /** The job of the latest run. */
  job: Job | undefined;
  readonly #o: JobEnvironmentOptions;
  readonly #input: JsonObject;
  #stopping = false;
  #leaseLost = false;
  #current: RunningJob | undefined;

  constructor(options: JobEnvironmentOptions = {}) {
    this.#o = options;
    this.#input = options.input ?? {};
    this.workerId = options.workerId ?? "test-worker";
    this.raw = {
      id: options.jobId ?? randomUUID(),
      instanceId: options.instanceId ?? randomUUID(),
      stepId: options.stepId ?? "test-step",
      stepExecutionId: randomUUID(),
      jobType: options.jobType ?? "test-job",
      attempt: options.attempt ?? 1,
      retriesRemaining: options.retriesRemaining ?? 0,
      input: this.#input,
    };
  }

  /** As if the runner were asked to stop: `job.shuttingDown` turns true. */
  requestShutdown(): void {
    this.#stopping = true;
  }

  /**
   * As if the job were taken away (instance cancelled, lease lapsed): `job.signal` aborts with a
   * LeaseLostError and every later `job.heartbeat()` rejects with a ConflictError.
   */
  loseLease(): void {
    this.#leaseLost = true;
    this.#current?.loseLease(this.#conflict().message);
  }

  /** Call `handler` with a new job; its result, or a rejection with what it threw. */
  async run(handler: Handler): Promise<HandlerResult> {
    const expires = new Date(Date.now() + this.#leaseMs());
    const raw: JobJson = { ...this.raw, lockExpiresAt: expires.toISOString() };
    const job = new RunningJob({
      raw,
      input: structuredClone(this.#input),
      workerId: this.workerId,
      lockExpiresAt: expires,
      logger: (fields) => withFields(this.#o.logger ?? silentLogger, fields),
      stopping: () => this.#stopping,
      heartbeat: (j) => this.#heartbeat(j),
    });
    this.#current = job;
    this.job = job;
    if (this.#leaseLost) job.loseLease(this.#conflict().message);
    const result = await handler(job);
    if (this.#o.checkResult ?? true) {
      const problem = resultProblem(result, job.jobType);
      if (problem !== undefined) throw new RejectedResult(problem);
    }
    return result;
  }

  async #heartbeat(job: RunningJob): Promise<Date> {
    const sent = new Date();
    this.heartbeats.push(sent);
    this.#o.onHeartbeat?.(job);
    if (this.#leaseLost) {
      const error = this.#conflict();
      job.loseLease(error.message);
      throw error;
    }
    job.lockExpiresAt = new Date(sent.getTime() + this.#leaseMs());
    return job.lockExpiresAt;
  }

  #leaseMs(): number {
    return (this.#o.leaseSeconds ?? 30) * 1000;
  }

  #conflict(): ConflictError {
    return new ConflictError({
      status: 409,
      title: "Conflict",
      detail: `job ${this.raw.id} is not locked by worker ${this.workerId} (simulated)`,
    });
  }
}
