package baton

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RequestSigner signs a request before it is sent (AWS SigV4: package sigv4). body is the
// request's exact body (nil for none).
type RequestSigner interface {
	SignRequest(ctx context.Context, req *http.Request, body []byte) error
}

// Client calls Baton's REST API. It is safe for concurrent use.
type Client struct {
	baseURL     string
	http        *http.Client
	presigned   *http.Client
	apiKey      string
	credentials string // where the credentials came from, for 401/403 messages
	urlSource   string // where the URL came from, for "cannot reach" messages
	signer      RequestSigner
	protocol    Protocol
	retry       RetryPolicy
	timeout     time.Duration
	logger      *slog.Logger

	configMu sync.Mutex
	config   *serverConfig
}

type clientOptions struct {
	apiKey     string
	apiKeySet  bool
	httpClient *http.Client
	signer     RequestSigner
	protocol   Protocol
	retry      *RetryPolicy
	timeout    time.Duration
	logger     *slog.Logger
}

// ClientOption configures a [Client].
type ClientOption func(*clientOptions)

// WithAPIKey sends key as x-api-key (instead of $BATON_API_KEY or a local baton dev's key).
func WithAPIKey(key string) ClientOption {
	return func(o *clientOptions) { o.apiKey, o.apiKeySet = key, true }
}

// WithSigner signs every request (AWS SigV4 for an IAM-authorised API: package sigv4); no
// API key is looked for then.
func WithSigner(s RequestSigner) ClientOption {
	return func(o *clientOptions) { o.signer = s }
}

// WithHTTPClient uses c for the API's requests (its Timeout should be 0: the client bounds
// each request itself, stretching long-polls past their wait).
func WithHTTPClient(c *http.Client) ClientOption {
	return func(o *clientOptions) { o.httpClient = c }
}

// WithRetryPolicy sets how requests are retried (default [DefaultRetryPolicy]). Only what
// cannot do harm is retried: no connection, 429 and 503 for every request; other 5xx and lost
// answers for idempotent ones; never another 4xx.
func WithRetryPolicy(p RetryPolicy) ClientOption {
	return func(o *clientOptions) { o.retry = &p }
}

// WithTimeout bounds each request (default 30 s; a long-poll gets its wait on top).
func WithTimeout(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.timeout = d }
}

// WithLogger sets the client's logger (default slog.Default()).
func WithLogger(l *slog.Logger) ClientOption {
	return func(o *clientOptions) { o.logger = l }
}

// NewClient is a client of the API at baseURL ("" : $BATON_URL, else http://127.0.0.1:8080).
//
// The wire: [WithProtocol], else $BATON_PROTOCOL (rest or connect), else REST.
//
// Credentials: [WithSigner], else [WithAPIKey], else $BATON_API_KEY, else (for a server on
// this machine only) the key a local baton dev keeps in $BATON_DATA_DIR/api-key (default
// .baton/data/api-key).
func NewClient(baseURL string, opts ...ClientOption) (*Client, error) {
	var o clientOptions
	for _, opt := range opts {
		opt(&o)
	}
	urlSource := "the baseURL given to NewClient"
	if baseURL == "" {
		baseURL, urlSource = os.Getenv(EnvURL), "$"+EnvURL
	}
	if baseURL == "" {
		baseURL, urlSource = DefaultURL, "the default ("+DefaultURL+")"
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("baton: %q is not an http(s) URL", baseURL)
	}
	protocol := o.protocol
	if protocol == "" {
		protocol = Protocol(strings.ToLower(strings.TrimSpace(os.Getenv(EnvProtocol))))
	}
	switch protocol {
	case "":
		protocol = ProtocolREST
	case ProtocolREST, ProtocolConnect:
	default:
		return nil, fmt.Errorf("baton: the protocol must be %q or %q, not %q (WithProtocol or $%s)",
			ProtocolREST, ProtocolConnect, protocol, EnvProtocol)
	}
	c := &Client{
		protocol:  protocol,
		baseURL:   strings.TrimRight(baseURL, "/"),
		urlSource: urlSource,
		http:      o.httpClient,
		signer:    o.signer,
		retry:     DefaultRetryPolicy,
		timeout:   30 * time.Second,
		logger:    o.logger,
	}
	if o.retry != nil {
		c.retry = *o.retry
	}
	if o.timeout > 0 {
		c.timeout = o.timeout
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.http == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.MaxIdleConnsPerHost = 64
		c.http = &http.Client{Transport: transport}
	}
	c.presigned = &http.Client{Transport: c.http.Transport}
	switch {
	case c.signer != nil:
		c.credentials = "requests signed by the configured signer (AWS SigV4)"
	case o.apiKeySet:
		c.apiKey, c.credentials = o.apiKey, "the API key given to NewClient (WithAPIKey)"
	default:
		key, source := APIKeyFromEnv(c.baseURL)
		if key != "" {
			c.apiKey, c.credentials = key, "the API key from "+source
		} else {
			c.credentials = fmt.Sprintf("no API key was sent: none given, $%s unset, and no %s "+
				"(a local baton dev's key, read for a server on this machine only)", EnvAPIKey, LocalAPIKeyPath())
		}
	}
	return c, nil
}

// Protocol is the client's wire (REST or Connect).
func (c *Client) Protocol() Protocol { return c.protocol }

// URL is the API's base URL.
func (c *Client) URL() string { return c.baseURL }

// request is one API call.
type request struct {
	method     string
	path       string
	query      url.Values
	body       []byte
	idempotent bool
	retry      *RetryPolicy  // nil: the client's
	timeout    time.Duration // 0: the client's
}

// call sends a request with retries; the body of a 2xx answer.
func (c *Client) call(ctx context.Context, r request) ([]byte, error) {
	policy := c.retry
	if r.retry != nil {
		policy = *r.retry
	}
	b := backoff{policy: policy}
	started := time.Now()
	for attempts := 1; ; attempts++ {
		body, err := c.send(ctx, r)
		if err == nil {
			return body, nil
		}
		if !mayRetry(err, r.idempotent) || ctx.Err() != nil {
			return nil, err
		}
		delay := b.next()
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
			delay = max(delay, min(apiErr.RetryAfter, policy.MaxInterval))
		}
		if !policy.allows(attempts, time.Since(started), delay) {
			return nil, err
		}
		c.logger.Debug("retrying after a transient failure", "method", r.method, "path", r.path,
			"attempt", attempts, "delay_s", delay.Seconds(), "error", err.Error())
		if !sleep(ctx.Done(), delay) {
			return nil, err
		}
	}
}

// mayRetry: no connection, 429 and 503 for every request (nothing was done); other 5xx and
// lost answers only for requests that are safe to repeat; never another 4xx.
func mayRetry(err error, idempotent bool) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		if apiErr.Status == 429 || apiErr.Status == 503 {
			return true
		}
		return idempotent && apiErr.Status >= 500
	}
	var transport *TransportError
	if errors.As(err, &transport) {
		return !transport.Sent || idempotent
	}
	return false
}

// send makes one attempt of r: as REST, or over Connect as the RPC that mirrors it (the
// answer then read back as REST's JSON, an error as REST's problem).
func (c *Client) send(ctx context.Context, r request) ([]byte, error) {
	timeout := c.timeout
	if r.timeout > 0 {
		timeout = r.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	target := c.baseURL + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	method, body, contentType, accept := r.method, r.body, "application/json", "application/json"
	var rpc *rpcCall
	if c.protocol == ProtocolConnect {
		var err error
		if rpc, err = toRPC(r); err != nil {
			return nil, err
		}
		target, method, body = c.baseURL+rpc.path, "POST", rpc.body
		// API Gateway returns binary only when Accept names a binary media type.
		contentType, accept = connectProto, connectProto
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return nil, err
	}
	req.Header.Set("accept", accept)
	if body != nil {
		req.Header.Set("content-type", contentType)
	}
	if rpc != nil {
		req.Header.Set("connect-protocol-version", "1")
	}
	if c.signer != nil {
		if err := c.signer.SignRequest(ctx, req, body); err != nil {
			return nil, fmt.Errorf("baton: signing %s %s: %w", r.method, r.path, err)
		}
	} else if c.apiKey != "" {
		req.Header.Set("x-api-key", c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &TransportError{Method: r.method, URL: c.baseURL + r.path, Sent: sentMaybe(err), Err: err, URLSource: c.urlSource}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &TransportError{Method: r.method, URL: c.baseURL + r.path, Sent: true, Err: err}
	}
	if rpc != nil {
		if resp.StatusCode == http.StatusOK {
			answer, err := restAnswer(rpc, answer)
			if err != nil {
				return nil, &APIError{Status: 200, Title: "Unexpected response", Method: r.method, URL: c.baseURL + r.path,
					Detail: fmt.Sprintf("the answer of %s is not its message: %v", rpc.rpc, err)}
			}
			return answer, nil
		}
		resp.StatusCode, answer = connectProblem(resp.StatusCode, answer)
	} else if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return answer, nil
	}
	apiErr := problemError(resp, answer)
	apiErr.Method, apiErr.URL = r.method, c.baseURL+r.path
	if apiErr.Status == 401 || apiErr.Status == 403 {
		apiErr.Credentials = c.credentials
	}
	return nil, apiErr
}

// sentMaybe is false when the request surely never left: the connection was not made.
func sentMaybe(err error) bool {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return false
	}
	var dnsErr *net.DNSError
	return !errors.As(err, &dnsErr)
}

func problemError(resp *http.Response, body []byte) *APIError {
	e := &APIError{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
	if e.Title == "" {
		e.Title = "HTTP error"
	}
	var doc struct {
		Type     string          `json:"type"`
		Title    string          `json:"title"`
		Detail   string          `json:"detail"`
		Message  string          `json:"message"`
		Instance string          `json:"instance"`
		Errors   json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(body, &doc) == nil {
		if doc.Title != "" {
			e.Title = doc.Title
		}
		e.Detail = doc.Detail
		if e.Detail == "" {
			e.Detail = doc.Message
		}
		e.Type, e.Instance = doc.Type, doc.Instance
		var items []ProblemItem
		if json.Unmarshal(doc.Errors, &items) == nil {
			e.Errors = items
		}
	} else if text := strings.TrimSpace(string(body)); text != "" {
		e.Detail = text[:min(len(text), 500)]
	}
	if s := resp.Header.Get("retry-after"); s != "" {
		if secs, err := strconv.ParseFloat(s, 64); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs * float64(time.Second))
		} else if at, err := http.ParseTime(s); err == nil {
			e.RetryAfter = max(time.Until(at), 0)
		}
	}
	return e
}

// callJSON sends body (encoded as strict JSON) and decodes a 2xx answer into out (if non-nil).
func (c *Client) callJSON(ctx context.Context, r request, body, out any) error {
	if body != nil {
		encoded, err := encodeJSON(body)
		if err != nil {
			return err
		}
		r.body = encoded
	}
	answer, err := c.call(ctx, r)
	if err != nil {
		return err
	}
	if out == nil || len(answer) == 0 {
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return &APIError{Status: 200, Title: "Unexpected response",
			Detail: fmt.Sprintf("the body of %s %s is not what was expected: %v", r.method, r.path, err),
			Method: r.method, URL: c.baseURL + r.path}
	}
	return nil
}

// encodeJSON encodes v as JSON without HTML escaping (NaN and Infinity are refused).
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func segment(s string) string { return url.PathEscape(s) }
