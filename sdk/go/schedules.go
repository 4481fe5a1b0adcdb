package baton

import (
	"context"
	"iter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

// Schedules (/v1/schedules) and batch starts (/v1/instances/batch): typed calls whose bodies
// are the proto3 JSON mapping of package workflowv1's messages.

// StartInstances starts up to 100 instances in one request, each answered on its own in the
// request's order (StartOutcome.Outcome: STARTED, EXISTING for an idempotency key seen
// before, INVALID or NOT_FOUND with Error and the Problem a single start would have
// answered). The request is retried after a lost answer only when every item has an
// idempotency key (a repeat is then harmless: it answers EXISTING).
func (c *Client) StartInstances(ctx context.Context, starts []*workflowv1.StartInstanceRequest) (*workflowv1.StartInstancesResponse, error) {
	idempotent := len(starts) > 0
	for _, s := range starts {
		if s.GetIdempotencyKey() == "" {
			idempotent = false
		}
	}
	out := &workflowv1.StartInstancesResponse{}
	r := request{method: "POST", path: "/v1/instances/batch", idempotent: idempotent}
	return out, c.callProto(ctx, r, &workflowv1.StartInstancesRequest{Instances: starts}, nil, out)
}

// CreateSchedule creates a schedule (an empty Id: the server names it). Fields left at their
// zero value take the server's defaults (overlap SKIP, not paused; a nil CatchupWindowSeconds
// the 60 s window).
func (c *Client) CreateSchedule(ctx context.Context, s *workflowv1.ScheduleRequest) (*workflowv1.Schedule, error) {
	out := &workflowv1.Schedule{}
	return out, c.callProto(ctx, request{method: "POST", path: "/v1/schedules"}, s, nil, out)
}

// GetSchedule is a schedule with its next ten fire times and its last ten actions.
func (c *Client) GetSchedule(ctx context.Context, id string) (*workflowv1.Schedule, error) {
	out := &workflowv1.Schedule{}
	r := request{method: "GET", path: "/v1/schedules/" + segment(id), idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// ListSchedules is one page of schedules, by id (limit 0: the server's default; pageToken
// "": the first page). [Client.Schedules] follows the pages.
func (c *Client) ListSchedules(ctx context.Context, limit int, pageToken string) (*workflowv1.SchedulePage, error) {
	out := &workflowv1.SchedulePage{}
	r := request{method: "GET", path: "/v1/schedules", query: pageQuery(limit, pageToken), idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// Schedules iterates over every schedule, by id, pageSize at a time (0: the server's
// default), following page tokens; it stops at the first error, which it yields.
//
//	for s, err := range client.Schedules(ctx, 100) {
//		if err != nil { return err }
//		fmt.Println(s.Id)
//	}
func (c *Client) Schedules(ctx context.Context, pageSize int) iter.Seq2[*workflowv1.Schedule, error] {
	return pages(func(t string) (*workflowv1.SchedulePage, error) { return c.ListSchedules(ctx, pageSize, t) },
		func(p *workflowv1.SchedulePage) ([]*workflowv1.Schedule, string) {
			return p.GetSchedules(), p.GetNextPageToken()
		})
}

// ReplaceSchedule replaces schedule s.Id whole (its slots not fired yet follow the new spec).
func (c *Client) ReplaceSchedule(ctx context.Context, s *workflowv1.ScheduleRequest) (*workflowv1.Schedule, error) {
	out := &workflowv1.Schedule{}
	r := request{method: "PUT", path: "/v1/schedules/" + segment(s.GetId()), idempotent: true}
	return out, c.callProto(ctx, r, s, []string{"id"}, out)
}

// DeleteSchedule deletes a schedule (the instances it started are kept).
func (c *Client) DeleteSchedule(ctx context.Context, id string) (*workflowv1.DeletedSchedule, error) {
	out := &workflowv1.DeletedSchedule{}
	return out, c.callProto(ctx, request{method: "DELETE", path: "/v1/schedules/" + segment(id)}, nil, nil, out)
}

// PauseSchedule pauses a schedule, with an optional note: no slot fires until it is unpaused
// (nor afterwards, for the paused time).
func (c *Client) PauseSchedule(ctx context.Context, id, note string) (*workflowv1.Schedule, error) {
	out := &workflowv1.Schedule{}
	r := request{method: "POST", path: "/v1/schedules/" + segment(id) + "/pause", idempotent: true}
	return out, c.callProto(ctx, r, &workflowv1.PauseScheduleRequest{Id: id, Note: note}, []string{"id"}, out)
}

// UnpauseSchedule unpauses a schedule: it fires from now on.
func (c *Client) UnpauseSchedule(ctx context.Context, id string) (*workflowv1.Schedule, error) {
	out := &workflowv1.Schedule{}
	r := request{method: "POST", path: "/v1/schedules/" + segment(id) + "/unpause", idempotent: true}
	return out, c.callProto(ctx, r, &workflowv1.ScheduleIdRequest{Id: id}, []string{"id"}, out)
}

// TriggerSchedule fires a schedule now (its overlap policy applies), even while paused. It is
// not repeated after a lost answer: a repeat would fire again.
func (c *Client) TriggerSchedule(ctx context.Context, id string) (*workflowv1.ScheduleTriggered, error) {
	out := &workflowv1.ScheduleTriggered{}
	r := request{method: "POST", path: "/v1/schedules/" + segment(id) + "/trigger"}
	return out, c.callProto(ctx, r, &workflowv1.ScheduleIdRequest{Id: id}, []string{"id"}, out)
}

// BackfillSchedule fires the slots of the schedule's spec between from and to, in order,
// whatever the catch-up window. Repeating it adds nothing (a slot fires once).
func (c *Client) BackfillSchedule(ctx context.Context, id string, from, to time.Time) (*workflowv1.BackfillResponse, error) {
	out := &workflowv1.BackfillResponse{}
	r := request{method: "POST", path: "/v1/schedules/" + segment(id) + "/backfill", idempotent: true}
	in := &workflowv1.BackfillRequest{Id: id, From: timestamppb.New(from), To: timestamppb.New(to)}
	return out, c.callProto(ctx, r, in, []string{"id"}, out)
}
