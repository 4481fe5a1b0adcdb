/**
 * One job, from dispatch to its reported outcome. `JobExecutor.run(job)` downloads an offloaded
 * input, builds the handler's {@link Job}, keeps its lease alive while the handler runs, calls it,
 * and reports the outcome: complete with the returned variables, or fail (retryable unless the
 * handler said otherwise). It never throws for anything a handler or the API does.
 *
 * Only failures that may pass (no answer, 429, 5xx) are retried. A result that is not strict
 * JSON fails the job at once, non-retryable, without being sent; a completion the server refuses
 * with a 4xx does the same with the server's reason. A 404/409 means the job is no longer this
 * worker's (cancelled, or settled by another after a lapsed lease): logged and dropped.
 *
 * A {@link JobError}'s `output` goes with its failure unless it is not strict JSON or too large:
 * then it is left out, with a warning, and the failure goes without it; so does a failure the
 * server refuses with its output. A failure is never lost for its output.
 */
import type { RetryPolicy } from "./backoff.js";
import { BatonClient, type JsonObject, type JsonValue } from "./client.js";
import {
  AuthenticationError,
  BatonApiError,
  BatonError,
  ConflictError,
  JobError,
  MAX_FAILURE_OUTPUT_BYTES,
  NotFoundError,
  PermissionDeniedError,
} from "./errors.js";
import type { ResultFlusher } from "./flusher.js";
import type { BatchOutcomeJson, JobJson } from "./gen/workflow/v1/engine_pb.js";
import { Heartbeater } from "./heartbeat.js";
import { RunningJob } from "./job.js";
import { jsonProblem, resultProblem } from "./json.js";
import { type Logger, withFields } from "./log.js";
import { type MetricsHook, notify } from "./metrics.js";
import type { Registry } from "./registry.js";

export const MAX_ERROR_MESSAGE = 10_000; // the API's limit on errorMessage
const FALLBACK_LEASE_MS = 30_000; // only for a job without a readable lockExpiresAt

interface Outcome {
  variables?: JsonObject | undefined;
  error?: string;
  retryable?: boolean;
  nextRetryDelaySeconds?: number | undefined;
  /** What goes with the failure (a JobError's output, once found sendable). */
  output?: JsonObject | undefined;
  seconds: number;
}

export interface ExecutorOptions {
  client: BatonClient;
  registry: Registry;
  workerId: string;
  logger: Logger;
  reportRetry: RetryPolicy;
  stopping: () => boolean;
  autoHeartbeat: boolean;
  flusher: ResultFlusher | undefined;
  metrics?: MetricsHook | undefined;
}

export class JobExecutor {
  readonly heartbeater: Heartbeater | undefined;
  readonly #active = new Map<string, RunningJob>();
  readonly #o: ExecutorOptions;

  constructor(options: ExecutorOptions) {
    this.#o = options;
    this.heartbeater = options.autoHeartbeat
      ? new Heartbeater(
          (id) => this.#autoHeartbeat(id),
          (id, e) => this.#leaseLost(id, e),
          options.logger,
        )
      : undefined;
  }

  get inFlight(): number {
    return this.#active.size;
  }

  /** Run one claimed job to a reported (or handed over) outcome. Never throws. */
  async run(raw: JobJson): Promise<void> {
    const o = this.#o;
    let expires = raw.lockExpiresAt ? new Date(raw.lockExpiresAt) : new Date(Number.NaN);
    if (Number.isNaN(expires.getTime())) expires = new Date(Date.now() + FALLBACK_LEASE_MS);
    let input: JsonValue | undefined = raw.input as JsonValue | undefined;
    let unavailable: string | undefined;
    if (raw.inputDownloadUrl && (input === undefined || input === null)) {
      try {
        input = await o.client.downloadPayload(raw.inputDownloadUrl);
      } catch (error) {
        unavailable = `cannot download the job's input: ${message(error)}`;
      }
    }
    const job = new RunningJob({
      raw,
      input,
      workerId: o.workerId,
      lockExpiresAt: expires,
      logger: (fields) => withFields(o.logger, fields),
      stopping: o.stopping,
      heartbeat: (j) => this.#manualHeartbeat(j),
    });
    this.#active.set(job.jobId, job);
    this.heartbeater?.track(job.jobId, expires);
    try {
      const handler = o.registry.get(job.jobType);
      let outcome: Outcome;
      if (unavailable !== undefined) {
        outcome = { error: unavailable, retryable: true, seconds: 0 };
      } else if (handler === undefined) {
        outcome = {
          error: `worker ${o.workerId} has no handler for job type ${job.jobType}`,
          retryable: true,
          seconds: 0,
        };
      } else {
        outcome = await this.#call(handler, job);
      }
      await this.#report(job, outcome);
    } catch (error) {
      job.logger.error("job execution crashed", { error: String(error) });
    } finally {
      this.heartbeater?.untrack(job.jobId);
      this.#active.delete(job.jobId);
    }
  }

  // --- the handler -------------------------------------------------------------------------

  async #call(
    handler: NonNullable<ReturnType<Registry["get"]>>,
    job: RunningJob,
  ): Promise<Outcome> {
    job.logger.debug("handler started");
    notify(this.#o.metrics, "jobStarted", { jobType: job.jobType }, this.#o.logger);
    const started = performance.now();
    let result: unknown;
    try {
      result = await handler(job);
    } catch (error) {
      const seconds = (performance.now() - started) / 1000;
      if (error instanceof JobError) {
        const delay = error.nonRetryable ? undefined : error.nextRetryDelaySeconds;
        job.logger.warn("handler failed", {
          error: error.message,
          retryable: !error.nonRetryable,
          next_retry_delay_s: delay,
          handler_s: seconds,
        });
        return {
          error: error.message || error.name,
          retryable: !error.nonRetryable,
          nextRetryDelaySeconds: delay,
          output: await this.#failureOutput(job, error.output),
          seconds,
        };
      }
      job.logger.warn("handler threw", {
        error: describe(error),
        stack: error instanceof Error ? error.stack : undefined,
        retryable: true,
        handler_s: seconds,
      });
      return { error: describe(error), retryable: true, seconds };
    }
    const seconds = (performance.now() - started) / 1000;
    const problem = resultProblem(result, job.jobType);
    if (problem !== undefined) {
      job.logger.error("handler returned a bad result", { error: problem });
      return { error: problem, retryable: false, seconds };
    }
    return { variables: (result ?? undefined) as JsonObject | undefined, seconds };
  }

  /**
   * A failure's output as it can be sent, or undefined: one that is not strict JSON, or whose JSON
   * is above the step output's soft limit (and {@link MAX_FAILURE_OUTPUT_BYTES}), is left out with
   * a warning saying why, so that the failure itself still goes.
   */
  async #failureOutput(job: RunningJob, output: unknown): Promise<JsonObject | undefined> {
    if (output === undefined || output === null) return undefined;
    let problem: string | undefined;
    if (typeof output !== "object" || Array.isArray(output)) {
      problem = `it is ${Array.isArray(output) ? "an array" : `a ${typeof output}`}, not an object`;
    } else {
      problem = jsonProblem(output);
    }
    let encoded = "";
    if (problem === undefined) {
      try {
        encoded = JSON.stringify(output);
        const size = Buffer.byteLength(encoded, "utf8");
        // Under the step output's soft limit (the server's inline limit is above it), and never
        // more than any server takes inline when that limit is not known.
        const soft = await this.#o.client.softLimit("stepOutput");
        const limit = Math.min(soft, MAX_FAILURE_OUTPUT_BYTES);
        if (size > limit) problem = `its JSON is ${size} bytes, above the ${limit}-byte limit`;
      } catch (error) {
        problem = `it cannot be encoded: ${message(error)}`; // e.g. a toJSON that throws
      }
    }
    if (problem !== undefined) {
      job.logger.warn("failure output left out; the failure is sent without it", {
        error: problem,
      });
      return undefined;
    }
    // A copy, as checked: the handler may still change the object it threw with.
    return JSON.parse(encoded) as JsonObject;
  }

  // --- the report --------------------------------------------------------------------------

  async #report(job: RunningJob, outcome: Outcome): Promise<void> {
    if (outcome.error === undefined) {
      const refused = await this.#complete(job, outcome);
      if (refused === undefined) return;
      outcome = refused;
    }
    if (this.#o.flusher) this.#submitFailure(job, outcome, this.#o.flusher);
    else await this.#fail(job, outcome);
  }

  /** Undefined when the completion is sent or handed over; else the failure to report instead. */
  async #complete(job: RunningJob, outcome: Outcome): Promise<Outcome | undefined> {
    const o = this.#o;
    const request = {
      jobId: job.jobId,
      workerId: o.workerId,
      variables: outcome.variables,
      attempt: job.attempt,
    };
    try {
      if (o.flusher === undefined) {
        await o.client.completeJob(request, { retry: o.reportRetry });
        this.#noteCompleted(job, outcome);
        return undefined;
      }
      const item = await o.client.completion(request, true); // uploads a large output first
      const flusher = o.flusher;
      flusher.submit(
        item,
        (answer) => this.#completed(job, outcome, answer),
        (error) => this.#unreported(job, error),
      );
      return undefined;
    } catch (error) {
      if (error instanceof TypeError) {
        return {
          error: `the handler's result cannot be sent: ${error.message}`,
          retryable: false,
          seconds: outcome.seconds,
        };
      }
      if (error instanceof BatonApiError && refused(error)) {
        return {
          error: `the server refused the handler's result: ${error.summary()}`,
          retryable: false,
          seconds: outcome.seconds,
        };
      }
      this.#unreported(job, error instanceof BatonError ? error : new BatonError(String(error)));
      return undefined;
    }
  }

  #failureItem(job: RunningJob, outcome: Outcome) {
    return {
      jobId: job.jobId,
      workerId: this.#o.workerId,
      errorMessage: clip(storable(outcome.error ?? "failed")),
      retryable: outcome.retryable ?? true,
      nextRetryDelaySeconds: outcome.nextRetryDelaySeconds,
      attempt: job.attempt,
      output: outcome.output,
    };
  }

  #submitFailure(job: RunningJob, outcome: Outcome, flusher: ResultFlusher): void {
    flusher.submit(
      BatonClient.failure(this.#failureItem(job, outcome)),
      (answer) => this.#failed(job, outcome, answer),
      (error) => this.#unreported(job, error),
    );
  }

  async #fail(job: RunningJob, outcome: Outcome): Promise<void> {
    const item = this.#failureItem(job, outcome);
    try {
      const done = await this.#o.client.failJob(
        {
          ...item,
          ...(item.nextRetryDelaySeconds === undefined
            ? {}
            : { nextRetryDelaySeconds: item.nextRetryDelaySeconds }),
          ...(item.output === undefined ? {} : { output: item.output }),
        },
        { retry: this.#o.reportRetry },
      );
      this.#noteFailed(job, outcome, done.status, done.nextAttemptAt);
    } catch (error) {
      if (outcome.output !== undefined && error instanceof BatonApiError && refused(error)) {
        this.#withoutOutput(job, error.summary());
        await this.#fail(job, { ...outcome, output: undefined });
        return;
      }
      this.#unreported(job, error instanceof BatonError ? error : new BatonError(String(error)));
    }
  }

  /** The server refused a failure with its output: it goes again without (never lost for it). */
  #withoutOutput(job: RunningJob, why: string): void {
    job.logger.warn("the server refused the failure with its output; sending it without", {
      error: why,
    });
  }

  #completed(job: RunningJob, outcome: Outcome, answer: BatchOutcomeJson): void {
    if (answer.outcome === "APPLIED" || answer.outcome === "DUPLICATE") {
      this.#noteCompleted(job, outcome);
    } else if (answer.outcome === "INVALID" && this.#o.flusher) {
      const refusedOutcome: Outcome = {
        error: `the server refused the handler's result: ${answer.error ?? "INVALID"}`,
        retryable: false,
        seconds: outcome.seconds,
      };
      this.#submitFailure(job, refusedOutcome, this.#o.flusher);
    } else {
      this.#gone(job, answer);
    }
  }

  #failed(job: RunningJob, outcome: Outcome, answer: BatchOutcomeJson): void {
    if (answer.outcome === "APPLIED" || answer.outcome === "DUPLICATE") {
      this.#noteFailed(job, outcome, answer.status, answer.nextAttemptAt);
    } else if (answer.outcome === "INVALID" && outcome.output !== undefined && this.#o.flusher) {
      this.#withoutOutput(job, answer.error ?? "INVALID");
      this.#submitFailure(job, { ...outcome, output: undefined }, this.#o.flusher);
    } else if (answer.outcome === "INVALID") {
      this.#notifyUnreported(job, new BatonError(answer.error ?? "INVALID"));
      job.logger.error(
        "the server refused the job's outcome; it will be delivered again after its lease",
        { error: answer.error ?? "INVALID" },
      );
    } else {
      this.#gone(job, answer);
    }
  }

  #gone(job: RunningJob, answer: BatchOutcomeJson): void {
    const error = new BatonError(`${answer.outcome}: ${answer.error ?? ""}`.trim());
    this.#notifyUnreported(job, error);
    job.logger.warn(
      "job is no longer this worker's (cancelled, or its lease expired and another worker took it); outcome discarded",
      { error: error.message },
    );
  }

  #noteCompleted(job: RunningJob, outcome: Outcome): void {
    const event = { jobType: job.jobType, handlerSeconds: outcome.seconds };
    notify(this.#o.metrics, "jobCompleted", event, this.#o.logger);
    // debug: a line per successful job is noise at thousands a second (and a write each).
    job.logger.debug("job completed", { handler_s: Math.round(outcome.seconds * 1e6) / 1e6 });
  }

  #noteFailed(job: RunningJob, outcome: Outcome, status?: string, nextAttemptAt?: string): void {
    const event = {
      jobType: job.jobType,
      handlerSeconds: outcome.seconds,
      retryable: outcome.retryable ?? true,
    };
    notify(this.#o.metrics, "jobFailed", event, this.#o.logger);
    job.logger.info("job failed", {
      error: outcome.error,
      retryable: outcome.retryable,
      status,
      next_attempt_at: nextAttemptAt,
    });
  }

  #notifyUnreported(job: RunningJob, error: BatonError): void {
    notify(this.#o.metrics, "outcomeUnreported", { jobType: job.jobType, error }, this.#o.logger);
  }

  #unreported(job: RunningJob, error: BatonError): void {
    this.#notifyUnreported(job, error);
    if (error instanceof ConflictError || error instanceof NotFoundError) {
      job.logger.warn(
        "job is no longer this worker's (cancelled, or its lease expired and another worker took it); outcome discarded",
        { error: error.message },
      );
    } else if (error instanceof BatonApiError && !error.transient) {
      job.logger.error(
        "the server refused the job's outcome; it will be delivered again after its lease",
        { error: error.message },
      );
    } else {
      job.logger.error(
        "could not report the job's outcome; it will be delivered again after its lease",
        { error: error.message },
      );
    }
  }

  // --- leases ------------------------------------------------------------------------------

  async #autoHeartbeat(jobId: string): Promise<Date> {
    const job = this.#active.get(jobId);
    const answer = await this.#o.client.heartbeat(
      { jobId, workerId: this.#o.workerId, ...(job ? { attempt: job.attempt } : {}) },
      { retry: null }, // the heartbeater retries
    );
    const expires = new Date(answer.lockExpiresAt ?? Date.now() + FALLBACK_LEASE_MS);
    if (job) job.lockExpiresAt = expires;
    return expires;
  }

  async #manualHeartbeat(job: RunningJob): Promise<Date> {
    let answer: Awaited<ReturnType<BatonClient["heartbeat"]>>;
    try {
      answer = await this.#o.client.heartbeat({
        jobId: job.jobId,
        workerId: this.#o.workerId,
        attempt: job.attempt,
      });
    } catch (error) {
      if (error instanceof ConflictError || error instanceof NotFoundError) {
        this.#leaseLost(job.jobId, error);
      }
      throw error;
    }
    const expires = new Date(answer.lockExpiresAt ?? Date.now() + FALLBACK_LEASE_MS);
    job.lockExpiresAt = expires;
    if (this.#active.has(job.jobId)) this.heartbeater?.track(job.jobId, expires);
    return expires;
  }

  #leaseLost(jobId: string, error: Error): void {
    this.heartbeater?.untrack(jobId);
    const job = this.#active.get(jobId);
    if (job && !job.leaseLost) {
      job.logger.warn("lease lost; aborting the handler's signal", { error: error.message });
      job.loseLease(error.message);
    }
  }
}

/** A 4xx refusing a completion for its content (not 404/409, not 401/403, not 429). */
function refused(error: BatonApiError): boolean {
  if (
    error.transient ||
    error instanceof ConflictError ||
    error instanceof NotFoundError ||
    error instanceof AuthenticationError ||
    error instanceof PermissionDeniedError
  ) {
    return false;
  }
  return error.status >= 400 && error.status < 500;
}

/** An error message the API can store: NUL and lone surrogates spelled out. */
function storable(text: string): string {
  return text.replaceAll("\u0000", "\\x00").toWellFormed();
}

function clip(text: string): string {
  return text.length <= MAX_ERROR_MESSAGE ? text : `${text.slice(0, MAX_ERROR_MESSAGE - 3)}...`;
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message ? `${error.name}: ${error.message}` : error.name;
  return `thrown: ${String(error)}`;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
