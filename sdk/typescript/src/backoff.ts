/**
 * Retry policies: the n-th retry (n = 0, 1, ...) waits `min(maximumInterval, initialInterval *
 * backoffCoefficient ** n)` seconds, less a random share of up to `jitter` of it, so that many
 * workers failing together do not retry in step.
 */
export interface RetryPolicy {
  /** Seconds before the first retry (default 0.1). */
  initialInterval: number;
  /** Growth per retry (default 2). */
  backoffCoefficient: number;
  /** Ceiling on one delay, in seconds (default 5). */
  maximumInterval: number;
  /** Attempts in all, the first included; undefined: no limit (default 4). */
  maximumAttempts: number | undefined;
  /** Seconds from the first attempt after which no retry starts; undefined: no limit. */
  maximumElapsed: number | undefined;
  /** The share (0 to 1) of each delay that may be taken off at random (default 0.5). */
  jitter: number;
}

export function retryPolicy(options: Partial<RetryPolicy> = {}): RetryPolicy {
  const policy: RetryPolicy = {
    initialInterval: 0.1,
    backoffCoefficient: 2,
    maximumInterval: 5,
    maximumAttempts: 4,
    maximumElapsed: undefined,
    jitter: 0.5,
    ...options,
  };
  if (!(policy.initialInterval > 0)) throw new RangeError("initialInterval must be positive");
  if (!(policy.backoffCoefficient >= 1)) throw new RangeError("backoffCoefficient must be >= 1");
  if (!(policy.maximumInterval >= policy.initialInterval)) {
    throw new RangeError("maximumInterval must be at least initialInterval");
  }
  if (policy.maximumAttempts !== undefined && policy.maximumAttempts < 1) {
    throw new RangeError("maximumAttempts must be at least 1");
  }
  if (!(policy.jitter >= 0 && policy.jitter <= 1)) throw new RangeError("jitter must be in [0, 1]");
  return policy;
}

/** Never retry. */
export const NO_RETRY: RetryPolicy = retryPolicy({ maximumAttempts: 1 });

/** The delay before retry number `retry` (0-based), with jitter. */
export function retryDelay(
  policy: RetryPolicy,
  retry: number,
  rand: () => number = Math.random,
): number {
  const grown = policy.initialInterval * policy.backoffCoefficient ** Math.min(retry, 64);
  const ceiling = Math.min(policy.maximumInterval, grown);
  return ceiling * (1 - policy.jitter * rand());
}

/** Whether another attempt may follow `attemptsMade` after `elapsed` seconds and `nextDelay`. */
export function retryAllows(
  policy: RetryPolicy,
  attemptsMade: number,
  elapsed: number,
  nextDelay: number,
): boolean {
  if (policy.maximumAttempts !== undefined && attemptsMade >= policy.maximumAttempts) return false;
  return policy.maximumElapsed === undefined || elapsed + nextDelay <= policy.maximumElapsed;
}

/** Consecutive failures of one loop and the delay each one earns. */
export class Backoff {
  failures = 0;
  constructor(
    readonly policy: RetryPolicy,
    private readonly rand: () => number = Math.random,
  ) {}

  nextDelay(): number {
    const delay = retryDelay(this.policy, this.failures, this.rand);
    this.failures += 1;
    return delay;
  }

  reset(): void {
    this.failures = 0;
  }
}

/** Resolves after `seconds`, or at once (false) when `signal` aborts first. */
export function sleep(seconds: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve(false);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener("abort", onAbort);
        resolve(true);
      },
      Math.max(0, seconds * 1000),
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
