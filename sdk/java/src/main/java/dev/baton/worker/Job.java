package dev.baton.worker;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Instant;
import java.util.Collections;
import java.util.Map;
import java.util.function.BooleanSupplier;
import java.util.function.Function;

/**
 * One claimed job, as its handler sees it: its ids, {@link #attempt()}, {@link
 * #retriesRemaining()}, its {@link #input()} (an offloaded input is already downloaded), and a
 * {@link #logger()} whose lines carry the job's ids as key-value pairs ({@code job_id}, {@code
 * job_type}, {@code instance_id}, {@code step_id}, {@code attempt}, {@code worker_id}); while the
 * handler runs the runner also puts them in the SLF4J MDC, for any other logger.
 *
 * <p>The runner extends the lease at half of each lease on its own. When the lease is lost (the job
 * was cancelled, or another worker took it after a lapse) the handler's thread is interrupted and
 * {@link #isLeaseLost()} turns true: its result would be refused, so a long handler should stop.
 */
public final class Job {
  private final JsonNode raw;
  private final JsonNode input;
  private final String workerId;
  private final BooleanSupplier shuttingDown;
  private final Function<Job, Instant> heartbeat;
  private volatile Instant lockExpiresAt;
  private volatile boolean leaseLost;
  private Thread handlerThread; // guarded by this
  private JobLogger logger;

  Job(
      JsonNode raw,
      JsonNode input,
      String workerId,
      Instant lockExpiresAt,
      BooleanSupplier shuttingDown,
      Function<Job, Instant> heartbeat) {
    this.raw = raw;
    this.input = input == null || input.isNull() ? ApiHttp.JSON.createObjectNode() : input;
    this.workerId = workerId;
    this.lockExpiresAt = lockExpiresAt;
    this.shuttingDown = shuttingDown;
    this.heartbeat = heartbeat;
  }

  public String id() {
    return raw.path("id").asText();
  }

  public String jobType() {
    return raw.path("jobType").asText();
  }

  public String instanceId() {
    return raw.path("instanceId").asText();
  }

  public String stepId() {
    return raw.path("stepId").asText();
  }

  public String stepExecutionId() {
    return raw.path("stepExecutionId").asText();
  }

  /** 1 for the first delivery of this step's job, 2 after one retry, and so on. */
  public int attempt() {
    return raw.path("attempt").asInt(1);
  }

  /** How many retries the step has left after this attempt (0: this is the last). */
  public int retriesRemaining() {
    return raw.path("retriesRemaining").asInt(0);
  }

  /** The worker id this runner polls with. */
  public String workerId() {
    return workerId;
  }

  /** The job's input as Java values (maps, lists, strings, numbers, booleans, null). */
  @SuppressWarnings("unchecked")
  public Map<String, Object> input() {
    if (!input.isObject()) {
      return Map.of("value", ApiHttp.JSON.convertValue(input, Object.class));
    }
    try { // read from the tree itself, not serialised and parsed again as convertValue does
      return Collections.unmodifiableMap(ApiHttp.JSON.treeToValue(input, Map.class));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("the job's input cannot be read as a map: " + e.getOriginalMessage(), e);
    }
  }

  /** The job's input as a Jackson tree. */
  public JsonNode inputJson() {
    return input.deepCopy();
  }

  /** The job's input bound to a class (a record, a POJO) with Jackson. */
  public <T> T inputAs(Class<T> type) {
    return ApiHttp.JSON.convertValue(input, type);
  }

  /** The job as the server sent it (proto3 JSON of {@code workflow.v1.Job}). */
  public ObjectNode raw() {
    return (ObjectNode) raw.deepCopy();
  }

  /** A logger whose lines carry the job's ids (see {@link JobLogger}). */
  public synchronized JobLogger logger() {
    if (logger == null) {
      logger = JobLogger.of(this);
    }
    return logger;
  }

  /** When the lease ends unless extended (the runner extends it on its own). */
  public Instant lockExpiresAt() {
    return lockExpiresAt;
  }

  /** True once the lease is lost: the result would be refused, stop working on it. */
  public boolean isLeaseLost() {
    return leaseLost;
  }

  /** True once the runner is asked to stop: a long handler may finish early. */
  public boolean isShuttingDown() {
    return shuttingDown.getAsBoolean();
  }

  /**
   * Extends the lease now (the runner also does so at half of each lease); its new end. Throws a
   * {@link BatonApiException.Conflict} or {@link BatonApiException.NotFound} once it is lost.
   */
  public Instant heartbeat() {
    return heartbeat.apply(this);
  }

  void extended(Instant expires) {
    lockExpiresAt = expires;
  }

  synchronized void enter() {
    handlerThread = Thread.currentThread();
  }

  /** The handler returned: no interrupt reaches its thread from now on. */
  synchronized void exit() {
    handlerThread = null;
    Thread.interrupted(); // an interrupt meant for the handler must not break the report
  }

  /** Marks the lease lost and interrupts the handler; false if it was already. */
  synchronized boolean loseLease() {
    if (leaseLost) {
      return false;
    }
    leaseLost = true;
    if (handlerThread != null) {
      handlerThread.interrupt();
    }
    return true;
  }

  @Override
  public String toString() {
    return "Job(" + jobType() + " " + id() + " attempt " + attempt() + ")";
  }
}
