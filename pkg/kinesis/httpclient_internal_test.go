package kinesis

import (
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// idleConnsPerHost is the idle connection bound of an SDK client's HTTP client, or -1 when it
// is not the SDK's buildable client (one the caller brought).
func idleConnsPerHost(c aws.HTTPClient) int {
	b, ok := c.(*awshttp.BuildableClient)
	if !ok {
		return -1
	}
	return b.GetTransport().MaxIdleConnsPerHost
}

// The clients a Subscriber builds from AWSConfig keep an idle connection per shard reader
// instead of the SDK's 10 per host; an HTTPClient in the aws.Config, or one set by the
// caller's options, is kept as it is.
func TestSubscriberBuildsPooledClients(t *testing.T) {
	base := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}
	own := &http.Client{}
	for _, tc := range []struct {
		name string
		cfg  aws.Config
		opts []func(*awskinesis.Options)
		want int
	}{
		{name: "SDK default HTTP client", cfg: base, want: maxIdleConnsPerHost},
		{name: "aws.Config carries an HTTPClient", cfg: func() aws.Config { c := base.Copy(); c.HTTPClient = own; return c }(), want: -1},
		{name: "KinesisOptions set one", cfg: base, opts: []func(*awskinesis.Options){func(o *awskinesis.Options) { o.HTTPClient = own }}, want: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSubscriber(SubscriberConfig{AWSConfig: &tc.cfg, KinesisOptions: tc.opts}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			client, ok := awscall.Unwrap(s.config.Client).(*awskinesis.Client)
			if !ok {
				t.Fatalf("Client is a %T, want the *kinesis.Client built from AWSConfig", s.config.Client)
			}
			if got := idleConnsPerHost(client.Options().HTTPClient); got != tc.want {
				t.Errorf("idle connections per host = %d, want %d", got, tc.want)
			}
		})
	}
	if got := idleConnsPerHost(dynamodb.NewFromConfig(base, dynamoDBPooled(base)...).Options().HTTPClient); got != maxIdleConnsPerHost {
		t.Errorf("lease table client: idle connections per host = %d, want %d", got, maxIdleConnsPerHost)
	}
	withOwn := base.Copy()
	withOwn.HTTPClient = own
	if got := idleConnsPerHost(dynamodb.NewFromConfig(withOwn, dynamoDBPooled(withOwn)...).Options().HTTPClient); got != -1 {
		t.Errorf("lease table client with an aws.Config HTTPClient: %d, want that client kept", got)
	}
	if got := idleConnsPerHost(awskinesis.NewFromConfig(base).Options().HTTPClient); got != awshttp.DefaultHTTPTransportMaxIdleConnsPerHost {
		t.Errorf("the SDK's own default is %d idle connections per host, want %d (the baseline this change raises)", got, awshttp.DefaultHTTPTransportMaxIdleConnsPerHost)
	}
}
