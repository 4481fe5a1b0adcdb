package dev.baton.worker;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.HttpURLConnection;
import java.net.URI;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * The default wire: the JDK's {@code HttpURLConnection}, blocking on the calling thread, its
 * connections kept alive by the JDK's per-process cache (idle ones closed after 5 s).
 *
 * <p>Chosen over {@code java.net.http.HttpClient} for cost: a worker makes a request per poll and
 * per batch of results, and {@code HttpClient} spends several times the CPU on each (its selector
 * thread, reactive body subscribers and futures), plus about 0.3 s more at start-up (measured in
 * docs/sdk-java.md).
 *
 * <p>On a kept-alive connection found dead after the request was written, {@code
 * HttpURLConnection} sends a buffered body again once by itself: harmless for a resendable call
 * (an idempotent one, or a poll: the runner would poll again anyway), so those are buffered. The
 * others (an instance start, a claim by id) stream their body, which it never re-sends; it then
 * probes a reused connection before each such POST (a read with a 1 ms timeout), a cost the hot
 * path (polls, result batches, heartbeats) does not pay.
 */
final class UrlConnectionWire implements HttpWire {
  private final int connectTimeoutMillis;

  UrlConnectionWire(Duration connectTimeout) {
    this.connectTimeoutMillis = (int) Math.min(Integer.MAX_VALUE, connectTimeout.toMillis());
  }

  @Override
  public Answer exchange(
      String method, URI uri, Map<String, String> headers, byte[] body, Duration timeout, boolean resendable)
      throws IOException {
    return exchange(method, uri, headers, body, timeout, resendable, c -> {});
  }

  /** {@link #exchange}, handing the connection to {@code connected} once it is open. */
  private Answer exchange(
      String method, URI uri, Map<String, String> headers, byte[] body, Duration timeout, boolean resendable,
      Consumer<HttpURLConnection> connected)
      throws IOException {
    HttpURLConnection c = (HttpURLConnection) uri.toURL().openConnection();
    c.setRequestMethod(method);
    c.setConnectTimeout(connectTimeoutMillis);
    c.setReadTimeout((int) Math.min(Integer.MAX_VALUE, Math.max(1, timeout.toMillis())));
    c.setUseCaches(false);
    c.setInstanceFollowRedirects(false); // as HttpClient's default: a redirect is an answer
    headers.forEach(c::setRequestProperty);
    byte[] content = body == null && (method.equals("POST") || method.equals("PUT")) ? new byte[0] : body;
    if (content != null) {
      c.setDoOutput(true);
      if (!resendable) {
        c.setFixedLengthStreamingMode(content.length);
      }
    }
    try {
      c.connect();
    } catch (IOException e) { // nothing was sent
      ConnectException notSent = new ConnectException(e.getMessage() == null ? e.toString() : e.getMessage());
      notSent.initCause(e);
      throw notSent;
    }
    try {
      connected.accept(c);
      if (content != null) {
        try (OutputStream out = c.getOutputStream()) {
          out.write(content);
        }
      }
      int status = c.getResponseCode();
      byte[] answer;
      try (InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream()) {
        answer = in == null ? new byte[0] : in.readAllBytes(); // read to the end: kept alive
      }
      return new Answer(status, answer, c.getHeaderField("retry-after"));
    } catch (IOException e) {
      c.disconnect(); // a connection in an unknown state is not reused
      throw e;
    }
  }

  @Override
  public CompletableFuture<Answer> exchangeAsync(
      String method, URI uri, Map<String, String> headers, byte[] body, Duration timeout, boolean resendable) {
    CompletableFuture<Answer> answer = new CompletableFuture<>();
    AtomicReference<HttpURLConnection> open = new AtomicReference<>();
    // A cancel closes the connection (disconnect() also tells HttpURLConnection not to send the
    // request again): whichever of the cancel and the connect comes second does it.
    Consumer<HttpURLConnection> connected = c -> {
      open.set(c);
      if (answer.isCancelled()) {
        c.disconnect();
      }
    };
    answer.whenComplete((a, e) -> {
      HttpURLConnection c = open.get();
      if (answer.isCancelled() && c != null) {
        c.disconnect();
      }
    });
    Thread thread =
        new Thread(
            () -> {
              try {
                answer.complete(exchange(method, uri, headers, body, timeout, resendable, connected));
              } catch (IOException | RuntimeException e) {
                answer.completeExceptionally(e);
              }
            },
            "baton-long-poll");
    thread.setDaemon(true);
    thread.start();
    return answer;
  }
}
