package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// throttlingKinesis is a Kinesis endpoint that answers every request as a throttled one, and
// counts the requests.
func throttlingKinesis(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for shard shardId-000000000000"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// One retry layer: a throttled PutRecords goes out 1 + MaxRetries times, counted at the HTTP
// server, whether the Publisher builds the client from AWSConfig or is given one built with
// the SDK's default (standard, 3-attempt) retryer. With both layers it went out 3 times per
// attempt of the driver's: 12 requests for MaxRetries 3.
func TestThrottledPublishAttempts(t *testing.T) {
	srv, requests := throttlingKinesis(t)
	awsCfg := aws.Config{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}, BaseEndpoint: aws.String(srv.URL)}
	for _, tc := range []struct {
		name string
		cfg  kinesis.PublisherConfig
	}{
		{"AWSConfig", kinesis.PublisherConfig{AWSConfig: &awsCfg}},
		{"the SDK's client with its default retryer", kinesis.PublisherConfig{Client: awskinesis.NewFromConfig(awsCfg)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests.Store(0)
			cfg := tc.cfg
			cfg.MaxRetries, cfg.RetryBackoff, cfg.MaxRetryBackoff = 3, time.Millisecond, 2*time.Millisecond
			pub, err := kinesis.NewPublisher(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = pub.Publish("orders", message.NewMessage("m1", []byte("x")))
			if err == nil || !strings.Contains(err.Error(), "ProvisionedThroughputExceededException") {
				t.Fatalf("Publish: %v, want the throttling error", err)
			}
			if got := requests.Load(); got != 4 {
				t.Fatalf("%d PutRecords requests for MaxRetries 3, want 4", got)
			}
		})
	}
}

// countingCredentials fails every retrieval, as a credential chain that found nothing does,
// and counts them.
type countingCredentials struct{ n atomic.Int64 }

func (c *countingCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	c.n.Add(1)
	return aws.Credentials{}, errors.New("failed to refresh cached credentials, no EC2 IMDS role found")
}

// A call that cannot leave the process fails at once, once, saying what to set: without
// credentials Publish and Subscribe make one attempt, send no request, and name the settings
// of the credential chain. (Before, Publish retried for 19 s and ended with the SDK's IMDS
// error.)
func TestNoCredentialsFailsAtOnce(t *testing.T) {
	srv, requests := throttlingKinesis(t)
	creds := &countingCredentials{}
	awsCfg := aws.Config{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(srv.URL)}

	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{AWSConfig: &awsCfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = pub.Publish("orders", message.NewMessage("m1", []byte("x")))
	if err == nil || !strings.Contains(err.Error(), "no AWS credentials for Kinesis") || !strings.Contains(err.Error(), "AWS_PROFILE") {
		t.Fatalf("Publish without credentials: %v, want an error naming the credential settings", err)
	}
	if n := creds.n.Load(); n != 1 {
		t.Fatalf("Publish asked for credentials %d times, want once", n)
	}

	creds.n.Store(0)
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{AWSConfig: &awsCfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	_, err = sub.Subscribe(t.Context(), "orders")
	if err == nil || !strings.Contains(err.Error(), "AWS_PROFILE") {
		t.Fatalf("Subscribe without credentials: %v, want an error naming the credential settings", err)
	}
	if n := creds.n.Load(); n != 1 {
		t.Fatalf("Subscribe asked for credentials %d times, want once", n)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached Kinesis without credentials", n)
	}
}

// NewPublisher and NewSubscriber refuse a client that has neither a region nor an endpoint,
// naming both settings: every call would fail (before, Publish retried for 23 s and ended with
// "Invalid Configuration: Missing Region"). The SDK's own endpoint variable counts.
func TestNoRegionRefused(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_KINESIS", "")
	noRegion, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const says = "has no region and no endpoint, so no call can reach Kinesis; set AWS_REGION"
	if _, err := kinesis.NewPublisher(kinesis.PublisherConfig{AWSConfig: &noRegion}, nil); err == nil || !strings.Contains(err.Error(), "kinesis: PublisherConfig: the Kinesis client "+says) {
		t.Errorf("NewPublisher without a region: %v", err)
	}
	if _, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{Client: awskinesis.NewFromConfig(noRegion)}, nil); err == nil || !strings.Contains(err.Error(), "kinesis: SubscriberConfig: the Kinesis client "+says) {
		t.Errorf("NewSubscriber without a region: %v", err)
	}
	// An endpoint is enough to build, whichever way it is given.
	withOption := kinesis.PublisherConfig{AWSConfig: &noRegion, KinesisOptions: []func(*awskinesis.Options){
		func(o *awskinesis.Options) { o.BaseEndpoint = aws.String("http://127.0.0.1:4567") }}}
	if err := withOption.Validate(); err != nil {
		t.Errorf("an endpoint in KinesisOptions: %v", err)
	}
	t.Setenv("AWS_ENDPOINT_URL_KINESIS", "http://127.0.0.1:4567")
	fromEnv, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := (kinesis.SubscriberConfig{AWSConfig: &fromEnv}).Validate(); err != nil {
		t.Errorf("AWS_ENDPOINT_URL_KINESIS: %v", err)
	}
}
