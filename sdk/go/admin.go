package baton

import (
	"context"
	"fmt"
	"iter"
	"net/url"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

// The rest of the API's typed calls: definitions, task definitions, instance operations, step
// and history pages, the server's config and OpenAPI document. Every list has a one-page call
// and an iterator that follows page tokens.

// pageQuery is the query of a paginated GET.
func pageQuery(limit int, pageToken string) url.Values {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if pageToken != "" {
		q.Set("pageToken", pageToken)
	}
	return q
}

// pages iterates over every item of a paginated list: page fetches one page, items picks its
// items and its next page token. It yields the first error and stops.
func pages[P proto.Message, T any](page func(token string) (P, error), items func(P) ([]T, string)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		token := ""
		for {
			p, err := page(token)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			list, next := items(p)
			for _, item := range list {
				if !yield(item, nil) {
					return
				}
			}
			if token = next; token == "" {
				return
			}
		}
	}
}

// ListDefinitions is one page of definitions (the latest version of each name).
func (c *Client) ListDefinitions(ctx context.Context, limit int, pageToken string) (*workflowv1.DefinitionPage, error) {
	out := &workflowv1.DefinitionPage{}
	r := request{method: "GET", path: "/v1/definitions", query: pageQuery(limit, pageToken), idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// Definitions iterates over every definition (latest versions), pageSize at a time.
func (c *Client) Definitions(ctx context.Context, pageSize int) iter.Seq2[*workflowv1.Definition, error] {
	return pages(func(t string) (*workflowv1.DefinitionPage, error) { return c.ListDefinitions(ctx, pageSize, t) },
		func(p *workflowv1.DefinitionPage) ([]*workflowv1.Definition, string) {
			return p.GetDefinitions(), p.GetNextPageToken()
		})
}

// DeleteDefinition deletes one version of a definition and answers it as it was.
func (c *Client) DeleteDefinition(ctx context.Context, name string, version int) (*workflowv1.Definition, error) {
	out := &workflowv1.Definition{}
	path := "/v1/definitions/" + segment(name) + "/versions/" + strconv.Itoa(version)
	return out, c.callProto(ctx, request{method: "DELETE", path: path}, nil, nil, out)
}

// GetTaskDef is the task definition of a job type.
func (c *Client) GetTaskDef(ctx context.Context, name string) (*workflowv1.TaskDef, error) {
	out := &workflowv1.TaskDef{}
	r := request{method: "GET", path: "/v1/taskdefs/" + segment(name), idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// DeleteTaskDef deletes the task definition of a job type and answers it as it was.
func (c *Client) DeleteTaskDef(ctx context.Context, name string) (*workflowv1.TaskDef, error) {
	out := &workflowv1.TaskDef{}
	return out, c.callProto(ctx, request{method: "DELETE", path: "/v1/taskdefs/" + segment(name)}, nil, nil, out)
}

// ListTaskDefs is one page of task definitions.
func (c *Client) ListTaskDefs(ctx context.Context, limit int, pageToken string) (*workflowv1.TaskDefPage, error) {
	out := &workflowv1.TaskDefPage{}
	r := request{method: "GET", path: "/v1/taskdefs", query: pageQuery(limit, pageToken), idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// TaskDefs iterates over every task definition, pageSize at a time.
func (c *Client) TaskDefs(ctx context.Context, pageSize int) iter.Seq2[*workflowv1.TaskDef, error] {
	return pages(func(t string) (*workflowv1.TaskDefPage, error) { return c.ListTaskDefs(ctx, pageSize, t) },
		func(p *workflowv1.TaskDefPage) ([]*workflowv1.TaskDef, string) {
			return p.GetTaskDefs(), p.GetNextPageToken()
		})
}

// Instances iterates over every instance matching req (its Limit is the page size; its
// PageToken is ignored), newest first.
func (c *Client) Instances(ctx context.Context, req *workflowv1.SearchInstancesRequest) iter.Seq2[*workflowv1.Instance, error] {
	return pages(func(t string) (*workflowv1.InstancePage, error) {
		q := proto.CloneOf(req)
		if q == nil {
			q = &workflowv1.SearchInstancesRequest{}
		}
		q.PageToken = t
		return c.SearchInstances(ctx, q)
	}, func(p *workflowv1.InstancePage) ([]*workflowv1.Instance, string) {
		return p.GetInstances(), p.GetNextPageToken()
	})
}

// ListSteps is one page of an instance's step executions, in the order they were created.
func (c *Client) ListSteps(ctx context.Context, id string, limit int, pageToken string) (*workflowv1.StepExecutionPage, error) {
	out := &workflowv1.StepExecutionPage{}
	r := request{method: "GET", path: "/v1/instances/" + segment(id) + "/steps", query: pageQuery(limit, pageToken), idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// Steps iterates over every step execution of an instance, pageSize at a time.
func (c *Client) Steps(ctx context.Context, id string, pageSize int) iter.Seq2[*workflowv1.StepExecution, error] {
	return pages(func(t string) (*workflowv1.StepExecutionPage, error) { return c.ListSteps(ctx, id, pageSize, t) },
		func(p *workflowv1.StepExecutionPage) ([]*workflowv1.StepExecution, string) {
			return p.GetSteps(), p.GetNextPageToken()
		})
}

// History iterates over an instance's whole audit log, pageSize events at a time.
func (c *Client) History(ctx context.Context, id string, pageSize int) iter.Seq2[*workflowv1.HistoryEvent, error] {
	return pages(func(t string) (*workflowv1.HistoryPage, error) { return c.GetHistory(ctx, id, pageSize, t) },
		func(p *workflowv1.HistoryPage) ([]*workflowv1.HistoryEvent, string) {
			return p.GetEvents(), p.GetNextPageToken()
		})
}

// DeleteInstance deletes a finished instance with its step executions, jobs and history (a
// 409 while it runs: cancel it first). It is not repeated after a lost answer.
func (c *Client) DeleteInstance(ctx context.Context, id string) (*workflowv1.DeletedInstance, error) {
	out := &workflowv1.DeletedInstance{}
	return out, c.callProto(ctx, request{method: "DELETE", path: "/v1/instances/" + segment(id)}, nil, nil, out)
}

// instanceOp posts to /v1/instances/{id}/{op} with body.
func (c *Client) instanceOp(ctx context.Context, id, op string, body proto.Message) (*workflowv1.Instance, error) {
	out := &workflowv1.Instance{}
	r := request{method: "POST", path: "/v1/instances/" + segment(id) + "/" + op}
	return out, c.callProto(ctx, r, body, []string{"id"}, out)
}

// RetryInstance runs a FAILED, TIMED_OUT or CANCELLED instance again from what did not
// complete, keeping what completed.
func (c *Client) RetryInstance(ctx context.Context, id string) (*workflowv1.Instance, error) {
	return c.instanceOp(ctx, id, "retry", &workflowv1.InstanceOperationRequest{Id: id})
}

// RestartInstance runs an ended instance again from the start with the same input (the same
// id, its next run); useLatestDefinition runs its definition's newest version.
func (c *Client) RestartInstance(ctx context.Context, id string, useLatestDefinition bool) (*workflowv1.Instance, error) {
	return c.instanceOp(ctx, id, "restart", &workflowv1.RestartInstanceRequest{Id: id, UseLatestDefinition: useLatestDefinition})
}

// RerunInstance runs an ended instance again from one of its step executions (req's
// FromStepExecutionId; empty: from the start): what came after it is removed and it runs again
// in its place, with req's StepInput if given; req's Input and CorrelationId replace the
// instance's. req.Id is set from id.
func (c *Client) RerunInstance(ctx context.Context, id string, req *workflowv1.RerunInstanceRequest) (*workflowv1.Instance, error) {
	if req == nil {
		req = &workflowv1.RerunInstanceRequest{}
	}
	req.Id = id
	return c.instanceOp(ctx, id, "rerun", req)
}

// PauseInstance pauses a running instance: no new work until resumed (jobs in flight may
// finish).
func (c *Client) PauseInstance(ctx context.Context, id string) (*workflowv1.Instance, error) {
	return c.instanceOp(ctx, id, "pause", &workflowv1.InstanceOperationRequest{Id: id})
}

// ResumeInstance resumes a paused instance; what waited runs, and timers that fell due fire.
func (c *Client) ResumeInstance(ctx context.Context, id string) (*workflowv1.Instance, error) {
	return c.instanceOp(ctx, id, "resume", &workflowv1.InstanceOperationRequest{Id: id})
}

// Config is GET /v1/config: the payload limits and the presigned URLs' lifetime.
func (c *Client) Config(ctx context.Context) (*workflowv1.ServerConfig, error) {
	out := &workflowv1.ServerConfig{}
	return out, c.callProto(ctx, request{method: "GET", path: "/v1/config", idempotent: true}, nil, nil, out)
}

// OpenAPI is the API's OpenAPI document.
func (c *Client) OpenAPI(ctx context.Context) (map[string]any, error) {
	out := &structpb.Struct{}
	if err := c.callProto(ctx, request{method: "GET", path: "/v1/openapi.json", idempotent: true}, nil, nil, out); err != nil {
		return nil, fmt.Errorf("baton: the OpenAPI document: %w", err)
	}
	return out.AsMap(), nil
}
