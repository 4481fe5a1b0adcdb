package dev.baton.worker;

import java.time.Duration;

/** The growing delays of one run of failures; {@link #reset()} after a success. Not thread-safe. */
final class Backoff {
  private final RetryPolicy policy;
  private int failures;

  Backoff(RetryPolicy policy) {
    this.policy = policy;
  }

  Duration nextDelay() {
    Duration d = policy.delay(failures);
    failures++;
    return d;
  }

  void reset() {
    failures = 0;
  }
}
