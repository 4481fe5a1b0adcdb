/**
 * Results reported in batches: a job hands its result over and its slot frees at once; the
 * flusher sends what gathered with `POST /v1/jobs/complete-batch` after `interval` seconds, at
 * once when `maxBatch` results (or `maxBytes` of them) wait, and whatever is left at close.
 * One flush is in flight at a time; results arriving meanwhile form the next batch.
 *
 * A failed flush is sent again, the same items, per the report retry policy (a result already
 * applied answers DUPLICATE, so none is applied twice). A batch refused whole (400, 413, 422) is
 * sent again one result at a time, and a server without the route (404, 405) gets single calls.
 */
import type { RetryPolicy } from "./backoff.js";
import type { BatonClient, JsonObject } from "./client.js";
import { BatonApiError, BatonError, TransportError } from "./errors.js";
import type { BatchOutcomeJson, BatchResultItemJson } from "./gen/workflow/v1/engine_pb.js";
import type { Logger } from "./log.js";

export const MAX_BATCH = 100; // the API's limit on results per call
const DEFAULT_MAX_BYTES = 1_000_000; // a flush's body stays well under the API's inline limit

interface Pending {
  item: BatchResultItemJson;
  size: number;
  onAnswer: (answer: BatchOutcomeJson) => void;
  onUnreported: (error: BatonError) => void;
}

export class ResultFlusher {
  #pending: Pending[] = [];
  #bytes = 0;
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #inFlight = 0;
  #batchSupported = true;
  flushes = 0;

  constructor(
    private readonly client: BatonClient,
    private readonly retry: RetryPolicy,
    private readonly log: Logger,
    private readonly interval = 0.005,
    private readonly maxBatch = 32,
    private readonly maxBytes = DEFAULT_MAX_BYTES,
  ) {
    if (!(maxBatch >= 1 && maxBatch <= MAX_BATCH)) {
      throw new RangeError(`maxResultsPerFlush must be between 1 and ${MAX_BATCH}`);
    }
  }

  /** Results handed over and not yet answered. */
  get waiting(): number {
    return this.#pending.length + this.#inFlight;
  }

  submit(
    item: BatchResultItemJson,
    onAnswer: (answer: BatchOutcomeJson) => void,
    onUnreported: (error: BatonError) => void,
  ): void {
    const size = JSON.stringify(item).length;
    this.#pending.push({ item, size, onAnswer, onUnreported });
    this.#bytes += size;
    this.#kick();
  }

  /** Flush what is left; resolves once every result handed over is answered. */
  async close(): Promise<void> {
    while (this.waiting > 0) {
      if (this.#timer) {
        clearTimeout(this.#timer);
        this.#timer = undefined;
      }
      if (!this.#flushing) this.#startFlush();
      await this.#flushing;
    }
  }

  #full(): boolean {
    return this.#pending.length >= this.maxBatch || this.#bytes >= this.maxBytes;
  }

  #kick(): void {
    if (this.#flushing) return; // the flush in flight starts the next one when it ends
    if (this.#full()) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#startFlush();
    } else if (!this.#timer) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        if (!this.#flushing) this.#startFlush();
      }, this.interval * 1000);
    }
  }

  #startFlush(): void {
    if (this.#pending.length === 0) return;
    const batch: Pending[] = [];
    let size = 0;
    for (const p of this.#pending) {
      if (batch.length > 0 && (batch.length >= this.maxBatch || size + p.size > this.maxBytes))
        break;
      batch.push(p);
      size += p.size;
    }
    this.#pending.splice(0, batch.length);
    this.#bytes -= size;
    this.#inFlight += batch.length;
    this.#flushing = this.#send(batch)
      .catch((error: unknown) => {
        this.log.error("result flush crashed", { error: String(error) });
      })
      .finally(() => {
        this.#inFlight -= batch.length;
        this.#flushing = undefined;
        if (this.#pending.length > 0) this.#kick();
      });
  }

  async #send(batch: Pending[]): Promise<void> {
    this.flushes += 1;
    if (this.#batchSupported) {
      let answers: BatchOutcomeJson[];
      try {
        answers = await this.client.completeBatch(
          batch.map((p) => p.item),
          { retry: this.retry },
        );
      } catch (error) {
        if (error instanceof BatonApiError) {
          if ([400, 413, 422].includes(error.status) && batch.length > 1) {
            this.log.warn("a batch of results was refused whole; sending them one by one");
            for (const p of batch) await this.#sendOne(p);
            return;
          }
          if (error.status !== 404 && error.status !== 405) {
            for (const p of batch) call(p.onUnreported, error, this.log);
            return;
          }
          this.log.warn("the server has no batch completion; reporting results one by one");
          this.#batchSupported = false;
        } else {
          const e = error instanceof BatonError ? error : new BatonError(String(error));
          for (const p of batch) call(p.onUnreported, e, this.log);
          return;
        }
      }
      if (this.#batchSupported) {
        batch.forEach((p, i) => {
          const answer = answers[i];
          if (answer) call(p.onAnswer, answer, this.log);
          else
            call(p.onUnreported, new BatonError("the server answered no outcome for it"), this.log);
        });
        return;
      }
    }
    for (const p of batch) await this.#sendOne(p);
  }

  async #sendOne(p: Pending): Promise<void> {
    const item = p.item;
    const jobId = item.jobId ?? "";
    try {
      if (item.failure) {
        const f = item.failure;
        const done = await this.client.failJob(
          {
            jobId,
            workerId: item.workerId ?? "",
            errorMessage: f.errorMessage ?? "",
            retryable: f.retryable ?? true,
            ...(f.nextRetryDelaySeconds === undefined
              ? {}
              : { nextRetryDelaySeconds: Number(f.nextRetryDelaySeconds) }),
            ...(item.attempt === undefined ? {} : { attempt: item.attempt }),
            ...(f.output === undefined ? {} : { output: f.output as JsonObject }),
          },
          { retry: this.retry },
        );
        call(p.onAnswer, answerOf(jobId, done.applied, done.status), this.log);
      } else {
        const done = await this.client.sendCompletion(item, { retry: this.retry });
        call(p.onAnswer, answerOf(jobId, done.applied, done.status), this.log);
      }
    } catch (error) {
      if (error instanceof BatonApiError) {
        const outcome =
          error.status === 404
            ? "NOT_FOUND"
            : error.status === 409
              ? "CONFLICT"
              : !error.transient &&
                  error.status >= 400 &&
                  error.status < 500 &&
                  error.status !== 401 &&
                  error.status !== 403
                ? "INVALID"
                : undefined;
        if (outcome === undefined) call(p.onUnreported, error, this.log);
        else call(p.onAnswer, { jobId, outcome, error: error.summary() }, this.log);
        return;
      }
      const e =
        error instanceof BatonError
          ? error
          : new TransportError(String(error), { sent: true, method: "POST", url: "" });
      call(p.onUnreported, e, this.log);
    }
  }
}

function answerOf(
  jobId: string,
  applied: boolean | undefined,
  status: string | undefined,
): BatchOutcomeJson {
  return { jobId, outcome: applied ? "APPLIED" : "DUPLICATE", ...(status ? { status } : {}) };
}

function call<T>(fn: (arg: T) => void, arg: T, log: Logger): void {
  try {
    fn(arg);
  } catch (error) {
    log.error("result callback failed", { error: String(error) });
  }
}
