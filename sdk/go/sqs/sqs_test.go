package sqs

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	baton "github.com/baton-dev/baton/sdk/go"
)

// motoSQS starts moto's server (the repository's .venv has it; $MOTO_SERVER names another)
// and returns an SQS client of it; the test is skipped where there is none.
func motoSQS(t *testing.T) *awssqs.Client {
	t.Helper()
	c, _, _ := startMoto(t)
	return c
}

// startMoto starts a moto server: its client, its endpoint, and a function that kills it.
func startMoto(t *testing.T) (*awssqs.Client, string, func()) {
	t.Helper()
	bin := os.Getenv("MOTO_SERVER")
	if bin == "" {
		bin, _ = filepath.Abs("../../../.venv/bin/moto_server")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no moto_server (%s): run make install at the repository root", bin)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill := func() { once.Do(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) }
	t.Cleanup(kill)
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("moto_server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("baton-local", "baton-local", "")}), endpoint, kill
}

func fifoQueue(t *testing.T, c *awssqs.Client) string {
	out, err := c.CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: aws.String("dispatch.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

func send(t *testing.T, c *awssqs.Client, queue, group, body string) {
	_, err := c.SendMessage(context.Background(), &awssqs.SendMessageInput{QueueUrl: aws.String(queue),
		MessageBody: aws.String(body), MessageGroupId: aws.String(group)})
	if err != nil {
		t.Fatal(err)
	}
}

// fakeClaims answers claims (a job id in taken: 409) and completions.
type fakeClaims struct {
	mu        sync.Mutex
	taken     map[string]bool
	claims    []string
	completed map[string]json.RawMessage
}

func (f *fakeClaims) server(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		w.Header().Set("content-type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/claim"):
			id := strings.Split(r.URL.Path, "/")[3]
			f.claims = append(f.claims, id)
			if f.taken[id] {
				w.WriteHeader(409)
				_, _ = io.WriteString(w, `{"status":409,"title":"Conflict","detail":"job is not claimable"}`)
				return
			}
			f.taken[id] = true
			_ = json.NewEncoder(w).Encode(baton.ClaimedJob{ID: id, InstanceID: "i", StepID: "s", JobType: "echo", Attempt: 1,
				LockExpiresAt: time.Now().Add(30 * time.Second).UTC().Format(time.RFC3339Nano), Input: json.RawMessage(`{"x":1}`)})
		case r.URL.Path == "/v1/jobs/complete-batch":
			var req struct {
				Results []baton.ResultItem `json:"results"`
			}
			_ = json.Unmarshal(raw, &req)
			var answers []baton.BatchOutcome
			for _, item := range req.Results {
				f.completed[item.JobID] = item.VariablesToSet
				answers = append(answers, baton.BatchOutcome{JobID: item.JobID, Outcome: "APPLIED", Status: "COMPLETED"})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"results": answers})
		default:
			w.WriteHeader(404)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestFetchClaimsDropsDuplicatesAndReleasesForeignTypes(t *testing.T) {
	sqsClient := motoSQS(t)
	queue := fifoQueue(t, sqsClient)
	fake := &fakeClaims{taken: map[string]bool{"dup": true}, completed: map[string]json.RawMessage{}}
	server := fake.server(t)
	client, err := baton.NewClient(server.URL, baton.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	send(t, sqsClient, queue, "i1", `{"jobId":"j1","attempt":1,"jobType":"echo"}`)
	send(t, sqsClient, queue, "i2", `{"jobId":"dup","attempt":1,"jobType":"echo"}`)
	send(t, sqsClient, queue, "i3", `{"jobId":"f1","attempt":1,"jobType":"other"}`)
	send(t, sqsClient, queue, "i4", `not a dispatch`)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	transport := New(client, sqsClient, queue, WithForeignDelay(0), WithWaitSeconds(1), WithLogger(quiet))
	var jobs []baton.ClaimedJob
	for range 5 {
		got, err := transport.Fetch(context.Background(), "w", []string{"echo"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, got...)
		if transport.Duplicates() == 1 && len(jobs) == 1 {
			break
		}
	}
	if len(jobs) != 1 || jobs[0].ID != "j1" || transport.Duplicates() != 1 {
		t.Fatalf("jobs %+v, duplicates %d", jobs, transport.Duplicates())
	}
	// Only the foreign job's message is left: it came back (released at once) and is never claimed.
	out, err := sqsClient.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 || !strings.Contains(aws.ToString(out.Messages[0].Body), `"f1"`) {
		t.Fatalf("left on the queue: %+v", out.Messages)
	}
	for _, id := range fake.claims {
		if id == "f1" {
			t.Fatal("a foreign job type was claimed")
		}
	}
}

func TestARunnerCompletesJobsFromTheQueue(t *testing.T) {
	sqsClient := motoSQS(t)
	queue := fifoQueue(t, sqsClient)
	fake := &fakeClaims{taken: map[string]bool{}, completed: map[string]json.RawMessage{}}
	client, err := baton.NewClient(fake.server(t).URL, baton.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		id := "job-" + strconv.Itoa(i)
		send(t, sqsClient, queue, id, `{"jobId":"`+id+`","attempt":1,"jobType":"echo"}`)
	}
	send(t, sqsClient, queue, "again", `{"jobId":"job-0","attempt":1,"jobType":"echo","again":true}`) // a duplicate delivery (another body: FIFO deduplicates equal ones)
	registry := baton.NewRegistry()
	registry.Register("echo", func(_ context.Context, job *baton.Job) (map[string]any, error) {
		return map[string]any{"got": job.Input["x"]}, nil
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	transport := New(client, sqsClient, queue, WithLogger(quiet))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- baton.NewRunner(client, registry, baton.WithTransport(transport), baton.WithRunnerLogger(quiet)).Run(ctx)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fake.mu.Lock()
		n := len(fake.completed)
		fake.mu.Unlock()
		if n == 5 && transport.Duplicates() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 jobs completed, %d duplicates", n, transport.Duplicates())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if string(fake.completed["job-3"]) != `{"got":1}` {
		t.Fatalf("%s", fake.completed["job-3"])
	}
}

func writeQueueFile(t *testing.T, dir, queueURL, endpoint string) {
	data, _ := json.Marshal(map[string]string{"queueUrl": queueURL, "endpoint": endpoint, "region": "us-east-1", "mode": "outbox"})
	if err := os.WriteFile(filepath.Join(dir, "dispatch-queue.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestFromEnvFollowsARestartedBatonDevToItsNewQueue(t *testing.T) {
	first, firstEndpoint, killFirst := startMoto(t)
	second, secondEndpoint, _ := startMoto(t)
	firstQueue, secondQueue := fifoQueue(t, first), fifoQueue(t, second)
	dir := t.TempDir()
	t.Setenv(baton.EnvDataDir, dir)
	t.Setenv(EnvQueueURL, "")
	writeQueueFile(t, dir, firstQueue, firstEndpoint)
	fake := &fakeClaims{taken: map[string]bool{}, completed: map[string]json.RawMessage{}}
	client, err := baton.NewClient(fake.server(t).URL, baton.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	transport, err := FromEnv(context.Background(), client, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	// baton dev restarts: its SQS is on another port, and it says so in its data directory.
	killFirst()
	writeQueueFile(t, dir, secondQueue, secondEndpoint)
	send(t, second, secondQueue, "g", `{"jobId":"moved","attempt":1,"jobType":"echo"}`)
	jobs, err := transport.Fetch(context.Background(), "w", []string{"echo"}, 10)
	if err != nil || len(jobs) != 1 || jobs[0].ID != "moved" {
		t.Fatalf("jobs %+v, err %v", jobs, err)
	}
}

func TestFromEnvNeedsAQueue(t *testing.T) {
	t.Setenv(baton.EnvDataDir, t.TempDir())
	t.Setenv(EnvQueueURL, "")
	client, _ := baton.NewClient("http://127.0.0.1:1", baton.WithAPIKey("k"))
	if _, err := FromEnv(context.Background(), client); err == nil || !strings.Contains(err.Error(), EnvQueueURL) {
		t.Fatalf("%v", err)
	}
	t.Setenv(EnvQueueURL, "https://sqs.eu-west-1.amazonaws.com/123456789012/baton-dispatch.fifo")
	found, err := findQueue("https://api.example.com")
	if err != nil || found.region != "eu-west-1" || found.fromFile || found.local {
		t.Fatalf("%+v %v", found, err)
	}
}
