package baton

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func echoRegistry(jobType string) *Registry {
	reg := NewRegistry()
	reg.Register(jobType, func(_ context.Context, job *Job) (map[string]any, error) {
		return map[string]any{"echoed": job.Input, "attempt": job.Attempt}, nil
	})
	return reg
}

func TestResultsAreBatchedWithTheirAttempts(t *testing.T) {
	f := newFake(t)
	for i := range 20 {
		f.push(job(fmt.Sprintf("j%02d", i), "echo", 3, `{"n":1}`))
	}
	r := NewRunner(f.client(t), echoRegistry("echo"), WithParallelism(8), WithRunnerLogger(quietLogger()),
		WithBatchResults(true, 200*time.Millisecond, 32))
	stop := runInBackground(t, r)
	f.waitFor("20 results", func() bool { return len(f.results) == 20 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	batches := f.count("POST", "/v1/jobs/complete-batch")
	if batches >= 20 || batches == 0 {
		t.Fatalf("20 results went out in %d complete-batch calls; want batches", batches)
	}
	if n := f.count("POST", "/v1/jobs/complete"); n != 0 {
		t.Fatalf("%d single completions while batching", n)
	}
	for id, item := range f.results {
		if item.Attempt == nil || *item.Attempt != 3 {
			t.Fatalf("result of %s carries attempt %v, want 3", id, item.Attempt)
		}
		if string(item.VariablesToSet) != `{"attempt":3,"echoed":{"n":1}}` {
			t.Fatalf("variables of %s: %s", id, item.VariablesToSet)
		}
	}
}

func TestAPollNeverAsksForMoreThanFreeSlots(t *testing.T) {
	f := newFake(t)
	for i := range 12 {
		f.push(job(fmt.Sprintf("j%02d", i), "slow", 1, `{}`))
	}
	var running, most atomic.Int32
	release := make(chan struct{})
	reg := NewRegistry()
	reg.Register("slow", func(context.Context, *Job) (map[string]any, error) {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		return nil, nil
	})
	r := NewRunner(f.client(t), reg, WithParallelism(3), WithPrefetch(1), WithMaxJobsPerPoll(10),
		WithRunnerLogger(quietLogger()))
	stop := runInBackground(t, r)
	// 3 running and 1 prefetched: 4 slots, all taken; no poll may ask for more.
	f.waitFor("4 jobs claimed", func() bool { return len(f.queue) == 8 })
	time.Sleep(100 * time.Millisecond) // let a wrong runner poll again
	f.mu.Lock()
	queued := len(f.queue)
	f.mu.Unlock()
	if queued != 8 {
		t.Fatalf("%d jobs left queued; the runner claimed beyond parallelism + prefetch", queued)
	}
	for _, body := range f.bodies("/v1/jobs/poll") {
		if n := body["maxJobs"].(float64); n > 4 {
			t.Fatalf("a poll asked for %v jobs with 4 slots", n)
		}
	}
	close(release)
	f.waitFor("12 results", func() bool { return len(f.results) == 12 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if most.Load() > 3 {
		t.Fatalf("%d handlers ran at once with parallelism 3", most.Load())
	}
}

func TestLongHandlersAreHeartbeatedWithTheirAttempt(t *testing.T) {
	f := newFake(t)
	j := job("long", "long", 2, `{}`)
	j.LockExpiresAt = time.Now().Add(400 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	f.push(j)
	reg := NewRegistry()
	reg.Register("long", func(ctx context.Context, job *Job) (map[string]any, error) {
		select {
		case <-time.After(1200 * time.Millisecond):
			return map[string]any{"done": true}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	r := NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger()))
	stop := runInBackground(t, r)
	f.waitFor("the result", func() bool { return len(f.results) == 1 })
	_ = stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.heartbeats) < 2 {
		t.Fatalf("%d heartbeats for a 1.2 s handler with a 0.4 s lease", len(f.heartbeats))
	}
	for _, hb := range f.heartbeats {
		if hb["attempt"] != float64(2) || hb["jobId"] != "long" {
			t.Fatalf("heartbeat %v: want jobId long, attempt 2", hb)
		}
	}
	if f.results["long"].Failure != nil {
		t.Fatalf("the heartbeated job failed: %v", f.results["long"].Failure)
	}
}

func TestALostLeaseCancelsTheHandlersContext(t *testing.T) {
	f := newFake(t)
	j := job("lost", "long", 1, `{}`)
	j.LockExpiresAt = time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	f.push(j)
	f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
		if r.URL.Path == "/v1/jobs/heartbeat" {
			problem(w, 409, "Conflict", "job lost is not locked by this worker")
			return true
		}
		return false
	}
	cause := make(chan error, 1)
	reg := NewRegistry()
	reg.Register("long", func(ctx context.Context, job *Job) (map[string]any, error) {
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
			return nil, context.Cause(ctx)
		case <-time.After(5 * time.Second):
			cause <- nil
			return nil, nil
		}
	})
	r := NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger()))
	stop := runInBackground(t, r)
	got := <-cause
	_ = stop()
	if !errors.Is(got, ErrLeaseLost) {
		t.Fatalf("the handler's context ended with %v; want ErrLeaseLost", got)
	}
}

func TestThePollBacksOffOn503AndRecovers(t *testing.T) {
	f := newFake(t)
	f.push(job("after-503", "echo", 1, `{}`))
	var polls atomic.Int32
	f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
		if r.URL.Path == "/v1/jobs/poll" && polls.Add(1) <= 2 {
			problem(w, 503, "Service unavailable", "try later")
			return true
		}
		return false
	}
	r := NewRunner(f.client(t), echoRegistry("echo"), WithRunnerLogger(quietLogger()),
		WithPollErrorBackoff(RetryPolicy{InitialInterval: 20 * time.Millisecond, Coefficient: 2, MaxInterval: 100 * time.Millisecond, Jitter: 0.5}))
	stop := runInBackground(t, r)
	f.waitFor("the result", func() bool { return len(f.results) == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if polls.Load() < 3 {
		t.Fatalf("%d polls; want two refused ones and then a good one", polls.Load())
	}
}

func TestTheClientRetries503ButNeverAnother4xx(t *testing.T) {
	for _, tc := range []struct {
		status, calls int
	}{{503, 3}, {429, 3}, {400, 1}, {422, 1}, {404, 1}} {
		f := newFake(t)
		var calls atomic.Int32
		f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
			if calls.Add(1) < 3 || tc.status < 500 && tc.status != 429 {
				problem(w, tc.status, http.StatusText(tc.status), "no")
				return true
			}
			writeJSON(w, 200, map[string]any{"jobId": "j", "lockExpiresAt": time.Now().UTC().Format(time.RFC3339Nano)})
			return true
		}
		c := f.client(t, WithRetryPolicy(RetryPolicy{InitialInterval: time.Millisecond, Coefficient: 2, MaxInterval: 5 * time.Millisecond, MaxAttempts: 4}))
		_, err := c.Heartbeat(context.Background(), "j", "w", 1)
		if int(calls.Load()) != tc.calls {
			t.Fatalf("status %d: %d calls, want %d (err %v)", tc.status, calls.Load(), tc.calls, err)
		}
		if (tc.calls == 1) != (err != nil) {
			t.Fatalf("status %d: error %v", tc.status, err)
		}
	}
}

func TestStoppingDrainsInFlightHandlersAndClaimsNothingMore(t *testing.T) {
	f := newFake(t)
	f.push(job("in-flight", "slow", 1, `{}`))
	started := make(chan struct{})
	reg := NewRegistry()
	reg.Register("slow", func(_ context.Context, job *Job) (map[string]any, error) {
		close(started)
		<-job.ShuttingDown()
		time.Sleep(300 * time.Millisecond) // still running well after the stop
		return map[string]any{"finished": true}, nil
	})
	r := NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger()))
	stop := runInBackground(t, r)
	<-started
	pollsBefore := f.count("POST", "/v1/jobs/poll")
	f.push(job("too-late", "slow", 1, `{}`))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	item, ok := f.results["in-flight"]
	if !ok || string(item.VariablesToSet) != `{"finished":true}` {
		t.Fatalf("Run returned before the in-flight job's result was sent: %+v", item)
	}
	if _, claimed := f.results["too-late"]; claimed || len(f.queue) != 1 {
		t.Fatal("a job was claimed after the stop")
	}
	if after := f.countLocked("POST", "/v1/jobs/poll"); after > pollsBefore+1 {
		t.Fatalf("%d polls after the stop", after-pollsBefore)
	}
}

func TestOutcomesOfHandlers(t *testing.T) {
	f := newFake(t)
	reg := NewRegistry()
	reg.Register("nan", func(context.Context, *Job) (map[string]any, error) {
		return map[string]any{"stats": map[string]any{"ratio": math.NaN()}}, nil
	})
	reg.Register("refuse", func(context.Context, *Job) (map[string]any, error) {
		return nil, NonRetryable(errors.New("nothing to charge"))
	})
	reg.Register("later", func(context.Context, *Job) (map[string]any, error) {
		return nil, WithNextRetryDelay(errors.New("rate limited"), 30*time.Second)
	})
	reg.Register("oops", func(context.Context, *Job) (map[string]any, error) {
		return nil, fmt.Errorf("gateway: %w", errors.New("timeout"))
	})
	reg.Register("panics", func(context.Context, *Job) (map[string]any, error) {
		panic("boom")
	})
	for _, name := range []string{"nan", "refuse", "later", "oops", "panics"} {
		f.push(job(name, name, 1, `{}`))
	}
	stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger())))
	f.waitFor("5 results", func() bool { return len(f.results) == 5 })
	_ = stop()
	want := map[string]struct {
		message   string
		retryable bool
		delay     float64
	}{
		"nan":    {"the handler's result cannot be sent: $.stats.ratio is NaN, which is not JSON", false, -1},
		"refuse": {"nothing to charge", false, -1},
		"later":  {"rate limited", true, 30},
		"oops":   {"gateway: timeout", true, -1},
		"panics": {"panic: boom", true, -1},
	}
	for name, w := range want {
		fl := f.results[name].Failure
		if fl == nil || fl.ErrorMessage != w.message || fl.Retryable != w.retryable {
			t.Fatalf("%s: failure %+v, want %+v", name, fl, w)
		}
		if (w.delay < 0) != (fl.NextRetryDelaySeconds == nil) || (fl.NextRetryDelaySeconds != nil && *fl.NextRetryDelaySeconds != w.delay) {
			t.Fatalf("%s: next retry delay %v, want %v", name, fl.NextRetryDelaySeconds, w.delay)
		}
	}
}

func TestJobFieldsAndLogger(t *testing.T) {
	f := newFake(t)
	f.push(job("j1", "info", 2, `{"orderId":"A-1","qty":3}`))
	got := make(chan *Job, 1)
	reg := NewRegistry()
	reg.Register("info", func(_ context.Context, job *Job) (map[string]any, error) {
		got <- job
		return nil, nil
	})
	stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger()), WithWorkerID("w-1")))
	j := <-got
	_ = stop()
	if j.ID != "j1" || j.InstanceID != "i-j1" || j.StepID != "s" || j.StepExecutionID != "se-j1" || j.Type != "info" ||
		j.Attempt != 2 || j.RetriesRemaining != 2 || j.WorkerID != "w-1" || j.Input["orderId"] != "A-1" {
		t.Fatalf("job fields: %+v", j)
	}
	var in struct {
		OrderID string `json:"orderId"`
		Qty     int    `json:"qty"`
	}
	if err := j.Decode(&in); err != nil || in.OrderID != "A-1" || in.Qty != 3 {
		t.Fatalf("Decode: %+v %v", in, err)
	}
	if j.Logger == nil || j.LockExpiresAt().IsZero() {
		t.Fatal("no logger or lease")
	}
}

type countingMetrics struct {
	NoopMetrics
	mu                                      sync.Mutex
	polls, started, completed, failed, gone int
	retryableFailures                       int
}

func (m *countingMetrics) PollCompleted(_, received int, _ time.Duration) {
	m.mu.Lock()
	m.polls++
	m.mu.Unlock()
}
func (m *countingMetrics) JobStarted(string) {
	m.mu.Lock()
	m.started++
	m.mu.Unlock()
	panic("a broken sink")
}
func (m *countingMetrics) JobCompleted(string, time.Duration) {
	m.mu.Lock()
	m.completed++
	m.mu.Unlock()
}
func (m *countingMetrics) JobFailed(_ string, _ time.Duration, retryable bool) {
	m.mu.Lock()
	m.failed++
	if retryable {
		m.retryableFailures++
	}
	m.mu.Unlock()
}

func TestMetricsSeeEveryOutcomeAndABrokenSinkChangesNothing(t *testing.T) {
	f := newFake(t)
	reg := echoRegistry("echo")
	reg.Register("flaky", func(context.Context, *Job) (map[string]any, error) { return nil, errors.New("flaky") })
	f.push(job("a", "echo", 1, `{}`), job("b", "echo", 1, `{}`), job("c", "flaky", 1, `{}`))
	m := &countingMetrics{}
	stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger()), WithMetrics(m)))
	f.waitFor("3 results", func() bool { return len(f.results) == 3 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.polls == 0 || m.started != 3 || m.completed != 2 || m.failed != 1 || m.retryableFailures != 1 {
		t.Fatalf("%+v", m)
	}
}

func TestInMemoryMetricsCountARunnersOutcomes(t *testing.T) {
	f := newFake(t)
	reg := echoRegistry("echo")
	reg.Register("refused", func(context.Context, *Job) (map[string]any, error) {
		return nil, NonRetryable(errors.New("refused"))
	})
	f.push(job("a", "echo", 1, `{}`), job("b", "echo", 1, `{}`), job("c", "refused", 1, `{}`))
	m := &InMemoryMetrics{}
	stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger()), WithMetrics(m)))
	f.waitFor("3 results", func() bool { return len(f.results) == 3 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := m.Snapshot()
	if s.Polls == 0 || s.JobsStarted["echo"] != 2 || s.JobsStarted["refused"] != 1 || s.JobsCompleted["echo"] != 2 ||
		s.JobsFailed["refused"] != 1 || s.JobsFailedNonRetryable["refused"] != 1 || len(s.OutcomesUnreported) != 0 {
		t.Fatalf("%+v", s)
	}
	s.JobsStarted["echo"] = 99 // a copy
	if m.Snapshot().JobsStarted["echo"] != 2 {
		t.Fatal("the snapshot shares its maps")
	}
}

// By default a poll asks for every free slot (parallelism + prefetch), up to the API's 100,
// not a fixed 10: fewer, larger polls cost the server less per job.
func TestADefaultPollAsksForEveryFreeSlot(t *testing.T) {
	f := newFake(t)
	for i := range 64 {
		f.push(job(fmt.Sprintf("j%02d", i), "echo", 1, `{}`))
	}
	stop := runInBackground(t, NewRunner(f.client(t), echoRegistry("echo"), WithParallelism(16), WithRunnerLogger(quietLogger())))
	f.waitFor("64 results", func() bool { return len(f.results) == 64 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	polls := f.bodies("/v1/jobs/poll")
	if first := polls[0]["maxJobs"].(float64); first != 32 {
		t.Fatalf("the first poll asked for %v jobs; want 32 (16 handlers + 16 prefetched)", first)
	}
	for _, body := range polls {
		if n := body["maxJobs"].(float64); n > 32 {
			t.Fatalf("a poll asked for %v jobs with 32 slots", n)
		}
	}
}

// By default a flush carries up to the API's 100 results.
func TestADefaultFlushCarriesUpTo100Results(t *testing.T) {
	f := newFake(t)
	o := defaultRunnerOptions()
	fl := newFlusher(f.client(t), o.reportRetry, o.flushInterval, o.maxResultsPerFlush, quietLogger())
	var answered atomic.Int32
	for i := range 150 {
		fl.submit(ResultItem{JobID: fmt.Sprintf("j%03d", i), WorkerID: "w", VariablesToSet: json.RawMessage(`{}`)},
			func(BatchOutcome) { answered.Add(1) }, func(err error) { t.Errorf("unreported: %v", err) })
	}
	fl.start()
	if !fl.close(10 * time.Second) {
		t.Fatal("the flusher did not finish")
	}
	var sizes []int
	for _, body := range f.bodies("/v1/jobs/complete-batch") {
		sizes = append(sizes, len(body["results"].([]any)))
	}
	if !reflect.DeepEqual(sizes, []int{100, 50}) || answered.Load() != 150 {
		t.Fatalf("150 waiting results went out in batches of %v (%d answered); want [100 50]", sizes, answered.Load())
	}
}

func TestInFlightCountsTheJobsHeld(t *testing.T) {
	f := newFake(t)
	f.push(job("a", "slow", 1, `{}`), job("b", "slow", 1, `{}`))
	release := make(chan struct{})
	reg := NewRegistry()
	reg.Register("slow", func(context.Context, *Job) (map[string]any, error) { <-release; return nil, nil })
	r := NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger()))
	if r.InFlight() != 0 || !reflect.DeepEqual(r.JobTypes(), []string{"slow"}) {
		t.Fatalf("before Run: %d in flight, types %v", r.InFlight(), r.JobTypes())
	}
	stop := runInBackground(t, r)
	deadline := time.Now().Add(10 * time.Second)
	for r.InFlight() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d in flight; want 2", r.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	f.waitFor("2 results", func() bool { return len(f.results) == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if r.InFlight() != 0 {
		t.Fatalf("%d in flight after Run", r.InFlight())
	}
}
