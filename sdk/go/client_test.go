package baton

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestKeyDiscovery(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "api-key"), []byte("file-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDataDir, dir)
	t.Setenv(EnvAPIKey, "")
	if key, source := APIKeyFromEnv("http://127.0.0.1:8080"); key != "file-key" || source != filepath.Join(dir, "api-key") {
		t.Fatalf("local server: %q from %q", key, source)
	}
	if key, _ := APIKeyFromEnv("https://api.example.com/prod"); key != "" {
		t.Fatalf("the local key was offered to another host: %q", key)
	}
	t.Setenv(EnvAPIKey, "env-key")
	if key, source := APIKeyFromEnv("http://localhost:8080"); key != "env-key" || source != "$BATON_API_KEY" {
		t.Fatalf("env: %q from %q", key, source)
	}
	t.Setenv(EnvDataDir, "")
	t.Setenv(EnvAPIKey, "")
	if path := LocalAPIKeyPath(); path != filepath.Join(".baton", "data", "api-key") {
		t.Fatalf("default key path %q", path)
	}
}

func TestA403NamesWhereTheKeyCameFrom(t *testing.T) {
	f := newFake(t)
	f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
		problem(w, 403, "Forbidden", "invalid API key")
		return true
	}
	t.Setenv(EnvAPIKey, "wrong-key")
	c, err := NewClient(f.server.URL, WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Heartbeat(context.Background(), "j", "w", 1)
	if err == nil || !strings.Contains(err.Error(), "403 Forbidden: invalid API key") || !strings.Contains(err.Error(), "$BATON_API_KEY") {
		t.Fatalf("error %q does not name the key's source", err)
	}
	if f.count("POST", "/v1/jobs/heartbeat") != 1 {
		t.Fatal("a 403 was retried")
	}
	f.mu.Lock()
	sent := f.requests[0].APIKey
	f.mu.Unlock()
	if sent != "wrong-key" {
		t.Fatalf("sent key %q", sent)
	}
}

func TestProblemFieldsAreKept(t *testing.T) {
	f := newFake(t)
	f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
		w.Header().Set("content-type", "application/problem+json")
		w.Header().Set("retry-after", "2")
		w.WriteHeader(422)
		_, _ = io.WriteString(w, `{"type":"about:blank","title":"Unprocessable","status":422,"detail":"invalid body","instance":"/v1/jobs/poll","errors":[{"path":"maxJobs","message":"must be at most 100"}]}`)
		return true
	}
	_, err := f.client(t).PollJobs(context.Background(), PollRequest{WorkerID: "w", JobTypes: []string{"t"}, MaxJobs: 1})
	apiErr, ok := err.(*APIError)
	if !ok {
		t.Fatalf("%T %v", err, err)
	}
	if apiErr.Status != 422 || apiErr.Title != "Unprocessable" || apiErr.Detail != "invalid body" || apiErr.Instance != "/v1/jobs/poll" ||
		len(apiErr.Errors) != 1 || apiErr.Errors[0].Path != "maxJobs" || apiErr.RetryAfter != 2*time.Second {
		t.Fatalf("%+v", apiErr)
	}
	if apiErr.Error() != "422 Unprocessable: invalid body (maxJobs: must be at most 100)" {
		t.Fatalf("%q", apiErr.Error())
	}
}

func TestNoConnectionIsATransportError(t *testing.T) {
	c, err := NewClient("http://127.0.0.1:1", WithAPIKey("k"), WithRetryPolicy(NoRetry))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Heartbeat(context.Background(), "j", "w", 1)
	var transport *TransportError
	if !asTransport(err, &transport) || transport.Sent || !IsTransient(err) {
		t.Fatalf("%T %v", err, err)
	}
	// It says where the URL came from and how to set another, as for a 401 the key.
	if msg := err.Error(); !contains(msg, "the URL comes from the baseURL given to NewClient") || !contains(msg, "$BATON_URL") {
		t.Fatalf("the message does not say where the URL came from: %s", msg)
	}
	t.Setenv(EnvURL, "http://127.0.0.1:1")
	c, _ = NewClient("", WithAPIKey("k"), WithRetryPolicy(NoRetry))
	if _, err = c.Heartbeat(context.Background(), "j", "w", 1); !contains(err.Error(), "the URL comes from $BATON_URL") {
		t.Fatalf("the message does not name $BATON_URL: %v", err)
	}
}

func asTransport(err error, target **TransportError) bool {
	t, ok := err.(*TransportError)
	*target = t
	return ok
}

// fakeS3 stores what presigned PUTs send and serves presigned GETs.
type fakeS3 struct {
	server  *httptest.Server
	objects map[string][]byte
	headers http.Header
}

func newFakeS3(t *testing.T) *fakeS3 {
	s := &fakeS3{objects: map[string][]byte{}}
	s.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "PUT":
			body, _ := io.ReadAll(r.Body)
			s.objects[r.URL.Path] = body
			s.headers = r.Header.Clone()
		case "GET":
			body, ok := s.objects[r.URL.Path]
			if !ok {
				w.WriteHeader(404)
				return
			}
			_, _ = w.Write(body)
		}
	}))
	t.Cleanup(s.server.Close)
	return s
}

func TestPayloadsAreOffloadedBothWays(t *testing.T) {
	f := newFake(t)
	s3 := newFakeS3(t)
	blob := strings.Repeat("y", 100_000)
	s3.objects["/in/1"] = []byte(`{"blob":"` + blob + `"}`)
	j := job("big", "big", 1, `null`)
	j.Input, j.InputPayloadPath, j.InputDownloadURL = nil, "payloads/in/1", s3.server.URL+"/in/1"
	f.push(j)
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		switch r.URL.Path {
		case "/v1/config":
			writeJSON(w, 200, map[string]any{"payloadLimits": map[string]any{"stepOutput": map[string]any{"softLimitBytes": 70_000, "hardLimitBytes": 1 << 20}}})
		case "/v1/payloads":
			if body["kind"] != "STEP_OUTPUT" {
				problem(w, 422, "Invalid", "kind")
				return true
			}
			writeJSON(w, 200, map[string]any{"path": "payloads/out/1", "uploadUrl": s3.server.URL + "/out/1",
				"uploadHeaders": map[string]string{"x-amz-meta-kind": "STEP_OUTPUT"}})
		default:
			return false
		}
		return true
	}
	reg := NewRegistry()
	reg.Register("big", func(_ context.Context, job *Job) (map[string]any, error) {
		s, _ := job.Input["blob"].(string)
		return map[string]any{"length": len(s), "copy": s}, nil
	})
	stop := runInBackground(t, NewRunner(f.client(t), reg, WithRunnerLogger(quietLogger())))
	f.waitFor("the result", func() bool { return len(f.results) == 1 })
	_ = stop()
	item := f.results["big"]
	if item.Failure != nil || item.OutputPayloadPath != "payloads/out/1" || item.VariablesToSet != nil {
		t.Fatalf("result %+v", item)
	}
	var uploaded map[string]any
	if err := json.Unmarshal(s3.objects["/out/1"], &uploaded); err != nil || uploaded["length"] != float64(100_000) {
		t.Fatalf("uploaded %d bytes: %v", len(s3.objects["/out/1"]), err)
	}
	if s3.headers.Get("x-amz-meta-kind") != "STEP_OUTPUT" {
		t.Fatalf("the upload headers were not sent: %v", s3.headers)
	}
}

func TestABatchRefusedWholeIsSentOneByOne(t *testing.T) {
	f := newFake(t)
	f.push(job("a", "echo", 1, `{}`), job("b", "echo", 1, `{}`)) // in one batch or two: each is sent alone
	var batches atomic.Int32
	f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
		if r.URL.Path == "/v1/jobs/complete-batch" {
			batches.Add(1)
			problem(w, 422, "Invalid", "an item is unreadable")
			return true
		}
		return false
	}
	r := NewRunner(f.client(t), echoRegistry("echo"), WithRunnerLogger(quietLogger()), WithBatchResults(true, 200*time.Millisecond, 32))
	stop := runInBackground(t, r)
	f.waitFor("2 results", func() bool { return len(f.results) == 2 })
	_ = stop()
	if batches.Load() == 0 || f.count("POST", "/v1/jobs/complete") != 2 {
		t.Fatalf("batches %d, single completions %d", batches.Load(), f.count("POST", "/v1/jobs/complete"))
	}
}

func TestALoneResultRefusedWholeGetsItsOwnAnswer(t *testing.T) {
	f := newFake(t)
	f.push(job("solo", "echo", 1, `{}`))
	f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
		switch r.URL.Path {
		case "/v1/jobs/complete-batch":
			problem(w, 422, "Invalid", "an item is unreadable")
		case "/v1/jobs/complete":
			problem(w, 422, "Invalid", "variablesToSet is nested too deeply")
		default:
			return false
		}
		return true
	}
	stop := runInBackground(t, NewRunner(f.client(t), echoRegistry("echo"), WithRunnerLogger(quietLogger())))
	f.waitFor("the failure", func() bool { return len(f.results) == 1 })
	_ = stop()
	fl := f.results["solo"].Failure
	if fl == nil || fl.Retryable || !strings.Contains(fl.ErrorMessage, "the server refused the handler's result: 422 Invalid: variablesToSet is nested too deeply") {
		t.Fatalf("%+v", fl)
	}
}
