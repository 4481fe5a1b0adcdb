package baton

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// maxErrorMessage is the API's limit on an error message.
const maxErrorMessage = 10_000

// fallbackLease is used only when a job came without a readable lockExpiresAt.
const fallbackLease = 30 * time.Second

// minHeartbeatInterval is a floor against a heartbeat storm when a lease looks expired.
const minHeartbeatInterval = 100 * time.Millisecond

// outcome is what a handler's call came to.
type outcome struct {
	variables json.RawMessage // completion (nil: no variables)
	failure   *Failure        // or failure
	took      time.Duration
}

// execute runs one claimed job to a reported outcome, then frees its slot.
func (r *Runner) execute(claimed ClaimedJob) {
	defer r.slots.release(1)
	r.handlers <- struct{}{}
	defer func() { <-r.handlers }()

	ctx, cancel := context.WithCancelCause(r.handlerCtx)
	defer cancel(nil)
	job := r.newJob(claimed, cancel)
	var unavailable string
	if claimed.InputDownloadURL != "" && (len(claimed.Input) == 0 || string(claimed.Input) == "null") {
		// An offloaded input: the handler sees it as if it had come inline.
		raw, err := r.client.DownloadPayload(ctx, claimed.InputDownloadURL)
		if err == nil {
			err = setInput(job, raw)
		}
		if err != nil {
			unavailable = "cannot download the job's input: " + err.Error()
		}
	}
	heartbeats := make(chan struct{})
	if r.opts.autoHeartbeat {
		go r.keepLease(job, cancel, heartbeats)
	}
	var out outcome
	switch handler := r.registry.Handler(job.Type); {
	case unavailable != "":
		out = outcome{failure: &Failure{ErrorMessage: unavailable, Retryable: true}}
	case handler == nil:
		out = outcome{failure: &Failure{ErrorMessage: fmt.Sprintf("worker %s has no handler for job type %q", r.opts.workerID, job.Type)}}
	default:
		out = r.call(ctx, handler, job)
	}
	r.report(ctx, job, out)
	close(heartbeats)
}

func (r *Runner) newJob(c ClaimedJob, cancel context.CancelCauseFunc) *Job {
	expires, err := parseTime(c.LockExpiresAt)
	if err != nil {
		expires = time.Now().Add(fallbackLease)
	}
	job := &Job{ID: c.ID, InstanceID: c.InstanceID, StepID: c.StepID, StepExecutionID: c.StepExecutionID,
		Type: c.JobType, WorkerID: r.opts.workerID, Attempt: c.Attempt, RetriesRemaining: c.RetriesRemaining,
		InputPayloadPath: c.InputPayloadPath, lockExpiresAt: expires, stopping: r.stopping}
	job.Logger = r.opts.logger.With("job_id", c.ID, "instance_id", c.InstanceID, "step_id", c.StepID,
		"job_type", c.JobType, "attempt", c.Attempt, "worker_id", r.opts.workerID)
	_ = setInput(job, c.Input)
	job.heartbeatFn = func(hctx context.Context) (time.Time, error) {
		t, err := r.client.Heartbeat(hctx, job.ID, r.opts.workerID, job.Attempt)
		if err != nil && (IsConflict(err) || IsNotFound(err)) {
			r.leaseLost(job, cancel, err)
		}
		return t, err
	}
	return job
}

func setInput(job *Job, raw json.RawMessage) error {
	job.RawInput = raw
	job.Input = nil
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var input map[string]any
	if err := json.Unmarshal(raw, &input); err != nil {
		return fmt.Errorf("the input is not JSON: %w", err)
	}
	job.Input = input
	return nil
}

// call runs the handler, turning its return, error or panic into an outcome.
func (r *Runner) call(ctx context.Context, handler HandlerFunc, job *Job) (out outcome) {
	r.notify(func(m Metrics) { m.JobStarted(job.Type) })
	started := time.Now()
	defer func() {
		if p := recover(); p != nil {
			out = outcome{failure: &Failure{ErrorMessage: fmt.Sprintf("panic: %v", p), Retryable: true}, took: time.Since(started)}
			job.Logger.Error("handler panicked", "error", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
	}()
	variables, err := handler(ctx, job)
	took := time.Since(started)
	if err != nil {
		f := &Failure{ErrorMessage: err.Error(), Retryable: true}
		var nonRetryable *NonRetryableError
		var delayed *RetryDelayError
		if errors.As(err, &nonRetryable) {
			f.Retryable = false
		} else if errors.As(err, &delayed) {
			seconds := min(max(delayed.Delay, 0), MaxRetryDelay).Seconds()
			f.NextRetryDelaySeconds = &seconds
		}
		var withOutput *OutputError
		if errors.As(err, &withOutput) {
			f.Output = r.failureOutput(ctx, job, withOutput.Output)
		}
		job.Logger.Warn("handler failed", "error", f.ErrorMessage, "retryable", f.Retryable, "handler_s", took.Seconds())
		return outcome{failure: f, took: took}
	}
	encoded, problem := encodeResult(variables)
	if problem != "" {
		job.Logger.Error("handler returned a bad result", "error", problem)
		return outcome{failure: &Failure{ErrorMessage: problem}, took: took}
	}
	return outcome{variables: encoded, took: took}
}

// failureOutput is a failure's output as it can be sent, or nil: one that is not JSON Baton
// can store, or above the step output's soft limit (at most MaxFailureOutputBytes; the server
// would refuse the whole failure), is left out with a warning, so that the failure still goes.
func (r *Runner) failureOutput(ctx context.Context, job *Job, output map[string]any) json.RawMessage {
	encoded, problem := encodeVariables(output)
	if problem == "" && encoded != nil {
		limit := min(r.client.SoftLimit(ctx, "stepOutput"), MaxFailureOutputBytes)
		if n := int64(len(encoded)); n > limit {
			problem = fmt.Sprintf("its JSON is %d bytes, above the %d-byte limit", n, limit)
		}
	}
	if problem != "" {
		job.Logger.Warn("the failure's output is left out; the failure is sent without it", "error", problem)
		return nil
	}
	return encoded
}

// report sends the outcome: through the flusher (batching) or at once. Only failures that may
// pass (no answer, 429, 5xx) are retried; a result the server refuses with another 4xx fails
// the job non-retryable with the server's reason; a 404/409 means the job is no longer this
// worker's, and the outcome is dropped.
func (r *Runner) report(ctx context.Context, job *Job, out outcome) {
	if out.failure == nil {
		refused := r.complete(ctx, job, out)
		if refused == nil {
			return
		}
		out = *refused
	}
	r.fail(job, out)
}

func (r *Runner) complete(ctx context.Context, job *Job, out outcome) *outcome {
	item := ResultItem{JobID: job.ID, WorkerID: r.opts.workerID, Attempt: intPtr(job.Attempt), VariablesToSet: out.variables}
	if n := len(out.variables); n > offloadFloor && int64(n) > r.client.SoftLimit(ctx, "stepOutput") {
		// Above the soft limit the output goes to S3; the server gets its path.
		path, err := r.client.UploadPayload(context.WithoutCancel(ctx), "STEP_OUTPUT", out.variables)
		if err != nil {
			if refusedResult(err) {
				return &outcome{failure: &Failure{ErrorMessage: "the server refused the handler's result: " + summary(err)}, took: out.took}
			}
			r.unreported(job, err)
			return nil
		}
		item.VariablesToSet, item.OutputPayloadPath = nil, path
	}
	if r.flusher != nil {
		r.flusher.submit(item, func(answer BatchOutcome) { r.completed(job, out, answer) }, func(err error) { r.unreported(job, err) })
		return nil
	}
	result, err := r.client.completeJob(context.Background(), item, &r.opts.reportRetry)
	if err != nil {
		if refusedResult(err) {
			return &outcome{failure: &Failure{ErrorMessage: "the server refused the handler's result: " + summary(err)}, took: out.took}
		}
		r.unreported(job, err)
		return nil
	}
	r.notify(func(m Metrics) { m.JobCompleted(job.Type, out.took) })
	job.Logger.Info("job completed", "handler_s", out.took.Seconds(), "applied", result.Applied)
	return nil
}

func (r *Runner) fail(job *Job, out outcome) {
	f := *out.failure
	f.ErrorMessage = storable(f.ErrorMessage)
	out.failure = &f
	if r.flusher != nil {
		item := ResultItem{JobID: job.ID, WorkerID: r.opts.workerID, Attempt: intPtr(job.Attempt), Failure: &f}
		r.flusher.submit(item, func(answer BatchOutcome) { r.failed(job, out, answer) }, func(err error) { r.unreported(job, err) })
		return
	}
	result, err := r.client.failJob(context.Background(), job.ID, r.opts.workerID, job.Attempt, f, &r.opts.reportRetry)
	if err != nil {
		if f.Output != nil && refusedResult(err) {
			r.withoutOutput(job, out, summary(err))
			return
		}
		r.unreported(job, err)
		return
	}
	r.notify(func(m Metrics) { m.JobFailed(job.Type, out.took, f.Retryable) })
	job.Logger.Info("job failed", "error", f.ErrorMessage, "retryable", f.Retryable, "status", result.Status)
}

// withoutOutput sends a failure the server refused with its output again without it (a server
// older than failure outputs refuses the field): the failure must not be lost for its output.
func (r *Runner) withoutOutput(job *Job, out outcome, reason string) {
	job.Logger.Warn("the server refused the failure with its output; sending it without the output", "error", reason)
	f := *out.failure
	f.Output = nil
	r.fail(job, outcome{failure: &f, took: out.took})
}

// completed handles a batched completion's answer.
func (r *Runner) completed(job *Job, out outcome, answer BatchOutcome) {
	switch answer.Outcome {
	case "APPLIED", "DUPLICATE":
		r.notify(func(m Metrics) { m.JobCompleted(job.Type, out.took) })
		job.Logger.Info("job completed", "handler_s", out.took.Seconds(), "outcome", answer.Outcome)
	case "INVALID": // refused for its content: fail the job, saying why
		r.fail(job, outcome{failure: &Failure{ErrorMessage: "the server refused the handler's result: " + answer.Error}, took: out.took})
	default:
		r.gone(job, answer)
	}
}

// failed handles a batched failure's answer.
func (r *Runner) failed(job *Job, out outcome, answer BatchOutcome) {
	f, took := out.failure, out.took
	switch answer.Outcome {
	case "APPLIED", "DUPLICATE":
		r.notify(func(m Metrics) { m.JobFailed(job.Type, took, f.Retryable) })
		job.Logger.Info("job failed", "error", f.ErrorMessage, "retryable", f.Retryable, "status", answer.Status, "next_attempt_at", answer.NextAttemptAt)
	case "INVALID":
		if f.Output != nil {
			r.withoutOutput(job, out, answer.Error)
			return
		}
		r.notify(func(m Metrics) { m.OutcomeUnreported(job.Type, errors.New(answer.Error)) })
		job.Logger.Error("the server refused the job's outcome; it will be delivered again after its lease", "error", answer.Error)
	default:
		r.gone(job, answer)
	}
}

func (r *Runner) gone(job *Job, answer BatchOutcome) {
	r.notify(func(m Metrics) {
		m.OutcomeUnreported(job.Type, fmt.Errorf("%w: %s %s", errGone, answer.Outcome, answer.Error))
	})
	job.Logger.Warn("job is no longer this worker's (cancelled, or its lease expired and another worker took it); outcome discarded",
		"error", strings.TrimSpace(answer.Outcome+": "+answer.Error))
}

func (r *Runner) unreported(job *Job, err error) {
	r.notify(func(m Metrics) { m.OutcomeUnreported(job.Type, err) })
	switch {
	case IsConflict(err) || IsNotFound(err):
		job.Logger.Warn("job is no longer this worker's (cancelled, or its lease expired and another worker took it); outcome discarded", "error", err.Error())
	case IsTransient(err):
		job.Logger.Error("could not report the job's outcome; it will be delivered again after its lease", "error", err.Error())
	default:
		job.Logger.Error("the server refused the job's outcome; it will be delivered again after its lease", "error", err.Error())
	}
}

// keepLease heartbeats the job at half of its remaining lease until done closes; a 404/409
// answer cancels the handler's context with ErrLeaseLost.
func (r *Runner) keepLease(job *Job, cancel context.CancelCauseFunc, done <-chan struct{}) {
	delay := max(minHeartbeatInterval, time.Until(job.LockExpiresAt())/2)
	for sleep(done, delay) {
		hctx, stop := context.WithTimeout(context.Background(), max(time.Until(job.LockExpiresAt()), time.Second))
		expires, err := r.client.heartbeat(hctx, job.ID, r.opts.workerID, job.Attempt, &retryNever)
		stop()
		select {
		case <-done:
			return
		default:
		}
		switch {
		case err == nil:
			job.setLockExpiresAt(expires)
			delay = max(minHeartbeatInterval, time.Until(expires)/2)
		case IsConflict(err) || IsNotFound(err):
			r.leaseLost(job, cancel, err)
			return
		default: // no answer, 429, 5xx (or a refusal): try again after a quarter of what remains
			delay = max(minHeartbeatInterval, time.Until(job.LockExpiresAt())/4)
			job.Logger.Warn("heartbeat failed; retrying", "error", err.Error(), "retry_in_s", delay.Seconds())
		}
	}
}

func (r *Runner) leaseLost(job *Job, cancel context.CancelCauseFunc, err error) {
	job.Logger.Warn("lease lost; the handler's context is cancelled and its result will be refused", "error", err.Error())
	cancel(fmt.Errorf("%w: %v", ErrLeaseLost, err))
}

// refusedResult: a 4xx that neither says the job is gone (404, 409), nor is about
// credentials (401, 403), nor asks to wait (429): the result itself was refused.
func refusedResult(err error) bool {
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Transient() {
		return false
	}
	switch apiErr.Status {
	case 401, 403, 404, 409:
		return false
	}
	return apiErr.Status >= 400 && apiErr.Status < 500
}

func summary(err error) string {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Summary()
	}
	return err.Error()
}

// storable is an error message the API can store: NUL spelled out, clipped to the limit.
func storable(message string) string {
	message = strings.ReplaceAll(message, "\x00", `\x00`)
	message = strings.ToValidUTF8(message, "\uFFFD")
	if len(message) > maxErrorMessage {
		cut := maxErrorMessage - 3
		for cut > 0 && !isRuneStart(message[cut]) {
			cut--
		}
		message = message[:cut] + "..."
	}
	if message == "" {
		message = "error"
	}
	return message
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
