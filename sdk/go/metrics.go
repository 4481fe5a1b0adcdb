package baton

import (
	"errors"
	"maps"
	"sync"
	"time"
)

// Metrics receives a runner's events (WithMetrics), from the runner's goroutines: keep each
// call quick. Embed [NoopMetrics] to implement only some. A panic in one is logged and ignored.
type Metrics interface {
	// PollCompleted: a poll (or a transport's fetch) asked for requested jobs and got received.
	PollCompleted(requested, received int, took time.Duration)
	// PollFailed: a poll got no answer or an error answer (the runner backs off).
	PollFailed(err error)
	// JobStarted: a handler is called.
	JobStarted(jobType string)
	// JobCompleted: the server applied the job's completion (or already had it).
	JobCompleted(jobType string, handler time.Duration)
	// JobFailed: the server applied the job's failure (or already had it).
	JobFailed(jobType string, handler time.Duration, retryable bool)
	// OutcomeUnreported: the outcome could not be reported, or the job was no longer this
	// worker's; it is delivered again after its lease (unless settled elsewhere).
	OutcomeUnreported(jobType string, err error)
}

// NoopMetrics does nothing; embed it in a Metrics of your own.
type NoopMetrics struct{}

func (NoopMetrics) PollCompleted(int, int, time.Duration) {}
func (NoopMetrics) PollFailed(error)                      {}
func (NoopMetrics) JobStarted(string)                     {}
func (NoopMetrics) JobCompleted(string, time.Duration)    {}
func (NoopMetrics) JobFailed(string, time.Duration, bool) {}
func (NoopMetrics) OutcomeUnreported(string, error)       {}

// WithMetrics sends the runner's events to m (default: none).
func WithMetrics(m Metrics) RunnerOption { return func(o *runnerOptions) { o.metrics = m } }

// notify calls a metrics hook; a broken metrics sink must not break job processing.
func (r *Runner) notify(hook func(Metrics)) {
	if r.opts.metrics == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r.logger.Error("metrics hook panicked", "error", p)
		}
	}()
	hook(r.opts.metrics)
}

var errGone = errors.New("baton: the job is no longer this worker's")

// InMemoryMetrics keeps counters and handler-time totals in memory, per job type where it
// applies (tests, benchmarks, a status page). It is safe for concurrent use; read it with
// [InMemoryMetrics.Snapshot].
type InMemoryMetrics struct {
	mu sync.Mutex
	s  MetricsSnapshot
}

// MetricsSnapshot is a copy of an [InMemoryMetrics]' counters.
type MetricsSnapshot struct {
	Polls                  int
	EmptyPolls             int
	PollErrors             int
	JobsStarted            map[string]int
	JobsCompleted          map[string]int
	JobsFailed             map[string]int
	JobsFailedNonRetryable map[string]int
	OutcomesUnreported     map[string]int
	HandlerTime            map[string]time.Duration
}

var _ Metrics = (*InMemoryMetrics)(nil)

func (m *InMemoryMetrics) update(f func(s *MetricsSnapshot)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s.JobsStarted == nil {
		m.s.JobsStarted, m.s.JobsCompleted, m.s.JobsFailed = map[string]int{}, map[string]int{}, map[string]int{}
		m.s.JobsFailedNonRetryable, m.s.OutcomesUnreported = map[string]int{}, map[string]int{}
		m.s.HandlerTime = map[string]time.Duration{}
	}
	f(&m.s)
}

func (m *InMemoryMetrics) PollCompleted(_, received int, _ time.Duration) {
	m.update(func(s *MetricsSnapshot) {
		s.Polls++
		if received == 0 {
			s.EmptyPolls++
		}
	})
}

func (m *InMemoryMetrics) PollFailed(error) { m.update(func(s *MetricsSnapshot) { s.PollErrors++ }) }

func (m *InMemoryMetrics) JobStarted(jobType string) {
	m.update(func(s *MetricsSnapshot) { s.JobsStarted[jobType]++ })
}

func (m *InMemoryMetrics) JobCompleted(jobType string, handler time.Duration) {
	m.update(func(s *MetricsSnapshot) {
		s.JobsCompleted[jobType]++
		s.HandlerTime[jobType] += handler
	})
}

func (m *InMemoryMetrics) JobFailed(jobType string, handler time.Duration, retryable bool) {
	m.update(func(s *MetricsSnapshot) {
		s.JobsFailed[jobType]++
		if !retryable {
			s.JobsFailedNonRetryable[jobType]++
		}
		s.HandlerTime[jobType] += handler
	})
}

func (m *InMemoryMetrics) OutcomeUnreported(jobType string, _ error) {
	m.update(func(s *MetricsSnapshot) { s.OutcomesUnreported[jobType]++ })
}

// Snapshot is a copy of every counter.
func (m *InMemoryMetrics) Snapshot() MetricsSnapshot {
	var out MetricsSnapshot
	m.update(func(s *MetricsSnapshot) {
		out = *s
		out.JobsStarted, out.JobsCompleted = maps.Clone(s.JobsStarted), maps.Clone(s.JobsCompleted)
		out.JobsFailed, out.JobsFailedNonRetryable = maps.Clone(s.JobsFailed), maps.Clone(s.JobsFailedNonRetryable)
		out.OutcomesUnreported, out.HandlerTime = maps.Clone(s.OutcomesUnreported), maps.Clone(s.HandlerTime)
	})
	return out
}
