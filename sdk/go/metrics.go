package baton

import (
	"errors"
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
