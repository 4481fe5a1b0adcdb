package baton

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// TestEnv runs a handler in a unit test the way the runner would, without a server: the job,
// its context, the heartbeats it sent, a shutdown and a lost lease on demand (Temporal's
// TestActivityEnvironment plays the same part).
//
//	env := baton.NewTestEnv("charge-card", map[string]any{"amount": 42.0})
//	env.Job.Attempt = 2
//	out, err := env.Run(charge)
type TestEnv struct {
	// Job is what the handler gets; set its fields (Attempt, RetriesRemaining...) before Run.
	Job *Job
	// Lease is how far a heartbeat moves the job's lease (default 30 s).
	Lease time.Duration
	// OnHeartbeat, if set, is called at each heartbeat before it answers (it may call
	// RequestShutdown or LoseLease).
	OnHeartbeat func(env *TestEnv)

	mu         sync.Mutex
	heartbeats []time.Time
	stopping   chan struct{}
	stopOnce   sync.Once
	lost       bool
	cancel     context.CancelCauseFunc
}

// NewTestEnv is an environment for a job of jobType with input; its ids are test values.
func NewTestEnv(jobType string, input map[string]any) *TestEnv {
	raw, _ := json.Marshal(input)
	e := &TestEnv{Lease: 30 * time.Second, stopping: make(chan struct{})}
	e.Job = &Job{ID: "test-job", InstanceID: "test-instance", StepID: "test-step", StepExecutionID: "test-step-execution",
		Type: jobType, WorkerID: "test-worker", Attempt: 1, Input: input, RawInput: raw, Logger: slog.Default(),
		lockExpiresAt: time.Now().Add(e.Lease), stopping: e.stopping}
	e.Job.heartbeatFn = e.heartbeat
	return e
}

// NewTestJob is a job for a unit test of a handler: NewTestEnv(jobType, input).Job.
func NewTestJob(jobType string, input map[string]any) *Job { return NewTestEnv(jobType, input).Job }

// ErrTestLeaseLost is what Job.Heartbeat returns in a TestEnv after LoseLease.
var ErrTestLeaseLost = &APIError{Status: 409, Title: "Conflict", Detail: "the job's lease was lost (TestEnv.LoseLease)"}

func (e *TestEnv) heartbeat(context.Context) (time.Time, error) {
	if e.OnHeartbeat != nil {
		e.OnHeartbeat(e)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lost {
		return time.Time{}, ErrTestLeaseLost
	}
	e.heartbeats = append(e.heartbeats, time.Now())
	return time.Now().Add(e.Lease), nil
}

// Heartbeats are the times of the heartbeats the handler sent.
func (e *TestEnv) Heartbeats() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.heartbeats...)
}

// RequestShutdown closes the job's ShuttingDown channel, as a stopping runner does.
func (e *TestEnv) RequestShutdown() { e.stopOnce.Do(func() { close(e.stopping) }) }

// LoseLease cancels the handler's context with ErrLeaseLost, as a 409 heartbeat does; later
// heartbeats fail with ErrTestLeaseLost.
func (e *TestEnv) LoseLease() {
	e.mu.Lock()
	e.lost = true
	cancel := e.cancel
	e.mu.Unlock()
	if cancel != nil {
		cancel(ErrLeaseLost)
	}
}

// Run calls handler with the job and a context like the runner's, and returns what it
// returned. A panic is returned as an error, as the runner would report it. A result the
// runner would refuse (not JSON Baton can store) is returned as a *NonRetryableError with the
// message the job would fail with.
func (e *TestEnv) Run(handler HandlerFunc) (out map[string]any, err error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e.mu.Lock()
	e.cancel = cancel
	lost := e.lost
	e.mu.Unlock()
	if lost {
		cancel(ErrLeaseLost)
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, errors.New("panic: "+slog.AnyValue(p).String())
		}
	}()
	out, err = handler(ctx, e.Job)
	if err == nil {
		if _, problem := encodeResult(out); problem != "" {
			return out, NonRetryable(errors.New(problem))
		}
	}
	return out, err
}
