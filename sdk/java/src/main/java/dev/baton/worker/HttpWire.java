package dev.baton.worker;

import java.io.IOException;
import java.net.URI;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * One HTTP exchange as the SDK makes it (a method, a URL, headers and bytes; a status, bytes and
 * the {@code Retry-After} header), over the JDK's {@code HttpURLConnection} by default ({@link
 * UrlConnectionWire}) or over a {@code java.net.http.HttpClient} the caller gave ({@link
 * HttpClientWire}).
 *
 * <p>A failure before the request could have reached the server (no connection, a connect
 * timeout) is a {@link java.net.ConnectException}: {@link ApiHttp} retries only those for calls
 * that are not idempotent. {@code resendable} says whether the wire itself may send the request
 * again when a kept-alive connection turns out dead after it was written (its answer lost): true
 * for idempotent calls and polls, false for the rest (starting an instance twice is not harmless).
 */
interface HttpWire {
  /** What came back. */
  record Answer(int status, byte[] body, String retryAfter) {}

  /** Sends one request and waits for the whole answer on the calling thread. */
  Answer exchange(
      String method, URI uri, Map<String, String> headers, byte[] body, Duration timeout, boolean resendable)
      throws IOException, InterruptedException;

  /**
   * The same, answered on another thread (a long-poll, which the runner waits on while watching
   * for a stop). Cancelling the future aborts the exchange: its connection is closed, and the
   * request is not sent again.
   */
  CompletableFuture<Answer> exchangeAsync(
      String method, URI uri, Map<String, String> headers, byte[] body, Duration timeout, boolean resendable);
}
