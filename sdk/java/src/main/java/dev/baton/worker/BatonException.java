package dev.baton.worker;

/**
 * Root of every exception the SDK throws on purpose.
 *
 * <p>Two branches hang off it: {@link JobException} (and {@link NonRetryableException}), which a
 * handler throws to fail its job on purpose, and {@link BatonApiException} / {@link
 * TransportException}, which the client throws when the API refuses a request or cannot be
 * reached.
 */
public class BatonException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public BatonException(String message) {
    super(message);
  }

  public BatonException(String message, Throwable cause) {
    super(message, cause);
  }
}
