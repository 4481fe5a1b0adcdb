/**
 * Metrics hooks: the runner reports what it does to an object you give it
 * (`new Runner(registry, { metrics })`), to feed Prometheus, StatsD, CloudWatch EMF or anything
 * else. Every method is optional and gets one object, so a hook implements only what it needs.
 * Hooks are called synchronously on the runner's path: keep them quick. A hook that throws is
 * logged and ignored. {@link InMemoryMetrics} keeps counters in memory (tests, benchmarks, a
 * status page).
 */
import type { Logger } from "./log.js";

export interface MetricsHook {
  /** A poll returned `received` jobs of `requested` (0: an empty poll). */
  pollCompleted?(event: { requested: number; received: number; seconds: number }): void;
  /** A poll failed (the runner backs off and polls again). */
  pollFailed?(event: { error: unknown }): void;
  /** A handler was called. */
  jobStarted?(event: { jobType: string }): void;
  /** A job's handler returned and its completion was accepted. */
  jobCompleted?(event: { jobType: string; handlerSeconds: number }): void;
  /** A job's handler threw (or its result was refused) and the failure was recorded. */
  jobFailed?(event: { jobType: string; handlerSeconds: number; retryable: boolean }): void;
  /**
   * The runner could not report a job's outcome (no answer, refused, or the job is no longer
   * this worker's); its lease will lapse and another delivery follow, unless it was cancelled.
   */
  outcomeUnreported?(event: { jobType: string; error: unknown }): void;
}

type Events = {
  [K in keyof MetricsHook]-?: Parameters<NonNullable<MetricsHook[K]>>[0];
};

/** Call `hook[name](event)` if the hook has it; a hook that throws must not break a job. */
export function notify<K extends keyof Events>(
  hook: MetricsHook | undefined,
  name: K,
  event: Events[K],
  logger: Logger,
): void {
  const fn = hook?.[name] as ((e: Events[K]) => void) | undefined;
  if (fn === undefined) return;
  try {
    fn.call(hook, event);
  } catch (error) {
    logger.error("metrics hook failed", { hook: name, error: String(error) });
  }
}

/** A plain copy of {@link InMemoryMetrics}' counters. */
export interface MetricsSnapshot {
  polls: number;
  emptyPolls: number;
  pollErrors: number;
  jobsStarted: Record<string, number>;
  jobsCompleted: Record<string, number>;
  jobsFailed: Record<string, number>;
  jobsFailedNonRetryable: Record<string, number>;
  outcomesUnreported: Record<string, number>;
  handlerSeconds: Record<string, number>;
}

/** Counters and handler-time totals, per job type where it applies. */
export class InMemoryMetrics implements MetricsHook {
  polls = 0;
  emptyPolls = 0;
  pollErrors = 0;
  readonly jobsStarted = new Map<string, number>();
  readonly jobsCompleted = new Map<string, number>();
  readonly jobsFailed = new Map<string, number>();
  readonly jobsFailedNonRetryable = new Map<string, number>();
  readonly outcomesUnreported = new Map<string, number>();
  readonly handlerSeconds = new Map<string, number>();

  pollCompleted(event: { received: number }): void {
    this.polls += 1;
    if (event.received === 0) this.emptyPolls += 1;
  }

  pollFailed(): void {
    this.pollErrors += 1;
  }

  jobStarted(event: { jobType: string }): void {
    add(this.jobsStarted, event.jobType, 1);
  }

  jobCompleted(event: { jobType: string; handlerSeconds: number }): void {
    add(this.jobsCompleted, event.jobType, 1);
    add(this.handlerSeconds, event.jobType, event.handlerSeconds);
  }

  jobFailed(event: { jobType: string; handlerSeconds: number; retryable: boolean }): void {
    add(this.jobsFailed, event.jobType, 1);
    if (!event.retryable) add(this.jobsFailedNonRetryable, event.jobType, 1);
    add(this.handlerSeconds, event.jobType, event.handlerSeconds);
  }

  outcomeUnreported(event: { jobType: string }): void {
    add(this.outcomesUnreported, event.jobType, 1);
  }

  snapshot(): MetricsSnapshot {
    return {
      polls: this.polls,
      emptyPolls: this.emptyPolls,
      pollErrors: this.pollErrors,
      jobsStarted: Object.fromEntries(this.jobsStarted),
      jobsCompleted: Object.fromEntries(this.jobsCompleted),
      jobsFailed: Object.fromEntries(this.jobsFailed),
      jobsFailedNonRetryable: Object.fromEntries(this.jobsFailedNonRetryable),
      outcomesUnreported: Object.fromEntries(this.outcomesUnreported),
      handlerSeconds: Object.fromEntries(this.handlerSeconds),
    };
  }
}

function add(map: Map<string, number>, key: string, n: number): void {
  map.set(key, (map.get(key) ?? 0) + n);
}
