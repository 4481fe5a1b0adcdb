package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * A client for one Baton API: the worker's calls (poll, claim, complete, fail, heartbeat, the stop
 * signal, payloads) here, and the typed calls of the rest of the API (definitions, instances,
 * signals, user tasks) in {@link #api()}, with the types generated from {@code engine.proto}.
 *
 * <p>Thread-safe; share one per process. Build one with {@link #builder()} or {@link #fromEnv()}.
 * Errors are {@link BatonApiException} (the server's problem+json) and {@link TransportException}.
 */
public final class BatonClient implements AutoCloseable {
  /** The server's longest long-poll, in seconds. */
  public static final double MAX_LONG_POLL_SECONDS = 20.0;
  /** Bodies up to this size always go inline (small requests never cost a GET /v1/config). */
  static final int OFFLOAD_FLOOR = 64 * 1024;
  /** Transient S3 failures on presigned uploads/downloads: a few quick retries. */
  static final RetryPolicy PAYLOAD_RETRY =
      RetryPolicy.builder()
          .initialInterval(Duration.ofMillis(200))
          .maximumInterval(Duration.ofSeconds(2))
          .maximumAttempts(4)
          .build();

  static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);
  static final Duration TRANSFER_TIMEOUT = Duration.ofSeconds(60);

  final ApiHttp http;
  private volatile JsonNode config;
  private final TypedApi api;

  private BatonClient(Builder b) {
    // The JDK's HttpURLConnection unless the caller brought a java.net.http client: see
    // UrlConnectionWire for why.
    HttpWire wire = b.httpClient == null ? new UrlConnectionWire(CONNECT_TIMEOUT) : new HttpClientWire(b.httpClient);
    this.http = new ApiHttp(b.url, wire, b.auth, b.timeout, b.retry, b.protocol);
    this.api = new TypedApi(http);
  }

  public static Builder builder() {
    return new Builder();
  }

  /**
   * A client of {@code BATON_URL} (default {@code http://127.0.0.1:8080}) with the key from {@code
   * BATON_API_KEY}, else, for a server on this machine, the key {@code baton dev} keeps in {@code
   * $BATON_DATA_DIR/api-key}.
   */
  public static BatonClient fromEnv() {
    return builder().build();
  }

  /** The API's base URL. */
  public String url() {
    return http.url;
  }

  /** The wire this client speaks. */
  public Protocol protocol() {
    return http.protocol;
  }

  /** Where the credentials came from (said in the message of a 401/403). */
  public String credentials() {
    return http.auth == null ? "no credentials" : http.auth.describe();
  }

  /** The typed calls of the rest of the API (definitions, instances, signals, user tasks). */
  public TypedApi api() {
    return api;
  }

  /**
   * Nothing to release: connections are kept alive by the JDK's cache (closed after 5 s idle),
   * and a {@link Builder#httpClient} stays the caller's to close.
   */
  @Override
  public void close() {}

  // --- the worker's calls ------------------------------------------------------------------

  /**
   * Claims up to {@code maxJobs} jobs of {@code jobTypes} for {@code workerId} (may be none).
   * {@code waitSeconds} (0 to 20) long-polls: the server holds the request until a job is
   * claimable or the wait is over.
   */
  public List<JsonNode> pollJobs(
      String workerId, List<String> jobTypes, int maxJobs, double waitSeconds, RetryPolicy retry) {
    // Not idempotent (a repeat claims other jobs), but resendable by the wire: the jobs of a poll
    // whose answer was lost wait for their leases either way, and the runner polls again.
    JsonNode answer =
        http.call("POST", "/v1/jobs/poll", pollBody(workerId, jobTypes, maxJobs, waitSeconds),
            false, retry, pollTimeout(waitSeconds), true);
    return jobs(answer);
  }

  /** The long-poll, sent asynchronously: the runner waits on it while watching for a stop. */
  CompletableFuture<HttpWire.Answer> pollAsync(
      String workerId, List<String> jobTypes, int maxJobs, double waitSeconds) {
    ObjectNode body = pollBody(workerId, jobTypes, maxJobs, waitSeconds);
    return http.sendAsync("POST", "/v1/jobs/poll", body, pollTimeout(waitSeconds), true);
  }

  static List<JsonNode> jobs(JsonNode answer) {
    List<JsonNode> jobs = new ArrayList<>();
    if (answer != null) {
      answer.path("jobs").forEach(jobs::add);
    }
    return jobs;
  }

  private ObjectNode pollBody(String workerId, List<String> jobTypes, int maxJobs, double wait) {
    if (wait < 0 || wait > MAX_LONG_POLL_SECONDS) {
      throw new IllegalArgumentException("waitSeconds must be between 0 and 20");
    }
    ObjectNode body = ApiHttp.JSON.createObjectNode();
    body.put("workerId", workerId);
    ArrayNode types = body.putArray("jobTypes");
    jobTypes.forEach(types::add);
    body.put("maxJobs", maxJobs);
    if (wait > 0) {
      body.put("waitSeconds", wait);
    }
    return body;
  }

  private Duration pollTimeout(double wait) {
    Duration stretched = Duration.ofMillis((long) ((wait + 10) * 1000));
    return wait > 0 && stretched.compareTo(http.timeout) > 0 ? stretched : http.timeout;
  }

  /**
   * Takes the lease on one job by id (event-driven dispatch: the id came from the broker). A
   * {@link BatonApiException.Conflict} when it is no longer claimable (a duplicate delivery).
   */
  public JsonNode claimJob(String jobId, String workerId, Integer attempt) {
    ObjectNode body = ApiHttp.JSON.createObjectNode().put("workerId", workerId);
    if (attempt != null) {
      body.put("attempt", attempt);
    }
    return http.call("POST", "/v1/jobs/" + segment(jobId) + "/claim", body, false, http.retry, null);
  }

  /**
   * The body of a completion: {@code variablesToSet}, or above the step output's soft limit the
   * output uploaded ({@code POST /v1/payloads} and its presigned PUT) and its {@code
   * outputPayloadPath}.
   */
  public ObjectNode completion(String jobId, String workerId, JsonNode variables, Integer attempt) {
    ObjectNode body = ApiHttp.JSON.createObjectNode();
    body.put("jobId", jobId).put("workerId", workerId);
    if (attempt != null) {
      body.put("attempt", attempt);
    }
    if (variables != null) {
      byte[] encoded = ApiHttp.encode(variables);
      if (encoded.length > OFFLOAD_FLOOR && encoded.length > softLimit("stepOutput")) {
        body.put("outputPayloadPath", uploadPayload("STEP_OUTPUT", encoded));
      } else {
        body.set("variablesToSet", variables);
      }
    }
    return body;
  }

  /** One failure as an item of {@link #completeBatch}. */
  public static ObjectNode failure(
      String jobId,
      String workerId,
      String errorMessage,
      boolean retryable,
      Double nextRetryDelaySeconds,
      Integer attempt) {
    return failure(jobId, workerId, errorMessage, retryable, nextRetryDelaySeconds, attempt, null);
  }

  /**
   * One failure as an item of {@link #completeBatch}, with the {@code output} (a JSON object, or
   * null for none) the step keeps as its output when this failure ends it (no retry follows).
   */
  public static ObjectNode failure(
      String jobId,
      String workerId,
      String errorMessage,
      boolean retryable,
      Double nextRetryDelaySeconds,
      Integer attempt,
      JsonNode output) {
    ObjectNode body = ApiHttp.JSON.createObjectNode();
    body.put("jobId", jobId).put("workerId", workerId);
    if (attempt != null) {
      body.put("attempt", attempt);
    }
    ObjectNode f = body.putObject("failure");
    f.put("errorMessage", errorMessage).put("retryable", retryable);
    if (nextRetryDelaySeconds != null) {
      f.put("nextRetryDelaySeconds", nextRetryDelaySeconds);
    }
    if (output != null && !output.isNull()) {
      if (!output.isObject()) {
        throw new IllegalArgumentException("a failure's output is a JSON object, not " + output.getNodeType());
      }
      f.set("output", output);
    }
    return body;
  }

  /**
   * Reports up to 100 results in one call ({@code POST /v1/jobs/complete-batch}): one answer per
   * item, in order ({@code outcome}: APPLIED, DUPLICATE, CONFLICT, NOT_FOUND or INVALID). Safe to
   * repeat: a result already applied answers DUPLICATE.
   */
  public List<JsonNode> completeBatch(List<ObjectNode> items, RetryPolicy retry) {
    ObjectNode body = ApiHttp.JSON.createObjectNode();
    ArrayNode results = body.putArray("results");
    items.forEach(results::add);
    JsonNode answer = http.call("POST", "/v1/jobs/complete-batch", body, true, retry, null);
    List<JsonNode> out = new ArrayList<>();
    answer.path("results").forEach(out::add);
    return out;
  }

  /** {@code POST /v1/jobs/complete} with a body built by {@link #completion}. */
  public JsonNode sendCompletion(ObjectNode body, RetryPolicy retry) {
    return http.call("POST", "/v1/jobs/complete", body, true, retry, null);
  }

  /** {@code POST /v1/jobs/fail}; retried by the engine when {@code retryable}. */
  public JsonNode failJob(
      String jobId,
      String workerId,
      String errorMessage,
      boolean retryable,
      Double nextRetryDelaySeconds,
      Integer attempt,
      RetryPolicy retry) {
    return failJob(jobId, workerId, errorMessage, retryable, nextRetryDelaySeconds, attempt, null, retry);
  }

  /**
   * {@code POST /v1/jobs/fail} with an {@code output} (a JSON object, or null for none): the step
   * keeps it as its output when this failure ends the step (no retry follows).
   */
  public JsonNode failJob(
      String jobId,
      String workerId,
      String errorMessage,
      boolean retryable,
      Double nextRetryDelaySeconds,
      Integer attempt,
      JsonNode output,
      RetryPolicy retry) {
    ObjectNode body = failure(jobId, workerId, errorMessage, retryable, nextRetryDelaySeconds, attempt, output);
    ObjectNode flat = (ObjectNode) body.remove("failure");
    body.setAll(flat);
    return http.call("POST", "/v1/jobs/fail", body, true, retry, null);
  }

  /** Extends the lease of a claimed job (of its {@code attempt}); the new {@code lockExpiresAt}. */
  public JsonNode heartbeat(String jobId, String workerId, Integer attempt, RetryPolicy retry) {
    ObjectNode body = ApiHttp.JSON.createObjectNode().put("jobId", jobId).put("workerId", workerId);
    if (attempt != null) {
      body.put("attempt", attempt);
    }
    return http.call("POST", "/v1/jobs/heartbeat", body, true, retry, null);
  }

  /**
   * The worker's stop signal ({@code POST /v1/workers/stop}): a long-poll of {@code workerId}
   * waiting now claims nothing more and ends empty.
   */
  public JsonNode stopWorker(String workerId, RetryPolicy retry, Duration timeout) {
    ObjectNode body = ApiHttp.JSON.createObjectNode().put("workerId", workerId);
    return http.call("POST", "/v1/workers/stop", body, true, retry, timeout);
  }

  // --- external payloads ---------------------------------------------------------------------

  /** {@code GET /v1/config} (the payload limits), fetched once per client. */
  public JsonNode config() {
    JsonNode c = config;
    if (c == null) {
      c = http.call("GET", "/v1/config", null, true, http.retry, null);
      config = c;
    }
    return c;
  }

  /**
   * The soft limit of {@code kind} ({@code workflowInput}, {@code stepInput}, {@code
   * stepOutput}); a server without {@code /v1/config} means never offload.
   */
  public long softLimit(String kind) {
    try {
      JsonNode limit = config().path("payloadLimits").path(kind).path("softLimitBytes");
      return limit.isNumber() || limit.isTextual() ? limit.asLong(Long.MAX_VALUE) : Long.MAX_VALUE;
    } catch (BatonApiException e) {
      config = ApiHttp.JSON.createObjectNode(); // an older server: asked once
      return Long.MAX_VALUE;
    } catch (TransportException e) {
      return Long.MAX_VALUE;
    }
  }

  /**
   * Uploads {@code data} through a presigned PUT ({@code POST /v1/payloads} and its {@code
   * uploadHeaders}); its path. Transient S3 failures are retried with a fresh grant each time.
   */
  public String uploadPayload(String kind, byte[] data) {
    String[] path = new String[1];
    presigned(
        "upload",
        () -> {
          ObjectNode body =
              ApiHttp.JSON.createObjectNode().put("kind", kind).put("sizeBytes", data.length);
          JsonNode grant = http.call("POST", "/v1/payloads", body, false, http.retry, null);
          path[0] = grant.path("path").asText();
          Map<String, String> headers = new LinkedHashMap<>();
          grant.path("uploadHeaders").properties().forEach(
              e -> {
                if (!"host".equalsIgnoreCase(e.getKey())
                    && !"content-length".equalsIgnoreCase(e.getKey())) {
                  headers.put(e.getKey(), e.getValue().asText());
                }
              });
          return new Transfer("PUT", URI.create(grant.path("uploadUrl").asText()), headers, data);
        });
    return path[0];
  }

  /** The JSON at a presigned GET URL (an offloaded input), retrying transient S3 failures. */
  public JsonNode downloadPayload(String url) {
    HttpWire.Answer response = presigned("download", () -> new Transfer("GET", URI.create(url), Map.of(), null));
    try {
      return ApiHttp.JSON.readTree(response.body());
    } catch (IOException e) {
      throw new TransportException("the downloaded payload is not JSON: " + e.getMessage(), true, e);
    }
  }

  /** One presigned request: it carries its own signature (no API key, no SigV4 on it). */
  private record Transfer(String method, URI uri, Map<String, String> headers, byte[] body) {}

  private interface TransferSource {
    Transfer next();
  }

  private HttpWire.Answer presigned(String what, TransferSource source) {
    Backoff backoff = new Backoff(PAYLOAD_RETRY);
    int attempts = 0;
    while (true) {
      attempts++;
      String failure;
      try {
        Transfer t = source.next();
        HttpWire.Answer response =
            http.wire.exchange(t.method(), t.uri(), t.headers(), t.body(), TRANSFER_TIMEOUT, true);
        int status = response.status();
        if (status >= 200 && status < 300) {
          return response;
        }
        String text = ApiHttp.clip(new String(response.body(), StandardCharsets.UTF_8), 300);
        if (status < 500) {
          throw new TransportException(
              "payload " + what + " refused: " + status + " " + text, true, null);
        }
        failure = String.valueOf(status);
      } catch (IOException e) {
        failure = e.toString();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new TransportException("payload " + what + " interrupted", true, e);
      }
      Duration delay = backoff.nextDelay();
      if (!PAYLOAD_RETRY.allows(attempts, Duration.ZERO, delay)) {
        throw new TransportException("payload " + what + " failed: " + failure, true, null);
      }
      ApiHttp.sleep(delay);
    }
  }

  // --- raw ---------------------------------------------------------------------------------

  /**
   * Any route, for what the typed calls do not cover: {@code body} (a Jackson node, a map or a
   * record; null for none) is sent as JSON; the decoded answer. Not retried unless {@code
   * idempotent} (then per the client's policy).
   */
  public JsonNode call(String method, String path, Object body, boolean idempotent) {
    return http.call(method, path, body, idempotent, idempotent ? http.retry : RetryPolicy.NONE, null);
  }

  static String segment(String value) {
    return URLEncoder.encode(Objects.requireNonNull(value), StandardCharsets.UTF_8).replace("+", "%20");
  }

  /** Builds a {@link BatonClient}. */
  public static final class Builder {
    private String url;
    private RequestAuth auth;
    private boolean authSet;
    private Duration timeout = Duration.ofSeconds(30);
    private RetryPolicy retry = RetryPolicy.DEFAULT;
    private HttpClient httpClient;
    private Map<String, String> env = System.getenv();
    private Protocol protocol;

    private Builder() {}

    /**
     * The wire: {@link Protocol#REST} (JSON), or {@link Protocol#CONNECT}, every call as its RPC
     * in binary protobuf; default {@code BATON_PROTOCOL}, else REST. Same answers, same errors.
     */
    public Builder protocol(Protocol protocol) {
      this.protocol = Objects.requireNonNull(protocol, "protocol");
      return this;
    }

    /** The API's base URL; default {@code BATON_URL}, else {@code http://127.0.0.1:8080}. */
    public Builder url(String url) {
      this.url = url;
      return this;
    }

    /** Sends {@code x-api-key}; default {@code BATON_API_KEY}, else a local baton dev's key. */
    public Builder apiKey(String apiKey) {
      this.auth = new ApiKeyAuth(apiKey);
      this.authSet = true;
      return this;
    }

    /** Other credentials, e.g. {@link AwsSigV4Auth}; null sends none. */
    public Builder auth(RequestAuth auth) {
      this.auth = auth;
      this.authSet = true;
      return this;
    }

    /** The timeout of one request (a long-poll's is stretched past its wait). */
    public Builder timeout(Duration timeout) {
      this.timeout = timeout;
      return this;
    }

    /** The policy for transient failures; {@link RetryPolicy#NONE} never retries. */
    public Builder retry(RetryPolicy retry) {
      this.retry = retry;
      return this;
    }

    /**
     * Your own {@code java.net.http} {@link HttpClient} (a proxy, TLS settings, HTTP/2) for every
     * call, instead of the JDK's {@code HttpURLConnection} (which follows the JVM's proxy and TLS
     * settings, and costs a worker less CPU per request). Yours to close.
     */
    public Builder httpClient(HttpClient httpClient) {
      this.httpClient = httpClient;
      return this;
    }

    /** The environment read for defaults (tests). */
    public Builder environment(Map<String, String> env) {
      this.env = Map.copyOf(env);
      return this;
    }

    public BatonClient build() {
      if (url == null) {
        url = Env.url(env);
      }
      if (!authSet) {
        auth = Env.apiKey(url, env).orElse(null);
      }
      if (protocol == null) {
        protocol = Env.protocol(env);
      }
      return new BatonClient(this);
    }
  }
}
