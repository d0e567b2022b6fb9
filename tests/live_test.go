package tests_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithymiddleware "github.com/aws/smithy-go/middleware"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/streams"
)

// liveEnv is the AWS-protocol servers the live tests run against: kinesalite for Kinesis and
// dynalite for the DynamoDB lease table, both started by scripts/with-emulators.sh, which
// exports their addresses as the SDK's own AWS_ENDPOINT_URL_KINESIS and
// AWS_ENDPOINT_URL_DYNAMODB.
//
// The clients here set BaseEndpoint from the endpoint fields rather than leave it to the SDK
// (awsConfig is a literal, which carries no environment): tests point them elsewhere, at
// restartable servers (TestLiveReconnect), at proxies that inject faults, or hand the
// addresses to worker processes.
type liveEnv struct {
	kinesisEndpoint  string
	dynamoDBEndpoint string
	awsConfig        aws.Config
}

// newLiveEnv skips the test, saying how to run it, when the servers' endpoints are not set.
func newLiveEnv(t testing.TB) *liveEnv {
	t.Helper()
	k, d := os.Getenv("AWS_ENDPOINT_URL_KINESIS"), os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if k == "" || d == "" {
		t.Skip("AWS_ENDPOINT_URL_KINESIS and AWS_ENDPOINT_URL_DYNAMODB are not set: run `make test`, which starts " +
			"kinesalite and dynalite, or `scripts/with-emulators.sh go test ./tests/`")
	}
	return &liveEnv{
		kinesisEndpoint:  k,
		dynamoDBEndpoint: d,
		awsConfig: aws.Config{
			Region:      "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		},
	}
}

func (e *liveEnv) kinesisOptions(o *awskinesis.Options) {
	o.BaseEndpoint = aws.String(e.kinesisEndpoint)
}

func (e *liveEnv) dynamoDBOptions(o *dynamodb.Options) {
	o.BaseEndpoint = aws.String(e.dynamoDBEndpoint)
}

func (e *liveEnv) kinesisClient() *awskinesis.Client {
	return awskinesis.NewFromConfig(e.awsConfig, e.kinesisOptions)
}

// leaseStore opens a lease table of its own for one suite run, counting DynamoDB calls.
func (e *liveEnv) leaseStore(t testing.TB, calls *callCounter) *lease.DynamoDBStore {
	t.Helper()
	store, _ := e.leaseTable(t, calls)
	return store
}

// leaseTable is leaseStore and the table's name, for tests that hand it to worker processes.
func (e *liveEnv) leaseTable(t testing.TB, calls *callCounter) (*lease.DynamoDBStore, string) {
	t.Helper()
	client := dynamodb.NewFromConfig(e.awsConfig, e.dynamoDBOptions, calls.option)
	table := "leases-" + watermill.NewShortUUID()
	store, err := lease.NewDynamoDBStore(context.Background(), lease.DynamoDBConfig{
		Client:      client,
		TableName:   table,
		CreateTable: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return store, table
}

// callCounter counts SDK calls by operation, through a middleware on the client.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func newCallCounter() *callCounter { return &callCounter{calls: map[string]int{}} }

func (c *callCounter) option(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, c.count) }

// kinesisOption counts a Kinesis client's calls.
func (c *callCounter) kinesisOption(o *awskinesis.Options) {
	o.APIOptions = append(o.APIOptions, c.count)
}

// count adds the middleware that counts each call by its operation.
func (c *callCounter) count(stack *smithymiddleware.Stack) error {
	return stack.Initialize.Add(smithymiddleware.InitializeMiddlewareFunc("countCalls",
		func(ctx context.Context, in smithymiddleware.InitializeInput, next smithymiddleware.InitializeHandler) (smithymiddleware.InitializeOutput, smithymiddleware.Metadata, error) {
			c.mu.Lock()
			c.calls[awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), smithymiddleware.Before)
}

// of is how many calls of op were counted.
func (c *callCounter) of(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

func (c *callCounter) summary() (total int, byOp string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := make([]string, 0, len(c.calls))
	for op, n := range c.calls {
		total += n
		ops = append(ops, fmt.Sprintf("%s=%d", op, n))
	}
	sort.Strings(ops)
	return total, strings.Join(ops, " ")
}

// countingUnmarshaler counts records decoded into messages: each is one delivery (a nacked
// message is resent without decoding it again).
type countingUnmarshaler struct {
	kinesis.EnvelopeMarshaler
	decoded *atomic.Int64
}

func (u countingUnmarshaler) Unmarshal(stream, shardID string, rec *types.Record) (*message.Message, error) {
	u.decoded.Add(1)
	return u.EnvelopeMarshaler.Unmarshal(stream, shardID, rec)
}

// newLiveBackend is a suite backend on kinesalite and a DynamoDB lease table on dynalite; at
// the end of the test it logs the DynamoDB calls made per 1,000 messages delivered.
func newLiveBackend(t *testing.T, shards int32) *streams.Backend {
	return newLiveBackendOn(t, newLiveEnv(t), shards)
}

func newLiveBackendOn(t *testing.T, env *liveEnv, shards int32) *streams.Backend {
	calls := newCallCounter()
	delivered := &atomic.Int64{}
	b := &streams.Backend{
		Client:       env.kinesisClient(),
		Leases:       env.leaseStore(t, calls),
		Shards:       shards,
		PollInterval: 100 * time.Millisecond,
		Unmarshaler:  countingUnmarshaler{decoded: delivered},
	}
	start := time.Now()
	t.Cleanup(func() {
		total, byOp := calls.summary()
		n := delivered.Load()
		perK := 0.0
		if n > 0 {
			perK = float64(total) * 1000 / float64(n)
		}
		msg := fmt.Sprintf("%s: %s, %d messages delivered, %d DynamoDB calls (%.1f per 1,000 messages): %s",
			t.Name(), time.Since(start).Round(time.Millisecond), n, total, perK, byOp)
		t.Log(msg)
		fmt.Println(msg)
	})
	return b
}

// TestLivePubSubConsumerGroups: the universal suite on kinesalite, 4-shard streams, with the
// DynamoDB lease store on dynalite.
func TestLivePubSubConsumerGroups(t *testing.T) {
	b := newLiveBackend(t, 4)
	tests.TestPubSub(t,
		tests.Features{ConsumerGroups: true, Persistent: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "test") },
		b.PubSub,
	)
}

// TestLivePubSubSingleShardOrdered: one shard, ordered, on kinesalite and dynalite.
func TestLivePubSubSingleShardOrdered(t *testing.T) {
	b := newLiveBackend(t, 1)
	tests.TestPubSub(t,
		tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "test") },
		b.PubSub,
	)
}

// TestLivePubSubNoGroup: every subscriber reads every shard of a kinesalite stream.
func TestLivePubSubNoGroup(t *testing.T) {
	b := newLiveBackend(t, 4)
	tests.TestPubSub(t,
		tests.Features{Persistent: true, NewSubscriberReceivesOldMessages: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "") },
		nil,
	)
}

// TestLiveDynamoDBCallsAtDefaults consumes 20,000 messages from a 4-shard stream with one
// group member and the default lease and checkpoint intervals, and reports the DynamoDB calls
// this took per 1,000 messages. (The suite runs above use intervals 20 times shorter, so their
// counts are upper bounds.) The assertion is that every message arrived.
func TestLiveDynamoDBCallsAtDefaults(t *testing.T) {
	env := newLiveEnv(t)
	calls := newCallCounter()
	store := env.leaseStore(t, calls)
	client := env.kinesisClient()
	stream := "calls-" + watermill.NewShortUUID()
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: client, CreateStream: true, CreateStreamShards: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	const n = 20000
	for i := 0; i < n; i += 500 {
		batch := make([]*message.Message, 500)
		for j := range batch {
			batch[j] = message.NewMessage(watermill.NewUUID(), []byte("x"))
		}
		if err := pub.Publish(stream, batch...); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := calls.summary()
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: client, Group: kinesis.GroupConfig{Name: "calls", LeaseStore: store}, MinReadInterval: 10 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	msgs, err := sub.Subscribe(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]struct{}{}
	timeout := time.After(2 * time.Minute)
	for len(seen) < n {
		select {
		case m := <-msgs:
			seen[m.UUID] = struct{}{}
			m.Ack()
		case <-timeout:
			t.Fatalf("received %d of %d", len(seen), n)
		}
	}
	took := time.Since(start)
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	total, byOp := calls.summary()
	used := total - before
	msg := fmt.Sprintf("defaults: %d messages in %s, %d DynamoDB calls including Close (%.2f per 1,000 messages); by operation, table setup included: %s",
		n, took.Round(time.Millisecond), used, float64(used)*1000/n, byOp)
	t.Log(msg)
	fmt.Println(msg)
}
