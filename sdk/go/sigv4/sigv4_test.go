package sigv4

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	baton "github.com/baton-dev/baton/sdk/go"
)

var vectorTime = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)

// AWS's published SigV4 test suite, case get-vanilla: GET / on example.amazonaws.com.
func TestTheGetVanillaVector(t *testing.T) {
	s, err := New(context.Background(), WithRegion("us-east-1"), WithService("service"),
		WithCredentials(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "")),
		WithClock(func() time.Time { return vectorTime }))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://example.amazonaws.com/", nil)
	if err := s.SignRequest(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	want := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, " +
		"SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
	if got := req.Header.Get("Authorization"); got != want {
		t.Fatalf("Authorization\n got %s\nwant %s", got, want)
	}
	if req.Header.Get("X-Amz-Date") != "20150830T123600Z" {
		t.Fatalf("X-Amz-Date %q", req.Header.Get("X-Amz-Date"))
	}
}

// Through the client: every request is signed for execute-api (and sends no API key), with the
// session token of temporary credentials.
func TestTheClientSignsItsRequests(t *testing.T) {
	var auth, token, apiKey string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, token, apiKey = r.Header.Get("Authorization"), r.Header.Get("X-Amz-Security-Token"), r.Header.Get("x-api-key")
		w.Header().Set("content-type", "application/json")
		_, _ = w.Write([]byte(`{"jobId":"j","lockExpiresAt":"2026-01-01T00:00:00Z"}`))
	}))
	defer server.Close()
	t.Setenv("BATON_API_KEY", "must-not-be-sent")
	s, err := New(context.Background(), WithRegion("eu-west-1"),
		WithCredentials(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "SESSION")))
	if err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewClient(server.URL, baton.WithSigner(s))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(context.Background(), "j", "w", 1); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKID/") || !strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") ||
		!strings.Contains(auth, "SignedHeaders=") || token != "SESSION" || apiKey != "" {
		t.Fatalf("Authorization %q, token %q, api key %q", auth, token, apiKey)
	}
}
