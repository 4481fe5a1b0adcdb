package dev.baton.worker;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How to retry a failed call: jittered exponential backoff.
 *
 * <p>The n-th retry (n = 0, 1, ...) waits {@code min(maximumInterval, initialInterval *
 * backoffCoefficient^n)}, less a random share of up to {@code jitter} of it (0.5: anywhere between
 * half and all of it), so that many workers failing together do not come back in the same instant.
 * {@code maximumAttempts} counts the first call too (0: no limit); {@code maximumElapsed} caps the
 * time spent retrying (null: no cap).
 */
public final class RetryPolicy {
  /** The client's default: 4 attempts, 0.1 s growing to 5 s. */
  public static final RetryPolicy DEFAULT = builder().build();
  /** One attempt, no retry. */
  public static final RetryPolicy NONE = builder().maximumAttempts(1).build();

  private final Duration initialInterval;
  private final double backoffCoefficient;
  private final Duration maximumInterval;
  private final int maximumAttempts;
  private final Duration maximumElapsed;
  private final double jitter;

  private RetryPolicy(Builder b) {
    if (b.initialInterval.isNegative() || b.initialInterval.isZero()) {
      throw new IllegalArgumentException("initialInterval must be positive");
    }
    if (b.backoffCoefficient < 1) {
      throw new IllegalArgumentException("backoffCoefficient must be at least 1");
    }
    if (b.maximumInterval.compareTo(b.initialInterval) < 0) {
      throw new IllegalArgumentException("maximumInterval must be at least initialInterval");
    }
    if (b.maximumAttempts < 0) {
      throw new IllegalArgumentException("maximumAttempts must be 0 (no limit) or more");
    }
    if (b.jitter < 0 || b.jitter > 1) {
      throw new IllegalArgumentException("jitter must be between 0 and 1");
    }
    this.initialInterval = b.initialInterval;
    this.backoffCoefficient = b.backoffCoefficient;
    this.maximumInterval = b.maximumInterval;
    this.maximumAttempts = b.maximumAttempts;
    this.maximumElapsed = b.maximumElapsed;
    this.jitter = b.jitter;
  }

  public static Builder builder() {
    return new Builder();
  }

  public Duration maximumInterval() {
    return maximumInterval;
  }

  /** The un-jittered delay before retry number {@code retry} (0-based), in seconds. */
  double ceilingSeconds(int retry) {
    double grown =
        seconds(initialInterval) * Math.pow(backoffCoefficient, Math.min(retry, 64));
    return Math.min(seconds(maximumInterval), grown);
  }

  /** A jittered delay before retry number {@code retry}: within [(1 - jitter) c, c]. */
  Duration delay(int retry) {
    double c = ceilingSeconds(retry);
    double s = c * (1.0 - jitter * ThreadLocalRandom.current().nextDouble());
    return Duration.ofNanos((long) (s * 1e9));
  }

  /** May another attempt follow {@code attemptsMade} attempts, {@code elapsed} spent? */
  boolean allows(int attemptsMade, Duration elapsed, Duration nextDelay) {
    if (maximumAttempts > 0 && attemptsMade >= maximumAttempts) {
      return false;
    }
    return maximumElapsed == null || elapsed.plus(nextDelay).compareTo(maximumElapsed) <= 0;
  }

  static double seconds(Duration d) {
    return d.toNanos() / 1e9;
  }

  /** Builds a {@link RetryPolicy}. */
  public static final class Builder {
    private Duration initialInterval = Duration.ofMillis(100);
    private double backoffCoefficient = 2.0;
    private Duration maximumInterval = Duration.ofSeconds(5);
    private int maximumAttempts = 4;
    private Duration maximumElapsed;
    private double jitter = 0.5;

    private Builder() {}

    public Builder initialInterval(Duration value) {
      this.initialInterval = value;
      return this;
    }

    public Builder backoffCoefficient(double value) {
      this.backoffCoefficient = value;
      return this;
    }

    public Builder maximumInterval(Duration value) {
      this.maximumInterval = value;
      return this;
    }

    /** Attempts in all, the first included; 0 for no limit. */
    public Builder maximumAttempts(int value) {
      this.maximumAttempts = value;
      return this;
    }

    public Builder maximumElapsed(Duration value) {
      this.maximumElapsed = value;
      return this;
    }

    public Builder jitter(double value) {
      this.jitter = value;
      return this;
    }

    public RetryPolicy build() {
      return new RetryPolicy(this);
    }
  }
}
