package baton

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

// scheduleJSON is a schedule as the server answers it (proto3 JSON, with a field this SDK
// does not know yet).
func scheduleJSON(id string, paused bool) map[string]any {
	return map[string]any{
		"id": id, "definitionName": "nightly", "input": map[string]any{"at": "${schedule.time}"},
		"spec":          map[string]any{"cron": []string{"0 2 * * *"}, "timeZone": "Europe/Paris"},
		"overlapPolicy": "SKIP", "catchupWindowSeconds": 60, "pauseOnFailure": false, "paused": paused,
		"createdAt": "2026-11-26T08:00:00Z", "updatedAt": "2026-11-26T08:00:00Z",
		"nextFireTimes": []string{"2026-11-27T01:00:00Z"},
		"recentActions": []map[string]any{{"slotTime": "2026-11-26T01:00:00Z", "kind": "SCHEDULED", "outcome": "STARTED", "instanceId": "i-9"}},
		"futureField":   1,
	}
}

func TestScheduleCallsSendTheirRoutesAndDecodeTheAnswers(t *testing.T) {
	f := newFake(t)
	var queries []string
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		queries = append(queries, r.URL.RawQuery)
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/schedules":
			if r.URL.Query().Get("pageToken") == "" {
				writeJSON(w, 200, map[string]any{"schedules": []any{scheduleJSON("a", false), scheduleJSON("b", false)}, "nextPageToken": "t2"})
			} else {
				writeJSON(w, 200, map[string]any{"schedules": []any{scheduleJSON("c", true)}})
			}
		case r.Method == "DELETE":
			writeJSON(w, 200, map[string]any{"id": "nightly", "deleted": true})
		case r.URL.Path == "/v1/schedules/nightly/trigger":
			writeJSON(w, 200, map[string]any{"id": "nightly", "slotTimes": []string{"2026-11-26T08:00:00Z"}})
		case r.URL.Path == "/v1/schedules/nightly/backfill":
			writeJSON(w, 200, map[string]any{"id": "nightly", "slots": "3", "added": 2, "slotTimes": []string{"2026-11-24T01:00:00Z", "2026-11-25T01:00:00Z"}})
		default:
			writeJSON(w, 200, scheduleJSON("nightly", r.URL.Path == "/v1/schedules/nightly/pause"))
		}
		return true
	}
	c := f.client(t)
	ctx := context.Background()
	input, _ := structpb.NewStruct(map[string]any{"at": "${schedule.time}"})
	req := &workflowv1.ScheduleRequest{Id: "nightly", DefinitionName: "nightly", Input: input,
		Spec: &workflowv1.ScheduleSpec{Cron: []string{"0 2 * * *"}, TimeZone: "Europe/Paris"}, OverlapPolicy: "BUFFER_ONE"}

	created, err := c.CreateSchedule(ctx, req)
	if err != nil || created.Id != "nightly" || created.Spec.TimeZone != "Europe/Paris" ||
		len(created.NextFireTimes) != 1 || created.RecentActions[0].InstanceId != "i-9" {
		t.Fatalf("create: %v %v", created, err)
	}
	if got, err := c.GetSchedule(ctx, "nightly"); err != nil || got.Id != "nightly" {
		t.Fatalf("get: %v %v", got, err)
	}
	page, err := c.ListSchedules(ctx, 2, "")
	if err != nil || len(page.Schedules) != 2 || page.NextPageToken != "t2" {
		t.Fatalf("list: %v %v", page, err)
	}
	var ids []string
	for s, err := range c.Schedules(ctx, 2) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.Id)
	}
	if !reflect.DeepEqual(ids, []string{"a", "b", "c"}) {
		t.Fatalf("Schedules iterated %v", ids)
	}
	if _, err := c.ReplaceSchedule(ctx, req); err != nil {
		t.Fatal(err)
	}
	if paused, err := c.PauseSchedule(ctx, "nightly", "maintenance"); err != nil || !paused.Paused {
		t.Fatalf("pause: %v %v", paused, err)
	}
	if _, err := c.UnpauseSchedule(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if fired, err := c.TriggerSchedule(ctx, "nightly"); err != nil || len(fired.SlotTimes) != 1 {
		t.Fatalf("trigger: %v %v", fired, err)
	}
	from := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	filled, err := c.BackfillSchedule(ctx, "nightly", from, from.Add(48*time.Hour))
	if err != nil || filled.Slots != 3 || filled.Added != 2 || len(filled.SlotTimes) != 2 {
		t.Fatalf("backfill: %v %v", filled, err)
	}
	if gone, err := c.DeleteSchedule(ctx, "nightly"); err != nil || !gone.Deleted {
		t.Fatalf("delete: %v %v", gone, err)
	}

	sent := map[string]any{"definitionName": "nightly", "input": map[string]any{"at": "${schedule.time}"},
		"spec": map[string]any{"cron": []any{"0 2 * * *"}, "timeZone": "Europe/Paris"}, "overlapPolicy": "BUFFER_ONE"}
	withID := map[string]any{"id": "nightly"}
	for k, v := range sent {
		withID[k] = v
	}
	want := []recorded{
		{"POST", "/v1/schedules", withID, "test-key"},
		{"GET", "/v1/schedules/nightly", nil, "test-key"},
		{"GET", "/v1/schedules", nil, "test-key"},
		{"GET", "/v1/schedules", nil, "test-key"},
		{"GET", "/v1/schedules", nil, "test-key"},
		{"PUT", "/v1/schedules/nightly", sent, "test-key"}, // the id is the path's
		{"POST", "/v1/schedules/nightly/pause", map[string]any{"note": "maintenance"}, "test-key"},
		{"POST", "/v1/schedules/nightly/unpause", map[string]any{}, "test-key"},
		{"POST", "/v1/schedules/nightly/trigger", map[string]any{}, "test-key"},
		{"POST", "/v1/schedules/nightly/backfill", map[string]any{"from": "2026-11-24T00:00:00Z", "to": "2026-11-26T00:00:00Z"}, "test-key"},
		{"DELETE", "/v1/schedules/nightly", nil, "test-key"},
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !reflect.DeepEqual(f.requests, want) {
		t.Fatalf("requests\n got %+v\nwant %+v", f.requests, want)
	}
	if want := []string{"", "", "limit=2", "limit=2", "limit=2&pageToken=t2", "", "", "", "", "", ""}; !reflect.DeepEqual(queries, want) {
		t.Fatalf("queries %q", queries)
	}
}

func TestStartInstancesAnswersEachItemOnItsOwn(t *testing.T) {
	f := newFake(t)
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		writeJSON(w, 200, map[string]any{"results": []any{
			map[string]any{"index": 0, "outcome": "STARTED", "instance": map[string]any{"id": "i-1", "definitionName": "order", "status": "RUNNING"}},
			map[string]any{"index": 1, "outcome": "EXISTING", "instance": map[string]any{"id": "i-0", "definitionName": "order", "status": "COMPLETED"}},
			map[string]any{"index": 2, "outcome": "NOT_FOUND", "error": "no definition named nope",
				"problem": map[string]any{"status": 404, "title": "Not found", "detail": "no definition named nope"}},
		}})
		return true
	}
	c := f.client(t)
	out, err := c.StartInstances(context.Background(), []*workflowv1.StartInstanceRequest{
		{DefinitionName: "order", CorrelationId: "A-1"},
		{DefinitionName: "order", IdempotencyKey: "k-0"},
		{DefinitionName: "nope"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := out.Results
	if len(r) != 3 || r[0].Outcome != "STARTED" || r[0].Instance.Id != "i-1" || r[1].Instance.Status != "COMPLETED" ||
		r[2].Index != 2 || r[2].Outcome != "NOT_FOUND" || r[2].Problem.Status != 404 || r[2].Error == "" {
		t.Fatalf("results %v", r)
	}
	want := map[string]any{"instances": []any{
		map[string]any{"definitionName": "order", "correlationId": "A-1"},
		map[string]any{"definitionName": "order", "idempotencyKey": "k-0"},
		map[string]any{"definitionName": "nope"},
	}}
	if got := f.bodies("/v1/instances/batch"); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("sent %v", got)
	}
}

// A batch whose every item has an idempotency key is safe to send again after a lost answer
// (a repeat answers EXISTING); one item without a key makes the whole batch a one-shot.
func TestStartInstancesIsRetriedOnlyWhenEveryItemHasAKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keys      []string
		wantCalls int
	}{{"every item keyed", []string{"k-1", "k-2"}, 2}, {"one item without a key", []string{"k-1", ""}, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			calls := 0
			f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
				if calls++; calls == 1 {
					problem(w, 502, "Bad gateway", "the answer was lost")
					return true
				}
				writeJSON(w, 200, map[string]any{"results": []any{}})
				return true
			}
			c := f.client(t, WithRetryPolicy(RetryPolicy{InitialInterval: time.Millisecond, Coefficient: 1, MaxInterval: time.Millisecond, MaxAttempts: 3}))
			var starts []*workflowv1.StartInstanceRequest
			for _, k := range tc.keys {
				starts = append(starts, &workflowv1.StartInstanceRequest{DefinitionName: "order", IdempotencyKey: k})
			}
			_, err := c.StartInstances(context.Background(), starts)
			if calls != tc.wantCalls || (tc.wantCalls == 1) != HasStatus(err, 502) {
				t.Fatalf("%d calls, error %v", calls, err)
			}
		})
	}
}
