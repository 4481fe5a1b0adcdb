/**
 * The runner: polls Baton for jobs of the registered types, runs their handlers with a cap on
 * how many run at once, and reports outcomes (in batches by default). `await runner.run({ signal
 * })` resolves after the drain once the signal aborts (or `runner.stop()` is called): no poll
 * starts after the stop, the worker's stop signal ends a long-poll waiting on the server (whose
 * answer, with any job it had claimed, is taken and run), every in-flight handler finishes and
 * its result is sent, and nothing new is claimed.
 *
 * The loop (Conductor's polling model, one slot per job): reserve free slots (at most
 * `maxJobsPerPoll`, gathering a moment while others run); `POST /v1/jobs/poll` for that many,
 * long-polling when the queue looked empty and nothing runs; give back what the answer did not
 * use; run each job; poll again at once after a full batch, else after a pause.
 */
import { hostname } from "node:os";
import { Backoff, retryPolicy, sleep } from "./backoff.js";
import { BatonClient } from "./client.js";
import { BatonApiError, BatonError, isTransient } from "./errors.js";
import { JobExecutor } from "./execution.js";
import { ResultFlusher } from "./flusher.js";
import type { JobJson } from "./gen/workflow/v1/engine_pb.js";
import { JsonLogger, type Logger } from "./log.js";
import { type MetricsHook, notify } from "./metrics.js";
import type { JobTransport, RunnerOptions, RunOptions } from "./options.js";
import type { Registry } from "./registry.js";
import { Slots } from "./slots.js";

export type { JobTransport, RunnerOptions, RunOptions } from "./options.js";

/**
 * At a stop, how long a long-poll in flight may take to answer after the worker's stop signal
 * (the server ends its wait on the signal, and answers with what it had already claimed) before
 * it is abandoned (seconds; never more than `drainTimeout`).
 */
export const STOP_POLL_GRACE = 3;

const STOP_SIGNAL_RETRY = retryPolicy({
  initialInterval: 0.1,
  maximumAttempts: 3,
  maximumElapsed: 2,
});

/** `<host>-<pid>`: unique per process, and says where a job ran. */
export function defaultWorkerId(): string {
  return `${hostname()}-${process.pid}`;
}

export class Runner {
  readonly client: BatonClient;
  readonly workerId: string;
  readonly jobTypes: string[];
  readonly parallelism: number;
  readonly #o: Required<
    Pick<
      RunnerOptions,
      | "maxJobsPerPoll"
      | "prefetch"
      | "pollInterval"
      | "maxPollInterval"
      | "longPollWait"
      | "gatherInterval"
      | "pollErrors"
    >
  > & { drainTimeout: number | undefined };
  readonly #log: Logger;
  readonly #claim: Slots; // claimed jobs, running or waiting to (parallelism + prefetch)
  readonly #run: Slots; // running handlers (parallelism)
  readonly #flusher: ResultFlusher | undefined;
  readonly #jobs: JobExecutor;
  readonly #transport: JobTransport | undefined;
  readonly #stopping = new AbortController();
  readonly #ownsClient: boolean;
  readonly #metrics: MetricsHook | undefined;
  #longPoll: AbortController | undefined;
  #pollGrace: NodeJS.Timeout | undefined;
  #longPollOn: boolean;
  #stopSignal: Promise<void> | undefined;
  #started = false;
  #claimed = 0; // jobs dispatched and not finished (running or waiting for a running slot)
  #done: Promise<void> | undefined;

  constructor(
    readonly registry: Registry,
    options: RunnerOptions = {},
  ) {
    if (options.client && (options.url || options.apiKey || options.auth || options.protocol)) {
      throw new TypeError("give a client, or url and credentials, not both");
    }
    this.client =
      options.client ??
      new BatonClient({
        ...(options.url === undefined ? {} : { url: options.url }),
        ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
        ...(options.auth === undefined ? {} : { auth: options.auth }),
        ...(options.protocol === undefined ? {} : { protocol: options.protocol }),
        ...(options.logger === undefined ? {} : { logger: options.logger }),
      });
    this.#ownsClient = options.client === undefined;
    this.workerId = options.workerId ?? defaultWorkerId();
    this.jobTypes = [...new Set(options.jobTypes ?? registry.jobTypes)];
    if (this.jobTypes.length === 0) {
      throw new TypeError("no job types: register a handler first (or pass jobTypes)");
    }
    const missing = this.jobTypes.filter((t) => !registry.has(t));
    if (missing.length > 0) {
      throw new TypeError(`no handler registered for job type(s): ${missing.join(", ")}`);
    }
    this.parallelism = whole("parallelism", options.parallelism ?? 8, 1);
    const maxJobsPerPoll = whole("maxJobsPerPoll", options.maxJobsPerPoll ?? 100, 1, 100);
    const prefetch = whole(
      "prefetch",
      options.prefetch ?? Math.min(this.parallelism, maxJobsPerPoll),
      0,
    );
    const longPollWait = options.longPollWait ?? 10;
    if (!(longPollWait >= 0 && longPollWait <= 20)) {
      throw new RangeError("longPollWait must be between 0 and 20 seconds");
    }
    const pollInterval = options.pollInterval ?? 0.5;
    this.#o = {
      maxJobsPerPoll,
      prefetch,
      pollInterval,
      maxPollInterval: Math.max(pollInterval, options.maxPollInterval ?? 2),
      longPollWait,
      gatherInterval: options.gatherInterval ?? 0.01,
      pollErrors:
        options.pollErrors ??
        retryPolicy({ initialInterval: 0.5, maximumInterval: 30, maximumAttempts: undefined }),
      drainTimeout: options.drainTimeout,
    };
    this.#longPollOn = longPollWait > 0 && options.transport === undefined;
    this.#log = options.logger ?? new JsonLogger("baton.runner");
    this.#claim = new Slots(this.parallelism + prefetch);
    this.#run = new Slots(this.parallelism);
    const reportRetry =
      options.reportRetry ??
      retryPolicy({
        initialInterval: 0.2,
        maximumInterval: 5,
        maximumAttempts: undefined,
        maximumElapsed: 300,
      });
    this.#flusher =
      options.batchResults === false
        ? undefined
        : new ResultFlusher(
            this.client,
            reportRetry,
            this.#log,
            options.flushInterval ?? 0.005,
            options.maxResultsPerFlush ?? 100,
          );
    this.#transport = options.transport;
    this.#metrics = options.metrics;
    this.#jobs = new JobExecutor({
      client: this.client,
      registry,
      workerId: this.workerId,
      logger: this.#log,
      reportRetry,
      stopping: () => this.#stopping.signal.aborted,
      autoHeartbeat: options.autoHeartbeat ?? true,
      flusher: this.#flusher,
      metrics: options.metrics,
    });
  }

  /** Jobs claimed and not finished, plus results handed over and not yet answered. */
  get inFlight(): number {
    return this.#claimed + (this.#flusher?.waiting ?? 0);
  }

  /** True once a stop was asked for. */
  get stopping(): boolean {
    return this.#stopping.signal.aborted;
  }

  /**
   * Poll and run jobs until `signal` aborts or {@link stop} is called; resolves after the drain
   * (every in-flight handler finished, its result sent). A runner runs once.
   */
  run(options: RunOptions = {}): Promise<void> {
    if (this.#started) throw new Error("this runner was already started (a runner runs once)");
    this.#started = true;
    const { signal, handleSignals } = options;
    const onAbort = () => this.#requestStop("the run's signal aborted");
    if (signal?.aborted) onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    const restore = handleSignals ? this.#installSignalHandlers() : undefined;
    this.#done = this.#serve().finally(() => {
      signal?.removeEventListener("abort", onAbort);
      restore?.();
    });
    return this.#done;
  }

  /** Stop gracefully; resolves after the drain (at once if the runner never ran). */
  async stop(): Promise<void> {
    this.#requestStop("stop() was called");
    await this.#done;
  }

  #requestStop(why: string): void {
    if (this.#stopping.signal.aborted) return;
    this.#log.info("stopping: no more polls; draining in-flight jobs", {
      workerId: this.workerId,
      why,
      in_flight: this.inFlight,
      // its answer (jobs the server claimed before the stop signal) joins the drain
      long_poll_in_flight: this.#longPoll !== undefined,
    });
    this.#stopping.abort();
    this.#claim.interrupt();
    const poll = this.#longPoll;
    if (poll) {
      // Not aborted: the server may have claimed jobs for it already (leased to this worker, lost
      // if the answer were thrown away). The stop signal ends its wait; its answer runs in the
      // drain. Only a poll still unanswered after the grace is abandoned.
      this.#stopSignal = this.#sendStopSignal();
      const grace = Math.min(STOP_POLL_GRACE, this.#o.drainTimeout ?? STOP_POLL_GRACE);
      this.#pollGrace = setTimeout(() => {
        this.#log.warn(
          "stopping: the long-poll did not answer the stop signal; abandoning it (jobs it claimed go back to work when their leases lapse)",
          { workerId: this.workerId, grace_s: grace },
        );
        poll.abort();
        // Once more: a wait that missed the first signal (it can land before the server starts
        // watching for one) would otherwise claim for this worker, gone, until its wait ends.
        const first = this.#stopSignal;
        this.#stopSignal = Promise.all([first, this.#sendStopSignal()]).then(() => undefined);
      }, grace * 1000);
    }
  }

  #installSignalHandlers(): () => void {
    const onSignal = (name: NodeJS.Signals) => {
      if (this.#stopping.signal.aborted) {
        this.#log.warn(
          "second signal: exiting without waiting; in-flight jobs will be delivered again when their leases expire",
          { workerId: this.workerId, signal: name },
        );
        process.exit(name === "SIGINT" ? 130 : 143);
      }
      this.#requestStop(name);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    return () => {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    };
  }

  async #serve(): Promise<void> {
    if (this.#flusher) void this.client.config().catch(() => undefined); // limits, once, early
    this.#log.info("runner started", {
      workerId: this.workerId,
      url: this.client.url,
      jobTypes: this.jobTypes,
      parallelism: this.parallelism,
    });
    try {
      await this.#pollLoop();
    } catch (error) {
      this.#log.error("poll loop crashed; draining and stopping", { error: String(error) });
      this.#stopping.abort();
    }
    // Polling is over: say so at every stop (not only when a long-poll was waiting at it), so
    // the server's waits, and whoever watches, know this worker claims nothing more (a second
    // time only after an abandoned poll).
    if (this.#transport === undefined) this.#stopSignal ??= this.#sendStopSignal();
    await this.#drain();
  }

  async #pollLoop(): Promise<void> {
    const o = this.#o;
    const stop = this.#stopping.signal;
    const idle = new Backoff(
      retryPolicy({
        initialInterval: o.pollInterval,
        maximumInterval: o.maxPollInterval,
        maximumAttempts: undefined,
        jitter: 0.1,
      }),
    );
    const errors = new Backoff(o.pollErrors);
    let wait = 0; // the first poll answers at once; one after an empty or short poll may wait
    while (!stop.aborted) {
      const wanted = await this.#claim.acquireUpTo(
        o.maxJobsPerPoll,
        o.gatherInterval,
        Math.max(1, Math.floor(o.maxJobsPerPoll / 2)),
      );
      if (wanted === 0) break;
      if (stop.aborted) {
        this.#claim.release(wanted);
        break;
      }
      let jobs: JobJson[];
      const started = performance.now();
      try {
        jobs = await this.#fetch(wanted, wait);
      } catch (error) {
        this.#claim.release(wanted);
        if (stop.aborted) break; // e.g. the long-poll was abandoned after the stop's grace
        notify(this.#metrics, "pollFailed", { error }, this.#log);
        if (wait > 0 && refusesWait(error)) {
          this.#log.warn("the server does not take waitSeconds; polling short", {
            error: String(error),
          });
          this.#longPollOn = false;
          wait = 0;
          continue;
        }
        let delay = errors.nextDelay();
        if (error instanceof BatonApiError && error.retryAfter) {
          delay = Math.max(delay, Math.min(error.retryAfter, o.pollErrors.maximumInterval));
        }
        this.#logPollError(error, delay);
        await sleep(delay, stop);
        continue;
      }
      errors.reset();
      const seconds = (performance.now() - started) / 1000;
      const event = { requested: wanted, received: jobs.length, seconds };
      notify(this.#metrics, "pollCompleted", event, this.#log);
      if (jobs.length < wanted) this.#claim.release(wanted - jobs.length);
      for (const job of jobs) this.#dispatch(job); // after a stop too: they are leased to us
      if (stop.aborted) break;
      if (this.#longPollOn) {
        wait = await this.#nextWait(jobs.length, wanted, wait, seconds, idle);
        continue;
      }
      if (this.#transport?.waits) continue;
      if (jobs.length === 0) {
        await sleep(idle.nextDelay(), stop);
        continue;
      }
      idle.reset();
      if (jobs.length < wanted) await sleep(o.pollInterval, stop);
    }
  }

  async #fetch(wanted: number, wait: number): Promise<JobJson[]> {
    if (this.#transport) {
      return this.#transport.fetch({
        workerId: this.workerId,
        jobTypes: this.jobTypes,
        maxJobs: wanted,
        signal: this.#stopping.signal,
      });
    }
    const request = { workerId: this.workerId, jobTypes: this.jobTypes, maxJobs: wanted };
    if (wait <= 0) return this.client.pollJobs(request, { retry: null }); // the loop retries
    // At a stop, the stop signal ends this wait on the server and the answer is taken; it is
    // aborted only after STOP_POLL_GRACE without one (see #requestStop).
    const abort = new AbortController();
    this.#longPoll = abort;
    try {
      return await this.client.pollJobs(
        { ...request, waitSeconds: wait },
        { retry: null, signal: abort.signal },
      );
    } finally {
      this.#longPoll = undefined;
      clearTimeout(this.#pollGrace);
    }
  }

  /**
   * After a poll with long-poll on: pause if need be, and say how long the next poll may wait
   * on the server. A full batch: at once, short. Otherwise the next poll long-polls, but only
   * once no job is in flight: a long-poll outlives a worker that crashes, on the server, where
   * it may still claim a job nobody will run.
   */
  async #nextWait(
    got: number,
    wanted: number,
    wait: number,
    took: number,
    idle: Backoff,
  ): Promise<number> {
    const stop = this.#stopping.signal;
    if (got >= wanted) {
      idle.reset();
      return 0;
    }
    if (got > 0) idle.reset();
    else if (wait > 0 && took < wait / 2) await sleep(idle.nextDelay(), stop); // no long-poll there
    if (this.#claim.inUse === 0) return this.#o.longPollWait;
    if ((await this.#claim.waitIdle(idle.nextDelay())) && !stop.aborted)
      return this.#o.longPollWait;
    return 0;
  }

  #dispatch(job: JobJson): void {
    this.#claimed += 1;
    void (async () => {
      await this.#run.acquire();
      try {
        await this.#jobs.run(job);
      } finally {
        this.#run.release();
        this.#claimed -= 1;
        this.#claim.release();
      }
    })();
  }

  async #sendStopSignal(): Promise<void> {
    try {
      await this.client.stopWorker(this.workerId, { retry: STOP_SIGNAL_RETRY, timeoutSeconds: 2 });
    } catch (error) {
      const quiet =
        error instanceof BatonApiError && (error.status === 404 || error.status === 405);
      (quiet ? this.#log.debug : this.#log.warn).call(this.#log, "stop signal not sent", {
        error: String(error),
      });
    }
  }

  #logPollError(error: unknown, delay: number): void {
    const fields = {
      workerId: this.workerId,
      error: error instanceof Error ? error.message : String(error),
      retry_in_s: Math.round(delay * 1000) / 1000,
    };
    if (isTransient(error)) this.#log.warn("poll failed; backing off", fields);
    else if (error instanceof BatonError) this.#log.error("poll refused; backing off", fields);
    else this.#log.error("poll failed unexpectedly; backing off", fields);
  }

  async #drain(): Promise<void> {
    if (this.inFlight > 0) {
      this.#log.info("draining in-flight jobs", {
        workerId: this.workerId,
        in_flight: this.inFlight,
      });
    }
    const drained = await this.#claim.waitIdle(this.#o.drainTimeout);
    if (!drained) {
      this.#log.warn(
        "drain timed out; unfinished jobs will be delivered again after their leases",
        {
          workerId: this.workerId,
          in_flight: this.inFlight,
        },
      );
    }
    await this.#flusher?.close();
    this.#jobs.heartbeater?.stop();
    await this.#stopSignal;
    if (this.#ownsClient && drained) this.client.close();
    this.#log.info("runner stopped", { workerId: this.workerId });
  }
}

function whole(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be a whole number between ${min} and ${max}, not ${value}`);
  }
  return value;
}

/** A 422 naming waitSeconds: the server predates long-poll. */
function refusesWait(error: unknown): boolean {
  return (
    error instanceof BatonApiError &&
    error.status === 422 &&
    error.errors.some((e) => e.path === "waitSeconds")
  );
}
