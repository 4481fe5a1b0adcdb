package dev.baton.worker;

/** Thrown by a handler to fail its job at once: the engine skips the step's remaining retries. */
public class NonRetryableException extends JobException {
  private static final long serialVersionUID = 1L;

  public NonRetryableException(String message) {
    super(message, null, true, null);
  }

  public NonRetryableException(String message, Throwable cause) {
    super(message, cause, true, null);
  }
}
