package baton

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxRetryDelay is the API's limit on a handler's next retry delay.
const MaxRetryDelay = 365 * 24 * time.Hour

// NonRetryableError fails the job at once: the engine skips the step's remaining retries.
// Return it (or any error wrapping it) from a handler, usually through [NonRetryable].
type NonRetryableError struct {
	Err error
}

func (e *NonRetryableError) Error() string {
	if e.Err == nil {
		return "non-retryable error"
	}
	return e.Err.Error()
}

func (e *NonRetryableError) Unwrap() error { return e.Err }

// NonRetryable wraps err so that the job fails without retries. NonRetryable(nil) is nil.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return &NonRetryableError{Err: err}
}

// RetryDelayError fails the job as retryable, and the engine waits Delay (instead of the
// step's retryDelaySeconds and backoff) before that one retry: 0 retries at once.
type RetryDelayError struct {
	Err   error
	Delay time.Duration
}

func (e *RetryDelayError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry in %s", e.Delay)
	}
	return e.Err.Error()
}

func (e *RetryDelayError) Unwrap() error { return e.Err }

// WithNextRetryDelay wraps err so that the engine retries the job after delay (0 to 365 days;
// a delay outside that range is clamped into it). WithNextRetryDelay(nil, d) is nil.
func WithNextRetryDelay(err error, delay time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryDelayError{Err: err, Delay: min(max(delay, 0), MaxRetryDelay)}
}

// MaxFailureOutputBytes caps the JSON of a failure's output when the server's step output
// soft limit (GET /v1/config) is not known or is larger.
const MaxFailureOutputBytes = 256 * 1024

// OutputError gives a failure an output: the variables the step keeps as its output when this
// failure ends the step (no retry follows), as Conductor keeps a failed task's outputData; an
// optional step's successors read it. A failure a retry follows does not keep it. Return it
// (or any error wrapping it) from a handler, usually through [WithOutput]; it combines with
// [NonRetryable] and [WithNextRetryDelay] in either order.
type OutputError struct {
	Err    error
	Output map[string]any
}

func (e *OutputError) Error() string {
	if e.Err == nil {
		return "failed with an output"
	}
	return e.Err.Error()
}

func (e *OutputError) Unwrap() error { return e.Err }

// WithOutput wraps err so that the job's failure carries output (see [OutputError]):
//
//	return nil, baton.NonRetryable(baton.WithOutput(errors.New("card declined"), map[string]any{"code": 42}))
//
// The runner sends the output with the failure. One that is not JSON Baton can store (NaN, a
// channel, a NUL character...) or whose JSON is larger than the step output's soft limit (at
// most [MaxFailureOutputBytes]) is left out, with a warning in the job's log saying why: the
// failure itself is sent all the same. WithOutput(nil, output) is nil; a nil output sends none.
func WithOutput(err error, output map[string]any) error {
	if err == nil {
		return nil
	}
	return &OutputError{Err: err, Output: output}
}

// ProblemItem is one entry of a problem's errors list: where (a JSON path) and what.
type ProblemItem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// APIError is an error answer of the API: the fields of its RFC 9457 problem document.
type APIError struct {
	Status     int
	Title      string
	Detail     string
	Type       string
	Instance   string
	Errors     []ProblemItem
	RetryAfter time.Duration // from a Retry-After header (429, 503)
	Method     string
	URL        string
	// Credentials says where the credentials sent came from; set on 401 and 403 answers so
	// the message names the key that was refused.
	Credentials string
}

// Summary is one line: "404 Not found: definition 'x' not found" plus any listed problems.
func (e *APIError) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Status, e.Title)
	if e.Detail != "" && e.Detail != e.Title {
		b.WriteString(": " + e.Detail)
	}
	var listed []string
	for _, item := range e.Errors {
		if !strings.Contains(e.Detail, item.Message) {
			listed = append(listed, item.Path+": "+item.Message)
		}
	}
	if len(listed) > 0 {
		b.WriteString(" (" + strings.Join(listed, "; ") + ")")
	}
	return b.String()
}

func (e *APIError) Error() string {
	s := e.Summary()
	if (e.Status == 401 || e.Status == 403) && e.Credentials != "" {
		s += " [" + e.Credentials + "]"
	}
	return s
}

// Transient is true when the same request may succeed later (429 and 5xx).
func (e *APIError) Transient() bool { return e.Status == 429 || e.Status >= 500 }

// TransportError is a request that got no answer: connection refused or reset, a timeout.
// Sent is false when the request surely never reached the server; URLSource then says where
// the URL came from, and the message how to set another.
type TransportError struct {
	Method    string
	URL       string
	Sent      bool
	Err       error
	URLSource string
}

func (e *TransportError) Error() string {
	if !e.Sent {
		if e.URLSource != "" {
			return fmt.Sprintf("cannot reach %s: %v (the URL comes from %s; is a server running there? "+
				"Set another with NewClient's baseURL or $%s)", e.URL, e.Err, e.URLSource, EnvURL)
		}
		return fmt.Sprintf("cannot reach %s: %v", e.URL, e.Err)
	}
	return fmt.Sprintf("%s %s failed: %v", e.Method, e.URL, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// HasStatus reports whether err is (or wraps) an [APIError] with the given status.
func HasStatus(err error, status int) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Status == status
}

// IsNotFound reports a 404 answer.
func IsNotFound(err error) bool { return HasStatus(err, 404) }

// IsConflict reports a 409 answer (for a job: it is no longer this worker's).
func IsConflict(err error) bool { return HasStatus(err, 409) }

// IsTransient reports an error worth retrying later: no answer, 429 or 5xx.
func IsTransient(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Transient()
	}
	var transport *TransportError
	return errors.As(err, &transport)
}
