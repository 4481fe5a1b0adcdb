package dev.baton.worker;

import java.util.Map;

/**
 * Thrown by a handler to fail its job at once: the engine skips the step's remaining retries. An
 * {@code output} goes with the failure and is kept as the failed step's output (see {@link
 * JobException}).
 */
public class NonRetryableException extends JobException {
  private static final long serialVersionUID = 1L;

  public NonRetryableException(String message) {
    super(message, null, true, null, null);
  }

  public NonRetryableException(String message, Throwable cause) {
    super(message, cause, true, null, null);
  }

  /** A non-retryable failure carrying {@code output} (null: none), kept as the failed step's output. */
  public NonRetryableException(String message, Map<String, ?> output) {
    super(message, null, true, null, output);
  }

  /** As {@link #NonRetryableException(String, Map)}, with the exception that caused it. */
  public NonRetryableException(String message, Throwable cause, Map<String, ?> output) {
    super(message, cause, true, null, output);
  }
}
