package baton

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// A stop while a long-poll is out. The defect these guard against: a stop that cancelled the
// outstanding long-poll threw its answer away, and with it a job the server had just claimed for
// this worker (the claim committed, the answer on its way); the job sat leased until its lease
// lapsed, then ran again as a new attempt. The runner now sends the worker's stop signal, takes
// the poll's answer and runs its jobs in the drain; only a poll unanswered past a grace is
// abandoned.

// waitForLongPoll waits until the runner has a long-poll out.
func (f *fakeBaton) waitForLongPoll() {
	f.t.Helper()
	f.waitFor("a long-poll", func() bool {
		for _, req := range f.requests {
			if req.Path == "/v1/jobs/poll" && req.Body["waitSeconds"] != nil {
				return true
			}
		}
		return false
	})
}

// holdUntil blocks a request's handler until cond (called under the lock) holds or the request
// ends; it says whether cond came true. For hooks: it never fails the test itself.
func (f *fakeBaton) holdUntil(r *http.Request, cond func() bool) bool {
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ok := cond()
		ch := f.changed
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return false
		case <-deadline:
			return false
		}
	}
}

func TestAJobClaimedByTheLongPollOutAtTheStopRunsInTheDrain(t *testing.T) {
	f := newFake(t)
	// The long-poll waits on the server until the worker's stop signal; then it answers with a
	// job it claimed in that same moment (the race of the flaky CI run).
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if r.URL.Path != "/v1/jobs/poll" || body["waitSeconds"] == nil {
			return false
		}
		if !f.holdUntil(r, func() bool { return len(f.stops) > 0 }) {
			problem(w, 500, "Internal error", "no stop signal while the long-poll was held")
			return true
		}
		writeJSON(w, 200, map[string]any{"jobs": []ClaimedJob{job("at-stop", "echo", 1, `{"n":1}`)}})
		return true
	}
	r := NewRunner(f.client(t), echoRegistry("echo"), WithRunnerLogger(quietLogger()), WithWorkerID("w-stop"),
		WithLongPollWait(10*time.Second))
	stop := runInBackground(t, r)
	f.waitForLongPoll()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	item, ok := f.results["at-stop"]
	if !ok || item.Failure != nil || string(item.VariablesToSet) != `{"attempt":1,"echoed":{"n":1}}` {
		t.Fatalf("the job the held poll claimed was not run and completed before Run returned: %+v (ok %v)", item, ok)
	}
	if f.stops["w-stop"] != 1 || len(f.stops) != 1 {
		t.Fatalf("stop signals: %v; want one from w-stop", f.stops)
	}
	if polls := f.countLocked("POST", "/v1/jobs/poll"); polls != 2 {
		t.Fatalf("%d polls; want the first short one and the held long-poll, none after the stop", polls)
	}
}

func TestAStopDuringALongPollEndsItWithTheStopSignal(t *testing.T) {
	f := newFake(t) // its long-poll answers empty at the worker's stop signal, as Baton's does
	r := NewRunner(f.client(t), echoRegistry("echo"), WithRunnerLogger(quietLogger()), WithLongPollWait(10*time.Second))
	stop := runInBackground(t, r)
	f.waitForLongPoll()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stops[r.WorkerID()] != 1 || len(f.stops) != 1 {
		t.Fatalf("stop signals: %v; want one from %s", f.stops, r.WorkerID())
	}
	if f.abandonedPolls != 0 {
		t.Fatal("the long-poll was cut off instead of answered")
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) records(t *testing.T) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

func TestALongPollUnansweredAfterTheStopSignalIsAbandonedAfterTheGrace(t *testing.T) {
	saved := stopPollGrace
	stopPollGrace = 300 * time.Millisecond
	t.Cleanup(func() { stopPollGrace = saved })
	f := newFake(t)
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if r.URL.Path != "/v1/jobs/poll" || body["waitSeconds"] == nil {
			return false
		}
		<-r.Context().Done() // never answered: held until the client hangs up
		f.mu.Lock()
		f.abandonedPolls++
		f.notifyLocked()
		f.mu.Unlock()
		return true
	}
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := NewRunner(f.client(t), echoRegistry("echo"), WithRunnerLogger(logger), WithWorkerID("w-grace"),
		WithLongPollWait(10*time.Second))
	stop := runInBackground(t, r)
	f.waitForLongPoll()
	begun := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(begun); waited < stopPollGrace {
		t.Fatalf("Run returned %s after the stop, before the grace of %s", waited, stopPollGrace)
	}
	f.waitFor("the held poll cut off", func() bool { return f.abandonedPolls == 1 })
	f.mu.Lock()
	if f.stops["w-grace"] != 1 {
		t.Fatalf("stop signals: %v; want one from w-grace", f.stops)
	}
	f.mu.Unlock()
	var warned []map[string]any
	for _, rec := range logs.records(t) {
		if strings.Contains(rec["msg"].(string), "abandoned") {
			warned = append(warned, rec)
		}
	}
	if len(warned) != 1 || warned[0]["level"] != "WARN" || warned[0]["worker_id"] != "w-grace" {
		t.Fatalf("want one WARN naming the worker about the abandoned poll; got %v", warned)
	}
}

func TestEveryStopSendsTheStopSignalOncePollingIsOver(t *testing.T) {
	f := newFake(t)
	r := NewRunner(f.client(t), echoRegistry("echo"), WithRunnerLogger(quietLogger()), WithLongPollWait(0))
	stop := runInBackground(t, r)
	f.waitFor("a poll", func() bool { return f.countLocked("POST", "/v1/jobs/poll") > 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if bodies := f.bodies("/v1/workers/stop"); len(bodies) != 1 || bodies[0]["workerId"] != r.WorkerID() {
		t.Fatalf("stop signals: %v", bodies)
	}
}
