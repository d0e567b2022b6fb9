package awscall

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go/middleware"
)

// sends counts the requests that reached the HTTP client and fails each with a transport error.
type sends struct{ n atomic.Int64 }

func (s *sends) Do(*http.Request) (*http.Response, error) {
	s.n.Add(1)
	return nil, errors.New("connection refused")
}

type noCredentials struct{}

func (noCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, errors.New("no EC2 IMDS role found")
}

// TestExplainSetup runs real SDK clients (the version in go.mod: a later one that renames the
// middleware ExplainSetup places its markers after fails here) and checks the stage each
// failure is put at: no region, no credentials, and a request that was sent.
func TestExplainSetup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   kinesis.Options
		stage  Stage // StageSent: not a SetupError
		says   string
		sendsN int64
	}{
		{"no region", kinesis.Options{Credentials: aws.AnonymousCredentials{}}, StageEndpoint, "AWS_REGION", 0},
		{"no credentials", kinesis.Options{Region: "eu-west-1", Credentials: noCredentials{}}, StageCredentials, "AWS_PROFILE", 0},
		{"sent", kinesis.Options{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}}, StageSent, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			http := &sends{}
			tc.opts.HTTPClient = http
			tc.opts.Retryer = aws.NopRetryer{}
			tc.opts.APIOptions = append(tc.opts.APIOptions, ExplainSetup)
			_, err := kinesis.New(tc.opts).ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String("s")})
			var setup *SetupError
			isSetup := errors.As(err, &setup)
			switch {
			case tc.stage == StageSent && isSetup:
				t.Fatalf("a request that was sent failed as a setup error: %v", err)
			case tc.stage != StageSent && (!isSetup || setup.Stage != tc.stage || setup.Service != "Kinesis" || !strings.Contains(err.Error(), tc.says)):
				t.Fatalf("error %v, want a SetupError of Kinesis at stage %d saying %q", err, tc.stage, tc.says)
			}
			if got := http.n.Load(); got != tc.sendsN {
				t.Fatalf("%d requests sent, want %d", got, tc.sendsN)
			}
			if want := map[bool]Class{true: Fatal, false: Transient}[isSetup]; Classify(context.Background(), err) != want {
				t.Fatalf("Classify(%v) = %d, want %d", err, Classify(context.Background(), err), want)
			}
		})
	}
}

// retryableNoCredentials fails as a credential chain that cannot reach the EC2 metadata service
// does: with a connection error, which the SDK's standard retryer would retry.
type retryableNoCredentials struct{ n *atomic.Int64 }

func (c retryableNoCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	c.n.Add(1)
	return aws.Credentials{}, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: network is unreachable")}
}

// TestExplainSetupStopsSDKRetries: under the SDK's standard retryer (the lease store's DynamoDB
// client keeps it), a call without credentials is tried once, not three times with backoff.
func TestExplainSetupStopsSDKRetries(t *testing.T) {
	var n atomic.Int64
	_, err := kinesis.New(kinesis.Options{
		Region: "eu-west-1", Credentials: retryableNoCredentials{&n}, HTTPClient: &sends{},
		Retryer: retry.NewStandard(), APIOptions: []func(*middleware.Stack) error{ExplainSetup},
	}).ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String("s")})
	var setup *SetupError
	if !errors.As(err, &setup) || setup.Stage != StageCredentials {
		t.Fatalf("error %v, want a SetupError at the credentials stage", err)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("credentials asked for %d times, want 1", got)
	}
}
