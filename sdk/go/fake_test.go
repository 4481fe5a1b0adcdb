package baton

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBaton is a small in-process Baton API: it hands out queued jobs to polls and records
// every request, so the runner's behaviour can be checked without a server.
type fakeBaton struct {
	t       *testing.T
	server  *httptest.Server
	connect *connectServer // the Connect protocol in front of serve, as Baton has it

	mu         sync.Mutex
	queue      []ClaimedJob
	requests   []recorded
	results    map[string]ResultItem // job id -> the result reported
	heartbeats []map[string]any
	stops      map[string]int // the stop signals received, per worker id
	// long-polls that ended because their client hung up (not answered)
	abandonedPolls int
	// hooks: return true when the hook answered the request itself
	hook    func(w http.ResponseWriter, r *http.Request, body map[string]any) bool
	changed chan struct{}
}

type recorded struct {
	Method, Path string
	Body         map[string]any
	APIKey       string
}

func newFake(t *testing.T) *fakeBaton {
	f := &fakeBaton{t: t, results: map[string]ResultItem{}, stops: map[string]int{}, changed: make(chan struct{})}
	f.connect = &connectServer{rest: http.HandlerFunc(f.serve)}
	f.server = httptest.NewServer(f.connect)
	t.Cleanup(f.server.Close)
	return f
}

func (f *fakeBaton) client(t *testing.T, opts ...ClientOption) *Client {
	opts = append([]ClientOption{WithAPIKey("test-key"), WithLogger(quietLogger())}, opts...)
	c, err := NewClient(f.server.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (f *fakeBaton) push(jobs ...ClaimedJob) {
	f.mu.Lock()
	f.queue = append(f.queue, jobs...)
	f.notifyLocked() // a waiting long-poll takes them; waitFor looks again
	f.mu.Unlock()
}

func (f *fakeBaton) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitFor waits until cond (called under the lock) holds, failing the test after 10 s.
func (f *fakeBaton) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ok := cond()
		ch := f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (f *fakeBaton) count(method, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.countLocked(method, path)
}

func (f *fakeBaton) countLocked(method, path string) int {
	n := 0
	for _, r := range f.requests {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

func (f *fakeBaton) bodies(path string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, r := range f.requests {
		if r.Path == path {
			out = append(out, r.Body)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("content-type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "title": title, "detail": detail})
}

func (f *fakeBaton) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.requests = append(f.requests, recorded{r.Method, r.URL.Path, body, r.Header.Get("x-api-key")})
	f.notifyLocked()
	hook := f.hook
	f.mu.Unlock()
	if hook != nil && hook(w, r, body) {
		return
	}
	switch {
	case r.URL.Path == "/v1/jobs/poll":
		f.poll(w, r, body)
	case r.URL.Path == "/v1/jobs/complete-batch":
		var req struct {
			Results []ResultItem `json:"results"`
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			problem(w, 400, "Bad request", err.Error())
			return
		}
		answers := make([]BatchOutcome, len(req.Results))
		f.mu.Lock()
		for i, item := range req.Results {
			_, seen := f.results[item.JobID]
			f.results[item.JobID] = item
			answers[i] = BatchOutcome{JobID: item.JobID, Outcome: map[bool]string{true: "DUPLICATE", false: "APPLIED"}[seen], Status: "COMPLETED"}
		}
		f.notifyLocked()
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"results": answers})
	case r.URL.Path == "/v1/jobs/complete" || r.URL.Path == "/v1/jobs/fail":
		var item ResultItem
		_ = json.Unmarshal(raw, &item)
		if r.URL.Path == "/v1/jobs/fail" {
			var failure Failure
			_ = json.Unmarshal(raw, &failure)
			item.Failure = &failure
		}
		f.mu.Lock()
		f.results[item.JobID] = item
		f.notifyLocked()
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"jobId": item.JobID, "status": "COMPLETED", "applied": true})
	case r.URL.Path == "/v1/jobs/heartbeat":
		f.mu.Lock()
		f.heartbeats = append(f.heartbeats, body)
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"jobId": body["jobId"], "lockExpiresAt": time.Now().Add(400 * time.Millisecond).UTC().Format(time.RFC3339Nano)})
	case r.URL.Path == "/v1/workers/stop":
		f.mu.Lock()
		f.stops[fmt.Sprint(body["workerId"])]++
		f.notifyLocked()
		f.mu.Unlock()
		writeJSON(w, 200, map[string]any{"workerId": body["workerId"]})
	default:
		problem(w, 404, "Not found", "no route "+r.URL.Path)
	}
}

// poll hands out up to maxJobs queued jobs; with waitSeconds and nothing queued, it waits for
// a push, the wait, the worker's stop signal (then it answers empty, as Baton does) or the
// client hanging up.
func (f *fakeBaton) poll(w http.ResponseWriter, r *http.Request, body map[string]any) {
	maxJobs := int(body["maxJobs"].(float64))
	wait, _ := body["waitSeconds"].(float64)
	deadline := time.Now().Add(time.Duration(wait * float64(time.Second)))
	worker := fmt.Sprint(body["workerId"])
	f.mu.Lock()
	stops := f.stops[worker]
	f.mu.Unlock()
	for {
		f.mu.Lock()
		var jobs []ClaimedJob
		stopped := f.stops[worker] != stops
		if !stopped {
			n := min(maxJobs, len(f.queue))
			jobs = append(jobs, f.queue[:n]...)
			f.queue = f.queue[n:]
			if n > 0 {
				// waitFor on the queue looks again (the request's own notice came before
				// the take; a runner with every slot busy sends no other).
				f.notifyLocked()
			}
		}
		ch := f.changed
		f.mu.Unlock()
		if len(jobs) > 0 || stopped || !time.Now().Before(deadline) {
			if jobs == nil {
				jobs = []ClaimedJob{}
			}
			writeJSON(w, 200, map[string]any{"jobs": jobs})
			return
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
		case <-r.Context().Done():
			f.mu.Lock()
			f.abandonedPolls++
			f.mu.Unlock()
			return
		}
	}
}

func job(id, jobType string, attempt int, input string) ClaimedJob {
	return ClaimedJob{ID: id, InstanceID: "i-" + id, StepID: "s", StepExecutionID: "se-" + id, JobType: jobType,
		Attempt: attempt, RetriesRemaining: 2, Input: json.RawMessage(input),
		LockExpiresAt: time.Now().Add(30 * time.Second).UTC().Format(time.RFC3339Nano)}
}

// runInBackground starts r.Run and returns a function that cancels it and waits for it.
func runInBackground(t *testing.T, r *Runner) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return after its context was cancelled")
			return nil
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
