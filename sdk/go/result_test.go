package baton

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestResultsThatAreNotJSONSayWhere(t *testing.T) {
	type inner struct {
		Score float64 `json:"score"`
	}
	for _, tc := range []struct {
		vars map[string]any
		want string
	}{
		{map[string]any{"ratio": math.Inf(1)}, "$.ratio is Infinity, which is not JSON"},
		{map[string]any{"list": []any{1, math.NaN()}}, "$.list[1] is NaN, which is not JSON"},
		{map[string]any{"s": inner{Score: math.Inf(-1)}}, "$.s.score is -Infinity, which is not JSON"},
		{map[string]any{"c": make(chan int)}, "$.c is a chan int, which is not JSON"},
		{map[string]any{"text": "a\x00b"}, "$.text contains a NUL character (\\u0000), which Baton cannot store"},
		{map[string]any{"odd key": map[string]any{"x": math.NaN()}}, `$["odd key"].x is NaN, which is not JSON`},
	} {
		_, problem := encodeResult(tc.vars)
		if problem != "the handler's result cannot be sent: "+tc.want {
			t.Fatalf("%v: %q, want %q", tc.vars, problem, tc.want)
		}
	}
	encoded, problem := encodeResult(map[string]any{"at": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "html": "<b>&</b>", "n": []int{1}})
	if problem != "" || string(encoded) != `{"at":"2026-01-02T03:04:05Z","html":"<b>&</b>","n":[1]}` {
		t.Fatalf("%s %q", encoded, problem)
	}
}

func TestErrorMessagesAreStorable(t *testing.T) {
	if got := storable("a\x00b"); got != `a\x00b` {
		t.Fatalf("%q", got)
	}
	long := storable(strings.Repeat("é", 6000))
	if len(long) > maxErrorMessage || !strings.HasSuffix(long, "...") || !strings.HasPrefix(long, "é") {
		t.Fatalf("clipped to %d bytes", len(long))
	}
}

func TestRegisterRefusesMistakes(t *testing.T) {
	r := NewRegistry()
	ok := func(context.Context, *Job) (map[string]any, error) { return nil, nil }
	r.Register("charge-card", ok)
	for name, register := range map[string]func(){
		"a second handler": func() { r.Register("charge-card", ok) },
		"a bad job type":   func() { r.Register("has space", ok) },
		"a nil handler":    func() { r.Register("x", nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("%s was accepted", name)
				}
			}()
			register()
		}()
	}
	r.Replace("charge-card", ok)
	if got := r.JobTypes(); len(got) != 1 || got[0] != "charge-card" {
		t.Fatalf("%v", got)
	}
	if err := NewRunner(&Client{}, NewRegistry()).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no job types") {
		t.Fatalf("an empty registry ran: %v", err)
	}
}

func TestAnInputThatCannotBeDownloadedFailsTheJobRetryably(t *testing.T) {
	f := newFake(t)
	s3 := newFakeS3(t)
	j := job("gone", "echo", 1, `null`)
	j.InputPayloadPath, j.InputDownloadURL = "payloads/in/gone", s3.server.URL+"/missing"
	f.push(j)
	called := false
	reg := NewRegistry()
	reg.Register("echo", func(context.Context, *Job) (map[string]any, error) {
		called = true
		return nil, nil
	})
	stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger())))
	f.waitFor("the result", func() bool { return len(f.results) == 1 })
	_ = stop()
	fl := f.results["gone"].Failure
	if called || fl == nil || !fl.Retryable || !strings.HasPrefix(fl.ErrorMessage, "cannot download the job's input: payload download failed: 404") {
		t.Fatalf("handler called %v, failure %+v", called, fl)
	}
}

func TestAResultTheServerRefusesFailsTheJobWithItsReason(t *testing.T) {
	f := newFake(t)
	f.push(job("r1", "echo", 1, `{}`))
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		if r.URL.Path == "/v1/jobs/complete-batch" {
			results := body["results"].([]any)
			item := results[0].(map[string]any)
			if item["failure"] == nil {
				writeJSON(w, 200, map[string]any{"results": []BatchOutcome{{JobID: "r1", Outcome: "INVALID", Error: "variablesToSet: too deep"}}})
				return true
			}
		}
		return false
	}
	stop := runInBackground(t, NewRunner(f.client(t), echoRegistry("echo"), WithRunnerLogger(quietLogger())))
	f.waitFor("the failure", func() bool { return len(f.results) == 1 })
	_ = stop()
	fl := f.results["r1"].Failure
	if fl == nil || fl.Retryable || fl.ErrorMessage != "the server refused the handler's result: variablesToSet: too deep" {
		t.Fatalf("%+v", fl)
	}
}

func TestADrainTimeoutCancelsHandlersAndSaysSo(t *testing.T) {
	f := newFake(t)
	f.push(job("stuck", "stuck", 1, `{}`))
	started := make(chan struct{})
	cause := make(chan error, 1)
	reg := NewRegistry()
	reg.Register("stuck", func(ctx context.Context, _ *Job) (map[string]any, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger()), WithDrainTimeout(200*time.Millisecond)))
	<-started
	err := stop()
	if err == nil || !strings.Contains(err.Error(), "drain timed out") {
		t.Fatalf("Run returned %v", err)
	}
	if c := <-cause; c == nil || errors.Is(c, ErrLeaseLost) {
		t.Fatalf("the handler's context ended with %v", c)
	}
}

func TestA401WithoutAKeySaysNoneWasSent(t *testing.T) {
	f := newFake(t)
	f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
		problem(w, 401, "Unauthorized", "missing API key")
		return true
	}
	t.Setenv(EnvAPIKey, "")
	t.Setenv(EnvDataDir, t.TempDir())
	c, err := NewClient(f.server.URL, WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PollJobs(context.Background(), PollRequest{WorkerID: "w", JobTypes: []string{"t"}, MaxJobs: 1})
	if err == nil || !strings.Contains(err.Error(), "no API key was sent") || !strings.Contains(err.Error(), "$BATON_API_KEY unset") {
		t.Fatalf("%v", err)
	}
}
