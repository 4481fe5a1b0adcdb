package baton

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

// The typed client for the rest of the API: its bodies are the proto3 JSON mapping of the
// messages of proto/workflow/v1/engine.proto (package workflowv1).

var (
	protoOut = protojson.MarshalOptions{}
	protoIn  = protojson.UnmarshalOptions{DiscardUnknown: true}
)

// callProto sends in (without the fields that went into the path) and decodes the answer
// into out.
func (c *Client) callProto(ctx context.Context, r request, in proto.Message, pathFields []string, out proto.Message) error {
	if in != nil {
		body, err := protoOut.Marshal(withoutLegacy(in))
		if err != nil {
			return fmt.Errorf("baton: encoding %s: %w", in.ProtoReflect().Descriptor().Name(), err)
		}
		if len(pathFields) > 0 {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(body, &fields); err != nil {
				return err
			}
			for _, name := range pathFields {
				delete(fields, name)
			}
			if body, err = json.Marshal(fields); err != nil {
				return err
			}
		}
		r.body = body
	}
	answer, err := c.call(ctx, r)
	if err != nil {
		return err
	}
	return c.decodeProto(r, answer, out)
}

// withoutLegacy is in, or a copy of it with each deprecated legacy_<name> field set moved into
// <name> (when that is unset), in the messages within too: REST knows only <name> (see
// foldLegacy). Code that still sets an old field (a step's LegacyInput) registers what it meant.
func withoutLegacy(in proto.Message) proto.Message {
	if !reachesLegacy(in.ProtoReflect().Descriptor(), map[protoreflect.FullName]bool{}) {
		return in
	}
	out := proto.Clone(in)
	moveLegacy(out.ProtoReflect())
	return out
}

// reachesLegacy is whether a message of desc may hold a legacy field (a Definition's steps do).
func reachesLegacy(desc protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[desc.FullName()] || strings.HasPrefix(string(desc.FullName()), "google.protobuf.") {
		return false
	}
	seen[desc.FullName()] = true
	if len(legacyPairs(desc)) > 0 {
		return true
	}
	fields := desc.Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message() != nil && reachesLegacy(f.Message(), seen) {
			return true
		}
	}
	return false
}

func moveLegacy(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Kind() != protoreflect.MessageKind || f.IsMap() {
			continue
		}
		if f.IsList() {
			list := m.Get(f).List()
			for j := range list.Len() {
				moveLegacy(list.Get(j).Message())
			}
		} else if m.Has(f) {
			moveLegacy(m.Mutable(f).Message())
		}
	}
	for _, pair := range legacyPairs(m.Descriptor()) {
		if !m.Has(pair.old) {
			continue
		}
		if !m.Has(pair.new) {
			m.Set(pair.new, protoreflect.ValueOfMessage(legacyValue(pair.old, m.Get(pair.old)).ProtoReflect()))
		}
		m.Clear(pair.old)
	}
}

// legacyValue is an old field's value (a Struct, a bool or an integer) as the Value it widened to.
func legacyValue(f protoreflect.FieldDescriptor, v protoreflect.Value) *structpb.Value {
	switch f.Kind() {
	case protoreflect.MessageKind:
		if s, ok := v.Message().Interface().(*structpb.Struct); ok {
			return structpb.NewStructValue(s)
		}
	case protoreflect.BoolKind:
		return structpb.NewBoolValue(v.Bool())
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return structpb.NewNumberValue(float64(v.Int()))
	}
	return structpb.NewNullValue()
}

// decodeProto decodes a 2xx answer into out (fields this SDK does not know are skipped).
func (c *Client) decodeProto(r request, answer []byte, out proto.Message) error {
	if err := protoIn.Unmarshal(answer, out); err != nil {
		return &APIError{Status: 200, Title: "Unexpected response", Method: r.method, URL: c.baseURL + r.path,
			Detail: fmt.Sprintf("the answer is not a %s: %v", out.ProtoReflect().Descriptor().Name(), err)}
	}
	return nil
}

// RegisterDefinition registers a workflow definition (a new version when the name exists).
func (c *Client) RegisterDefinition(ctx context.Context, def *workflowv1.Definition) (*workflowv1.Definition, error) {
	out := &workflowv1.Definition{}
	return out, c.callProto(ctx, request{method: "POST", path: "/v1/definitions"}, def, nil, out)
}

// GetDefinition is a definition's latest version (version 0) or the given one.
func (c *Client) GetDefinition(ctx context.Context, name string, version int) (*workflowv1.Definition, error) {
	path := "/v1/definitions/" + segment(name)
	if version > 0 {
		path += "/versions/" + strconv.Itoa(version)
	}
	out := &workflowv1.Definition{}
	return out, c.callProto(ctx, request{method: "GET", path: path, idempotent: true}, nil, nil, out)
}

// PutTaskDef creates or replaces a task definition (the defaults of a job type).
func (c *Client) PutTaskDef(ctx context.Context, def *workflowv1.TaskDef) (*workflowv1.TaskDef, error) {
	out := &workflowv1.TaskDef{}
	r := request{method: "PUT", path: "/v1/taskdefs/" + segment(def.GetName()), idempotent: true}
	return out, c.callProto(ctx, r, def, nil, out)
}

// StartInstance starts a workflow instance. With an IdempotencyKey the start is safe to
// repeat (and the client retries it after a lost answer); without one it is sent once.
func (c *Client) StartInstance(ctx context.Context, req *workflowv1.StartInstanceRequest) (*workflowv1.Instance, error) {
	out := &workflowv1.Instance{}
	r := request{method: "POST", path: "/v1/instances", idempotent: req.GetIdempotencyKey() != ""}
	return out, c.callProto(ctx, r, req, nil, out)
}

// GetInstance is an instance with its steps.
func (c *Client) GetInstance(ctx context.Context, id string) (*workflowv1.Instance, error) {
	out := &workflowv1.Instance{}
	r := request{method: "GET", path: "/v1/instances/" + segment(id), idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// SearchInstances lists instances by status, definition, correlation id and creation time.
func (c *Client) SearchInstances(ctx context.Context, req *workflowv1.SearchInstancesRequest) (*workflowv1.InstancePage, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", req.GetStatus())
	set("definitionName", req.GetDefinitionName())
	set("correlationId", req.GetCorrelationId())
	set("pageToken", req.GetPageToken())
	if req.GetLimit() > 0 {
		q.Set("limit", strconv.Itoa(int(req.GetLimit())))
	}
	if req.CreatedAfter != nil {
		q.Set("createdAfter", req.CreatedAfter.AsTime().Format("2006-01-02T15:04:05.999999999Z07:00"))
	}
	if req.CreatedBefore != nil {
		q.Set("createdBefore", req.CreatedBefore.AsTime().Format("2006-01-02T15:04:05.999999999Z07:00"))
	}
	out := &workflowv1.InstancePage{}
	return out, c.callProto(ctx, request{method: "GET", path: "/v1/instances", query: q, idempotent: true}, nil, nil, out)
}

// GetHistory is a page of an instance's audit log (pageToken "" for the first).
func (c *Client) GetHistory(ctx context.Context, id string, limit int, pageToken string) (*workflowv1.HistoryPage, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if pageToken != "" {
		q.Set("pageToken", pageToken)
	}
	out := &workflowv1.HistoryPage{}
	r := request{method: "GET", path: "/v1/instances/" + segment(id) + "/history", query: q, idempotent: true}
	return out, c.callProto(ctx, r, nil, nil, out)
}

// CancelInstance cancels a running instance.
func (c *Client) CancelInstance(ctx context.Context, id, reason string) (*workflowv1.Instance, error) {
	out := &workflowv1.Instance{}
	r := request{method: "POST", path: "/v1/instances/" + segment(id) + "/cancel"}
	return out, c.callProto(ctx, r, &workflowv1.CancelInstanceRequest{Id: id, Reason: reason}, []string{"id"}, out)
}

// CompleteUserTask completes a waiting USER_TASK step (req.Id, req.StepId) with variables.
func (c *Client) CompleteUserTask(ctx context.Context, req *workflowv1.CompleteUserTaskRequest) (*workflowv1.Instance, error) {
	out := &workflowv1.Instance{}
	path := "/v1/instances/" + segment(req.GetId()) + "/user-tasks/" + segment(req.GetStepId()) + "/complete"
	return out, c.callProto(ctx, request{method: "POST", path: path}, req, []string{"id", "stepId"}, out)
}

// Signal delivers a payload to a waiting SIGNAL step (req.Id, req.StepId); the payload
// becomes the step's output.
func (c *Client) Signal(ctx context.Context, req *workflowv1.SignalRequest) (*workflowv1.Instance, error) {
	out := &workflowv1.Instance{}
	path := "/v1/instances/" + segment(req.GetId()) + "/signals/" + segment(req.GetStepId())
	return out, c.callProto(ctx, request{method: "POST", path: path}, req, []string{"id", "stepId"}, out)
}
