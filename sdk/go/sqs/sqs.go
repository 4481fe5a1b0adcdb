// Package sqs is the outbox dispatch transport: jobs delivered through Baton's SQS FIFO
// dispatch queue (BATON_DISPATCH_MODE=outbox), claimed by id with POST /v1/jobs/{id}/claim
// and completed through the REST API like polled ones.
//
//	transport, err := sqs.FromEnv(ctx, client)
//	runner := baton.NewRunner(client, registry, baton.WithTransport(transport))
//
// The message is only a wake-up: the lease lives in Baton's database, so the message is deleted
// right after the claim answered. A duplicate or stale delivery is refused by the claim (409)
// and dropped; a job type at its limit (429) is left on the queue to be delivered again; a job
// type this worker does not handle is made visible again for a worker that does.
package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	baton "github.com/baton-dev/baton/sdk/go"
)

// The environment the transport reads (the same variables as the engine and the Python SDK).
const (
	EnvQueueURL       = "BATON_DISPATCH_QUEUE_URL"
	EnvEndpoint       = "BATON_SQS_ENDPOINT"
	dispatchQueueFile = "dispatch-queue.json"
	maxMessages       = 10 // ReceiveMessage returns at most 10
)

// API is the part of the SQS client the transport uses (*sqs.Client has it).
type API interface {
	ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, opts ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *awssqs.DeleteMessageInput, opts ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *awssqs.ChangeMessageVisibilityInput, opts ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error)
}

// Transport receives dispatch messages and claims their jobs. Use it with baton.WithTransport.
type Transport struct {
	client       *baton.Client
	sqs          API
	queueURL     string
	waitSeconds  int32
	foreignDelay int32
	logger       *slog.Logger
	duplicates   atomic.Int64
	follow       *queue // a local baton dev's queue, found in its data directory
}

// Option configures a [Transport].
type Option func(*Transport)

// WithWaitSeconds is SQS's long poll per receive (default 1, at most 20; short keeps a stop
// prompt).
func WithWaitSeconds(s int32) Option {
	return func(t *Transport) { t.waitSeconds = min(max(s, 0), 20) }
}

// WithForeignDelay is how long a message for a job type this worker does not handle stays
// invisible before another worker may receive it (default 2 s).
func WithForeignDelay(s int32) Option { return func(t *Transport) { t.foreignDelay = max(s, 0) } }

// WithLogger sets the transport's logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(t *Transport) { t.logger = l } }

// New is a transport for the queue at queueURL, received with sqsClient.
func New(client *baton.Client, sqsClient API, queueURL string, opts ...Option) *Transport {
	t := &Transport{client: client, sqs: sqsClient, queueURL: queueURL, waitSeconds: 1, foreignDelay: 2, logger: slog.Default()}
	for _, opt := range opts {
		opt(t)
	}
	return t
}

// FromEnv is the transport for the queue $BATON_DISPATCH_QUEUE_URL names (at
// $BATON_SQS_ENDPOINT if set), else the one a baton dev on this machine relays to (it writes
// it into $BATON_DATA_DIR/dispatch-queue.json at every start). A local queue is reached with
// placeholder credentials (the local SQS does not check them); another with the AWS SDK's
// default configuration, in the region of its URL unless AWS_REGION says otherwise.
func FromEnv(ctx context.Context, client *baton.Client, opts ...Option) (*Transport, error) {
	found, err := findQueue(client.URL())
	if err != nil {
		return nil, err
	}
	sqsClient, err := newSQSClient(ctx, found)
	if err != nil {
		return nil, err
	}
	t := New(client, sqsClient, found.url, opts...)
	if found.fromFile {
		// A local baton dev's queue: where to look again when it cannot be reached (its SQS
		// comes back on another port after a restart).
		t.follow = &found
	}
	t.logger.Info("receiving jobs from the dispatch queue", "queue_url", found.url, "source", found.source)
	return t, nil
}

// queue is where the dispatch messages are, and how it was found.
type queue struct {
	url, endpoint, region string
	local, fromFile       bool
	source                string
}

func newSQSClient(ctx context.Context, q queue) (*awssqs.Client, error) {
	var loads []func(*config.LoadOptions) error
	if q.region != "" {
		loads = append(loads, config.WithRegion(q.region))
	}
	if q.local {
		loads = append(loads, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("baton-local", "baton-local", "")))
		if q.region == "" {
			loads = append(loads, config.WithRegion("us-east-1"))
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, err
	}
	return awssqs.NewFromConfig(cfg, func(o *awssqs.Options) {
		if q.endpoint != "" {
			o.BaseEndpoint = aws.String(q.endpoint)
		}
	}), nil
}

var queueRegion = regexp.MustCompile(`^(?:sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?|([a-z0-9-]+)\.queue\.amazonaws\.com)$`)

func findQueue(batonURL string) (queue, error) {
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	if queueURL := os.Getenv(EnvQueueURL); queueURL != "" {
		endpoint := os.Getenv(EnvEndpoint)
		if region == "" {
			if u, err := url.Parse(queueURL); err == nil {
				if m := queueRegion.FindStringSubmatch(u.Hostname()); m != nil {
					region = m[1] + m[2]
				}
			}
		}
		return queue{url: queueURL, endpoint: endpoint, region: region, source: "$" + EnvQueueURL,
			local: endpoint != "" && baton.IsLoopback(endpoint)}, nil
	}
	dir := os.Getenv(baton.EnvDataDir)
	if dir == "" {
		dir = baton.DefaultDataDir
	}
	path := filepath.Join(dir, dispatchQueueFile)
	missing := fmt.Errorf("sqs: no dispatch queue: set %s (the stack's DispatchQueueUrl output), or run baton dev on this machine (it writes its queue into %s; BATON_DISPATCH_MODE=outbox makes it publish there)", EnvQueueURL, path)
	if !baton.IsLoopback(batonURL) {
		return queue{}, missing
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return queue{}, missing
	}
	var kept struct {
		QueueURL string `json:"queueUrl"`
		Endpoint string `json:"endpoint"`
		Region   string `json:"region"`
	}
	if json.Unmarshal(data, &kept) != nil || kept.QueueURL == "" {
		return queue{}, missing
	}
	if kept.Region != "" {
		region = kept.Region
	}
	return queue{url: kept.QueueURL, endpoint: kept.Endpoint, region: region, fromFile: true, source: path,
		local: kept.Endpoint != "" && baton.IsLoopback(kept.Endpoint)}, nil
}

// followRestart, after a failed receive from a local baton dev's queue: true if the server
// wrote another queue since (it restarted), now used.
func (t *Transport) followRestart(ctx context.Context) bool {
	if t.follow == nil {
		return false
	}
	now, err := findQueue(t.client.URL())
	if err != nil || now == *t.follow {
		return false
	}
	sqsClient, err := newSQSClient(ctx, now)
	if err != nil {
		return false
	}
	t.logger.Info("the local dispatch queue moved (baton dev restarted)", "queue_url", now.url)
	t.sqs, t.queueURL, t.follow = sqsClient, now.url, &now
	return true
}

// WaitsForWork: the receive is SQS's long poll, so the runner does not pause after it.
func (t *Transport) WaitsForWork() bool { return true }

// Duplicates is how many deliveries the claim refused (already claimed, finished or stale).
func (t *Transport) Duplicates() int64 { return t.duplicates.Load() }

// Fetch receives up to maxJobs messages and claims their jobs for workerID.
func (t *Transport) Fetch(ctx context.Context, workerID string, jobTypes []string, maxJobs int) ([]baton.ClaimedJob, error) {
	out, err := t.receive(ctx, maxJobs)
	if err != nil && t.followRestart(ctx) {
		out, err = t.receive(ctx, maxJobs)
	}
	if err != nil {
		// The runner backs off and logs one line, as for a Baton server it cannot reach.
		return nil, &baton.TransportError{Method: "ReceiveMessage", URL: t.queueURL, Sent: false, Err: err}
	}
	var jobs []baton.ClaimedJob
	var refused error
	for _, m := range out.Messages {
		job, err := t.claim(ctx, m, workerID, jobTypes)
		if err != nil {
			// Refused (a 401, say): the message comes back after its visibility timeout; the jobs
			// already claimed in this receive still run.
			refused = err
			continue
		}
		if job != nil {
			jobs = append(jobs, *job)
		}
	}
	if len(jobs) == 0 && refused != nil {
		return nil, refused
	}
	if refused != nil {
		t.logger.Error("a claim was refused", "error", refused.Error())
	}
	return jobs, nil
}

func (t *Transport) receive(ctx context.Context, maxJobs int) (*awssqs.ReceiveMessageOutput, error) {
	return t.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:              aws.String(t.queueURL),
		MaxNumberOfMessages:   int32(min(max(maxJobs, 1), maxMessages)),
		WaitTimeSeconds:       t.waitSeconds,
		MessageAttributeNames: []string{"All"},
	})
}

func (t *Transport) claim(ctx context.Context, m types.Message, workerID string, jobTypes []string) (*baton.ClaimedJob, error) {
	receipt := aws.ToString(m.ReceiptHandle)
	var delivered struct {
		JobID   string `json:"jobId"`
		Attempt int    `json:"attempt"`
		JobType string `json:"jobType"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &delivered); err != nil || delivered.JobID == "" {
		t.logger.Warn("dropping a message that is not a Baton dispatch", "body", truncate(aws.ToString(m.Body), 200))
		t.delete(ctx, receipt)
		return nil, nil
	}
	log := t.logger.With("job_id", delivered.JobID, "attempt", delivered.Attempt, "worker_id", workerID)
	if !slices.Contains(jobTypes, delivered.JobType) {
		log.Warn("delivered a job type this worker does not handle", "job_type", delivered.JobType)
		t.release(ctx, receipt, t.foreignDelay)
		return nil, nil
	}
	job, err := t.client.ClaimJob(ctx, delivered.JobID, workerID, delivered.Attempt)
	if err != nil {
		if baton.IsConflict(err) || baton.IsNotFound(err) {
			t.duplicates.Add(1)
			log.Info("delivery not claimable; dropped", "reason", err.Error())
			t.delete(ctx, receipt)
			return nil, nil
		}
		var apiErr *baton.APIError
		if errors.As(err, &apiErr) && apiErr.Transient() {
			// Throttled (a job type's limit) or unavailable: let SQS deliver it again later.
			t.release(ctx, receipt, int32(max(apiErr.RetryAfter.Seconds(), 1)))
			return nil, nil
		}
		return nil, err
	}
	t.delete(ctx, receipt)
	return job, nil
}

func (t *Transport) delete(ctx context.Context, receipt string) {
	_, err := t.sqs.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(t.queueURL), ReceiptHandle: aws.String(receipt)})
	if err != nil {
		t.logger.Warn("could not delete a dispatch message (it will be delivered again, harmlessly)", "error", err.Error())
	}
}

func (t *Transport) release(ctx context.Context, receipt string, seconds int32) {
	_, err := t.sqs.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(t.queueURL), ReceiptHandle: aws.String(receipt), VisibilityTimeout: max(seconds, 0)})
	if err != nil {
		t.logger.Warn("could not release a dispatch message", "error", err.Error())
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
