package dev.baton.worker;

import java.time.Duration;
import java.util.List;

/**
 * How a {@link Runner} polls and runs jobs; build with {@link #builder()}.
 *
 * <ul>
 *   <li>{@code workerId}: default {@code <host>-<pid>}. {@code jobTypes}: default every type
 *       registered.
 *   <li>{@code parallelism} (8): jobs running at once. A poll never asks for more jobs than there
 *       are free slots (the running and the prefetched ones), nor more than {@code
 *       maxJobsPerPoll} (default 100, the API's most, as in the Go and TypeScript SDKs): one poll
 *       can fill every free slot. Fewer, larger polls cost the server less per job.
 *   <li>{@code prefetch} (default {@code min(parallelism, maxJobsPerPoll)}): jobs claimed beyond
 *       those running, so the next poll overlaps the work; their leases run while they wait.
 *   <li>{@code longPollWait} (10 s; 0 to 20; 0: short polling): how long the server may hold a
 *       poll that follows an empty or short one. A stop ends a waiting one with the
 *       worker's stop signal and runs what it had claimed (see {@link Runner}).
 *   <li>{@code pollInterval}/{@code maxPollInterval} (0.5 s / 2 s): the pause after an empty
 *       short poll, doubling. {@code pollErrors}: the backoff after a failed poll (never gives
 *       up). {@code reportRetry}: the retries of a result's report.
 *   <li>{@code batchResults} (on): results go out in batches ({@code POST
 *       /v1/jobs/complete-batch}) every {@code flushInterval} (5 ms) or at {@code
 *       maxResultsPerFlush} (100, the server's most per call): the window, not the size, bounds
 *       a batch at low rates.
 *   <li>{@code autoHeartbeat} (on): extends the lease of a running job at half of its lease.
 *   <li>{@code drainTimeout} (none): the bound on the wait for in-flight jobs at stop.
 *   <li>{@code gatherInterval} (10 ms; 0 to 1 s): while jobs run, how long a poll may wait for
 *       more slots to free (up to half of {@code maxJobsPerPoll}, or all of them) so one poll
 *       asks for several jobs.
 * </ul>
 */
public final class RunnerOptions {
  final String workerId;
  final List<String> jobTypes;
  final int parallelism;
  final int maxJobsPerPoll;
  final Duration pollInterval;
  final Duration maxPollInterval;
  final RetryPolicy pollErrors;
  final RetryPolicy reportRetry;
  final boolean autoHeartbeat;
  final Duration drainTimeout;
  final boolean batchResults;
  final Duration flushInterval;
  final int maxResultsPerFlush;
  final Integer prefetch;
  final Duration longPollWait;
  final Duration gatherInterval;

  private RunnerOptions(Builder b) {
    if (b.parallelism < 1) {
      throw new IllegalArgumentException("parallelism must be at least 1");
    }
    int maxJobsPerPoll = b.maxJobsPerPoll != null ? b.maxJobsPerPoll : 100;
    if (maxJobsPerPoll < 1 || maxJobsPerPoll > 100) {
      throw new IllegalArgumentException("maxJobsPerPoll must be between 1 and 100");
    }
    double wait = RetryPolicy.seconds(b.longPollWait);
    if (wait < 0 || wait > BatonClient.MAX_LONG_POLL_SECONDS) {
      throw new IllegalArgumentException("longPollWait must be between 0 and 20 seconds");
    }
    if (b.pollInterval.isZero() || b.pollInterval.isNegative()) {
      throw new IllegalArgumentException("pollInterval must be positive");
    }
    if (b.maxPollInterval.compareTo(b.pollInterval) < 0) {
      throw new IllegalArgumentException("maxPollInterval must be at least pollInterval");
    }
    if (b.workerId != null && (b.workerId.isEmpty() || b.workerId.length() > 256)) {
      throw new IllegalArgumentException("workerId must be 1 to 256 characters");
    }
    if (b.maxResultsPerFlush < 1 || b.maxResultsPerFlush > ResultFlusher.MAX_BATCH) {
      throw new IllegalArgumentException("maxResultsPerFlush must be between 1 and 100");
    }
    if (b.flushInterval.isZero() || b.flushInterval.isNegative() || b.flushInterval.compareTo(Duration.ofSeconds(1)) > 0) {
      throw new IllegalArgumentException("flushInterval must be more than 0 and at most 1 second");
    }
    if (b.prefetch != null && b.prefetch < 0) {
      throw new IllegalArgumentException("prefetch must be 0 or more");
    }
    if (b.gatherInterval.isNegative() || b.gatherInterval.compareTo(Duration.ofSeconds(1)) > 0) {
      throw new IllegalArgumentException("gatherInterval must be between 0 and 1 second");
    }
    this.workerId = b.workerId;
    this.jobTypes = b.jobTypes == null ? null : List.copyOf(b.jobTypes);
    this.parallelism = b.parallelism;
    this.maxJobsPerPoll = maxJobsPerPoll;
    this.pollInterval = b.pollInterval;
    this.maxPollInterval = b.maxPollInterval;
    this.pollErrors = b.pollErrors;
    this.reportRetry = b.reportRetry;
    this.autoHeartbeat = b.autoHeartbeat;
    this.drainTimeout = b.drainTimeout;
    this.batchResults = b.batchResults;
    this.flushInterval = b.flushInterval;
    this.maxResultsPerFlush = b.maxResultsPerFlush;
    this.prefetch = b.prefetch;
    this.longPollWait = b.longPollWait;
    this.gatherInterval = b.gatherInterval;
  }

  public static Builder builder() {
    return new Builder();
  }

  public static RunnerOptions defaults() {
    return builder().build();
  }

  /** Jobs claimed beyond those running. */
  int prefetched() {
    return prefetch != null ? prefetch : Math.min(parallelism, maxJobsPerPoll);
  }

  RetryPolicy idleBackoff() {
    return RetryPolicy.builder()
        .initialInterval(pollInterval)
        .maximumInterval(maxPollInterval)
        .maximumAttempts(0)
        .jitter(0.2)
        .build();
  }

  /** Builds {@link RunnerOptions}. */
  public static final class Builder {
    private String workerId;
    private List<String> jobTypes;
    private int parallelism = 8;
    private Integer maxJobsPerPoll;
    private Duration pollInterval = Duration.ofMillis(500);
    private Duration maxPollInterval = Duration.ofSeconds(2);
    private RetryPolicy pollErrors =
        RetryPolicy.builder()
            .initialInterval(Duration.ofMillis(500))
            .maximumInterval(Duration.ofSeconds(30))
            .maximumAttempts(0)
            .build();
    private RetryPolicy reportRetry =
        RetryPolicy.builder()
            .initialInterval(Duration.ofMillis(200))
            .maximumInterval(Duration.ofSeconds(5))
            .maximumAttempts(0)
            .maximumElapsed(Duration.ofMinutes(5))
            .build();
    private boolean autoHeartbeat = true;
    private Duration drainTimeout;
    private boolean batchResults = true;
    private Duration flushInterval = Duration.ofMillis(5);
    private int maxResultsPerFlush = 100;
    private Integer prefetch;
    private Duration longPollWait = Duration.ofSeconds(10);
    private Duration gatherInterval = Duration.ofMillis(10);

    private Builder() {}

    public Builder workerId(String value) {
      this.workerId = value;
      return this;
    }

    public Builder jobTypes(List<String> value) {
      this.jobTypes = value;
      return this;
    }

    public Builder parallelism(int value) {
      this.parallelism = value;
      return this;
    }

    public Builder maxJobsPerPoll(int value) {
      this.maxJobsPerPoll = value;
      return this;
    }

    public Builder pollInterval(Duration value) {
      this.pollInterval = value;
      return this;
    }

    public Builder maxPollInterval(Duration value) {
      this.maxPollInterval = value;
      return this;
    }

    public Builder pollErrors(RetryPolicy value) {
      this.pollErrors = value;
      return this;
    }

    public Builder reportRetry(RetryPolicy value) {
      this.reportRetry = value;
      return this;
    }

    public Builder autoHeartbeat(boolean value) {
      this.autoHeartbeat = value;
      return this;
    }

    public Builder drainTimeout(Duration value) {
      this.drainTimeout = value;
      return this;
    }

    public Builder batchResults(boolean value) {
      this.batchResults = value;
      return this;
    }

    public Builder flushInterval(Duration value) {
      this.flushInterval = value;
      return this;
    }

    public Builder maxResultsPerFlush(int value) {
      this.maxResultsPerFlush = value;
      return this;
    }

    public Builder prefetch(int value) {
      this.prefetch = value;
      return this;
    }

    public Builder longPollWait(Duration value) {
      this.longPollWait = value;
      return this;
    }

    public Builder gatherInterval(Duration value) {
      this.gatherInterval = value;
      return this;
    }

    public RunnerOptions build() {
      return new RunnerOptions(this);
    }
  }
}
