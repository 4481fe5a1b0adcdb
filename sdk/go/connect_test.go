package baton

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

// The whole package's tests also run with BATON_PROTOCOL=connect (make check): every fake
// client then speaks Connect to the fake's Connect front. These tests pin the wire itself.

func TestTheProtocolSettingChoosesTheWire(t *testing.T) {
	t.Setenv(EnvProtocol, "")
	c, err := NewClient("http://127.0.0.1:1")
	if err != nil || c.Protocol() != ProtocolREST {
		t.Fatalf("default: %v %v", c, err)
	}
	t.Setenv(EnvProtocol, "Connect")
	if c, _ = NewClient("http://127.0.0.1:1"); c.Protocol() != ProtocolConnect {
		t.Fatalf("$%s=connect gave %q", EnvProtocol, c.Protocol())
	}
	if c, _ = NewClient("http://127.0.0.1:1", WithProtocol(ProtocolREST)); c.Protocol() != ProtocolREST {
		t.Fatalf("WithProtocol does not win over $%s: %q", EnvProtocol, c.Protocol())
	}
	t.Setenv(EnvProtocol, "grpc")
	if _, err = NewClient("http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), `"rest" or "connect", not "grpc"`) {
		t.Fatalf("an unknown protocol: %v", err)
	}
}

func TestTheRunnerWorksOverConnectInBinaryProtobuf(t *testing.T) {
	f := newFake(t)
	for i := range 12 {
		f.push(job(fmt.Sprintf("j%02d", i), "echo", 2, `{"n":3,"big":9007199254740993,"x":1.5}`))
	}
	r := NewRunner(f.client(t, WithProtocol(ProtocolConnect)), echoRegistry("echo"), WithParallelism(4),
		WithRunnerLogger(quietLogger()), WithBatchResults(true, 50*time.Millisecond, 32))
	stop := runInBackground(t, r)
	f.waitFor("12 results", func() bool { return len(f.results) == 12 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for id, item := range f.results {
		if item.Attempt == nil || *item.Attempt != 2 {
			t.Fatalf("result of %s carries attempt %v, want 2", id, item.Attempt)
		}
		// Struct numbers travel as doubles: a whole one must come back whole (3, not 3.0).
		if string(item.VariablesToSet) != `{"attempt":2,"echoed":{"big":9007199254740992,"n":3,"x":1.5}}` {
			t.Fatalf("variables of %s: %s", id, item.VariablesToSet)
		}
	}
	seen := map[string]bool{}
	for _, call := range f.connect.rpcs() {
		seen[call.RPC] = true
		if call.ContentType != "application/proto" || call.Accept != "application/proto" || call.ProtocolVersion != "1" {
			t.Fatalf("%s went as %+v", call.RPC, call)
		}
	}
	for _, rpc := range []string{"PollJobs", "CompleteBatch", "StopWorker"} {
		if !seen[rpc] {
			t.Fatalf("no %s RPC among %v", rpc, seen)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.requests {
		if strings.HasPrefix(r.Path, "/rpc/") {
			t.Fatalf("a REST request reached the fake untranslated: %+v", r)
		}
	}
}

func TestConnectErrorsAreTheSameProblemsAndRetries(t *testing.T) {
	f := newFake(t)
	var polls, heartbeats int
	var mu sync.Mutex
	f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/v1/jobs/poll":
			polls++
			w.Header().Set("content-type", "application/problem+json")
			w.WriteHeader(422)
			_, _ = io.WriteString(w, `{"type":"https://baton.dev/problems/validation-failed","title":"Validation failed","status":422,"detail":"1 problem found","errors":[{"path":"maxJobs","message":"must be at most 100"}]}`)
			return true
		case "/v1/jobs/heartbeat":
			heartbeats++
			if heartbeats < 3 {
				w.Header().Set("retry-after", "0.01")
				problem(w, 503, "Service unavailable", "try later")
				return true
			}
		}
		return false
	}
	c := f.client(t, WithProtocol(ProtocolConnect),
		WithRetryPolicy(RetryPolicy{InitialInterval: time.Millisecond, Coefficient: 2, MaxInterval: 20 * time.Millisecond, MaxAttempts: 5}))
	_, err := c.PollJobs(context.Background(), PollRequest{WorkerID: "w", JobTypes: []string{"t"}, MaxJobs: 1})
	apiErr, ok := err.(*APIError)
	if !ok {
		t.Fatalf("%T %v", err, err)
	}
	if apiErr.Status != 422 || apiErr.Type != "https://baton.dev/problems/validation-failed" ||
		apiErr.Error() != "422 Validation failed: 1 problem found (maxJobs: must be at most 100)" {
		t.Fatalf("the Connect error read as %+v", apiErr)
	}
	if apiErr.Method != "POST" || !strings.HasSuffix(apiErr.URL, "/v1/jobs/poll") {
		t.Fatalf("the error names %s %s, not the call", apiErr.Method, apiErr.URL)
	}
	if _, err := c.Heartbeat(context.Background(), "j", "w", 1); err != nil {
		t.Fatalf("two unavailable answers then a good one: %v", err)
	}
	if polls != 1 || heartbeats != 3 {
		t.Fatalf("%d polls (want 1: a 422 is never retried), %d heartbeats (want 3)", polls, heartbeats)
	}
}

func TestAConnectErrorWithoutAProblemStillSaysWhatWentWrong(t *testing.T) {
	status, body := connectProblem(404, []byte(`{"code":"unimplemented","message":"no RPC Frobnicate"}`))
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil || status != 404 ||
		doc["title"] != "Unimplemented" || doc["detail"] != "no RPC Frobnicate" {
		t.Fatalf("%d %s", status, body)
	}
	if status, body := connectProblem(502, []byte("<html>bad gateway</html>")); status != 502 || string(body) != "<html>bad gateway</html>" {
		t.Fatalf("a body that is not a Connect error: %d %s", status, body)
	}
}

// recordingSigner signs like SigV4 does: over the exact bytes and URL that are sent.
type recordingSigner struct {
	mu     sync.Mutex
	bodies [][]byte
	paths  []string
}

func (s *recordingSigner) SignRequest(_ context.Context, req *http.Request, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, append([]byte(nil), body...))
	s.paths = append(s.paths, req.URL.Path+" "+req.Header.Get("content-type"))
	req.Header.Set("authorization", "signed")
	return nil
}

func TestTheSignerSignsTheBinaryRPCBody(t *testing.T) {
	f := newFake(t)
	signer := &recordingSigner{}
	c := f.client(t, WithProtocol(ProtocolConnect), WithSigner(signer))
	if _, err := c.Heartbeat(context.Background(), "job-1", "w", 2); err != nil {
		t.Fatal(err)
	}
	if len(signer.bodies) != 1 || signer.paths[0] != "/rpc/workflow.v1.WorkflowEngine/Heartbeat application/proto" {
		t.Fatalf("signed %v", signer.paths)
	}
	got := &workflowv1.HeartbeatRequest{}
	if err := proto.Unmarshal(signer.bodies[0], got); err != nil || got.GetJobId() != "job-1" || got.GetAttempt() != 2 {
		t.Fatalf("the signed body is not the RPC's message: %v %v", got, err)
	}
}

func TestEveryTypedCallHasItsRPC(t *testing.T) {
	f := newFake(t)
	f.hook = func(w http.ResponseWriter, r *http.Request, _ map[string]any) bool {
		writeJSON(w, 200, map[string]any{})
		return true
	}
	c := f.client(t, WithProtocol(ProtocolConnect))
	ctx := context.Background()
	input, _ := structpb.NewStruct(map[string]any{"a": 1})
	calls := map[string]func() error{
		"GetDefinition": func() error { _, err := c.GetDefinition(ctx, "d", 2); return err },
		"StartInstance": func() error {
			_, err := c.StartInstance(ctx, &workflowv1.StartInstanceRequest{DefinitionName: "d", Input: input})
			return err
		},
		"SearchInstances": func() error {
			_, err := c.SearchInstances(ctx, &workflowv1.SearchInstancesRequest{Status: "RUNNING", Limit: 5})
			return err
		},
		"PutTaskDef":  func() error { _, err := c.PutTaskDef(ctx, &workflowv1.TaskDef{Name: "t"}); return err },
		"Purge":       func() error { _, err := c.Purge(ctx, "q"); return err },
		"ListSteps":   func() error { _, err := c.ListSteps(ctx, "i", 10, "tok"); return err },
		"GetOpenApi":  func() error { _, err := c.OpenAPI(ctx); return err },
		"StopWorker":  func() error { return c.StopWorker(ctx, "w") },
		"GetSchedule": func() error { _, err := c.GetSchedule(ctx, "s"); return err },
	}
	for rpc, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s: %v", rpc, err)
		}
		calls := f.connect.rpcs()
		if last := calls[len(calls)-1].RPC; last != rpc {
			t.Fatalf("went as %s, want %s", last, rpc)
		}
	}
}

// The table of REST operations and their RPCs is the engine's (shared/baton/rpc/methods.py):
// a path the engine answers by another RPC, or not at all, would go astray.
func TestTheRPCTableIsTheEngines(t *testing.T) {
	source, err := os.ReadFile("../../shared/baton/rpc/methods.py")
	if err != nil {
		t.Skipf("not in the Baton repository: %v", err)
	}
	twin := regexp.MustCompile(`_t\(\s*"(\w+)",\s*"(\w+)",((?:\s*"[^"]+",?)+)\s*(?:body="(\w+)",?\s*)?\)`)
	quoted := regexp.MustCompile(`"([^"]+)"`)
	engine := map[string]string{}
	for _, m := range twin.FindAllStringSubmatch(string(source), -1) {
		for _, p := range quoted.FindAllStringSubmatch(m[3], -1) {
			engine[m[2]+" "+p[1]] = m[1] + " " + m[4]
		}
	}
	sdk := map[string]string{}
	for _, tw := range connectTwins {
		sdk[tw.method+" "+tw.path] = tw.rpc + " " + tw.bodyField
	}
	if len(engine) < 50 || !reflect.DeepEqual(sdk, engine) {
		t.Fatalf("the SDK's table differs from the engine's:\nsdk    %v\nengine %v", sdk, engine)
	}
}

// A step's four widened fields kept their old numbers as deprecated legacy_* fields: they never
// show in REST JSON, and an engine older than this proto, which sets only them, still reads.
func TestAStepsLegacyFieldsNeverShowInRESTJSON(t *testing.T) {
	old, _ := structpb.NewStruct(map[string]any{"n": 1})
	steps := []*workflowv1.Step{
		{ // today's engine: both, the new field wins
			Id:             "a",
			Input:          structpb.NewStringValue("${workflow.input}"),
			Optional:       structpb.NewBoolValue(true),
			LegacyInput:    old,
			LegacyOptional: proto.Bool(true),
		},
		{ // an older engine: the old fields alone
			Id:                      "b",
			LegacyInput:             old,
			LegacyDefinitionVersion: proto.Int32(2),
			LegacyPermissive:        proto.Bool(false),
		},
	}
	want := []map[string]any{
		{"id": "a", "input": "${workflow.input}", "optional": true},
		{"id": "b", "input": map[string]any{"n": float64(1)}, "definitionVersion": float64(2), "permissive": false},
	}
	for i, step := range steps {
		text, err := encodeJSON(messageJSON(step.ProtoReflect()))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(text, &got); err != nil {
			t.Fatal(err)
		}
		for key := range got {
			if strings.HasPrefix(key, "legacy") {
				t.Fatalf("%s shows %s", text, key)
			}
		}
		for key, value := range want[i] {
			if !reflect.DeepEqual(got[key], value) {
				t.Fatalf("%s: %s is %v, want %v", text, key, got[key], value)
			}
		}
	}
}
