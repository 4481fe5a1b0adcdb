package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.function.BooleanSupplier;

/**
 * A small in-process Baton for runner tests: a queue of jobs handed out by /v1/jobs/poll, every
 * request recorded, and per-route overrides (status codes, delays) set by each test.
 */
final class FakeBaton implements AutoCloseable {
  static final ObjectMapper JSON = new ObjectMapper();

  /** One request as received. */
  record Request(String method, String path, Map<String, List<String>> headers, JsonNode body, byte[] raw, String query) {
    String header(String name) {
      for (Map.Entry<String, List<String>> e : headers.entrySet()) {
        if (e.getKey().equalsIgnoreCase(name)) {
          return e.getValue().get(0);
        }
      }
      return null;
    }
  }

  /** An answer to a request (status and JSON body), or null to fall through to the default. */
  interface Route {
    Answer answer(Request request) throws Exception;
  }

  record Answer(int status, Object body, Map<String, String> headers) {
    static Answer of(int status, Object body) {
      return new Answer(status, body, Map.of());
    }
  }

  final HttpServer server;
  private final ExecutorService executor = Executors.newCachedThreadPool();
  final List<Request> requests = new CopyOnWriteArrayList<>();
  final LinkedBlockingDeque<ObjectNode> queue = new LinkedBlockingDeque<>();
  final Map<String, Route> routes = new ConcurrentHashMap<>();
  final Map<String, byte[]> blobs = new ConcurrentHashMap<>();
  volatile Duration lease = Duration.ofSeconds(30);
  volatile boolean stopSignalled;

  /** The wire its clients speak; over Connect, REST routes under /v1 are refused. */
  final Protocol protocol;

  FakeBaton() throws IOException {
    this(Protocol.REST);
  }

  FakeBaton(Protocol protocol) throws IOException {
    this.protocol = protocol;
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(executor);
    server.createContext("/", this::handle);
    server.start();
  }

  String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  BatonClient client() {
    return BatonClient.builder().url(url()).apiKey("test-key").environment(Map.of()).protocol(protocol).build();
  }

  /** Adds a claimable job of {@code type} with {@code input}; its id. */
  String addJob(String type, Object input) {
    String id = "job-" + (queue.size() + requests.size()) + "-" + System.nanoTime();
    ObjectNode job = JSON.createObjectNode();
    job.put("id", id).put("instanceId", "inst-" + id).put("stepId", "step").put("stepExecutionId", "se-" + id);
    job.put("jobType", type).put("attempt", 1).put("retriesRemaining", 2);
    job.set("input", JSON.valueToTree(input));
    queue.add(job);
    return id;
  }

  List<Request> requests(String path) {
    List<Request> out = new ArrayList<>();
    for (Request r : requests) {
      if (r.path().equals(path)) {
        out.add(r);
      }
    }
    return out;
  }

  /** Every item of every complete-batch request, in order. */
  List<JsonNode> batchItems() {
    List<JsonNode> items = new ArrayList<>();
    for (Request r : requests("/v1/jobs/complete-batch")) {
      r.body().path("results").forEach(items::add);
    }
    return items;
  }

  static void waitFor(BooleanSupplier condition, Duration timeout, String what) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out waiting for " + what);
      }
      Thread.sleep(10);
    }
  }

  private void handle(HttpExchange exchange) throws IOException {
    if (exchange.getRequestURI().getPath().startsWith(FakeConnect.PREFIX)) {
      FakeConnect.handle(this, exchange);
      return;
    }
    if (protocol == Protocol.CONNECT && exchange.getRequestURI().getPath().startsWith("/v1/")) {
      byte[] out = "a Connect client sent REST".getBytes(StandardCharsets.UTF_8);
      exchange.sendResponseHeaders(418, out.length);
      exchange.getResponseBody().write(out);
      exchange.close();
      return;
    }
    try {
      byte[] raw = exchange.getRequestBody().readAllBytes();
      JsonNode body = raw.length == 0 ? null : parse(raw);
      String path = exchange.getRequestURI().getPath();
      Request request =
          new Request(
              exchange.getRequestMethod(), path, Map.copyOf(exchange.getRequestHeaders()), body, raw,
              exchange.getRequestURI().getRawQuery());
      Answer answer = answer(request);
      byte[] out =
          answer.body() == null
              ? new byte[0]
              : answer.body() instanceof byte[] ? (byte[]) answer.body() : JSON.writeValueAsBytes(answer.body());
      answer.headers().forEach((k, v) -> exchange.getResponseHeaders().add(k, v));
      exchange.getResponseHeaders().add("content-type", answer.status() >= 400 ? "application/problem+json" : "application/json");
      exchange.sendResponseHeaders(answer.status(), out.length == 0 ? -1 : out.length);
      if (out.length > 0) {
        try (OutputStream os = exchange.getResponseBody()) {
          os.write(out);
        }
      }
    } catch (Exception e) {
      byte[] out = e.toString().getBytes(StandardCharsets.UTF_8);
      exchange.sendResponseHeaders(500, out.length);
      exchange.getResponseBody().write(out);
    } finally {
      exchange.close();
    }
  }

  private static JsonNode parse(byte[] raw) {
    try {
      return JSON.readTree(raw);
    } catch (IOException e) {
      return JSON.getNodeFactory().textNode(new String(raw, StandardCharsets.UTF_8));
    }
  }

  static ObjectNode problem(int status, String title, String detail) {
    ObjectNode p = JSON.createObjectNode();
    p.put("type", "about:blank").put("title", title).put("status", status).put("detail", detail);
    return p;
  }

  /** The answer to {@code request}: the test's route, else the default. */
  Answer answer(Request request) throws Exception {
    requests.add(request);
    Answer answer = null;
    Route route = routes.get(request.path());
    if (route != null) {
      answer = route.answer(request);
    }
    return answer == null ? defaults(request) : answer;
  }

  private Answer defaults(Request r) throws InterruptedException {
    switch (r.path()) {
      case "/v1/jobs/poll": {
        int max = r.body().path("maxJobs").asInt(1);
        double wait = r.body().path("waitSeconds").asDouble(0);
        ArrayNode jobs = JSON.createArrayNode();
        long deadline = System.nanoTime() + (long) (wait * 1e9);
        while (true) {
          ObjectNode job;
          while (jobs.size() < max && (job = queue.poll()) != null) {
            job.put("lockExpiresAt", Instant.now().plus(lease).toString());
            jobs.add(job);
          }
          if (jobs.size() > 0 || System.nanoTime() >= deadline || stopSignalled) {
            break;
          }
          Thread.sleep(5);
        }
        return Answer.of(200, Map.of("jobs", jobs));
      }
      case "/v1/jobs/complete-batch": {
        ArrayNode results = JSON.createArrayNode();
        for (JsonNode item : r.body().path("results")) {
          ObjectNode o = results.addObject();
          o.put("jobId", item.path("jobId").asText()).put("outcome", "APPLIED");
          o.put("status", item.has("failure") ? (item.path("failure").path("retryable").asBoolean(true) ? "RETRY_SCHEDULED" : "FAILED") : "COMPLETED");
        }
        return Answer.of(200, Map.of("results", results));
      }
      case "/v1/jobs/complete":
        return Answer.of(200, Map.of("jobId", r.body().path("jobId").asText(), "status", "COMPLETED", "applied", true));
      case "/v1/jobs/fail":
        return Answer.of(200, Map.of("jobId", r.body().path("jobId").asText(), "status", "FAILED", "applied", true));
      case "/v1/jobs/heartbeat":
        return Answer.of(200, Map.of("jobId", r.body().path("jobId").asText(), "lockExpiresAt", Instant.now().plus(lease).toString()));
      case "/v1/workers/stop":
        stopSignalled = true;
        return Answer.of(200, Map.of("workerId", r.body().path("workerId").asText(), "stoppedAt", Instant.now().toString()));
      case "/v1/config":
        return Answer.of(200, Map.of("payloadLimits", Map.of("stepOutput", Map.of("softLimitBytes", 100_000, "hardLimitBytes", 10_000_000))));
      case "/v1/payloads": {
        String key = "payloads/step-output/" + System.nanoTime();
        return Answer.of(200, Map.of("path", key, "uploadUrl", url() + "/s3/" + key, "uploadHeaders", Map.of("x-amz-meta-kind", "STEP_OUTPUT")));
      }
      default:
        if (r.path().startsWith("/s3/")) {
          String key = r.path().substring(4);
          if (r.method().equals("PUT")) {
            if (!"STEP_OUTPUT".equals(r.header("x-amz-meta-kind"))) {
              return Answer.of(403, "missing the signed header");
            }
            blobs.put(key, r.raw());
            return Answer.of(200, null);
          }
          byte[] blob = blobs.get(key);
          return blob == null ? Answer.of(404, null) : Answer.of(200, blob);
        }
        return Answer.of(404, problem(404, "Not Found", "no route " + r.path()));
    }
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
  }
}
