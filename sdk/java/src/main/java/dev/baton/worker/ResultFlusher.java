package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Results reported in batches: a job thread hands its result over and takes the next job; one
 * thread sends what has gathered with {@code POST /v1/jobs/complete-batch} every {@code interval}
 * (a few milliseconds), at once when {@code maxBatch} results (or {@code maxBytes} of them) wait,
 * and whatever is left at close.
 *
 * <p>A failed flush is sent again, the same items, per the report retry policy: a result the
 * server already applied answers DUPLICATE, so none is applied twice. A body refused whole (400,
 * 413, 422) is sent again item by item so the bad one is answered alone; a server without the
 * batch route (404/405) gets each result on its own from then on.
 */
final class ResultFlusher {
  private static final Logger log = LoggerFactory.getLogger("dev.baton.worker.runner");
  static final int MAX_BATCH = 100;
  static final long MAX_BYTES = 1_000_000;

  /** One result waiting for its flush and what to do with its answer. */
  private static final class Pending {
    final ObjectNode item;
    final int size;
    final Consumer<JsonNode> onAnswer;
    final Consumer<BatonException> onUnreported;

    Pending(ObjectNode item, int size, Consumer<JsonNode> onAnswer, Consumer<BatonException> onUnreported) {
      this.item = item;
      this.size = size;
      this.onAnswer = onAnswer;
      this.onUnreported = onUnreported;
    }
  }

  private final BatonClient client;
  private final RetryPolicy retry;
  private final long intervalNanos;
  private final int maxBatch;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private final List<Pending> pending = new ArrayList<>();
  private final Thread thread;
  private long bytes;
  private int inFlight;
  private boolean closing;
  private volatile boolean batchSupported = true;

  ResultFlusher(BatonClient client, RetryPolicy retry, long intervalNanos, int maxBatch) {
    if (maxBatch < 1 || maxBatch > MAX_BATCH) {
      throw new IllegalArgumentException("maxResultsPerFlush must be between 1 and " + MAX_BATCH);
    }
    this.client = client;
    this.retry = retry;
    this.intervalNanos = intervalNanos;
    this.maxBatch = maxBatch;
    this.thread = new Thread(this::run, "baton-results");
    this.thread.setDaemon(true);
  }

  void start() {
    thread.start();
  }

  /** Results handed over and not yet answered. */
  int waiting() {
    lock.lock();
    try {
      return pending.size() + inFlight;
    } finally {
      lock.unlock();
    }
  }

  void submit(ObjectNode item, Consumer<JsonNode> onAnswer, Consumer<BatonException> onUnreported) {
    int size = ApiHttp.encode(item).length;
    lock.lock();
    try {
      if (closing && !thread.isAlive()) { // a handler that outlived the drain timeout
        call(onUnreported, new BatonException("the runner stopped before this result could be sent"));
        return;
      }
      pending.add(new Pending(item, size, onAnswer, onUnreported));
      bytes += size;
      // The flush thread waits for a first result, then for the window or a full batch: wake it
      // for those only, not once per result.
      if (pending.size() == 1 || full()) {
        changed.signalAll();
      }
    } finally {
      lock.unlock();
    }
  }

  /** Flushes what is left and stops; false if {@code timeoutNanos} (negative: none) passed first. */
  boolean close(long timeoutNanos) {
    lock.lock();
    try {
      closing = true;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
    try {
      if (timeoutNanos < 0) {
        thread.join();
      } else {
        TimeUnit.NANOSECONDS.timedJoin(thread, timeoutNanos);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return !thread.isAlive();
  }

  private void run() {
    while (true) {
      List<Pending> batch = nextBatch();
      if (batch == null) {
        return;
      }
      try {
        send(batch);
      } catch (RuntimeException e) {
        log.error("result flush crashed", e);
      } finally {
        lock.lock();
        try {
          inFlight -= batch.size();
          changed.signalAll();
        } finally {
          lock.unlock();
        }
      }
    }
  }

  private boolean full() {
    return pending.size() >= maxBatch || bytes >= MAX_BYTES;
  }

  private List<Pending> nextBatch() {
    lock.lock();
    try {
      while (pending.isEmpty()) {
        if (closing) {
          return null;
        }
        changed.awaitUninterruptibly();
      }
      long left = intervalNanos;
      while (!full() && !closing && left > 0) {
        try {
          left = changed.awaitNanos(left);
        } catch (InterruptedException e) {
          break;
        }
      }
      List<Pending> batch = new ArrayList<>();
      long size = 0;
      for (Pending p : pending) {
        if (!batch.isEmpty() && (batch.size() >= maxBatch || size + p.size > MAX_BYTES)) {
          break;
        }
        batch.add(p);
        size += p.size;
      }
      pending.subList(0, batch.size()).clear();
      bytes -= size;
      inFlight += batch.size();
      return batch;
    } finally {
      lock.unlock();
    }
  }

  private void send(List<Pending> batch) {
    if (batchSupported) {
      List<ObjectNode> items = new ArrayList<>();
      batch.forEach(p -> items.add(p.item));
      try {
        List<JsonNode> answers = client.completeBatch(items, retry);
        for (int i = 0; i < batch.size() && i < answers.size(); i++) {
          call(batch.get(i).onAnswer, answers.get(i));
        }
        return;
      } catch (BatonApiException e) {
        int status = e.status();
        if ((status == 400 || status == 413 || status == 422) && batch.size() > 1) {
          log.warn("a batch of results was refused whole; sending them one by one: {}", e.getMessage());
          batch.forEach(this::sendOne);
          return;
        }
        if (status != 404 && status != 405) {
          batch.forEach(p -> call(p.onUnreported, e));
          return;
        }
        log.warn("the server has no batch completion; reporting results one by one");
        batchSupported = false;
      } catch (BatonException e) { // no answer, even after the retries
        batch.forEach(p -> call(p.onUnreported, e));
        return;
      }
    }
    batch.forEach(this::sendOne);
  }

  private void sendOne(Pending p) {
    ObjectNode item = p.item;
    String jobId = item.path("jobId").asText();
    JsonNode done;
    try {
      if (item.has("failure")) {
        JsonNode f = item.get("failure");
        done =
            client.failJob(
                jobId,
                item.path("workerId").asText(),
                f.path("errorMessage").asText(),
                f.path("retryable").asBoolean(true),
                f.hasNonNull("nextRetryDelaySeconds") ? f.get("nextRetryDelaySeconds").asDouble() : null,
                item.hasNonNull("attempt") ? item.get("attempt").asInt() : null,
                f.get("output"),
                retry);
      } else {
        done = client.sendCompletion(item, retry);
      }
    } catch (BatonApiException e) {
      String outcome = e.status() == 404 ? "NOT_FOUND" : e.status() == 409 ? "CONFLICT" : null;
      if (outcome == null && !e.isTransient() && e.status() >= 400 && e.status() < 500
          && e.status() != 401 && e.status() != 403) {
        outcome = "INVALID";
      }
      if (outcome == null) {
        call(p.onUnreported, e);
      } else {
        ObjectNode answer = ApiHttp.JSON.createObjectNode();
        answer.put("jobId", jobId).put("outcome", outcome).put("error", e.summary());
        call(p.onAnswer, answer);
      }
      return;
    } catch (BatonException e) {
      call(p.onUnreported, e);
      return;
    }
    ObjectNode answer = ApiHttp.JSON.createObjectNode();
    answer.put("jobId", jobId).put("outcome", done.path("applied").asBoolean() ? "APPLIED" : "DUPLICATE");
    if (done.hasNonNull("status")) {
      answer.set("status", done.get("status"));
    }
    call(p.onAnswer, answer);
  }

  private static <T> void call(Consumer<T> fn, T arg) {
    try {
      fn.accept(arg);
    } catch (RuntimeException e) {
      log.error("result callback failed", e);
    }
  }
}
