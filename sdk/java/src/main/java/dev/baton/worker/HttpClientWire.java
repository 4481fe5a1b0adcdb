package dev.baton.worker;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The wire over a {@code java.net.http.HttpClient} the caller configured ({@link
 * BatonClient.Builder#httpClient}: a proxy, TLS settings, HTTP/2).
 *
 * <p>Synchronous calls use {@code send}, which completes on the client's own threads: {@code
 * sendAsync} hands each answer to the JVM's default async pool, which on a machine with one or
 * two CPUs (the common pool's parallelism is then 1) starts a new thread per request.
 */
final class HttpClientWire implements HttpWire {
  private static final HttpResponse.BodyHandler<byte[]> BYTES = HttpResponse.BodyHandlers.ofByteArray();
  private final HttpClient client;

  HttpClientWire(HttpClient client) {
    this.client = client;
  }

  @Override
  public Answer exchange(
      String method, URI uri, Map<String, String> headers, byte[] body, Duration timeout, boolean resendable)
      throws IOException, InterruptedException { // HttpClient never re-sends a POST by itself
    return answer(client.send(request(method, uri, headers, body, timeout), BYTES));
  }

  @Override
  public CompletableFuture<Answer> exchangeAsync(
      String method, URI uri, Map<String, String> headers, byte[] body, Duration timeout, boolean resendable) {
    CompletableFuture<HttpResponse<byte[]>> sent = client.sendAsync(request(method, uri, headers, body, timeout), BYTES);
    CompletableFuture<Answer> answer = sent.thenApply(HttpClientWire::answer);
    // Cancelling a dependent future does not reach the one it depends on: pass the cancel on
    // (since JDK 16 cancelling sendAsync's future aborts its exchange).
    answer.whenComplete((a, e) -> {
      if (answer.isCancelled()) {
        sent.cancel(true);
      }
    });
    return answer;
  }

  private static Answer answer(HttpResponse<byte[]> response) {
    byte[] body = response.body();
    return new Answer(
        response.statusCode(),
        body == null ? new byte[0] : body,
        response.headers().firstValue("retry-after").orElse(null));
  }

  private static HttpRequest request(
      String method, URI uri, Map<String, String> headers, byte[] body, Duration timeout) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(uri)
            .timeout(timeout)
            .method(
                method,
                body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(body));
    headers.forEach(request::header);
    return request.build();
  }
}
