package baton

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// MaxLongPollWait is the API's limit on a poll's wait.
const MaxLongPollWait = 20 * time.Second

// ClaimedJob is a job as a poll or a claim returns it (the proto's Job in its JSON mapping),
// leased to the worker that claimed it until LockExpiresAt.
type ClaimedJob struct {
	ID               string          `json:"id"`
	InstanceID       string          `json:"instanceId"`
	StepID           string          `json:"stepId"`
	StepExecutionID  string          `json:"stepExecutionId"`
	JobType          string          `json:"jobType"`
	Attempt          int             `json:"attempt"`
	RetriesRemaining int             `json:"retriesRemaining"`
	LockExpiresAt    string          `json:"lockExpiresAt"`
	Input            json.RawMessage `json:"input,omitempty"`
	InputPayloadPath string          `json:"inputPayloadPath,omitempty"`
	InputDownloadURL string          `json:"inputDownloadUrl,omitempty"`
}

// PollRequest asks for up to MaxJobs jobs of JobTypes for WorkerID; Wait (up to 20 s) holds
// the request on the server until a job is claimable (a long-poll).
type PollRequest struct {
	WorkerID string
	JobTypes []string
	MaxJobs  int
	Wait     time.Duration
}

// Failure is the failure of a job in a [ResultItem] (the proto's BatchFailure). Output, a JSON
// object (nil: none), is kept as the step's output when this failure ends the step (no retry
// follows); the server refuses one above its inline limit.
type Failure struct {
	ErrorMessage          string          `json:"errorMessage"`
	Retryable             bool            `json:"retryable"`
	NextRetryDelaySeconds *float64        `json:"nextRetryDelaySeconds,omitempty"`
	Output                json.RawMessage `json:"output,omitempty"`
}

// ResultItem completes (VariablesToSet or OutputPayloadPath) or fails (Failure) one claimed
// job: the body of POST /v1/jobs/complete, or one item of POST /v1/jobs/complete-batch.
type ResultItem struct {
	JobID             string          `json:"jobId"`
	WorkerID          string          `json:"workerId"`
	Attempt           *int            `json:"attempt,omitempty"`
	VariablesToSet    json.RawMessage `json:"variablesToSet,omitempty"`
	OutputPayloadPath string          `json:"outputPayloadPath,omitempty"`
	Failure           *Failure        `json:"failure,omitempty"`
}

// BatchOutcome is the answer to one item of a batch: APPLIED, DUPLICATE (a repeat, harmless),
// CONFLICT or NOT_FOUND (the job is no longer this worker's) or INVALID (refused, see Error).
type BatchOutcome struct {
	JobID         string `json:"jobId"`
	Outcome       string `json:"outcome"`
	Status        string `json:"status,omitempty"`
	NextAttemptAt string `json:"nextAttemptAt,omitempty"`
	Error         string `json:"error,omitempty"`
}

// JobResult is the answer to a single complete or fail.
type JobResult struct {
	JobID         string `json:"jobId"`
	Status        string `json:"status"`
	Applied       bool   `json:"applied"`
	NextAttemptAt string `json:"nextAttemptAt,omitempty"`
}

func intPtr(i int) *int { return &i }

var retryNever = NoRetry

// PollJobs claims up to req.MaxJobs jobs (possibly none). A poll is never retried by the
// client (it is not idempotent): a caller's loop retries it.
func (c *Client) PollJobs(ctx context.Context, req PollRequest) ([]ClaimedJob, error) {
	if req.Wait < 0 || req.Wait > MaxLongPollWait {
		return nil, fmt.Errorf("baton: a poll's wait must be between 0 and %s", MaxLongPollWait)
	}
	body := map[string]any{"workerId": req.WorkerID, "jobTypes": req.JobTypes, "maxJobs": max(req.MaxJobs, 1)}
	r := request{method: "POST", path: "/v1/jobs/poll", retry: &retryNever}
	if req.Wait > 0 {
		body["waitSeconds"] = req.Wait.Seconds()
		r.timeout = c.timeout + req.Wait
	}
	var answer struct {
		Jobs []ClaimedJob `json:"jobs"`
	}
	if err := c.callJSON(ctx, r, body, &answer); err != nil {
		return nil, err
	}
	return answer.Jobs, nil
}

// ClaimJob takes the lease on one job by id (event-driven dispatch: the id came from the
// queue). A 409 means the job is no longer claimable (a duplicate or stale delivery), a 429
// that its job type is at its concurrency or rate limit.
func (c *Client) ClaimJob(ctx context.Context, jobID, workerID string, attempt int) (*ClaimedJob, error) {
	body := map[string]any{"workerId": workerID}
	if attempt > 0 {
		body["attempt"] = attempt
	}
	var job ClaimedJob
	r := request{method: "POST", path: "/v1/jobs/" + segment(jobID) + "/claim", retry: &retryNever}
	if err := c.callJSON(ctx, r, body, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// CompleteJob completes a claimed job (item.Failure must be nil). Safe to repeat: a repeat
// answers Applied false.
func (c *Client) CompleteJob(ctx context.Context, item ResultItem) (*JobResult, error) {
	return c.completeJob(ctx, item, nil)
}

func (c *Client) completeJob(ctx context.Context, item ResultItem, policy *RetryPolicy) (*JobResult, error) {
	if item.Failure != nil {
		return nil, fmt.Errorf("baton: CompleteJob with a failure: use FailJob")
	}
	var result JobResult
	r := request{method: "POST", path: "/v1/jobs/complete", idempotent: true, retry: policy}
	if err := c.callJSON(ctx, r, item, &result); err != nil {
		return nil, err
	}
	return &result, nil
}

// FailJob fails a claimed job: the engine retries it per the step's policy when
// failure.Retryable, after NextRetryDelaySeconds when given; failure.Output, when given, is
// kept as the step's output if no retry follows. attempt 0: not sent.
func (c *Client) FailJob(ctx context.Context, jobID, workerID string, attempt int, failure Failure) (*JobResult, error) {
	return c.failJob(ctx, jobID, workerID, attempt, failure, nil)
}

func (c *Client) failJob(ctx context.Context, jobID, workerID string, attempt int, f Failure, policy *RetryPolicy) (*JobResult, error) {
	body := map[string]any{"jobId": jobID, "workerId": workerID, "errorMessage": f.ErrorMessage, "retryable": f.Retryable}
	if f.NextRetryDelaySeconds != nil {
		body["nextRetryDelaySeconds"] = *f.NextRetryDelaySeconds
	}
	if len(f.Output) > 0 {
		body["output"] = f.Output
	}
	if attempt > 0 {
		body["attempt"] = attempt
	}
	var result JobResult
	r := request{method: "POST", path: "/v1/jobs/fail", idempotent: true, retry: policy}
	if err := c.callJSON(ctx, r, body, &result); err != nil {
		return nil, err
	}
	return &result, nil
}

// CompleteBatch reports up to 100 results in one call; one answer per item, in order. Safe to
// repeat: a result already applied answers DUPLICATE.
func (c *Client) CompleteBatch(ctx context.Context, items []ResultItem) ([]BatchOutcome, error) {
	return c.completeBatch(ctx, items, nil)
}

func (c *Client) completeBatch(ctx context.Context, items []ResultItem, policy *RetryPolicy) ([]BatchOutcome, error) {
	var answer struct {
		Results []BatchOutcome `json:"results"`
	}
	r := request{method: "POST", path: "/v1/jobs/complete-batch", idempotent: true, retry: policy}
	body := struct {
		Results []ResultItem `json:"results"`
	}{items}
	if err := c.callJSON(ctx, r, body, &answer); err != nil {
		return nil, err
	}
	return answer.Results, nil
}

// Heartbeat extends the lease of a claimed job (of its attempt; 0: not sent); the lease's new
// end.
func (c *Client) Heartbeat(ctx context.Context, jobID, workerID string, attempt int) (time.Time, error) {
	return c.heartbeat(ctx, jobID, workerID, attempt, nil)
}

func (c *Client) heartbeat(ctx context.Context, jobID, workerID string, attempt int, policy *RetryPolicy) (time.Time, error) {
	body := map[string]any{"jobId": jobID, "workerId": workerID}
	if attempt > 0 {
		body["attempt"] = attempt
	}
	var answer struct {
		LockExpiresAt string `json:"lockExpiresAt"`
	}
	r := request{method: "POST", path: "/v1/jobs/heartbeat", idempotent: true, retry: policy}
	if err := c.callJSON(ctx, r, body, &answer); err != nil {
		return time.Time{}, err
	}
	return parseTime(answer.LockExpiresAt)
}

// StopWorker sends the worker's stop signal: a long-poll of workerID waiting now claims
// nothing more and ends empty.
func (c *Client) StopWorker(ctx context.Context, workerID string) error {
	policy := RetryPolicy{InitialInterval: 100 * time.Millisecond, Coefficient: 2, MaxInterval: time.Second, MaxAttempts: 3, MaxElapsed: 2 * time.Second}
	r := request{method: "POST", path: "/v1/workers/stop", idempotent: true, retry: &policy, timeout: 2 * time.Second}
	return c.callJSON(ctx, r, map[string]any{"workerId": workerID}, nil)
}

// --- external payloads ---------------------------------------------------------------------

type serverConfig struct {
	PayloadLimits map[string]struct {
		SoftLimitBytes json.Number `json:"softLimitBytes"`
		HardLimitBytes json.Number `json:"hardLimitBytes"`
	} `json:"payloadLimits"`
}

// offloadFloor: bodies up to this size always go inline (well under the server's inline cap),
// so small results never cost a GET /v1/config.
const offloadFloor = 64 * 1024

// SoftLimit is the soft limit of kind (workflowInput, stepInput, stepOutput) from
// GET /v1/config, read once per client; a server without the route means never offload.
func (c *Client) SoftLimit(ctx context.Context, kind string) int64 {
	c.configMu.Lock()
	defer c.configMu.Unlock()
	if c.config == nil {
		var cfg serverConfig
		err := c.callJSON(ctx, request{method: "GET", path: "/v1/config", idempotent: true}, nil, &cfg)
		if err != nil {
			var apiErr *APIError
			if !isAPIError(err, &apiErr) {
				return 1 << 62 // no answer: ask again next time
			}
		}
		c.config = &cfg
	}
	limit, ok := c.config.PayloadLimits[kind]
	if !ok {
		return 1 << 62
	}
	n, err := limit.SoftLimitBytes.Int64()
	if err != nil {
		return 1 << 62
	}
	return n
}

// UploadPayload uploads data through POST /v1/payloads and its presigned PUT (with the
// grant's uploadHeaders); the path to send as outputPayloadPath / inputPayloadPath.
func (c *Client) UploadPayload(ctx context.Context, kind string, data []byte) (string, error) {
	policy := payloadRetry
	b := backoff{policy: policy}
	for attempts := 1; ; attempts++ {
		var grant struct {
			Path          string            `json:"path"`
			UploadURL     string            `json:"uploadUrl"`
			UploadHeaders map[string]string `json:"uploadHeaders"`
		}
		body := map[string]any{"kind": kind, "sizeBytes": len(data)}
		if err := c.callJSON(ctx, request{method: "POST", path: "/v1/payloads"}, body, &grant); err != nil {
			return "", err
		}
		req, err := http.NewRequestWithContext(ctx, "PUT", grant.UploadURL, bytes.NewReader(data))
		if err != nil {
			return "", err
		}
		for k, v := range grant.UploadHeaders {
			req.Header.Set(k, v)
		}
		failure, final := c.presignedDo(req, nil)
		if failure == nil {
			return grant.Path, nil
		}
		delay := b.next()
		if final || !policy.allows(attempts, 0, delay) || !sleep(ctx.Done(), delay) {
			return "", fmt.Errorf("payload upload failed: %w", failure)
		}
	}
}

// DownloadPayload is the body at a presigned GET URL (an offloaded input), retrying transient
// S3 failures.
func (c *Client) DownloadPayload(ctx context.Context, url string) ([]byte, error) {
	policy := payloadRetry
	b := backoff{policy: policy}
	for attempts := 1; ; attempts++ {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		if err != nil {
			return nil, err
		}
		var body []byte
		failure, final := c.presignedDo(req, &body)
		if failure == nil {
			return body, nil
		}
		delay := b.next()
		if final || !policy.allows(attempts, 0, delay) || !sleep(ctx.Done(), delay) {
			return nil, fmt.Errorf("payload download failed: %w", failure)
		}
	}
}

var payloadRetry = RetryPolicy{InitialInterval: 200 * time.Millisecond, Coefficient: 2, MaxInterval: 2 * time.Second, MaxAttempts: 4, Jitter: 0.5}

// presignedDo sends a request to a presigned S3 URL (no credentials of ours); final is true
// for a refusal that retrying will not fix.
func (c *Client) presignedDo(req *http.Request, out *[]byte) (failure error, final bool) {
	ctx, cancel := context.WithTimeout(req.Context(), c.timeout)
	defer cancel()
	resp, err := c.presigned.Do(req.WithContext(ctx))
	if err != nil {
		return err, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err, false
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out != nil {
			*out = body
		}
		return nil, false
	}
	text := strings.TrimSpace(string(body))
	failure = fmt.Errorf("%d %s", resp.StatusCode, text[:min(len(text), 300)])
	return failure, resp.StatusCode < 500
}

func isAPIError(err error, target **APIError) bool {
	e, ok := err.(*APIError)
	if ok {
		*target = e
	}
	return ok
}

// parseTime reads an RFC 3339 timestamp of the API.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("baton: bad timestamp %q: %w", s, err)
	}
	return t, nil
}
