package baton

import (
	"fmt"
	"log/slog"
	"os"
	"time"
)

// maxJobsPerPoll is the API's limit on jobs per poll.
const maxJobsPerPoll = 100

// runnerOptions are a [Runner]'s settings; see each RunnerOption for its default.
type runnerOptions struct {
	workerID           string
	jobTypes           []string
	parallelism        int
	maxJobsPerPoll     int
	pollInterval       time.Duration
	maxPollInterval    time.Duration
	longPollWait       time.Duration
	gatherInterval     time.Duration
	prefetch           int // -1: min(parallelism, maxJobsPerPoll)
	batchResults       bool
	flushInterval      time.Duration
	maxResultsPerFlush int
	autoHeartbeat      bool
	drainTimeout       time.Duration // negative: wait for every handler
	pollErrors         RetryPolicy
	reportRetry        RetryPolicy
	logger             *slog.Logger
	transport          Transport
	metrics            Metrics
}

func defaultRunnerOptions() runnerOptions {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	return runnerOptions{
		workerID:           fmt.Sprintf("%s-%d", host, os.Getpid()),
		parallelism:        8,
		maxJobsPerPoll:     maxJobsPerPoll,
		pollInterval:       500 * time.Millisecond,
		maxPollInterval:    2 * time.Second,
		longPollWait:       10 * time.Second,
		gatherInterval:     10 * time.Millisecond,
		prefetch:           -1,
		batchResults:       true,
		flushInterval:      5 * time.Millisecond,
		maxResultsPerFlush: maxBatch,
		autoHeartbeat:      true,
		drainTimeout:       -1,
		pollErrors:         RetryPolicy{InitialInterval: 500 * time.Millisecond, Coefficient: 2, MaxInterval: 30 * time.Second, Jitter: 0.5},
		reportRetry:        RetryPolicy{InitialInterval: 200 * time.Millisecond, Coefficient: 2, MaxInterval: 5 * time.Second, MaxElapsed: 5 * time.Minute, Jitter: 0.5},
	}
}

func (o *runnerOptions) validate() error {
	switch {
	case o.workerID == "" || len(o.workerID) > 256:
		return fmt.Errorf("baton: the worker id must be 1 to 256 characters")
	case o.parallelism < 1:
		return fmt.Errorf("baton: parallelism must be at least 1")
	case o.maxJobsPerPoll < 1 || o.maxJobsPerPoll > maxJobsPerPoll:
		return fmt.Errorf("baton: max jobs per poll must be between 1 and %d", maxJobsPerPoll)
	case o.pollInterval <= 0 || o.maxPollInterval < o.pollInterval:
		return fmt.Errorf("baton: the poll interval must be positive and at most the max poll interval")
	case o.longPollWait < 0 || o.longPollWait > MaxLongPollWait:
		return fmt.Errorf("baton: the long-poll wait must be between 0 and %s", MaxLongPollWait)
	case o.gatherInterval < 0 || o.gatherInterval > time.Second:
		return fmt.Errorf("baton: the gather interval must be between 0 and 1 s")
	case o.flushInterval <= 0 || o.flushInterval > time.Second:
		return fmt.Errorf("baton: the flush interval must be more than 0 and at most 1 s")
	case o.maxResultsPerFlush < 1 || o.maxResultsPerFlush > maxBatch:
		return fmt.Errorf("baton: max results per flush must be between 1 and %d", maxBatch)
	}
	return nil
}

func (o *runnerOptions) prefetched() int {
	if o.prefetch >= 0 {
		return o.prefetch
	}
	return min(o.parallelism, o.maxJobsPerPoll)
}

// RunnerOption configures a [Runner].
type RunnerOption func(*runnerOptions)

// WithWorkerID names the worker that claims jobs (default <host>-<pid>).
func WithWorkerID(id string) RunnerOption { return func(o *runnerOptions) { o.workerID = id } }

// WithJobTypes polls for these types only (default: every registered type).
func WithJobTypes(types ...string) RunnerOption {
	return func(o *runnerOptions) { o.jobTypes = append([]string(nil), types...) }
}

// WithParallelism is how many handlers run at once (default 8).
func WithParallelism(n int) RunnerOption { return func(o *runnerOptions) { o.parallelism = n } }

// WithMaxJobsPerPoll is the most one poll asks for (default 100, the API's limit). A poll asks
// for the free slots (parallelism + prefetch, less the jobs held), never more, so by default
// one poll refills every slot: fewer, larger polls cost the server less per job.
func WithMaxJobsPerPoll(n int) RunnerOption { return func(o *runnerOptions) { o.maxJobsPerPoll = n } }

// WithPrefetch is how many claimed jobs may wait for a free handler beyond the running ones
// (default min(parallelism, max jobs per poll)), so the next poll overlaps the work. Their
// leases run while they wait (a prefetched job waits at most for one running handler to end,
// while prefetch <= parallelism): keep it small next to a lease. 0: claim only for free
// handlers.
func WithPrefetch(n int) RunnerOption { return func(o *runnerOptions) { o.prefetch = max(n, 0) } }

// WithPollInterval is the pause after an empty short poll, doubled per further empty poll up
// to max (defaults 0.5 s and 2 s).
func WithPollInterval(interval, maxInterval time.Duration) RunnerOption {
	return func(o *runnerOptions) { o.pollInterval, o.maxPollInterval = interval, maxInterval }
}

// WithLongPollWait is how long the server may hold a poll that follows an empty or short one
// (default 10 s, at most 20 s; 0: short polling). Stopping does not wait that long: the stop
// signal ends the wait, and the jobs of the poll's answer run in the drain.
func WithLongPollWait(d time.Duration) RunnerOption {
	return func(o *runnerOptions) { o.longPollWait = d }
}

// WithGatherInterval: while jobs run, how long a poll may wait for more slots to free so one
// poll asks for several jobs (default 10 ms; 0: poll as soon as one slot frees).
func WithGatherInterval(d time.Duration) RunnerOption {
	return func(o *runnerOptions) { o.gatherInterval = d }
}

// WithBatchResults reports outcomes in batches through POST /v1/jobs/complete-batch (default
// true), each batch sent after flushInterval (default 5 ms) or at once when maxPerFlush
// (default and most 100, the API's limit) results wait; false: one call per result. One batch
// is in flight at a time and results gather meanwhile, so under load batches grow by
// themselves up to maxPerFlush (one request for many jobs), and when idle a result waits only
// flushInterval.
func WithBatchResults(on bool, flushInterval time.Duration, maxPerFlush int) RunnerOption {
	return func(o *runnerOptions) {
		o.batchResults = on
		if flushInterval > 0 {
			o.flushInterval = flushInterval
		}
		if maxPerFlush > 0 {
			o.maxResultsPerFlush = maxPerFlush
		}
	}
}

// WithAutoHeartbeat heartbeats every running job at half of its lease (default true).
func WithAutoHeartbeat(on bool) RunnerOption { return func(o *runnerOptions) { o.autoHeartbeat = on } }

// WithDrainTimeout bounds the wait for in-flight handlers at stop (default: no bound). When it
// passes, their contexts are cancelled and Run returns; their jobs are delivered again after
// their leases.
func WithDrainTimeout(d time.Duration) RunnerOption {
	return func(o *runnerOptions) { o.drainTimeout = d }
}

// WithPollErrorBackoff is the backoff after a failed poll (default 0.5 s doubling to 30 s,
// jittered, never giving up; a Retry-After is honoured).
func WithPollErrorBackoff(p RetryPolicy) RunnerOption {
	return func(o *runnerOptions) { o.pollErrors = p }
}

// WithReportRetry is how a result's report is retried (default 0.2 s doubling to 5 s, for up
// to 5 min): only what may pass (no answer, 429, 5xx).
func WithReportRetry(p RetryPolicy) RunnerOption { return func(o *runnerOptions) { o.reportRetry = p } }

// WithRunnerLogger sets the runner's logger (default slog.Default()); each job's logger adds
// the job's ids to it.
func WithRunnerLogger(l *slog.Logger) RunnerOption { return func(o *runnerOptions) { o.logger = l } }

// WithTransport takes jobs from t instead of polling (the SQS outbox transport: package sqs).
func WithTransport(t Transport) RunnerOption { return func(o *runnerOptions) { o.transport = t } }
