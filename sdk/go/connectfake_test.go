package baton

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/baton-dev/baton/sdk/go/workflowv1"
)

// connectServer answers the Connect protocol in front of a REST handler, as Baton does: each
// RPC becomes the REST request it mirrors, and the REST answer becomes the binary response
// message or a Connect error with the problem in its details. It records what it was sent, so
// a test can check that the wire really was binary Connect.
type connectServer struct {
	rest http.Handler

	mu    sync.Mutex
	calls []connectCall
}

type connectCall struct {
	RPC, ContentType, Accept, ProtocolVersion string
}

func (s *connectServer) rpcs() []connectCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]connectCall(nil), s.calls...)
}

var connectStatus = map[int]struct {
	code   string
	status int
}{
	400: {"invalid_argument", 400}, 422: {"invalid_argument", 400}, 404: {"not_found", 404},
	409: {"failed_precondition", 400}, 413: {"resource_exhausted", 429}, 429: {"resource_exhausted", 429},
	503: {"unavailable", 503}, 401: {"unauthenticated", 401}, 403: {"unauthenticated", 403},
}

func (s *connectServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rpcName, ok := strings.CutPrefix(r.URL.Path, "/rpc/"+connectService+"/")
	if !ok {
		s.rest.ServeHTTP(w, r)
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, connectCall{rpcName, r.Header.Get("content-type"), r.Header.Get("accept"),
		r.Header.Get("connect-protocol-version")})
	s.mu.Unlock()
	if r.Method != "POST" || r.Header.Get("content-type") != connectProto {
		connectError(w, 415, "invalid_argument", "not a binary Connect request", nil)
		return
	}
	var route *connectRoute
	for i := range connectRoutes {
		if connectRoutes[i].rpc == rpcName {
			route = &connectRoutes[i]
			break
		}
	}
	if route == nil {
		connectError(w, 404, "unimplemented", "no RPC "+rpcName, nil)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	message := route.input.New().Interface()
	if err := proto.Unmarshal(raw, message); err != nil {
		connectError(w, 400, "invalid_argument", err.Error(), nil)
		return
	}
	encoded, _ := protojson.Marshal(message)
	var fields map[string]any
	_ = json.Unmarshal(encoded, &fields)
	// The REST path: the first template of this RPC whose parameters the message all has.
	var path string
	for _, t := range connectTwins {
		if t.rpc != rpcName {
			continue
		}
		p, complete := t.path, true
		for _, name := range route.pattern.SubexpNames() {
			if name == "" || !strings.Contains(t.path, "{"+name+"}") {
				continue
			}
			v, given := fields[name]
			if !given {
				complete = false
				break
			}
			p = strings.Replace(p, "{"+name+"}", url.PathEscape(jsonText(v)), 1)
			delete(fields, name)
		}
		if complete {
			path = p
			break
		}
	}
	var body io.Reader
	query := url.Values{}
	if route.method == "GET" || route.method == "DELETE" {
		for k, v := range fields {
			query.Set(k, jsonText(v))
		}
	} else {
		var content any = fields
		if route.bodyField != "" {
			content = fields[route.bodyField]
		}
		b, _ := json.Marshal(content)
		body = bytes.NewReader(b)
	}
	target := path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	inner := httptest.NewRequestWithContext(r.Context(), route.method, target, body)
	inner.Header = r.Header.Clone()
	inner.Header.Set("content-type", "application/json")
	rec := httptest.NewRecorder()
	s.rest.ServeHTTP(rec, inner)
	answer := rec.Result()
	answerBody, _ := io.ReadAll(answer.Body)
	if answer.StatusCode >= 200 && answer.StatusCode < 300 {
		out := route.output.New().Interface()
		if len(answerBody) > 0 {
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(answerBody, out); err != nil {
				connectError(w, 500, "internal", "the REST answer is not a "+string(route.output.Descriptor().Name())+": "+err.Error(), nil)
				return
			}
		}
		b, _ := proto.Marshal(out)
		w.Header().Set("content-type", connectProto)
		w.WriteHeader(200)
		_, _ = w.Write(b)
		return
	}
	problem := &workflowv1.Problem{}
	_ = (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(answerBody, problem)
	mapped, known := connectStatus[answer.StatusCode]
	if !known {
		mapped.code, mapped.status = "internal", 500
	}
	if ra := answer.Header.Get("retry-after"); ra != "" {
		w.Header().Set("retry-after", ra)
	}
	connectError(w, mapped.status, mapped.code, problem.GetDetail(), problem)
}

func connectError(w http.ResponseWriter, status int, code, message string, problem *workflowv1.Problem) {
	doc := map[string]any{"code": code, "message": message}
	if problem != nil {
		b, _ := proto.Marshal(problem)
		doc["details"] = []any{map[string]any{"type": "workflow.v1.Problem", "value": base64.RawStdEncoding.EncodeToString(b)}}
	}
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(doc)
}

func jsonText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
