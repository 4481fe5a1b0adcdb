package baton

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
	"google.golang.org/protobuf/types/known/structpb"
)

// Each typed call of the rest of the API: its method, path, query and body, and the answer
// decoded into its message (with a field this SDK does not know).
func TestAdminAndQueueCallsSendTheirRoutes(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		answer map[string]any
		call   func(c *Client) (any, error)
		check  func(out any) bool
		method string
		path   string
		query  string
		body   map[string]any
	}{
		{"list definitions", map[string]any{"definitions": []any{map[string]any{"name": "order", "version": 2}}, "nextPageToken": "t"},
			func(c *Client) (any, error) { return c.ListDefinitions(ctx, 5, "p") },
			func(o any) bool {
				p := o.(*workflowv1.DefinitionPage)
				return p.Definitions[0].GetVersion() == 2 && p.NextPageToken == "t"
			},
			"GET", "/v1/definitions", "limit=5&pageToken=p", nil},
		{"delete definition", map[string]any{"name": "order", "version": 2},
			func(c *Client) (any, error) { return c.DeleteDefinition(ctx, "order", 2) },
			func(o any) bool { return o.(*workflowv1.Definition).GetVersion() == 2 },
			"DELETE", "/v1/definitions/order/versions/2", "", nil},
		{"get task def", map[string]any{"name": "charge-card", "retryCount": 5},
			func(c *Client) (any, error) { return c.GetTaskDef(ctx, "charge-card") },
			func(o any) bool { return o.(*workflowv1.TaskDef).GetRetryCount() == 5 },
			"GET", "/v1/taskdefs/charge-card", "", nil},
		{"delete task def", map[string]any{"name": "charge-card"},
			func(c *Client) (any, error) { return c.DeleteTaskDef(ctx, "charge-card") },
			func(o any) bool { return o.(*workflowv1.TaskDef).Name == "charge-card" },
			"DELETE", "/v1/taskdefs/charge-card", "", nil},
		{"list task defs", map[string]any{"taskDefs": []any{map[string]any{"name": "a"}}},
			func(c *Client) (any, error) { return c.ListTaskDefs(ctx, 0, "") },
			func(o any) bool { return o.(*workflowv1.TaskDefPage).TaskDefs[0].Name == "a" },
			"GET", "/v1/taskdefs", "", nil},
		{"list steps", map[string]any{"steps": []any{map[string]any{"stepId": "charge", "status": "COMPLETED"}}},
			func(c *Client) (any, error) { return c.ListSteps(ctx, "i 1", 50, "") },
			func(o any) bool { return o.(*workflowv1.StepExecutionPage).Steps[0].StepId == "charge" },
			"GET", "/v1/instances/i 1/steps", "limit=50", nil},
		{"delete instance", map[string]any{"id": "i-1", "status": "COMPLETED", "jobs": "3", "historyEvents": 7},
			func(c *Client) (any, error) { return c.DeleteInstance(ctx, "i-1") },
			func(o any) bool { d := o.(*workflowv1.DeletedInstance); return d.Jobs == 3 && d.HistoryEvents == 7 },
			"DELETE", "/v1/instances/i-1", "", nil},
		{"retry instance", map[string]any{"id": "i-1", "status": "RUNNING"},
			func(c *Client) (any, error) { return c.RetryInstance(ctx, "i-1") },
			func(o any) bool { return o.(*workflowv1.Instance).Status == "RUNNING" },
			"POST", "/v1/instances/i-1/retry", "", map[string]any{}},
		{"restart instance", map[string]any{"id": "i-1", "status": "RUNNING", "run": 2},
			func(c *Client) (any, error) { return c.RestartInstance(ctx, "i-1", true) },
			func(o any) bool { return o.(*workflowv1.Instance).Id == "i-1" },
			"POST", "/v1/instances/i-1/restart", "", map[string]any{"useLatestDefinition": true}},
		{"rerun instance", map[string]any{"id": "i-1", "status": "RUNNING"},
			func(c *Client) (any, error) {
				in, _ := structpb.NewStruct(map[string]any{"k": "v"})
				return c.RerunInstance(ctx, "i-1", &workflowv1.RerunInstanceRequest{FromStepExecutionId: "s-1", StepInput: in, AtJoin: true})
			},
			func(o any) bool { return o.(*workflowv1.Instance).Status == "RUNNING" },
			"POST", "/v1/instances/i-1/rerun", "",
			map[string]any{"fromStepExecutionId": "s-1", "stepInput": map[string]any{"k": "v"}, "atJoin": true}},
		{"pause instance", map[string]any{"id": "i-1", "status": "PAUSED"},
			func(c *Client) (any, error) { return c.PauseInstance(ctx, "i-1") },
			func(o any) bool { return o.(*workflowv1.Instance).Status == "PAUSED" },
			"POST", "/v1/instances/i-1/pause", "", map[string]any{}},
		{"resume instance", map[string]any{"id": "i-1", "status": "RUNNING"},
			func(c *Client) (any, error) { return c.ResumeInstance(ctx, "i-1") },
			func(o any) bool { return o.(*workflowv1.Instance).Status == "RUNNING" },
			"POST", "/v1/instances/i-1/resume", "", map[string]any{}},
		{"config", map[string]any{"payloadLimits": map[string]any{"JOB_OUTPUT": map[string]any{"softLimitBytes": 65536}}, "presignSeconds": 900},
			func(c *Client) (any, error) { return c.Config(ctx) },
			func(o any) bool { return o.(*workflowv1.ServerConfig).PresignSeconds == 900 },
			"GET", "/v1/config", "", nil},
		{"openapi", map[string]any{"openapi": "3.1.0", "paths": map[string]any{}},
			func(c *Client) (any, error) { return c.OpenAPI(ctx) },
			func(o any) bool { return o.(map[string]any)["openapi"] == "3.1.0" },
			"GET", "/v1/openapi.json", "", nil},
		{"push", map[string]any{"id": "t-1", "queueName": "emails", "status": "pending", "priority": 5},
			func(c *Client) (any, error) {
				return c.Push(ctx, &workflowv1.PushRequest{Name: "emails", Title: "welcome", Body: "hi", Priority: 5})
			},
			func(o any) bool { return o.(*workflowv1.PushResponse).Id == "t-1" },
			"POST", "/v1/queues/emails/push", "", map[string]any{"title": "welcome", "body": "hi", "priority": 5.0}},
		{"queue stats", map[string]any{"pending": 3, "dead": "1"},
			func(c *Client) (any, error) { return c.QueueStats(ctx, "emails") },
			func(o any) bool { s := o.(*workflowv1.QueueStats); return s.Pending == 3 && s.Dead == 1 },
			"GET", "/v1/queues/emails/stats", "", nil},
		{"peek", map[string]any{"tasks": []any{map[string]any{"id": "t-1", "title": "welcome"}}},
			func(c *Client) (any, error) { return c.Peek(ctx, "emails", 3) },
			func(o any) bool { return o.([]*workflowv1.QueueTask)[0].Title == "welcome" },
			"GET", "/v1/queues/emails/peek", "limit=3", nil},
		{"purge", map[string]any{"deleted": 4},
			func(c *Client) (any, error) { return c.Purge(ctx, "emails") },
			func(o any) bool { return o.(*workflowv1.PurgeResponse).Deleted == 4 },
			"DELETE", "/v1/queues/emails", "", nil},
		{"list queues", map[string]any{"queues": []any{map[string]any{"name": "emails", "pending": 1}}},
			func(c *Client) (any, error) { return c.ListQueues(ctx, 10, "") },
			func(o any) bool { return o.(*workflowv1.QueuePage).Queues[0].Name == "emails" },
			"GET", "/v1/queues", "limit=10", nil},
		{"list queue tasks", map[string]any{"tasks": []any{map[string]any{"id": "t-1", "status": "dead", "lastError": "boom"}}},
			func(c *Client) (any, error) { return c.ListQueueTasks(ctx, "emails", "dead", 0, "p2") },
			func(o any) bool { return o.(*workflowv1.QueueTaskPage).Tasks[0].LastError == "boom" },
			"GET", "/v1/queues/emails/tasks", "pageToken=p2&status=dead", nil},
		{"redrive", map[string]any{"redriven": 1, "taskIds": []string{"t-1"}},
			func(c *Client) (any, error) { return c.Redrive(ctx, "emails", "t-1") },
			func(o any) bool { return o.(*workflowv1.RedriveResponse).Redriven == 1 },
			"POST", "/v1/queues/emails/redrive", "", map[string]any{"taskIds": []any{"t-1"}}},
		{"redrive every dead task", map[string]any{"redriven": 0, "remaining": 0},
			func(c *Client) (any, error) { return c.Redrive(ctx, "emails") },
			func(o any) bool { return o.(*workflowv1.RedriveResponse).Redriven == 0 },
			"POST", "/v1/queues/emails/redrive", "", map[string]any{}},
		{"dequeue", map[string]any{"tasks": []any{map[string]any{"id": "t-1", "receipt": "r-1"}}},
			func(c *Client) (any, error) {
				return c.Dequeue(ctx, &workflowv1.DequeueRequest{Name: "emails", ConsumerId: "c-1", MaxTasks: 2})
			},
			func(o any) bool { return o.([]*workflowv1.QueueTask)[0].Receipt == "r-1" },
			"POST", "/v1/queues/emails/dequeue", "", map[string]any{"consumerId": "c-1", "maxTasks": 2.0}},
		{"ack", map[string]any{"id": "t-1", "status": "completed", "applied": true},
			func(c *Client) (any, error) { return c.Ack(ctx, "emails", "t-1", "r-1") },
			func(o any) bool { return o.(*workflowv1.SettleResponse).GetApplied() },
			"POST", "/v1/queues/emails/tasks/t-1/ack", "", map[string]any{"receipt": "r-1"}},
		// retryable false is sent: the server's default for an absent one is true.
		{"nack, not retryable", map[string]any{"id": "t-1", "status": "dead", "retryCount": 1},
			func(c *Client) (any, error) { return c.Nack(ctx, "emails", "t-1", "r-1", "", false) },
			func(o any) bool { return o.(*workflowv1.SettleResponse).Status == "dead" },
			"POST", "/v1/queues/emails/tasks/t-1/nack", "", map[string]any{"receipt": "r-1", "retryable": false}},
		{"nack", map[string]any{"id": "t-1", "status": "pending"},
			func(c *Client) (any, error) { return c.Nack(ctx, "emails", "t-1", "r-1", "smtp <down>", true) },
			func(o any) bool { return o.(*workflowv1.SettleResponse).Status == "pending" },
			"POST", "/v1/queues/emails/tasks/t-1/nack", "", map[string]any{"receipt": "r-1", "retryable": true, "error": "smtp <down>"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			var query string
			f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
				query = r.URL.RawQuery
				answer := map[string]any{"someFutureField": true}
				for k, v := range tc.answer {
					answer[k] = v
				}
				writeJSON(w, 200, answer)
				return true
			}
			out, err := tc.call(f.client(t))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(out) {
				t.Fatalf("decoded %v", out)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			want := []recorded{{tc.method, tc.path, tc.body, "test-key"}}
			if !reflect.DeepEqual(f.requests, want) || query != tc.query {
				t.Fatalf("sent %+v ?%s\nwant %+v ?%s", f.requests, query, want, tc.query)
			}
		})
	}
}

// The iterators follow page tokens to the end and keep the filters on every page.
func TestIteratorsFollowPageTokens(t *testing.T) {
	f := newFake(t)
	var queries []string
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
		if r.URL.Query().Get("pageToken") == "" {
			writeJSON(w, 200, map[string]any{"instances": []any{map[string]any{"id": "a"}, map[string]any{"id": "b"}}, "nextPageToken": "n"})
		} else {
			writeJSON(w, 200, map[string]any{"instances": []any{map[string]any{"id": "c"}}})
		}
		return true
	}
	c := f.client(t)
	var ids []string
	for inst, err := range c.Instances(context.Background(), &workflowv1.SearchInstancesRequest{Status: "FAILED", Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.Id)
	}
	want := []string{"/v1/instances?limit=2&status=FAILED", "/v1/instances?limit=2&pageToken=n&status=FAILED"}
	if !reflect.DeepEqual(ids, []string{"a", "b", "c"}) || !reflect.DeepEqual(queries, want) {
		t.Fatalf("ids %v, queries %v", ids, queries)
	}
	// Breaking out of the loop fetches no further page.
	queries = nil
	for range c.Instances(context.Background(), nil) {
		break
	}
	if len(queries) != 1 {
		t.Fatalf("queries after a break: %v", queries)
	}
	// An error ends the iteration with it.
	f.hook = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		problem(w, 403, "Forbidden", "no")
		return true
	}
	for _, err := range c.History(context.Background(), "i-1", 100) {
		if !HasStatus(err, 403) {
			t.Fatalf("error %v", err)
		}
	}
}
