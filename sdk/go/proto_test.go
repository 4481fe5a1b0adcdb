package baton

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

// The runner's wire types must be the proto3 JSON mapping of the canonical contract: a poll
// answer and a batch of results read as the proto's messages with no unknown field, and back.

const pollAnswer = `{"jobs":[{"id":"7d0c","instanceId":"i-1","stepId":"charge","stepExecutionId":"se-1",
"jobType":"charge-card","attempt":2,"retriesRemaining":1,"lockExpiresAt":"2026-11-26T05:00:00.250Z",
"input":{"amount":42.5,"items":[{"sku":"B-1"}]},"inputPayloadPath":"","inputDownloadUrl":""}]}`

func TestAPollAnswerRoundTripsThroughTheProto(t *testing.T) {
	var msg workflowv1.PollJobsResponse
	if err := (protojson.UnmarshalOptions{}).Unmarshal([]byte(pollAnswer), &msg); err != nil {
		t.Fatalf("the proto does not read a poll answer: %v", err)
	}
	var ours struct {
		Jobs []ClaimedJob `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(pollAnswer), &ours); err != nil {
		t.Fatal(err)
	}
	p, o := msg.Jobs[0], ours.Jobs[0]
	if p.Id != o.ID || p.InstanceId != o.InstanceID || p.StepId != o.StepID || p.StepExecutionId != o.StepExecutionID ||
		p.JobType != o.JobType || int(p.Attempt) != o.Attempt || int(p.RetriesRemaining) != o.RetriesRemaining {
		t.Fatalf("proto %v vs ours %+v", p, o)
	}
	lock, _ := parseTime(o.LockExpiresAt)
	if !p.LockExpiresAt.AsTime().Equal(lock) {
		t.Fatalf("lease %v vs %v", p.LockExpiresAt.AsTime(), lock)
	}
	var input any
	_ = json.Unmarshal(o.Input, &input)
	if !reflect.DeepEqual(p.Input.AsInterface(), input) {
		t.Fatalf("input %v vs %v", p.Input.AsInterface(), input)
	}
	// and back: the proto's JSON of the message reads as ours
	again, err := protojson.Marshal(&msg)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Jobs []ClaimedJob `json:"jobs"`
	}
	if err := json.Unmarshal(again, &back); err != nil || back.Jobs[0].ID != o.ID || back.Jobs[0].Attempt != o.Attempt {
		t.Fatalf("%s: %v", again, err)
	}
}

func TestACompletionBatchRoundTripsThroughTheProto(t *testing.T) {
	vars, problem := encodeResult(map[string]any{"receipt": "R-1", "total": 42.5, "lines": []string{"a", "b"}})
	if problem != "" {
		t.Fatal(problem)
	}
	delay := 30.0
	items := []ResultItem{
		{JobID: "j1", WorkerID: "w", Attempt: intPtr(2), VariablesToSet: vars},
		{JobID: "j2", WorkerID: "w", Attempt: intPtr(1), OutputPayloadPath: "payloads/STEP_OUTPUT/x"},
		{JobID: "j3", WorkerID: "w", Attempt: intPtr(3), Failure: &Failure{ErrorMessage: "rate limited", Retryable: true, NextRetryDelaySeconds: &delay,
			Output: json.RawMessage(`{"code":42,"input":{"k":"v"}}`)}},
	}
	body, err := encodeJSON(struct {
		Results []ResultItem `json:"results"`
	}{items})
	if err != nil {
		t.Fatal(err)
	}
	var msg workflowv1.CompleteBatchRequest
	if err := (protojson.UnmarshalOptions{}).Unmarshal(body, &msg); err != nil {
		t.Fatalf("the proto does not read our batch %s: %v", body, err)
	}
	r := msg.Results
	if r[0].GetAttempt() != 2 || r[0].VariablesToSet.AsMap()["receipt"] != "R-1" || r[1].OutputPayloadPath != "payloads/STEP_OUTPUT/x" ||
		r[2].Failure.GetErrorMessage() != "rate limited" || !r[2].Failure.GetRetryable() || r[2].Failure.GetNextRetryDelaySeconds() != 30 ||
		r[2].Failure.GetOutput().AsMap()["code"] != float64(42) {
		t.Fatalf("read as %v", &msg)
	}
	again, err := protojson.Marshal(&msg)
	if err != nil {
		t.Fatal(err)
	}
	var ours, theirs any
	_ = json.Unmarshal(body, &ours)
	_ = json.Unmarshal(again, &theirs)
	if !reflect.DeepEqual(ours, theirs) {
		t.Fatalf("ours %s\nproto %s", body, again)
	}
	// the answer
	answer := `{"results":[{"jobId":"j1","outcome":"APPLIED","status":"COMPLETED"},{"jobId":"j3","outcome":"APPLIED","status":"RETRY_SCHEDULED","nextAttemptAt":"2026-11-26T05:00:30Z"}]}`
	var reply workflowv1.CompleteBatchResponse
	if err := (protojson.UnmarshalOptions{}).Unmarshal([]byte(answer), &reply); err != nil {
		t.Fatal(err)
	}
	var outcomes struct {
		Results []BatchOutcome `json:"results"`
	}
	if err := json.Unmarshal([]byte(answer), &outcomes); err != nil || outcomes.Results[1].Status != reply.Results[1].Status {
		t.Fatalf("%v %v", outcomes, err)
	}
}

func TestTypedCallsSendTheProtoJSONWithoutPathFields(t *testing.T) {
	f := newFake(t)
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		writeJSON(w, 200, map[string]any{"id": "i-1", "definitionName": "order", "status": "RUNNING", "version": "3", "futureField": true})
		return true
	}
	c := f.client(t)
	input, _ := structpb.NewStruct(map[string]any{"orderId": "A-1"})
	inst, err := c.StartInstance(context.Background(), &workflowv1.StartInstanceRequest{DefinitionName: "order", Input: input, IdempotencyKey: "k-1"})
	if err != nil || inst.Id != "i-1" || inst.Version != 3 {
		t.Fatalf("%v %v", inst, err)
	}
	vars, _ := structpb.NewStruct(map[string]any{"approvedBy": "ada"})
	if _, err := c.CompleteUserTask(context.Background(), &workflowv1.CompleteUserTaskRequest{Id: "i-1", StepId: "approve", VariablesToSet: vars}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Signal(context.Background(), &workflowv1.SignalRequest{Id: "i-1", StepId: "paid", Payload: structpb.NewStringValue("ok")}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []recorded{
		{"POST", "/v1/instances", map[string]any{"definitionName": "order", "input": map[string]any{"orderId": "A-1"}, "idempotencyKey": "k-1"}, "test-key"},
		{"POST", "/v1/instances/i-1/user-tasks/approve/complete", map[string]any{"variablesToSet": map[string]any{"approvedBy": "ada"}}, "test-key"},
		{"POST", "/v1/instances/i-1/signals/paid", map[string]any{"payload": "ok"}, "test-key"},
	}
	if !reflect.DeepEqual(f.requests, want) {
		t.Fatalf("requests %+v", f.requests)
	}
}

// Code that still sets a step's deprecated legacy field registers what it meant: REST knows only
// the widened field, so the typed call sends the old value under its name (the caller's message
// is left as it was).
func TestATypedDefinitionWithLegacyFieldsSendsTheirValuesUnderTheNewNames(t *testing.T) {
	f := newFake(t)
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		writeJSON(w, 201, map[string]any{"name": "order", "version": 1})
		return true
	}
	c := f.client(t)
	old, _ := structpb.NewStruct(map[string]any{"n": 1})
	def := &workflowv1.Definition{Name: "order", Steps: []*workflowv1.Step{
		{Id: "a", Type: "SUB_WORKFLOW", LegacyInput: old, LegacyDefinitionVersion: proto.Int32(2), Steps: []*workflowv1.Step{
			{Id: "b", LegacyOptional: proto.Bool(true), Optional: structpb.NewStringValue("${x}")},
		}},
	}}
	if _, err := c.RegisterDefinition(context.Background(), def); err != nil {
		t.Fatal(err)
	}
	if def.Steps[0].LegacyInput == nil || def.Steps[0].Input != nil {
		t.Fatal("the caller's definition was changed")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := map[string]any{"name": "order", "steps": []any{map[string]any{
		"id": "a", "type": "SUB_WORKFLOW", "input": map[string]any{"n": float64(1)}, "definitionVersion": float64(2),
		"steps": []any{map[string]any{"id": "b", "optional": "${x}"}},
	}}}
	if got := f.requests[len(f.requests)-1].Body; !reflect.DeepEqual(got, want) {
		t.Fatalf("sent %v", got)
	}
}
