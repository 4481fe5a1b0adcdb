package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * One job, from dispatch to its reported outcome: downloads an offloaded input, calls the handler
 * with the job's ids in the MDC, keeps the lease alive meanwhile, and reports the outcome (complete
 * with the returned variables, or fail: retryable unless the handler said otherwise). It never
 * throws for anything a handler or the API does.
 *
 * <p>Only failures that may pass (no answer, 429, 5xx) are retried. A result that is not strict
 * JSON Baton can store fails the job at once, non-retryably, without being sent; a completion the
 * server refuses with a 4xx does the same, with the server's reason. A 409 or 404 means the job is
 * no longer this worker's: the outcome is logged and dropped.
 *
 * <p>The output a {@link JobException} carries goes with its failure, unless it is not strict JSON
 * Baton can store or is above {@link #MAX_FAILURE_OUTPUT_BYTES} (or the step output's soft limit,
 * when lower): then, or when the server refuses the failure with it, the failure goes without it,
 * and a warning says why. A failure is never lost for its output.
 */
final class JobExecutor {
  private static final Logger log = LoggerFactory.getLogger("dev.baton.worker.runner");
  static final int MAX_ERROR_MESSAGE = 10_000;
  /** The largest failure output sent (its JSON), whatever the step output's soft limit. */
  static final long MAX_FAILURE_OUTPUT_BYTES = 256 * 1024;
  private static final String[] MDC_KEYS = {
    "job_id", "job_type", "instance_id", "step_id", "attempt", "worker_id"
  };

  /** What a handler's call came to; {@code output}: what goes with a failure (null: nothing). */
  record Outcome(
      JsonNode variables, String error, boolean retryable, Double nextRetryDelaySeconds, double seconds, JsonNode output) {
    static Outcome completed(JsonNode variables, double seconds) {
      return new Outcome(variables, null, true, null, seconds, null);
    }

    static Outcome failed(String error, boolean retryable, Double delay, double seconds) {
      return failed(error, retryable, delay, seconds, null);
    }

    static Outcome failed(String error, boolean retryable, Double delay, double seconds, JsonNode output) {
      return new Outcome(null, error, retryable, delay, seconds, output);
    }

    Outcome withoutOutput() {
      return new Outcome(variables, error, retryable, nextRetryDelaySeconds, seconds, null);
    }
  }

  private final BatonClient client;
  private final Registry registry;
  private final String workerId;
  private final RetryPolicy reportRetry;
  private final BooleanSupplier stopping;
  private final ResultFlusher flusher; // null: one call per result
  private final Map<String, Job> active = new ConcurrentHashMap<>();
  final Heartbeater heartbeater; // null: no automatic heartbeats

  JobExecutor(
      BatonClient client,
      Registry registry,
      String workerId,
      RetryPolicy reportRetry,
      BooleanSupplier stopping,
      boolean autoHeartbeat,
      ResultFlusher flusher) {
    this.client = client;
    this.registry = registry;
    this.workerId = workerId;
    this.reportRetry = reportRetry;
    this.stopping = stopping;
    this.flusher = flusher;
    this.heartbeater = autoHeartbeat ? new Heartbeater(this::sendHeartbeat, this::leaseLost) : null;
  }

  int inFlight() {
    return active.size();
  }

  /** Runs one claimed job to a reported outcome. */
  void run(JsonNode raw) {
    Instant expires = parseInstant(raw.path("lockExpiresAt").asText(null));
    JsonNode input = raw.get("input");
    String unavailable = null;
    if (raw.hasNonNull("inputDownloadUrl") && (input == null || input.isNull())) {
      try { // an offloaded input: the handler sees it as if it had come inline
        input = client.downloadPayload(raw.get("inputDownloadUrl").asText());
      } catch (BatonException e) {
        unavailable = "cannot download the job's input: " + e.getMessage();
      }
    }
    Job job = new Job(raw, input, workerId, expires, stopping, this::manualHeartbeat);
    active.put(job.id(), job);
    putMdc(job);
    try {
      if (heartbeater != null) {
        heartbeater.track(job.id(), expires);
      }
      Handler handler = registry.get(job.jobType());
      Outcome outcome;
      if (unavailable != null) { // the handler never runs on a partial input
        outcome = Outcome.failed(unavailable, true, null, 0);
      } else if (handler == null) {
        outcome = Outcome.failed("worker " + workerId + " has no handler for job type '" + job.jobType() + "'", true, null, 0);
      } else {
        outcome = call(handler, job);
      }
      report(job, outcome);
    } finally {
      if (heartbeater != null) {
        heartbeater.untrack(job.id());
      }
      active.remove(job.id());
      for (String key : MDC_KEYS) {
        MDC.remove(key);
      }
    }
  }

  static void putMdc(Job job) {
    MDC.put("job_id", job.id());
    MDC.put("job_type", job.jobType());
    MDC.put("instance_id", job.instanceId());
    MDC.put("step_id", job.stepId());
    MDC.put("attempt", Integer.toString(job.attempt()));
    MDC.put("worker_id", job.workerId());
  }

  private Outcome call(Handler handler, Job job) {
    long started = System.nanoTime();
    Map<String, ?> result = null;
    JobException failure = null;
    job.enter();
    try {
      result = handler.handle(job);
    } catch (JobException e) {
      failure = e;
    } catch (Throwable e) { // anything else fails the job as retryable
      double seconds = (System.nanoTime() - started) / 1e9;
      log.warn("handler threw", e);
      return Outcome.failed(describe(e), true, null, seconds);
    } finally {
      job.exit();
    }
    double seconds = (System.nanoTime() - started) / 1e9;
    if (failure != null) { // its output checked once the handler is out (no interrupt reaches it)
      String message = failure.getMessage() == null ? failure.getClass().getSimpleName() : failure.getMessage();
      Double delay = failure.nextRetryDelay() == null ? null : failure.nextRetryDelay().toNanos() / 1e9;
      log.warn("handler failed (retryable: {}): {}", !failure.isNonRetryable(), message);
      return Outcome.failed(message, !failure.isNonRetryable(), delay, seconds, failureOutput(failure.output()));
    }
    if (result == null) {
      return Outcome.completed(null, seconds);
    }
    try {
      return Outcome.completed(Results.toJson(result), seconds);
    } catch (Results.Problem p) {
      log.error("handler returned a bad result: {}", p.getMessage());
      return Outcome.failed(p.getMessage(), false, null, seconds);
    }
  }

  /**
   * A failure's output as it can be sent: null, with a warning saying why, when it is not strict
   * JSON Baton can store or its JSON is above min(the step output's soft limit, 256 KiB), so that
   * the failure itself still goes.
   */
  private JsonNode failureOutput(Map<String, Object> output) {
    if (output == null) {
      return null;
    }
    String problem;
    try {
      JsonNode tree = Results.toJson(output, "the failure's output");
      long size = ApiHttp.encode(tree).length;
      // Under the step output's soft limit (the server's inline limit is above it), and never more
      // than any server takes inline when that limit is not known.
      long limit = Math.min(client.softLimit("stepOutput"), MAX_FAILURE_OUTPUT_BYTES);
      if (size <= limit) {
        return tree;
      }
      problem = "the failure's output cannot be sent: it is " + size + " bytes of JSON, above the " + limit + "-byte limit";
    } catch (Results.Problem p) {
      problem = p.getMessage();
    } catch (RuntimeException | StackOverflowError e) { // whatever it is, it must not cost the failure
      problem = "the failure's output cannot be sent: " + describe(e);
    }
    log.warn("{}; the failure is sent without it", problem);
    return null;
  }

  // --- the report ----------------------------------------------------------------------------

  private void report(Job job, Outcome outcome) {
    if (outcome.error() == null) {
      Outcome refused = complete(job, outcome);
      if (refused == null) {
        return;
      }
      outcome = refused;
    }
    if (flusher != null) {
      submitFailure(job, outcome);
    } else {
      fail(job, outcome);
    }
  }

  /** Sends (or hands over) a completion; the failure to report instead when it was refused. */
  private Outcome complete(Job job, Outcome outcome) {
    ObjectNode item;
    try {
      item = client.completion(job.id(), workerId, outcome.variables(), job.attempt());
      if (flusher == null) {
        client.sendCompletion(item, reportRetry);
        noteCompleted(job, outcome);
        return null;
      }
    } catch (IllegalArgumentException e) {
      return Outcome.failed("the handler's result cannot be sent: " + e.getMessage(), false, null, outcome.seconds());
    } catch (BatonApiException e) {
      if (!refused(e)) {
        unreported(job, e);
        return null;
      }
      return Outcome.failed("the server refused the handler's result: " + e.summary(), false, null, outcome.seconds());
    } catch (BatonException e) {
      unreported(job, e);
      return null;
    }
    flusher.submit(item, answer -> completed(job, outcome, answer), error -> unreported(job, error));
    return null;
  }

  private void submitFailure(Job job, Outcome outcome) {
    ObjectNode item =
        BatonClient.failure(
            job.id(), workerId, clip(outcome.error()), outcome.retryable(), outcome.nextRetryDelaySeconds(), job.attempt(),
            outcome.output());
    flusher.submit(item, answer -> failed(job, outcome, answer), error -> unreported(job, error));
  }

  private void fail(Job job, Outcome outcome) {
    try {
      JsonNode answer =
          client.failJob(
              job.id(), workerId, clip(outcome.error()), outcome.retryable(), outcome.nextRetryDelaySeconds(), job.attempt(),
              outcome.output(), reportRetry);
      noteFailed(job, outcome, answer.path("status").asText(null));
    } catch (BatonApiException e) {
      if (outcome.output() != null && refused(e)) { // e.g. a server that does not take it: not the failure
        log.warn("the server refused the failure with its output; sending it without: {}", e.summary());
        fail(job, outcome.withoutOutput());
      } else {
        unreported(job, e);
      }
    } catch (BatonException e) {
      unreported(job, e);
    }
  }

  private void completed(Job job, Outcome outcome, JsonNode answer) {
    String applied = answer.path("outcome").asText();
    if ((applied.equals("APPLIED") || applied.equals("DUPLICATE")) && !log.isDebugEnabled()) {
      return; // the common case, on the flush thread: nothing to log, no MDC to set
    }
    withMdc(job, () -> {
      String verdict = answer.path("outcome").asText();
      if (verdict.equals("APPLIED") || verdict.equals("DUPLICATE")) {
        noteCompleted(job, outcome);
      } else if (verdict.equals("INVALID")) { // refused for its content: fail the job, saying why
        submitFailure(job, Outcome.failed(
            "the server refused the handler's result: " + answer.path("error").asText(), false, null, outcome.seconds()));
      } else {
        gone(job, answer);
      }
    });
  }

  private void failed(Job job, Outcome outcome, JsonNode answer) {
    withMdc(job, () -> {
      String verdict = answer.path("outcome").asText();
      if (verdict.equals("APPLIED") || verdict.equals("DUPLICATE")) {
        noteFailed(job, outcome, answer.path("status").asText(null));
      } else if (verdict.equals("INVALID") && outcome.output() != null) { // not the failure: send it without
        log.warn("the server refused the failure with its output; sending it without: {}", answer.path("error").asText());
        submitFailure(job, outcome.withoutOutput());
      } else if (verdict.equals("INVALID")) {
        log.error("the server refused the job's outcome; it will be delivered again after its lease: {}", answer.path("error").asText());
      } else {
        gone(job, answer);
      }
    });
  }

  private void gone(Job job, JsonNode answer) {
    log.warn(
        "job {} is no longer this worker's (cancelled, or its lease expired and another worker took it); outcome discarded: {} {}",
        job.id(), answer.path("outcome").asText(), answer.path("error").asText(""));
  }

  private void noteCompleted(Job job, Outcome outcome) {
    log.debug("job completed in {} ms", Math.round(outcome.seconds() * 1000));
  }

  private void noteFailed(Job job, Outcome outcome, String status) {
    log.info("job failed (retryable: {}, status: {}): {}", outcome.retryable(), status, outcome.error());
  }

  private void unreported(Job job, BatonException error) {
    withMdc(job, () -> {
      if (error instanceof BatonApiException.Conflict || error instanceof BatonApiException.NotFound) {
        log.warn("job {} is no longer this worker's; outcome discarded: {}", job.id(), error.getMessage());
      } else {
        log.error("could not report the outcome of job {}; it will be delivered again after its lease: {}", job.id(), error.getMessage());
      }
    });
  }

  private static void withMdc(Job job, Runnable body) {
    Map<String, String> saved = MDC.getCopyOfContextMap();
    putMdc(job);
    try {
      body.run();
    } finally {
      if (saved == null) {
        MDC.clear();
      } else {
        MDC.setContextMap(saved);
      }
    }
  }

  // --- leases --------------------------------------------------------------------------------

  private Instant sendHeartbeat(String jobId) {
    Job job = active.get(jobId);
    Integer attempt = job == null ? null : job.attempt();
    JsonNode answer = client.heartbeat(jobId, workerId, attempt, RetryPolicy.NONE);
    Instant expires = parseInstant(answer.path("lockExpiresAt").asText(null));
    if (job != null) {
      job.extended(expires);
    }
    return expires;
  }

  private Instant manualHeartbeat(Job job) {
    JsonNode answer;
    try {
      answer = client.heartbeat(job.id(), workerId, job.attempt(), reportRetry);
    } catch (BatonApiException.Conflict | BatonApiException.NotFound e) {
      leaseLost(job.id(), e);
      throw e;
    }
    Instant expires = parseInstant(answer.path("lockExpiresAt").asText(null));
    job.extended(expires);
    if (heartbeater != null && active.containsKey(job.id())) {
      heartbeater.track(job.id(), expires);
    }
    return expires;
  }

  private void leaseLost(String jobId, BatonException error) {
    if (heartbeater != null) {
      heartbeater.untrack(jobId);
    }
    Job job = active.get(jobId);
    if (job != null && job.loseLease()) {
      withMdc(job, () -> log.warn("lease lost; interrupting the handler: {}", error.getMessage()));
    }
  }

  // --- helpers -------------------------------------------------------------------------------

  /** A 4xx refusing the result for its content (not 401/403/404/409/429). */
  static boolean refused(BatonApiException e) {
    int s = e.status();
    return s >= 400 && s < 500 && s != 401 && s != 403 && s != 404 && s != 409 && s != 429;
  }

  static String describe(Throwable e) {
    String text = e.getMessage();
    String name = e.getClass().getSimpleName();
    return text == null || text.isEmpty() ? name : name + ": " + text;
  }

  static String clip(String message) {
    String m = message.replace("\0", "\\x00");
    return m.length() <= MAX_ERROR_MESSAGE ? m : m.substring(0, MAX_ERROR_MESSAGE - 3) + "...";
  }

  static Instant parseInstant(String text) {
    if (text != null) {
      Instant utc = UtcTimes.parse(text);
      if (utc != null) {
        return utc;
      }
      try {
        return Instant.parse(text);
      } catch (DateTimeParseException e) {
        try {
          return java.time.OffsetDateTime.parse(text).toInstant();
        } catch (DateTimeParseException e2) {
          // fall through
        }
      }
    }
    return Instant.now().plusSeconds(30); // only if a job came without a readable lease
  }
}
