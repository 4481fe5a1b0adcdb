package dev.baton.worker;

import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Thrown by a handler to fail its job with a message. The engine retries the job per its step's
 * retry policy unless the exception is non-retryable ({@link NonRetryableException}).
 *
 * <p>{@code nextRetryDelay} (0 to 365 days) replaces the step's retry delay for the one retry this
 * failure schedules: {@link Duration#ZERO} to retry at once, or what a rate-limited service asked
 * for. Any other exception a handler throws also fails the job as retryable, after the step's own
 * delay.
 *
 * <p>{@code output} (variables, as a handler returns them) goes with the failure: the step keeps
 * it as its output when this failure ends the step (no retry follows), as Conductor keeps a failed
 * task's {@code outputData}; an {@code optional} step's successors read it. An output that is not
 * strict JSON Baton can store, or whose JSON is above the step output's soft limit ({@code GET
 * /v1/config}, at most 256 KiB), is left out: the failure is still sent, and the runner logs why.
 *
 * <pre>{@code
 * throw new NonRetryableException("card declined", Map.of("declineCode", code));
 * throw new JobException("rate limited", Duration.ofSeconds(30), Map.of("remaining", 0));
 * }</pre>
 */
public class JobException extends BatonException {
  private static final long serialVersionUID = 1L;

  /** The API's limit on {@code nextRetryDelaySeconds}. */
  public static final Duration MAX_RETRY_DELAY = Duration.ofDays(365);

  private final boolean nonRetryable;
  private final Duration nextRetryDelay;
  private final transient Map<String, Object> output; // not serialised: Map is not Serializable

  public JobException(String message) {
    this(message, null, false, null, null);
  }

  public JobException(String message, Throwable cause) {
    this(message, cause, false, null, null);
  }

  /** A retryable failure whose retry comes after {@code nextRetryDelay}. */
  public JobException(String message, Duration nextRetryDelay) {
    this(message, null, false, Objects.requireNonNull(nextRetryDelay, "nextRetryDelay"), null);
  }

  /**
   * A retryable failure carrying {@code output} (null: none), kept as the step's output if no
   * retry follows (its retries are used up).
   */
  public JobException(String message, Map<String, ?> output) {
    this(message, null, false, null, output);
  }

  /**
   * A retryable failure whose retry comes after {@code nextRetryDelay}, carrying {@code output}
   * (null: none).
   */
  public JobException(String message, Duration nextRetryDelay, Map<String, ?> output) {
    this(message, null, false, Objects.requireNonNull(nextRetryDelay, "nextRetryDelay"), output);
  }

  protected JobException(
      String message, Throwable cause, boolean nonRetryable, Duration nextRetryDelay) {
    this(message, cause, nonRetryable, nextRetryDelay, null);
  }

  /**
   * The full form for subclasses: {@code nextRetryDelay} and {@code output} may be null (the
   * step's own delay; no output).
   */
  protected JobException(
      String message,
      Throwable cause,
      boolean nonRetryable,
      Duration nextRetryDelay,
      Map<String, ?> output) {
    super(message, cause);
    if (nextRetryDelay != null
        && (nextRetryDelay.isNegative() || nextRetryDelay.compareTo(MAX_RETRY_DELAY) > 0)) {
      throw new IllegalArgumentException(
          "nextRetryDelay must be between 0 and 365 days, not " + nextRetryDelay);
    }
    this.nonRetryable = nonRetryable;
    this.nextRetryDelay = nonRetryable ? null : nextRetryDelay;
    // A shallow copy: the output as it was when thrown (null values allowed, as in a result).
    this.output = output == null ? null : Collections.unmodifiableMap(new LinkedHashMap<>(output));
  }

  /** True when the engine must not retry the job (its remaining retries are skipped). */
  public boolean isNonRetryable() {
    return nonRetryable;
  }

  /** The delay before the retry this failure schedules; null for the step's own delay. */
  public Duration nextRetryDelay() {
    return nextRetryDelay;
  }

  /**
   * The output that goes with the failure (unmodifiable), kept as the step's output when the
   * failure ends the step; null when none was given.
   */
  public Map<String, Object> output() {
    return output;
  }
}
