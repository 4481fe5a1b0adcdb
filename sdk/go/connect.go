package baton

// The Connect protocol as the client's wire ([WithProtocol]([ProtocolConnect]) or
// BATON_PROTOCOL=connect): each REST call the client makes goes as the RPC that mirrors it, a
// binary protobuf POST to /rpc/workflow.v1.WorkflowEngine/<Method>, and its answer comes back
// as the JSON a REST answer holds, so everything above send (retries, decoding, the runner) is
// the same on both wires. Errors come back as the same *APIError: the problem travels in the
// Connect error's details as a workflow.v1.Problem.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

// Protocol is the client's wire.
type Protocol string

const (
	// ProtocolREST is REST JSON (the default).
	ProtocolREST Protocol = "rest"
	// ProtocolConnect sends each call as its RPC, binary protobuf over the Connect protocol.
	ProtocolConnect Protocol = "connect"

	// EnvProtocol chooses the wire when no [WithProtocol] is given: rest or connect.
	EnvProtocol = "BATON_PROTOCOL"

	connectService = "workflow.v1.WorkflowEngine"
	connectProto   = "application/proto"
)

// WithProtocol chooses the wire (default $BATON_PROTOCOL, else [ProtocolREST]).
func WithProtocol(p Protocol) ClientOption {
	return func(o *clientOptions) { o.protocol = p }
}

// connectTwins: each REST operation and its RPC, as the engine's baton.rpc.methods lists them
// (method, path template, RPC, the field holding the whole body, if any).
var connectTwins = []struct{ method, path, rpc, bodyField string }{
	{"GET", "/v1/config", "GetConfig", ""},
	{"POST", "/v1/payloads", "CreatePayload", ""},
	{"GET", "/v1/openapi.json", "GetOpenApi", ""},
	{"GET", "/v1/health", "GetHealth", ""},
	{"DELETE", "/v1/definitions/{name}/versions/{version}", "DeleteDefinition", ""},
	{"DELETE", "/v1/instances/{id}", "DeleteInstance", ""},
	{"POST", "/v1/definitions", "RegisterDefinition", ""},
	{"GET", "/v1/definitions", "ListDefinitions", ""},
	{"GET", "/v1/definitions/{name}/versions/{version}", "GetDefinition", ""},
	{"GET", "/v1/definitions/{name}", "GetDefinition", ""},
	{"GET", "/v1/taskdefs", "ListTaskDefs", ""},
	{"PUT", "/v1/taskdefs/{name}", "PutTaskDef", "taskDef"},
	{"GET", "/v1/taskdefs/{name}", "GetTaskDef", ""},
	{"DELETE", "/v1/taskdefs/{name}", "DeleteTaskDef", ""},
	{"POST", "/v1/instances", "StartInstance", ""},
	{"POST", "/v1/instances/batch", "StartInstances", ""},
	{"GET", "/v1/instances", "SearchInstances", ""},
	{"GET", "/v1/instances/{id}", "GetInstance", ""},
	{"GET", "/v1/instances/{id}/steps", "ListSteps", ""},
	{"GET", "/v1/instances/{id}/history", "GetHistory", ""},
	{"POST", "/v1/instances/{id}/cancel", "CancelInstance", ""},
	{"POST", "/v1/instances/{id}/user-tasks/{stepId}/complete", "CompleteUserTask", ""},
	{"POST", "/v1/instances/{id}/signals/{stepId}", "Signal", ""},
	{"POST", "/v1/instances/{id}/retry", "RetryInstance", ""},
	{"POST", "/v1/instances/{id}/rerun", "RerunInstance", ""},
	{"POST", "/v1/instances/{id}/restart", "RestartInstance", ""},
	{"POST", "/v1/instances/{id}/pause", "PauseInstance", ""},
	{"POST", "/v1/instances/{id}/resume", "ResumeInstance", ""},
	{"POST", "/v1/jobs/poll", "PollJobs", ""},
	{"POST", "/v1/jobs/complete", "CompleteJob", ""},
	{"POST", "/v1/jobs/complete-batch", "CompleteBatch", ""},
	{"POST", "/v1/jobs/fail", "FailJob", ""},
	{"POST", "/v1/jobs/heartbeat", "Heartbeat", ""},
	{"POST", "/v1/jobs/{id}/claim", "ClaimJob", ""},
	{"POST", "/v1/workers/stop", "StopWorker", ""},
	{"POST", "/v1/queues/{name}/push", "Push", ""},
	{"GET", "/v1/queues/{name}/stats", "Stats", ""},
	{"GET", "/v1/queues/{name}/peek", "Peek", ""},
	{"DELETE", "/v1/queues/{name}", "Purge", ""},
	{"POST", "/v1/queues/{name}/dequeue", "Dequeue", ""},
	{"POST", "/v1/queues/{name}/tasks/{taskId}/ack", "Ack", ""},
	{"POST", "/v1/queues/{name}/tasks/{taskId}/nack", "Nack", ""},
	{"GET", "/v1/queues", "ListQueues", ""},
	{"GET", "/v1/queues/{name}/tasks", "ListQueueTasks", ""},
	{"POST", "/v1/queues/{name}/redrive", "Redrive", ""},
	{"POST", "/v1/schedules", "CreateSchedule", ""},
	{"GET", "/v1/schedules", "ListSchedules", ""},
	{"GET", "/v1/schedules/{id}", "GetSchedule", ""},
	{"PUT", "/v1/schedules/{id}", "ReplaceSchedule", ""},
	{"DELETE", "/v1/schedules/{id}", "DeleteSchedule", ""},
	{"POST", "/v1/schedules/{id}/pause", "PauseSchedule", ""},
	{"POST", "/v1/schedules/{id}/unpause", "UnpauseSchedule", ""},
	{"POST", "/v1/schedules/{id}/trigger", "TriggerSchedule", ""},
	{"POST", "/v1/schedules/{id}/backfill", "BackfillSchedule", ""},
}

type connectRoute struct {
	method, rpc, bodyField string
	pattern                *regexp.Regexp
	input, output          protoreflect.MessageType
}

var connectRoutes = func() []connectRoute {
	param := regexp.MustCompile(`\{(\w+)\}`)
	service := workflowv1.File_workflow_v1_engine_proto.Services().ByName("WorkflowEngine")
	routes := make([]connectRoute, 0, len(connectTwins))
	for _, t := range connectTwins {
		m := service.Methods().ByName(protoreflect.Name(t.rpc))
		if m == nil {
			panic("baton: the proto has no RPC " + t.rpc)
		}
		in, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
		if err != nil {
			panic(err)
		}
		out, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
		if err != nil {
			panic(err)
		}
		// QuoteMeta escapes the braces: undo that for the parameters.
		quoted := strings.NewReplacer(`\{`, "{", `\}`, "}").Replace(regexp.QuoteMeta(t.path))
		re := "^" + param.ReplaceAllString(quoted, `(?P<$1>[^/]+)`) + "$"
		routes = append(routes, connectRoute{t.method, t.rpc, t.bodyField, regexp.MustCompile(re), in, out})
	}
	return routes
}()

// rpcCall is one REST call as its RPC: the URL path, the binary body and the answer's type.
type rpcCall struct {
	rpc    string
	path   string
	body   []byte
	output protoreflect.MessageType
}

// toRPC is the Connect request of r (its path parameters, query and JSON body as one message).
func toRPC(r request) (*rpcCall, error) {
	for _, route := range connectRoutes {
		if route.method != r.method {
			continue
		}
		match := route.pattern.FindStringSubmatch(r.path)
		if match == nil {
			continue
		}
		fields := map[string]any{}
		if len(r.body) > 0 {
			var body any
			if err := json.Unmarshal(r.body, &body); err != nil {
				return nil, fmt.Errorf("baton: %s %s cannot go as %s: %w", r.method, r.path, route.rpc, err)
			}
			if route.bodyField != "" {
				fields[route.bodyField] = body
			} else if object, ok := body.(map[string]any); ok {
				fields = object
			}
		}
		desc := route.input.Descriptor()
		for i, name := range route.pattern.SubexpNames() {
			if name == "" {
				continue
			}
			value, err := url.PathUnescape(match[i])
			if err != nil {
				return nil, err
			}
			fields[name] = fieldValue(desc, name, value)
		}
		for name, values := range r.query {
			if len(values) > 0 {
				fields[name] = fieldValue(desc, name, values[0])
			}
		}
		encoded, err := json.Marshal(fields)
		if err != nil {
			return nil, err
		}
		message := route.input.New().Interface()
		if err := protojson.Unmarshal(encoded, message); err != nil {
			return nil, fmt.Errorf("baton: %s %s cannot go as %s: %w", r.method, r.path, route.rpc, err)
		}
		body, err := proto.Marshal(message)
		if err != nil {
			return nil, err
		}
		return &rpcCall{route.rpc, "/rpc/" + connectService + "/" + route.rpc, body, route.output}, nil
	}
	return nil, fmt.Errorf("baton: %s %s has no RPC twin (cannot go over Connect)", r.method, r.path)
}

// fieldValue is a path or query text as the JSON its field takes (protojson reads numbers
// given as strings, but not booleans).
func fieldValue(desc protoreflect.MessageDescriptor, jsonName, text string) any {
	field := desc.Fields().ByJSONName(jsonName)
	if field != nil && field.Kind() == protoreflect.BoolKind {
		if b, err := strconv.ParseBool(text); err == nil {
			return b
		}
	}
	return text
}

// restAnswer is an RPC's binary answer as the JSON the REST answer holds.
func restAnswer(call *rpcCall, body []byte) ([]byte, error) {
	message := call.output.New().Interface()
	if err := proto.Unmarshal(body, message); err != nil {
		return nil, err
	}
	return encodeJSON(messageJSON(message.ProtoReflect()))
}

// connectProblem is a Connect error body as the REST status and problem (JSON) it carries.
func connectProblem(status int, body []byte) (int, []byte) {
	var doc struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Code == "" {
		return status, body
	}
	for _, d := range doc.Details {
		if d.Type != "workflow.v1.Problem" {
			continue
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			continue
		}
		problem := &workflowv1.Problem{}
		if proto.Unmarshal(raw, problem) != nil {
			continue
		}
		out, err := encodeJSON(messageJSON(problem.ProtoReflect()))
		if err != nil {
			continue
		}
		if s := int(problem.GetStatus()); s > 0 {
			status = s
		}
		return status, out
	}
	title := strings.ToUpper(doc.Code[:1]) + strings.ReplaceAll(doc.Code[1:], "_", " ")
	detail := doc.Message
	if detail == "" {
		detail = title
	}
	out, _ := encodeJSON(map[string]any{"title": title, "status": status, "detail": detail})
	return status, out
}

// messageJSON is a message as REST gives it: 64-bit integers as numbers, whole Struct numbers
// as integers; numbers, booleans and lists at their defaults too (proto3 leaves defaults out:
// a job with no retries left would lack retriesRemaining), texts only when not empty, and
// fields with presence only when set.
func messageJSON(m protoreflect.Message) any {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		return wellKnownJSON(m)
	case "google.protobuf.Timestamp":
		ts, ok := m.Interface().(*timestamppb.Timestamp)
		if !ok {
			return nil
		}
		text, err := protojson.Marshal(ts)
		if err != nil {
			return nil
		}
		return json.RawMessage(text)
	}
	out := map[string]any{}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch {
		case f.IsMap():
			entries := map[string]any{}
			m.Get(f).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				entries[k.String()] = scalarJSON(f.MapValue(), v)
				return true
			})
			out[f.JSONName()] = entries
		case f.IsList():
			list := m.Get(f).List()
			items := make([]any, list.Len())
			for j := range list.Len() {
				items[j] = scalarJSON(f, list.Get(j))
			}
			out[f.JSONName()] = items
		case f.HasPresence() && !m.Has(f):
		case f.Kind() == protoreflect.StringKind && m.Get(f).String() == "":
		default:
			out[f.JSONName()] = scalarJSON(f, m.Get(f))
		}
	}
	foldLegacy(m.Descriptor(), out)
	return out
}

// foldLegacy keeps a deprecated legacy_<name> field out of REST JSON. Such a field holds, under
// its old number and narrower type, a value whose field <name> widened (a step's input, a
// Struct, became a Value as it may be one ${...}): the engine sets both, and an engine older
// than this proto only the old one, whose value then stands for <name>.
func foldLegacy(desc protoreflect.MessageDescriptor, out map[string]any) {
	for _, pair := range legacyPairs(desc) {
		value, set := out[pair.old.JSONName()]
		delete(out, pair.old.JSONName())
		if _, given := out[pair.new.JSONName()]; set && !given {
			out[pair.new.JSONName()] = value
		}
	}
}

// legacyPair is a deprecated legacy_<name> field and the field <name> it stands for.
type legacyPair struct{ old, new protoreflect.FieldDescriptor }

// legacyCache holds each message type's legacy pairs, found once per type: most have none,
// and a poll's answer reads one message per job.
var legacyCache sync.Map // protoreflect.FullName -> []legacyPair

func legacyPairs(desc protoreflect.MessageDescriptor) []legacyPair {
	if found, ok := legacyCache.Load(desc.FullName()); ok {
		return found.([]legacyPair)
	}
	var pairs []legacyPair
	fields := desc.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		name := string(f.Name())
		options, _ := f.Options().(*descriptorpb.FieldOptions)
		if !strings.HasPrefix(name, "legacy_") || !options.GetDeprecated() {
			continue
		}
		if next := fields.ByName(protoreflect.Name(strings.TrimPrefix(name, "legacy_"))); next != nil {
			pairs = append(pairs, legacyPair{f, next})
		}
	}
	legacyCache.Store(desc.FullName(), pairs)
	return pairs
}

func scalarJSON(f protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return messageJSON(v.Message())
	case protoreflect.EnumKind:
		if e := f.Enum().Values().ByNumber(v.Enum()); e != nil {
			return string(e.Name())
		}
		return int32(v.Enum())
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	}
	return v.Interface()
}

// wellKnownJSON is a Struct, Value or ListValue as plain JSON, a whole number as an integer
// (binary protobuf carries Struct numbers as doubles: 3 must not come back as 3.0).
func wellKnownJSON(m protoreflect.Message) any {
	fields := m.Descriptor().Fields()
	switch m.Descriptor().FullName() {
	case "google.protobuf.Struct":
		out := map[string]any{}
		m.Get(fields.ByName("fields")).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			out[k.String()] = wellKnownJSON(v.Message())
			return true
		})
		return out
	case "google.protobuf.ListValue":
		list := m.Get(fields.ByName("values")).List()
		out := make([]any, list.Len())
		for i := range list.Len() {
			out[i] = wellKnownJSON(list.Get(i).Message())
		}
		return out
	}
	kind := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind"))
	if kind == nil {
		return nil
	}
	v := m.Get(kind)
	switch kind.Name() {
	case "number_value":
		n := v.Float()
		if !math.IsInf(n, 0) && !math.IsNaN(n) && n == math.Trunc(n) && math.Abs(n) <= 1<<53 {
			return int64(n)
		}
		return n
	case "string_value":
		return v.String()
	case "bool_value":
		return v.Bool()
	case "struct_value", "list_value":
		return wellKnownJSON(v.Message())
	}
	return nil
}
