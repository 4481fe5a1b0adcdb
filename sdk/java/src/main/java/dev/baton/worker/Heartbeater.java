package dev.baton.worker;

import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Automatic heartbeats: extends the lease of every tracked job at half of what remains of it.
 *
 * <p>The lease's end is the server's {@code lockExpiresAt}; a server clock far off from ours only
 * makes heartbeats early (never late), with a floor of {@link #MIN_INTERVAL}. A failed heartbeat
 * (no answer, 429, 5xx) is tried again after a quarter of what remains; a 404 or 409 means the
 * lease is lost: the job is untracked and {@code onLost} called (which interrupts the handler).
 */
final class Heartbeater {
  private static final Logger log = LoggerFactory.getLogger("dev.baton.worker.heartbeat");
  static final Duration MIN_INTERVAL = Duration.ofMillis(100);
  private static final double RETRY_SHARE = 0.25;

  private final Function<String, Instant> send;
  private final BiConsumer<String, BatonException> onLost;
  private final ScheduledExecutorService timer;
  private final ConcurrentHashMap<String, Tracked> tracked = new ConcurrentHashMap<>();

  /** One tracked lease; a new one replaces it at every extension, so stale runs are ignored. */
  private static final class Tracked {
    final Instant expires;
    volatile ScheduledFuture<?> future;

    Tracked(Instant expires) {
      this.expires = expires;
    }
  }

  Heartbeater(Function<String, Instant> send, BiConsumer<String, BatonException> onLost) {
    this.send = send;
    this.onLost = onLost;
    ScheduledThreadPoolExecutor executor =
        new ScheduledThreadPoolExecutor(
            2,
            r -> {
              Thread t = new Thread(r, "baton-heartbeat");
              t.setDaemon(true);
              return t;
            });
    // Most jobs end long before their first heartbeat: drop a cancelled one from the queue at
    // once rather than keep it until its time (thousands of them at a high job rate).
    executor.setRemoveOnCancelPolicy(true);
    this.timer = executor;
  }

  static Duration nextIn(Duration remaining) {
    Duration half = remaining.dividedBy(2);
    return half.compareTo(MIN_INTERVAL) < 0 ? MIN_INTERVAL : half;
  }

  /** Heartbeats {@code jobId} at half of its lease, which now ends at {@code expires}. */
  void track(String jobId, Instant expires) {
    Tracked t = new Tracked(expires);
    Tracked previous = tracked.put(jobId, t);
    if (previous != null && previous.future != null) {
      previous.future.cancel(false);
    }
    schedule(jobId, t, nextIn(Duration.between(Instant.now(), expires)));
  }

  /** Re-times a lease still tracked as {@code old} (not if it was untracked or re-timed since). */
  private void replace(String jobId, Tracked old, Tracked t, Duration delay) {
    if (tracked.replace(jobId, old, t)) {
      schedule(jobId, t, delay);
    }
  }

  private void schedule(String jobId, Tracked t, Duration delay) {
    try {
      t.future = timer.schedule(() -> beat(jobId, t), delay.toNanos(), TimeUnit.NANOSECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      tracked.remove(jobId, t); // stopped
    }
  }

  /** Stops heartbeating {@code jobId} (its outcome is reported, or its lease lost). */
  void untrack(String jobId) {
    Tracked t = tracked.remove(jobId);
    if (t != null && t.future != null) {
      t.future.cancel(false);
    }
  }

  int trackedCount() {
    return tracked.size();
  }

  private void beat(String jobId, Tracked t) {
    if (tracked.get(jobId) != t) {
      return; // untracked or re-timed since
    }
    try {
      Instant expires = send.apply(jobId);
      replace(jobId, t, new Tracked(expires), nextIn(Duration.between(Instant.now(), expires)));
    } catch (BatonApiException e) {
      if (e.isTransient()) {
        retrySoon(jobId, t, e);
      } else if (tracked.remove(jobId, t)) { // 404/409: completed, cancelled or taken over
        onLost.accept(jobId, e);
      }
    } catch (RuntimeException e) { // no answer at all (or a bug): the other jobs go on
      retrySoon(jobId, t, e);
    }
  }

  private void retrySoon(String jobId, Tracked t, RuntimeException error) {
    if (tracked.get(jobId) != t) {
      return;
    }
    Duration remaining = Duration.between(Instant.now(), t.expires);
    Duration delay = Duration.ofNanos((long) (remaining.toNanos() * RETRY_SHARE));
    if (delay.compareTo(MIN_INTERVAL) < 0) {
      delay = MIN_INTERVAL;
    }
    log.warn("heartbeat of job {} failed; retrying in {} ms: {}", jobId, delay.toMillis(), error.getMessage());
    replace(jobId, t, new Tracked(t.expires), delay);
  }

  void stop() {
    timer.shutdownNow();
    tracked.clear();
  }
}
