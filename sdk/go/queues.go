package baton

import (
	"context"
	"iter"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

// Named queues (/v1/queues): push, consume (dequeue, ack, nack), inspect and redrive.

// Push pushes a task onto a named queue (higher Priority first, then FIFO; MaxRetries 0: the
// server's default, 3). req.Name is the queue.
func (c *Client) Push(ctx context.Context, req *workflowv1.PushRequest) (*workflowv1.PushResponse, error) {
	out := &workflowv1.PushResponse{}
	r := request{method: "POST", path: "/v1/queues/" + segment(req.GetName()) + "/push"}
	return out, c.callProto(ctx, r, req, []string{"name"}, out)
}

// QueueStats is a queue's task counts by state.
func (c *Client) QueueStats(ctx context.Context, queue string) (*workflowv1.QueueStats, error) {
	out := &workflowv1.QueueStats{}
	r := request{method: "GET", path: "/v1/queues/" + segment(queue) + "/stats", idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// Peek is up to limit pending tasks in dequeue order, not claimed (limit 0: the server's
// default, 10; at most 100).
func (c *Client) Peek(ctx context.Context, queue string, limit int) ([]*workflowv1.QueueTask, error) {
	out := &workflowv1.QueueTaskList{}
	r := request{method: "GET", path: "/v1/queues/" + segment(queue) + "/peek", query: pageQuery(limit, ""), idempotent: true}
	err := c.callProto(ctx, r, nil, nil, out)
	return out.GetTasks(), err
}

// Purge deletes every task of a queue.
func (c *Client) Purge(ctx context.Context, queue string) (*workflowv1.PurgeResponse, error) {
	out := &workflowv1.PurgeResponse{}
	r := request{method: "DELETE", path: "/v1/queues/" + segment(queue), idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// ListQueues is one page of queues (those holding at least one task), by name, with their
// counts.
func (c *Client) ListQueues(ctx context.Context, limit int, pageToken string) (*workflowv1.QueuePage, error) {
	out := &workflowv1.QueuePage{}
	r := request{method: "GET", path: "/v1/queues", query: pageQuery(limit, pageToken), idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// Queues iterates over every queue, pageSize at a time.
func (c *Client) Queues(ctx context.Context, pageSize int) iter.Seq2[*workflowv1.QueueSummary, error] {
	return pages(func(t string) (*workflowv1.QueuePage, error) { return c.ListQueues(ctx, pageSize, t) },
		func(p *workflowv1.QueuePage) ([]*workflowv1.QueueSummary, string) {
			return p.GetQueues(), p.GetNextPageToken()
		})
}

// ListQueueTasks is one page of a queue's tasks, oldest first, each with its retry count and
// last error (status "": every state; "dead": its dead letters).
func (c *Client) ListQueueTasks(ctx context.Context, queue, status string, limit int, pageToken string) (*workflowv1.QueueTaskPage, error) {
	q := pageQuery(limit, pageToken)
	if status != "" {
		q.Set("status", status)
	}
	out := &workflowv1.QueueTaskPage{}
	r := request{method: "GET", path: "/v1/queues/" + segment(queue) + "/tasks", query: q, idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// QueueTasks iterates over a queue's tasks (of status, "" for all), pageSize at a time.
func (c *Client) QueueTasks(ctx context.Context, queue, status string, pageSize int) iter.Seq2[*workflowv1.QueueTaskDetail, error] {
	return pages(func(t string) (*workflowv1.QueueTaskPage, error) {
		return c.ListQueueTasks(ctx, queue, status, pageSize, t)
	},
		func(p *workflowv1.QueueTaskPage) ([]*workflowv1.QueueTaskDetail, string) {
			return p.GetTasks(), p.GetNextPageToken()
		})
}

// Redrive moves dead tasks back to pending with their retry count reset: taskIDs, or (none)
// a batch of every dead task, Remaining saying how many are left. Named tasks that were not
// dead come back in Skipped. Repeating it is harmless.
func (c *Client) Redrive(ctx context.Context, queue string, taskIDs ...string) (*workflowv1.RedriveResponse, error) {
	out := &workflowv1.RedriveResponse{}
	r := request{method: "POST", path: "/v1/queues/" + segment(queue) + "/redrive", idempotent: true}
	return out, c.callProto(ctx, r, &workflowv1.RedriveRequest{Name: queue, TaskIds: taskIDs}, []string{"name"}, out)
}

// Dequeue claims up to req.MaxTasks tasks of queue req.Name for req.ConsumerId (0: one; a
// VisibilityTimeoutSecs of 0: the server's default, 300 s); each carries the Receipt to Ack
// or Nack it with.
func (c *Client) Dequeue(ctx context.Context, req *workflowv1.DequeueRequest) ([]*workflowv1.QueueTask, error) {
	out := &workflowv1.QueueTaskList{}
	r := request{method: "POST", path: "/v1/queues/" + segment(req.GetName()) + "/dequeue"}
	err := c.callProto(ctx, r, req, []string{"name"}, out)
	return out.GetTasks(), err
}

// Ack acknowledges a dequeued task (completed). Repeating it is harmless.
func (c *Client) Ack(ctx context.Context, queue, taskID, receipt string) (*workflowv1.SettleResponse, error) {
	out := &workflowv1.SettleResponse{}
	r := request{method: "POST", path: "/v1/queues/" + segment(queue) + "/tasks/" + segment(taskID) + "/ack", idempotent: true}
	return out, c.callProto(ctx, r, &workflowv1.AckRequest{Receipt: receipt}, nil, out)
}

// Nack fails a dequeued task: retried later (retryable), or dead-lettered after its maximum
// retries (or at once when not retryable). errMessage may be "".
func (c *Client) Nack(ctx context.Context, queue, taskID, receipt, errMessage string, retryable bool) (*workflowv1.SettleResponse, error) {
	// Not the proto message: the server's default for an absent retryable is true, and proto3
	// JSON leaves a false bool out.
	body, err := encodeJSON(struct {
		Receipt   string `json:"receipt"`
		Error     string `json:"error,omitempty"`
		Retryable bool   `json:"retryable"`
	}{receipt, errMessage, retryable})
	if err != nil {
		return nil, err
	}
	out := &workflowv1.SettleResponse{}
	r := request{method: "POST", path: "/v1/queues/" + segment(queue) + "/tasks/" + segment(taskID) + "/nack", body: body}
	answer, err := c.call(ctx, r)
	if err != nil {
		return nil, err
	}
	return out, c.decodeProto(r, answer, out)
}
