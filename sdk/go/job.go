package baton

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrLeaseLost is the cause of a handler's cancelled context when its job is no longer this
// worker's (the instance was cancelled, or the lease lapsed and another worker took the job).
var ErrLeaseLost = errors.New("baton: the job's lease was lost")

// Job is what a handler gets: the job's ids, its attempt, its input and a logger carrying them.
type Job struct {
	ID               string
	InstanceID       string
	StepID           string
	StepExecutionID  string
	Type             string
	WorkerID         string
	Attempt          int // 1 on the first delivery, one more after each retry or lapsed lease
	RetriesRemaining int // retries a retryable failure would leave
	// Input is the step's resolved input when it is a JSON object (nil otherwise: see
	// RawInput). An offloaded input was downloaded before the handler ran.
	Input map[string]any
	// RawInput is the input as JSON, for [Job.Decode] or an input that is not an object.
	RawInput json.RawMessage
	// InputPayloadPath is set when the input was offloaded to S3 (and downloaded).
	InputPayloadPath string
	// Logger adds job_id, instance_id, step_id, job_type, attempt and worker_id to each record.
	Logger *slog.Logger

	mu            sync.Mutex
	lockExpiresAt time.Time
	stopping      <-chan struct{}
	heartbeatFn   func(ctx context.Context) (time.Time, error)
}

// Decode unmarshals the job's input into v (a pointer to a struct, say).
func (j *Job) Decode(v any) error {
	if len(j.RawInput) == 0 {
		return json.Unmarshal([]byte("{}"), v)
	}
	return json.Unmarshal(j.RawInput, v)
}

// LockExpiresAt is when the job's lease ends; each heartbeat moves it on.
func (j *Job) LockExpiresAt() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lockExpiresAt
}

func (j *Job) setLockExpiresAt(t time.Time) {
	j.mu.Lock()
	j.lockExpiresAt = t
	j.mu.Unlock()
}

// ShuttingDown is closed once the runner was asked to stop. The runner still waits for this
// handler; a long handler may use it to end early.
func (j *Job) ShuttingDown() <-chan struct{} { return j.stopping }

// Heartbeat extends the lease now (the runner also does it on its own at half the lease). An
// error wrapping a 404/409 means the job is no longer this worker's.
func (j *Job) Heartbeat(ctx context.Context) error {
	if j.heartbeatFn == nil {
		return errors.New("baton: this job has no heartbeat")
	}
	t, err := j.heartbeatFn(ctx)
	if err == nil {
		j.setLockExpiresAt(t)
	}
	return err
}
