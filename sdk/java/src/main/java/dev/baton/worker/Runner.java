package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Polls Baton for jobs and runs their handlers.
 *
 * <ol>
 *   <li>Reserve free slots (the parallelism semaphore, plus a small prefetch); poll for at most
 *       that many jobs. After an empty or short poll, once no job runs, the next poll is a
 *       long-poll ({@code longPollWait}): the server answers as soon as a job is claimable.
 *   <li>Run each job on a job thread; its lease is extended at half of each lease.
 *   <li>Report the outcome: results are gathered a few milliseconds and sent in one {@code POST
 *       /v1/jobs/complete-batch}, each with the attempt it ran.
 * </ol>
 *
 * <p>A failed poll (no connection, 429, 5xx) backs off with jitter and never stops the runner.
 * {@link #stop()} (or {@link #close()}, or SIGINT/SIGTERM under {@link #run()}) starts no poll
 * after it. A long-poll in flight is not dropped: the runner sends the worker's stop signal
 * ({@code POST /v1/workers/stop}) at once, on which the server ends that poll without claiming
 * again, and runs whatever the poll had already claimed (those jobs are leased to this worker).
 * Only if no answer comes within {@link #STOP_POLL_GRACE} is the poll aborted (a job it claimed
 * runs again once its lease lapses, as after a crash). With no poll in flight the signal is sent
 * once polling is over. The runner then waits for every in-flight job to finish and its result
 * to be sent, and returns.
 */
public final class Runner implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger("dev.baton.worker.runner");
  private static final long STOP_CHECK_MILLIS = 50;
  /** How long a stop waits for the answer of a long-poll in flight before aborting it. */
  public static final Duration STOP_POLL_GRACE = Duration.ofSeconds(3);
  private static final RetryPolicy STOP_SIGNAL_RETRY =
      RetryPolicy.builder()
          .initialInterval(Duration.ofMillis(100))
          .maximumAttempts(3)
          .maximumElapsed(Duration.ofSeconds(2))
          .build();

  private final Registry registry;
  private final BatonClient client;
  private final boolean ownsClient;
  private final RunnerOptions options;
  private final JobTransport transport; // null: Baton's own poll
  private final String workerId;
  private final Slots slots;
  private final ResultFlusher flusher;
  private final JobExecutor jobs;
  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicBoolean stopping = new AtomicBoolean();
  private final CountDownLatch stopSignal = new CountDownLatch(1);
  private final CountDownLatch stopped = new CountDownLatch(1);
  private volatile List<String> jobTypes = List.of();
  private ThreadPoolExecutor pool;
  private Thread poller;
  private boolean longPoll;
  private boolean stopSignalSent; // the poller's own

  private Runner(Builder b) {
    this.registry = Objects.requireNonNull(b.registry, "registry");
    this.options = b.options == null ? RunnerOptions.defaults() : b.options;
    this.ownsClient = b.client == null;
    this.client = b.client == null ? BatonClient.fromEnv() : b.client;
    this.transport = b.transport;
    this.workerId = options.workerId != null ? options.workerId : defaultWorkerId();
    this.slots = new Slots(options.parallelism + options.prefetched());
    this.flusher =
        options.batchResults
            ? new ResultFlusher(client, options.reportRetry, options.flushInterval.toNanos(), options.maxResultsPerFlush)
            : null;
    this.jobs =
        new JobExecutor(client, registry, workerId, options.reportRetry, stopping::get, options.autoHeartbeat, flusher);
    this.longPoll = !options.longPollWait.isZero();
  }

  public static Builder builder(Registry registry) {
    return new Builder(registry);
  }

  /** {@code <host>-<pid>}: unique per process, and says where a job ran. */
  public static String defaultWorkerId() {
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (UnknownHostException e) {
      host = "localhost";
    }
    return host + "-" + ProcessHandle.current().pid();
  }

  public String workerId() {
    return workerId;
  }

  /** The job types polled for (known once started). */
  public List<String> jobTypes() {
    return jobTypes;
  }

  public BatonClient client() {
    return client;
  }

  /** Jobs running, plus results handed over and not yet answered. */
  public int inFlight() {
    return jobs.inFlight() + (flusher == null ? 0 : flusher.waiting());
  }

  public boolean isRunning() {
    return started.get() && stopped.getCount() > 0;
  }

  /** Starts polling on a background thread and returns at once. A runner starts once. */
  public void start() {
    List<String> types = resolveJobTypes();
    if (!started.compareAndSet(false, true)) {
      throw new IllegalStateException("this runner was already started (a runner starts once)");
    }
    jobTypes = types;
    AtomicInteger n = new AtomicInteger();
    pool =
        new ThreadPoolExecutor(
            options.parallelism,
            options.parallelism,
            60,
            TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(),
            r -> new Thread(r, "baton-job-" + n.incrementAndGet()));
    if (flusher != null) {
      flusher.start();
    }
    poller = new Thread(this::serve, "baton-poller");
    poller.start();
    log.info(
        "runner started: worker {} polling {} for {} with {} slots",
        workerId, client.url(), types, options.parallelism);
  }

  /** Asks the runner to stop and returns at once: no more polls; in-flight jobs finish. */
  public void requestStop() {
    if (stopping.compareAndSet(false, true)) {
      stopSignal.countDown();
      slots.interrupt();
    }
  }

  /** Stops polling and waits for in-flight jobs to finish and their results to be sent. */
  public void stop() {
    stop(null);
  }

  /** As {@link #stop()}; false if {@code timeout} passed first (the runner goes on draining). */
  public boolean stop(Duration timeout) {
    requestStop();
    if (!started.get()) {
      return true;
    }
    return awaitTermination(timeout);
  }

  /** Same as {@link #stop()}. */
  @Override
  public void close() {
    stop();
  }

  /** Waits until the runner has stopped (null: no bound); false on timeout. */
  public boolean awaitTermination(Duration timeout) {
    try {
      if (timeout == null) {
        stopped.await();
        return true;
      }
      return stopped.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /**
   * Registers a JVM shutdown hook (SIGTERM, SIGINT, {@code System.exit}) that stops this runner
   * and waits for the drain before the JVM exits. Returns the hook's thread.
   */
  public Thread installShutdownHook() {
    Thread hook =
        new Thread(
            () -> {
              if (isRunning()) {
                log.info("stopping: no more polls; draining {} in-flight jobs", inFlight());
              }
              stop();
            },
            "baton-shutdown");
    Runtime.getRuntime().addShutdownHook(hook);
    return hook;
  }

  /** Starts, installs the shutdown hook, and blocks until the runner has stopped. */
  public void run() {
    installShutdownHook();
    start();
    awaitTermination(null);
  }

  private List<String> resolveJobTypes() {
    List<String> wanted =
        new ArrayList<>(new LinkedHashSet<>(options.jobTypes != null ? options.jobTypes : registry.jobTypes()));
    if (wanted.isEmpty()) {
      throw new IllegalStateException("no job types: register a handler first (or set jobTypes)");
    }
    List<String> missing = new ArrayList<>();
    for (String t : wanted) {
      if (registry.get(t) == null) {
        missing.add(t);
      }
    }
    if (!missing.isEmpty()) {
      throw new IllegalStateException("no handler registered for job type(s): " + String.join(", ", missing));
    }
    return List.copyOf(wanted);
  }

  // --- the poll loop -------------------------------------------------------------------------

  private void serve() {
    try {
      pollLoop();
    } catch (RuntimeException | Error e) {
      log.error("poll loop crashed; draining and stopping", e);
      requestStop();
    } finally {
      if (transport == null && !stopSignalSent) {
        // Polling is over: say so, so that whoever watches (the server's waits, a test, an
        // operator) knows this worker claims nothing more from here on.
        sendStopSignal();
      }
      drainAndClose();
    }
  }

  private void pause(Duration delay) {
    try {
      stopSignal.await(delay.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      requestStop();
    }
  }

  private void pollLoop() {
    Backoff idle = new Backoff(options.idleBackoff());
    Backoff errors = new Backoff(options.pollErrors);
    double wait = 0; // the first poll answers at once; one after an empty or short poll may wait
    while (!stopping.get()) {
      int wanted =
          slots.acquireUpTo(options.maxJobsPerPoll, options.gatherInterval.toNanos(), Math.max(1, options.maxJobsPerPoll / 2));
      if (wanted == 0) {
        break;
      }
      if (stopping.get()) {
        slots.release(wanted);
        break;
      }
      long started = System.nanoTime();
      List<JsonNode> polled;
      try {
        polled = transport == null ? poll(wanted, wait) : transport.fetch(workerId, jobTypes, wanted);
      } catch (RuntimeException error) {
        slots.release(wanted);
        if (wait > 0 && PollErrors.refusesWait(error)) {
          log.warn("the server does not take waitSeconds; polling short: {}", error.getMessage());
          longPoll = false;
          wait = 0;
          continue;
        }
        Duration delay = errors.nextDelay();
        if (error instanceof BatonApiException && ((BatonApiException) error).retryAfter() != null) {
          Duration hinted = ((BatonApiException) error).retryAfter();
          Duration max = options.pollErrors.maximumInterval();
          delay = hinted.compareTo(delay) > 0 ? (hinted.compareTo(max) < 0 ? hinted : max) : delay;
        }
        PollErrors.log(log, error, delay);
        pause(delay);
        continue;
      }
      errors.reset();
      if (polled.size() < wanted) {
        slots.release(wanted - polled.size());
      }
      for (JsonNode job : polled) { // also at stop: these jobs are leased to this worker
        dispatch(job);
      }
      if (stopping.get()) {
        break;
      }
      if (transport == null && longPoll) {
        wait = nextWait(polled.size(), wanted, wait, (System.nanoTime() - started) / 1e9, idle);
        continue;
      }
      if (transport != null && transport.waits()) {
        continue;
      }
      if (polled.isEmpty()) {
        pause(idle.nextDelay());
        continue;
      }
      idle.reset();
      if (polled.size() < wanted) {
        pause(options.pollInterval);
      }
    }
  }

  /**
   * After a poll with long-poll on: a full batch polls again at once; otherwise the next poll
   * long-polls, but only once no job is in flight (a long-poll outlives a worker that crashes, on
   * the server, where it may still claim a job nobody will run).
   */
  private double nextWait(int got, int wanted, double wait, double took, Backoff idle) {
    if (got >= wanted) {
      idle.reset();
      return 0;
    }
    if (got > 0) {
      idle.reset();
    } else if (wait > 0 && took < wait / 2) {
      pause(idle.nextDelay()); // an empty long-poll that did not wait: back off, do not spin
    }
    double longWait = RetryPolicy.seconds(options.longPollWait);
    if (slots.inUse() == 0) {
      return longWait;
    }
    if (slots.awaitIdle(idle.nextDelay().toNanos()) && !stopping.get()) {
      return longWait;
    }
    return 0;
  }

  /**
   * Polls for up to {@code wanted} jobs, waiting up to {@code wait} seconds on the server. A
   * long-poll is sent on another thread, watched for a stop: see {@link #finishPollAtStop}.
   */
  private List<JsonNode> poll(int wanted, double wait) {
    if (wait <= 0) {
      return client.pollJobs(workerId, jobTypes, wanted, 0, RetryPolicy.NONE);
    }
    CompletableFuture<HttpWire.Answer> future = client.pollAsync(workerId, jobTypes, wanted, wait);
    while (true) {
      try {
        return pollAnswer(future.get(STOP_CHECK_MILLIS, TimeUnit.MILLISECONDS));
      } catch (TimeoutException e) {
        if (stopping.get()) {
          return finishPollAtStop(future);
        }
      } catch (ExecutionException e) {
        throw client.http.transportError(e.getCause() == null ? e : e.getCause());
      } catch (InterruptedException e) { // the poller thread interrupted: no wait is possible
        Thread.currentThread().interrupt();
        requestStop();
        future.cancel(true);
        return List.of();
      }
    }
  }

  private List<JsonNode> pollAnswer(HttpWire.Answer response) {
    return BatonClient.jobs(client.http.decode("POST", "/v1/jobs/poll", response));
  }

  /**
   * A stop came while a long-poll waits on the server. The server may already have claimed jobs
   * for it (and be sending them): those are leased to this worker, so they must run, not be
   * dropped. The stop signal makes the server end the wait without claiming again; the answer,
   * with whatever it had claimed, is then taken and its jobs run in the drain. Only without an
   * answer within {@link #STOP_POLL_GRACE} is the poll aborted.
   */
  private List<JsonNode> finishPollAtStop(CompletableFuture<HttpWire.Answer> future) {
    long deadline = System.nanoTime() + STOP_POLL_GRACE.toNanos();
    sendStopSignal();
    try {
      List<JsonNode> claimed = pollAnswer(future.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
      if (!claimed.isEmpty()) {
        log.info("the long-poll in flight at stop claimed {} job(s); they run before the runner stops", claimed.size());
      }
      return claimed;
    } catch (TimeoutException e) {
      future.cancel(true);
      log.warn(
          "worker {}: the long-poll in flight at stop did not answer within {} s; aborted it (a job it had claimed "
              + "runs again once its lease lapses)",
          workerId, STOP_POLL_GRACE.toSeconds());
    } catch (ExecutionException | BatonException e) { // the poll failed: it claimed nothing
      Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
      log.debug("the long-poll in flight at stop failed: {}", cause.toString());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      future.cancel(true);
    }
    return List.of();
  }

  private void sendStopSignal() {
    stopSignalSent = true;
    try {
      client.stopWorker(workerId, STOP_SIGNAL_RETRY, Duration.ofSeconds(2));
    } catch (BatonApiException e) {
      if (e.status() == 404 || e.status() == 405) {
        log.debug("stop signal not sent: {}", e.getMessage());
      } else {
        log.warn("stop signal not sent: {}", e.getMessage());
      }
    } catch (RuntimeException e) {
      log.warn("stop signal not sent: {}", e.getMessage());
    }
  }

  private void dispatch(JsonNode job) {
    try {
      pool.execute(() -> execute(job));
    } catch (RuntimeException e) {
      slots.release(1);
      throw e;
    }
  }

  private void execute(JsonNode job) {
    try {
      jobs.run(job);
    } catch (RuntimeException | Error e) { // run() reports everything it expects; this is a bug
      log.error("job execution crashed: {}", job.path("id").asText(), e);
    } finally {
      slots.release(1);
    }
  }

  private void drainAndClose() {
    long timeout = options.drainTimeout == null ? -1 : options.drainTimeout.toNanos();
    int inFlight = slots.inUse(); // polling is over: every slot held is a dispatched job
    if (inFlight > 0) {
      log.info("draining {} in-flight jobs", inFlight);
    }
    boolean drained = slots.awaitIdle(timeout);
    if (!drained) {
      log.warn("drain timed out; unfinished jobs will be delivered again after their leases ({} in flight)", inFlight());
    }
    pool.shutdown();
    if (flusher != null && !flusher.close(timeout)) {
      log.warn("results still unflushed at stop; their jobs will be delivered again ({})", flusher.waiting());
    }
    if (jobs.heartbeater != null && drained) {
      jobs.heartbeater.stop();
    }
    if (transport != null) {
      try {
        transport.close();
      } catch (RuntimeException e) {
        log.warn("closing the transport failed: {}", e.getMessage());
      }
    }
    if (ownsClient && drained) {
      client.close();
    }
    log.info("runner stopped");
    stopped.countDown();
  }

  /** Builds a {@link Runner}. */
  public static final class Builder {
    private final Registry registry;
    private BatonClient client;
    private RunnerOptions options;
    private JobTransport transport;

    private Builder(Registry registry) {
      this.registry = registry;
    }

    /** The client (default: {@link BatonClient#fromEnv()}, closed with the runner). */
    public Builder client(BatonClient client) {
      this.client = client;
      return this;
    }

    public Builder options(RunnerOptions options) {
      this.options = options;
      return this;
    }

    /** Jobs from another transport than Baton's poll, e.g. {@link SqsTransport}. */
    public Builder transport(JobTransport transport) {
      this.transport = transport;
      return this;
    }

    public Runner build() {
      return new Runner(this);
    }
  }
}
