/** What a handler gets: the job's fields, its input, a logger carrying its ids, and signals. */
import type { JsonObject, JsonValue } from "./client.js";
import { BatonError } from "./errors.js";
import type { JobJson } from "./gen/workflow/v1/engine_pb.js";
import type { Logger } from "./log.js";

/** The reason of `job.signal` when a heartbeat learned the job is no longer this worker's. */
export class LeaseLostError extends BatonError {
  override name = "LeaseLostError";
}

export interface Job {
  /** The job's id (a good idempotency key for side effects). */
  readonly jobId: string;
  readonly instanceId: string;
  readonly stepId: string;
  readonly stepExecutionId: string;
  readonly jobType: string;
  /** 1 on the first delivery, one more after each retry or lapsed lease. */
  readonly attempt: number;
  /** Retries a retryable failure would leave. */
  readonly retriesRemaining: number;
  /** The step's resolved input (an offloaded input is downloaded before the handler runs). */
  readonly input: JsonObject;
  /** When the lease ends (moves on with each heartbeat). */
  readonly lockExpiresAt: Date;
  readonly workerId: string;
  /** Adds jobId, instanceId, jobType, stepId, attempt and workerId to every record. */
  readonly logger: Logger;
  /**
   * Aborted when the job is no longer this worker's (a heartbeat answered 404/409: cancelled,
   * or the lease lapsed and another worker took it); its reason is a {@link LeaseLostError}.
   * Pass it to `fetch` and timers so the handler stops early; its result would be refused.
   */
  readonly signal: AbortSignal;
  /** True once the runner was asked to stop (it still waits for this handler). */
  readonly shuttingDown: boolean;
  /** Extend the lease now; throws a ConflictError/NotFoundError when the job is gone. */
  heartbeat(): Promise<Date>;
  /** The job as the poll returned it. */
  readonly raw: JobJson;
}

/** The runner's implementation of {@link Job}. */
export class RunningJob implements Job {
  readonly jobId: string;
  readonly instanceId: string;
  readonly stepId: string;
  readonly stepExecutionId: string;
  readonly jobType: string;
  readonly attempt: number;
  readonly retriesRemaining: number;
  readonly input: JsonObject;
  lockExpiresAt: Date;
  readonly workerId: string;
  readonly logger: Logger;
  readonly raw: JobJson;
  #abort: AbortController | undefined; // made when first asked for: most jobs never are
  readonly #stopping: () => boolean;
  readonly #heartbeat: (job: RunningJob) => Promise<Date>;

  constructor(init: {
    raw: JobJson;
    input: JsonValue | undefined;
    workerId: string;
    lockExpiresAt: Date;
    logger: (fields: Record<string, unknown>) => Logger;
    stopping: () => boolean;
    heartbeat: (job: RunningJob) => Promise<Date>;
  }) {
    const raw = init.raw;
    this.raw = raw;
    this.jobId = raw.id ?? "";
    this.instanceId = raw.instanceId ?? "";
    this.stepId = raw.stepId ?? "";
    this.stepExecutionId = raw.stepExecutionId ?? "";
    this.jobType = raw.jobType ?? "";
    this.attempt = raw.attempt ?? 1;
    this.retriesRemaining = raw.retriesRemaining ?? 0;
    const input = init.input;
    this.input = input !== null && typeof input === "object" && !Array.isArray(input) ? input : {};
    this.lockExpiresAt = init.lockExpiresAt;
    this.workerId = init.workerId;
    this.logger = init.logger({
      jobId: this.jobId,
      instanceId: this.instanceId,
      jobType: this.jobType,
      stepId: this.stepId,
      attempt: this.attempt,
      workerId: this.workerId,
    });
    this.#stopping = init.stopping;
    this.#heartbeat = init.heartbeat;
  }

  get signal(): AbortSignal {
    this.#abort ??= new AbortController();
    return this.#abort.signal;
  }

  get shuttingDown(): boolean {
    return this.#stopping();
  }

  get leaseLost(): boolean {
    return this.#abort?.signal.aborted ?? false;
  }

  heartbeat(): Promise<Date> {
    return this.#heartbeat(this);
  }

  /** The runner learned the job is no longer this worker's. */
  loseLease(reason: string): void {
    this.#abort ??= new AbortController();
    if (!this.#abort.signal.aborted) this.#abort.abort(new LeaseLostError(reason));
  }
}
