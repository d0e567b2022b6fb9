package tests_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/kinesislocal"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/streams"
)

// kinesisLocalFanOut is an SDK client for kinesis-local, the test server that implements
// enhanced fan-out, with the initial-response event it leaves out added (kinesislocal), and
// its calls counted; it skips the test without the server.
func kinesisLocalFanOut(t *testing.T, env *liveEnv) (*awskinesis.Client, *callCounter) {
	t.Helper()
	endpoint := os.Getenv("KINESIS_MOCK_ENDPOINT")
	if endpoint == "" {
		t.Skip("KINESIS_MOCK_ENDPOINT is not set: run `make test`, which starts kinesis-local")
	}
	calls := newCallCounter()
	return awskinesis.NewFromConfig(env.awsConfig, func(o *awskinesis.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.HTTPClient = kinesislocal.HTTPClient(nil)
	}, calls.kinesisOption), calls
}

// TestLiveFanOutKinesisLocal runs the universal suite's tests that finish within a minute on
// kinesis-local with enhanced fan-out, each as the suite runs it
// (in parallel, a test ID of its own). kinesis-local pushes a shard's records once a second
// (EMULATORS.md), so the suite's long tests (50 concurrent subscriptions, thousands of messages
// across closes) take several minutes each there; they run with fan-out on memlog
// (TestPubSubFanOut in tests/universal). Grouped subscribers must read without one GetRecords call, through one
// registered consumer per group, which DeregisterConsumer removes.
func TestLiveFanOutKinesisLocal(t *testing.T) {
	env := newLiveEnv(t)
	client, calls := kinesisLocalFanOut(t, env)
	// The leases in memory: the lease table on dynalite is what the other live suites load,
	// at the same time, and fan-out changes nothing of it.
	b := &streams.Backend{Client: client, Leases: lease.NewMemoryStore(), Shards: 4, PollInterval: 100 * time.Millisecond, FanOut: true}
	features := tests.Features{ConsumerGroups: true, Persistent: true}
	single := func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "test") }
	suite := []struct {
		name string
		run  func(t *testing.T, tCtx tests.TestContext)
	}{
		{"TestPublishSubscribe", func(t *testing.T, c tests.TestContext) { tests.TestPublishSubscribe(t, c, single) }},
		{"TestConsumerGroups", func(t *testing.T, c tests.TestContext) { tests.TestConsumerGroups(t, c, b.PubSub) }},
		{"TestResendOnError", func(t *testing.T, c tests.TestContext) { tests.TestResendOnError(t, c, single) }},
		{"TestContinueAfterErrors", func(t *testing.T, c tests.TestContext) { tests.TestContinueAfterErrors(t, c, single) }},
		{"TestConcurrentClose", func(t *testing.T, c tests.TestContext) { tests.TestConcurrentClose(t, c, single) }},
		{"TestTopic", func(t *testing.T, c tests.TestContext) { tests.TestTopic(t, c, single) }},
		{"TestMessageCtx", func(t *testing.T, c tests.TestContext) { tests.TestMessageCtx(t, c, single) }},
		{"TestSubscribeCtx", func(t *testing.T, c tests.TestContext) { tests.TestSubscribeCtx(t, c, single) }},
	}
	t.Run("suite", func(t *testing.T) {
		for _, tc := range suite {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.run(t, tests.TestContext{TestID: tests.NewTestID(), Features: features})
			})
		}
	})
	if t.Failed() {
		return
	}
	if n := calls.of("GetRecords"); n != 0 {
		t.Errorf("%d GetRecords calls: grouped subscribers with FanOut must not poll", n)
	}
	subscribes, registered := calls.of("SubscribeToShard"), calls.of("RegisterStreamConsumer")
	t.Logf("SubscribeToShard=%d RegisterStreamConsumer=%d DescribeStreamConsumer=%d", subscribes, registered, calls.of("DescribeStreamConsumer"))
	if subscribes == 0 || registered == 0 {
		t.Errorf("SubscribeToShard=%d RegisterStreamConsumer=%d: the suite did not read with fan-out", subscribes, registered)
	}

	// Close leaves a group's consumer registered for its other instances; DeregisterConsumer
	// removes it.
	ctx := context.Background()
	stream := "fanout-deregister-" + tests.NewTestID()
	pub, sub := b.PubSub(t, "group-to-deregister")
	defer func() { _ = pub.Close() }()
	if err := sub.(*kinesis.Subscriber).SubscribeInitialize(string(stream)); err != nil {
		t.Fatal(err)
	}
	subCtx, cancel := context.WithCancel(ctx)
	if _, err := sub.Subscribe(subCtx, string(stream)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	summary, err := client.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(string(stream))})
	if err != nil {
		t.Fatal(err)
	}
	describe := func() (types.ConsumerStatus, error) {
		out, err := client.DescribeStreamConsumer(ctx, &awskinesis.DescribeStreamConsumerInput{
			StreamARN: summary.StreamDescriptionSummary.StreamARN, ConsumerName: aws.String("group-to-deregister"),
		})
		if err != nil {
			return "", err
		}
		return out.ConsumerDescription.ConsumerStatus, nil
	}
	if status, err := describe(); err != nil || status != types.ConsumerStatusActive {
		t.Fatalf("the consumer after Close: %s, %v; Close must leave it registered", status, err)
	}
	if err := kinesis.DeregisterConsumer(ctx, client, string(stream), "group-to-deregister"); err != nil {
		t.Fatal(err)
	}
	// AWS (and kinesis-local) show the consumer DELETING for a while, then not at all.
	var notFound *types.ResourceNotFoundException
	if status, err := describe(); !errors.As(err, &notFound) && status != types.ConsumerStatusDeleting {
		t.Errorf("the consumer after DeregisterConsumer: %s, %v; want DELETING or ResourceNotFoundException", status, err)
	}
}
