package baton

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// bufferLogger logs JSON records into a buffer; warned reads back the "error" of each record
// whose message holds msg, with its job id.
func bufferLogger() (*slog.Logger, *syncBuffer) {
	b := &syncBuffer{}
	return slog.New(slog.NewJSONHandler(b, nil)), b
}

func warned(t *testing.T, logs *syncBuffer, msg string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rec := range logs.records(t) {
		if m, _ := rec["msg"].(string); strings.Contains(m, msg) && rec["level"] == "WARN" {
			id, _ := rec["job_id"].(string)
			out[id], _ = rec["error"].(string)
		}
	}
	return out
}

// sentFailures is each job's failure as it went over the wire (its JSON object), from the
// complete-batch items or the /v1/jobs/fail bodies.
func (f *fakeBaton) sentFailures() map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, body := range f.bodies("/v1/jobs/complete-batch") {
		results, _ := body["results"].([]any)
		for _, r := range results {
			item, _ := r.(map[string]any)
			if failure, ok := item["failure"].(map[string]any); ok {
				id, _ := item["jobId"].(string)
				out[id] = append(out[id], failure)
			}
		}
	}
	for _, body := range f.bodies("/v1/jobs/fail") {
		id, _ := body["jobId"].(string)
		out[id] = append(out[id], body)
	}
	return out
}

func decoded(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	if raw == nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("output %s: %v", raw, err)
	}
	return m
}

func resultPaths(batch bool) (used, unused string) {
	if batch {
		return "/v1/jobs/complete-batch", "/v1/jobs/fail"
	}
	return "/v1/jobs/fail", "/v1/jobs/complete-batch"
}

func TestAFailureCarriesItsOutputOnBothPaths(t *testing.T) {
	for _, batch := range []bool{true, false} {
		f := newFake(t)
		reg := NewRegistry()
		reg.Register("refused", func(_ context.Context, job *Job) (map[string]any, error) {
			return nil, NonRetryable(WithOutput(errors.New("refused"), map[string]any{"code": 42, "input": job.Input}))
		})
		reg.Register("later", func(context.Context, *Job) (map[string]any, error) {
			// the other order: the output outside, the delay inside
			return nil, WithOutput(WithNextRetryDelay(errors.New("rate limited"), 5*time.Second), map[string]any{"retryAfter": 5})
		})
		reg.Register("plain", func(context.Context, *Job) (map[string]any, error) {
			return nil, NonRetryable(errors.New("no output"))
		})
		reg.Register("nil-output", func(context.Context, *Job) (map[string]any, error) {
			return nil, WithOutput(errors.New("nil output"), nil)
		})
		f.push(job("refused", "refused", 1, `{"k":"v"}`), job("later", "later", 1, `{}`),
			job("plain", "plain", 1, `{}`), job("nil-output", "nil-output", 1, `{}`))
		stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger()),
			WithBatchResults(batch, 5*time.Millisecond, 100)))
		f.waitFor("4 results", func() bool { return len(f.results) == 4 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		used, unused := resultPaths(batch)
		if f.count("POST", used) == 0 || f.count("POST", unused) != 0 {
			t.Fatalf("batch %v: %d calls to %s, %d to %s", batch, f.count("POST", used), used, f.count("POST", unused), unused)
		}
		want := map[string]struct {
			message   string
			retryable bool
			output    map[string]any
		}{
			"refused":    {"refused", false, map[string]any{"code": float64(42), "input": map[string]any{"k": "v"}}},
			"later":      {"rate limited", true, map[string]any{"retryAfter": float64(5)}},
			"plain":      {"no output", false, nil},
			"nil-output": {"nil output", true, nil},
		}
		sent := f.sentFailures()
		for name, w := range want {
			fl := f.results[name].Failure
			if fl == nil || fl.ErrorMessage != w.message || fl.Retryable != w.retryable || !reflect.DeepEqual(decoded(t, fl.Output), w.output) {
				t.Fatalf("batch %v, %s: failure %+v (output %s), want %+v", batch, name, fl, fl.Output, w)
			}
			if len(sent[name]) != 1 {
				t.Fatalf("batch %v, %s: sent %d times", batch, name, len(sent[name]))
			}
			if _, has := sent[name][0]["output"]; has != (w.output != nil) {
				t.Fatalf("batch %v, %s: sent %v", batch, name, sent[name][0])
			}
		}
		if d := f.results["later"].Failure.NextRetryDelaySeconds; d == nil || *d != 5 {
			t.Fatalf("batch %v: the output lost the retry delay: %v", batch, d)
		}
	}
}

func TestAFailuresOutputThatCannotGoIsLeftOutAndTheFailureStillGoes(t *testing.T) {
	for _, batch := range []bool{true, false} {
		f := newFake(t)
		f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
			if r.URL.Path == "/v1/config" {
				writeJSON(w, 200, map[string]any{"payloadLimits": map[string]any{"stepOutput": map[string]any{"softLimitBytes": 1000, "hardLimitBytes": 1 << 20}}})
				return true
			}
			return false
		}
		outputs := map[string]map[string]any{
			"nan":  {"stats": map[string]any{"ratio": math.NaN()}},
			"chan": {"c": make(chan int)},
			"nul":  {"s": "a\x00b"},
			"big":  {"blob": strings.Repeat("x", 2000)},
			"fits": {"blob": strings.Repeat("x", 500)},
		}
		reg := NewRegistry()
		for name, output := range outputs {
			reg.Register(name, func(context.Context, *Job) (map[string]any, error) {
				return nil, WithOutput(NonRetryable(errors.New(name+" refused")), output)
			})
			f.push(job(name, name, 1, `{}`))
		}
		logger, logs := bufferLogger()
		stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(logger),
			WithBatchResults(batch, 5*time.Millisecond, 100)))
		f.waitFor("5 results", func() bool { return len(f.results) == 5 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for name := range outputs {
			fl := f.results[name].Failure
			if fl == nil || fl.ErrorMessage != name+" refused" || fl.Retryable {
				t.Fatalf("batch %v, %s: the failure itself did not go as given: %+v", batch, name, fl)
			}
			if (name == "fits") != (fl.Output != nil) {
				t.Fatalf("batch %v, %s: output %s", batch, name, fl.Output)
			}
		}
		want := map[string]string{
			"nan":  "$.stats.ratio is NaN, which is not JSON",
			"chan": "$.c is a chan int, which is not JSON",
			"nul":  "$.s contains a NUL character (\\u0000), which Baton cannot store",
			"big":  "its JSON is 2011 bytes, above the 1000-byte limit",
		}
		if got := warned(t, logs, "output is left out"); !reflect.DeepEqual(got, want) {
			t.Fatalf("batch %v: warnings %v, want %v", batch, got, want)
		}
	}
}

// A server without /v1/config (or a larger soft limit): a failure's output still stays under
// MaxFailureOutputBytes.
func TestAFailuresOutputIsCappedWhenTheSoftLimitIsUnknown(t *testing.T) {
	f := newFake(t)
	reg := NewRegistry()
	blob := map[string]string{"under": strings.Repeat("x", MaxFailureOutputBytes-20), "over": strings.Repeat("x", MaxFailureOutputBytes)}
	for name, s := range blob {
		reg.Register(name, func(context.Context, *Job) (map[string]any, error) {
			return nil, WithOutput(errors.New(name), map[string]any{"blob": s})
		})
		f.push(job(name, name, 1, `{}`))
	}
	logger, logs := bufferLogger()
	stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(logger)))
	f.waitFor("2 results", func() bool { return len(f.results) == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if out := f.results["under"].Failure.Output; len(out) != MaxFailureOutputBytes-20+len(`{"blob":""}`) {
		t.Fatalf("an output under the cap was not sent whole: %d bytes", len(out))
	}
	if out := f.results["over"].Failure.Output; out != nil {
		t.Fatalf("an output over the cap was sent: %d bytes", len(out))
	}
	want := map[string]string{"over": "its JSON is 262155 bytes, above the 262144-byte limit"}
	if got := warned(t, logs, "output is left out"); !reflect.DeepEqual(got, want) {
		t.Fatalf("warnings %v, want %v", got, want)
	}
}

// A server that refuses a failure for its output (one older than failure outputs refuses the
// field) gets the failure again without it.
func TestAFailureRefusedForItsOutputGoesAgainWithoutIt(t *testing.T) {
	for _, batch := range []bool{true, false} {
		f := newFake(t)
		f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
			refused := body["output"] != nil
			results, _ := body["results"].([]any)
			for _, item := range results {
				failure, _ := item.(map[string]any)["failure"].(map[string]any)
				refused = refused || failure["output"] != nil
			}
			if refused {
				problem(w, 422, "Unprocessable content", "output: extra inputs are not permitted")
				return true
			}
			return false
		}
		reg := NewRegistry()
		reg.Register("refused", func(context.Context, *Job) (map[string]any, error) {
			return nil, NonRetryable(WithOutput(errors.New("refused"), map[string]any{"code": 42}))
		})
		f.push(job("refused", "refused", 1, `{}`), job("echo", "echo", 1, `{"n":1}`))
		reg.Register("echo", echoRegistry("echo").Handler("echo"))
		logger, logs := bufferLogger()
		stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(logger),
			WithBatchResults(batch, 5*time.Millisecond, 100)))
		f.waitFor("2 results", func() bool { return len(f.results) == 2 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		fl := f.results["refused"].Failure
		if fl == nil || fl.ErrorMessage != "refused" || fl.Retryable || fl.Output != nil {
			t.Fatalf("batch %v: failure %+v", batch, fl)
		}
		if f.results["echo"].Failure != nil {
			t.Fatalf("batch %v: the other result: %+v", batch, f.results["echo"])
		}
		got := warned(t, logs, "sending it without the output")
		if len(got) != 1 || !strings.Contains(got["refused"], "output: extra inputs are not permitted") {
			t.Fatalf("batch %v: warnings %v", batch, got)
		}
	}
}

func TestWithOutputWrapsItsError(t *testing.T) {
	if WithOutput(nil, map[string]any{"a": 1}) != nil {
		t.Fatal("WithOutput(nil, ...) is not nil")
	}
	cause := errors.New("card declined")
	err := NonRetryable(WithOutput(cause, map[string]any{"code": 42}))
	var withOutput *OutputError
	var nonRetryable *NonRetryableError
	if err.Error() != "card declined" || !errors.Is(err, cause) || !errors.As(err, &withOutput) || !errors.As(err, &nonRetryable) ||
		withOutput.Output["code"] != 42 {
		t.Fatalf("%v", err)
	}
}
