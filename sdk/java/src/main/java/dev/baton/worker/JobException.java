package dev.baton.worker;

import java.time.Duration;
import java.util.Objects;

/**
 * Thrown by a handler to fail its job with a message. The engine retries the job per its step's
 * retry policy unless the exception is non-retryable ({@link NonRetryableException}).
 *
 * <p>{@code nextRetryDelay} (0 to 365 days) replaces the step's retry delay for the one retry this
 * failure schedules: {@link Duration#ZERO} to retry at once, or what a rate-limited service asked
 * for. Any other exception a handler throws also fails the job as retryable, after the step's own
 * delay.
 */
public class JobException extends BatonException {
  private static final long serialVersionUID = 1L;

  /** The API's limit on {@code nextRetryDelaySeconds}. */
  public static final Duration MAX_RETRY_DELAY = Duration.ofDays(365);

  private final boolean nonRetryable;
  private final Duration nextRetryDelay;

  public JobException(String message) {
    this(message, null, false, null);
  }

  public JobException(String message, Throwable cause) {
    this(message, cause, false, null);
  }

  /** A retryable failure whose retry comes after {@code nextRetryDelay}. */
  public JobException(String message, Duration nextRetryDelay) {
    this(message, null, false, Objects.requireNonNull(nextRetryDelay, "nextRetryDelay"));
  }

  protected JobException(
      String message, Throwable cause, boolean nonRetryable, Duration nextRetryDelay) {
    super(message, cause);
    if (nextRetryDelay != null
        && (nextRetryDelay.isNegative() || nextRetryDelay.compareTo(MAX_RETRY_DELAY) > 0)) {
      throw new IllegalArgumentException(
          "nextRetryDelay must be between 0 and 365 days, not " + nextRetryDelay);
    }
    this.nonRetryable = nonRetryable;
    this.nextRetryDelay = nonRetryable ? null : nextRetryDelay;
  }

  /** True when the engine must not retry the job (its remaining retries are skipped). */
  public boolean isNonRetryable() {
    return nonRetryable;
  }

  /** The delay before the retry this failure schedules; null for the step's own delay. */
  public Duration nextRetryDelay() {
    return nextRetryDelay;
  }
}
