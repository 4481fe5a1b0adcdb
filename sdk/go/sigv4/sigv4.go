// Package sigv4 signs Baton API requests with AWS Signature Version 4, for an API Gateway
// whose methods use AWS_IAM authorisation. Credentials come from the AWS SDK's default chain
// (environment, shared profile, SSO, web identity, container or instance role), refreshed as
// they expire.
//
//	signer, err := sigv4.New(ctx, sigv4.WithRegion("eu-west-1"))
//	client, err := baton.NewClient(url, baton.WithSigner(signer))
package sigv4

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Signer signs requests for one region and service (execute-api by default).
type Signer struct {
	credentials aws.CredentialsProvider
	region      string
	service     string
	signer      *v4.Signer
	now         func() time.Time
}

type options struct {
	region      string
	service     string
	credentials aws.CredentialsProvider
	now         func() time.Time
}

// Option configures a [Signer].
type Option func(*options)

// WithRegion is the API's region (default: the AWS configuration's, e.g. $AWS_REGION).
func WithRegion(region string) Option { return func(o *options) { o.region = region } }

// WithService is the signing name (default execute-api, API Gateway's).
func WithService(service string) Option { return func(o *options) { o.service = service } }

// WithCredentials uses p instead of the default credential chain.
func WithCredentials(p aws.CredentialsProvider) Option { return func(o *options) { o.credentials = p } }

// WithClock sets the signing time source (tests).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// New is a signer with the default credential chain and region unless options say otherwise.
func New(ctx context.Context, opts ...Option) (*Signer, error) {
	o := options{service: "execute-api", now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.credentials == nil || o.region == "" {
		var loads []func(*config.LoadOptions) error
		if o.region != "" {
			loads = append(loads, config.WithRegion(o.region))
		}
		cfg, err := config.LoadDefaultConfig(ctx, loads...)
		if err != nil {
			return nil, err
		}
		if o.credentials == nil {
			o.credentials = cfg.Credentials
		}
		if o.region == "" {
			o.region = cfg.Region
		}
	}
	if o.region == "" {
		return nil, errors.New("sigv4: no region: pass WithRegion or set AWS_REGION")
	}
	if o.credentials == nil {
		return nil, errors.New("sigv4: no AWS credentials found by the default chain")
	}
	return &Signer{credentials: aws.NewCredentialsCache(o.credentials), region: o.region, service: o.service,
		signer: v4.NewSigner(), now: o.now}, nil
}

// SignRequest adds the SigV4 headers (Authorization, X-Amz-Date, and X-Amz-Security-Token for
// temporary credentials) to req, whose body is body.
func (s *Signer) SignRequest(ctx context.Context, req *http.Request, body []byte) error {
	creds, err := s.credentials.Retrieve(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	return s.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), s.service, s.region, s.now().UTC())
}
