package dev.baton.worker;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpConnectTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The transport under {@link BatonClient}: one request to the API, its credentials, its retries
 * and its errors (problem+json into {@link BatonApiException}).
 *
 * <p>Only failures whose repeat is harmless are retried: a request that never reached the server,
 * a 429 or 503 (the server did nothing), or any transient failure of a call that is idempotent on
 * the server (reads, job completion/failure/heartbeat, the worker stop signal).
 */
final class ApiHttp {
  private static final Logger log = LoggerFactory.getLogger("dev.baton.worker.client");

  static final ObjectMapper JSON = new ObjectMapper();

  final String url;
  final HttpWire wire;
  final RequestAuth auth;
  final Duration timeout;
  final RetryPolicy retry;
  final String userAgent;
  final Protocol protocol;

  ApiHttp(
      String url,
      HttpWire wire,
      RequestAuth auth,
      Duration timeout,
      RetryPolicy retry,
      Protocol protocol) {
    this.protocol = protocol;
    this.url = url.replaceAll("/+$", "");
    this.wire = wire;
    this.auth = auth;
    this.timeout = timeout;
    this.retry = retry;
    this.userAgent = "baton-worker-java/" + Version.VERSION;
  }

  /** Encodes a body as strict JSON (no NaN): the bytes sent. */
  static byte[] encode(Object body) {
    try {
      return JSON.writeValueAsBytes(body);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("the body is not JSON: " + e.getOriginalMessage(), e);
    }
  }

  /** Sends a request, retrying per policy; the decoded JSON of a 2xx answer (null if empty). */
  JsonNode call(
      String method,
      String path,
      Object body,
      boolean idempotent,
      RetryPolicy policy,
      Duration requestTimeout) {
    return call(method, path, body, idempotent, policy, requestTimeout, idempotent);
  }

  /** As above; {@code resendable}: the wire may send it again by itself (see {@link HttpWire}). */
  JsonNode call(
      String method,
      String path,
      Object body,
      boolean idempotent,
      RetryPolicy policy,
      Duration requestTimeout,
      boolean resendable) {
    Outgoing out = prepare(method, path, body);
    RetryPolicy p = policy == null ? RetryPolicy.NONE : policy;
    Backoff backoff = new Backoff(p);
    long started = System.nanoTime();
    int attempts = 0;
    while (true) {
      attempts++;
      try {
        return decode(method, path, exchange(out, requestTimeout, resendable));
      } catch (BatonApiException | TransportException error) {
        if (!mayRetry(error, idempotent)) {
          throw error;
        }
        Duration delay = backoff.nextDelay();
        if (error instanceof BatonApiException) {
          Duration hinted = ((BatonApiException) error).retryAfter();
          if (hinted != null && hinted.compareTo(delay) > 0) {
            delay = hinted.compareTo(p.maximumInterval()) < 0 ? hinted : p.maximumInterval();
          }
        }
        if (!p.allows(attempts, Duration.ofNanos(System.nanoTime() - started), delay)) {
          throw error;
        }
        log.info(
            "retrying {} {} after a transient failure (attempt {}, in {} ms): {}",
            method,
            path,
            attempts,
            delay.toMillis(),
            error.getMessage());
        sleep(delay);
      }
    }
  }

  /**
   * One request as it goes on the wire: REST's method, path and JSON body, or over {@link
   * Protocol#CONNECT} the POST of its RPC with the binary message ({@code rpc} set).
   */
  record Outgoing(String method, String path, byte[] content, String contentType, Connect.Call rpc) {}

  /** {@code method path} with {@code body} (null for none) as this client's wire sends it. */
  Outgoing prepare(String method, String path, Object body) {
    if (protocol == Protocol.CONNECT) {
      JsonNode tree =
          body == null ? null : body instanceof JsonNode ? (JsonNode) body : JSON.valueToTree(body);
      Connect.Call rpc = Connect.request(method, path, tree);
      return new Outgoing("POST", rpc.path(), rpc.body(), Connect.PROTO, rpc);
    }
    return new Outgoing(
        method, path, body == null ? null : encode(body), body == null ? null : "application/json", null);
  }

  /** Sends once, answered on another thread (the long-poll waits on it while watching stop). */
  CompletableFuture<HttpWire.Answer> sendAsync(
      String method, String path, Object body, Duration requestTimeout, boolean resendable) {
    Outgoing out = prepare(method, path, body);
    URI uri = URI.create(url + out.path());
    return wire.exchangeAsync(
        out.method(), uri, headers(out, uri), out.content(), timeout(requestTimeout), resendable);
  }

  /** Sends once and waits for the answer on the calling thread. */
  HttpWire.Answer exchange(Outgoing out, Duration requestTimeout, boolean resendable) {
    URI uri = URI.create(url + out.path());
    try {
      return wire.exchange(
          out.method(), uri, headers(out, uri), out.content(), timeout(requestTimeout), resendable);
    } catch (IOException e) {
      throw transportError(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new TransportException("interrupted while waiting for " + url, true, e);
    }
  }

  private Duration timeout(Duration requestTimeout) {
    return requestTimeout == null ? timeout : requestTimeout;
  }

  private Map<String, String> headers(Outgoing out, URI uri) {
    byte[] content = out.content();
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put("user-agent", userAgent);
    // API Gateway answers in binary only when Accept names a binary media type.
    headers.put("accept", out.rpc() != null ? Connect.PROTO : "application/json");
    Map<String, String> signed = new LinkedHashMap<>();
    if (content != null) {
      signed.put("content-type", out.contentType());
    }
    if (out.rpc() != null) {
      signed.put("connect-protocol-version", "1");
    }
    if (auth != null) {
      signed.putAll(auth.headers(out.method(), uri, Map.copyOf(signed), content == null ? new byte[0] : content));
    }
    headers.putAll(signed);
    return headers;
  }

  TransportException transportError(Throwable cause) {
    boolean sent = !(cause instanceof ConnectException || cause instanceof HttpConnectTimeoutException);
    String why = cause.getMessage() == null ? cause.getClass().getSimpleName() : cause.getMessage();
    if (!sent) {
      return new TransportException("cannot reach " + url + ": " + why, false, cause);
    }
    return new TransportException("request to " + url + " failed: " + why, true, cause);
  }

  /** The decoded body of a 2xx answer; the error a non-2xx answer means. */
  JsonNode decode(String method, String path, HttpWire.Answer response) {
    int status = response.status();
    byte[] body = response.body();
    if (protocol == Protocol.CONNECT) {
      return decodeRpc(method, path, response);
    }
    if (status >= 200 && status < 300) {
      if (body == null || body.length == 0) {
        return null;
      }
      try {
        return JSON.readTree(body);
      } catch (IOException e) {
        throw new BatonApiException(
            status,
            "Unexpected response",
            "the body of " + method + " " + path + " is not JSON",
            List.of(),
            null,
            null);
      }
    }
    throw problem(status, body, response.retryAfter());
  }

  /** A Connect answer as REST's: the message as REST JSON, an error as the problem it carries. */
  private JsonNode decodeRpc(String method, String path, HttpWire.Answer response) {
    int status = response.status();
    String retryAfter = response.retryAfter();
    if (status == 200) {
      try {
        return Connect.response(method, path, response.body());
      } catch (IOException e) {
        throw new BatonApiException(
            status,
            "Unexpected response",
            "the answer to " + method + " " + path + " over Connect is not its message: " + e.getMessage(),
            List.of(),
            null,
            null);
      }
    }
    ObjectNode problem = Connect.problem(status, response.body());
    if (problem == null) {
      throw problem(status, response.body(), retryAfter);
    }
    int problemStatus = problem.path("status").asInt(0);
    return throwProblem(problemStatus > 0 ? problemStatus : status, problem, retryAfter);
  }

  private JsonNode throwProblem(int status, ObjectNode problem, String retryAfter) {
    throw problem(status, encode(problem), retryAfter);
  }

  BatonApiException problem(int status, byte[] body, String retryAfter) {
    String title = "HTTP " + status;
    String detail = "";
    String type = null;
    List<BatonApiException.ProblemItem> errors = new ArrayList<>();
    JsonNode doc = null;
    try {
      doc = body == null || body.length == 0 ? null : JSON.readTree(body);
    } catch (IOException e) {
      detail = clip(new String(body, StandardCharsets.UTF_8).strip(), 500);
    }
    if (doc != null && doc.isObject()) {
      title = doc.path("title").asText(title);
      detail = doc.hasNonNull("detail") ? doc.get("detail").asText() : doc.path("message").asText("");
      type = doc.hasNonNull("type") ? doc.get("type").asText() : null;
      for (JsonNode item : doc.path("errors")) {
        errors.add(
            new BatonApiException.ProblemItem(
                item.path("path").asText("$"), item.path("message").asText("")));
      }
    }
    String hint = null;
    if (status == 401 || status == 403) {
      hint =
          auth == null
              ? "(no credentials were sent: set "
                  + Env.API_KEY
                  + ", pass an API key, or run baton dev so its key file is found)"
              : "(sent " + auth.describe() + "; check it is this server's)";
    }
    return BatonApiException.of(status, title, detail, errors, type, parseRetryAfter(retryAfter), hint);
  }

  static Duration parseRetryAfter(String value) {
    if (value == null) {
      return null;
    }
    try {
      double seconds = Double.parseDouble(value.strip());
      return seconds >= 0 ? Duration.ofMillis((long) (seconds * 1000)) : null;
    } catch (NumberFormatException e) {
      return null; // an HTTP date: not sent by this API
    }
  }

  static boolean mayRetry(BatonException error, boolean idempotent) {
    if (error instanceof TransportException) {
      return idempotent || !((TransportException) error).wasSent();
    }
    int status = ((BatonApiException) error).status();
    if (status == 429 || status == 503) {
      return true; // refused before doing anything
    }
    return idempotent && status >= 500;
  }

  static void sleep(Duration delay) {
    try {
      Thread.sleep(delay.toMillis(), (int) (delay.toNanos() % 1_000_000));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new TransportException("interrupted while waiting to retry", false, e);
    }
  }

  static String clip(String text, int max) {
    return text.length() <= max ? text : text.substring(0, max) + "...";
  }
}
