package dev.baton.worker;

/**
 * No HTTP answer: the connection was refused, reset, or timed out. {@link #wasSent()} is false
 * when the request certainly never reached the server, so repeating it is harmless.
 */
public class TransportException extends BatonException {
  private static final long serialVersionUID = 1L;

  private final boolean sent;

  public TransportException(String message, boolean sent, Throwable cause) {
    super(message, cause);
    this.sent = sent;
  }

  public boolean wasSent() {
    return sent;
  }
}
