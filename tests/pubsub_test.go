package tests_test

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/streams"
)

// backend is one in-memory Kinesis and one lease store shared by every publisher and
// subscriber of a suite run, as one AWS account and one lease table would be.
type backend struct {
	client kinesis.KinesisAPI
	leases lease.Store
	shards int32
	// pollInterval is how often an idle shard is read: short on memlog, longer against a
	// server so that 50 subscribers do not swamp it.
	pollInterval time.Duration
	// unmarshaler, when set, replaces the default (to count deliveries, say).
	unmarshaler kinesis.Unmarshaler
	// fanOut makes grouped subscribers read with enhanced fan-out.
	fanOut bool
}

func newBackend(shards int32) *backend {
	return &backend{
		client: memlog.New(memlog.Config{}), leases: lease.NewMemoryStore(), shards: shards,
		pollInterval: 20 * time.Millisecond,
	}
}

// subscriberConfig shortens the intervals that only set how fast an idle shard is polled and
// how soon a released lease is taken; delivery semantics are the defaults'.
func (b *backend) subscriberConfig(group string) kinesis.SubscriberConfig {
	cfg := kinesis.SubscriberConfig{
		Client: b.client,
		Group: kinesis.GroupConfig{
			Name:               group,
			LeaseSyncInterval:  100 * time.Millisecond,
			CheckpointInterval: 100 * time.Millisecond,
		},
		CreateStream:       true,
		CreateStreamShards: b.shards,
		Unmarshaler:        b.unmarshaler,
		PollInterval:       b.pollInterval,
		MinReadInterval:    time.Millisecond,
		NackResendSleep:    10 * time.Millisecond,
	}
	if group != "" {
		cfg.Group.LeaseStore = b.leases
		cfg.FanOut.Enabled = b.fanOut
	}
	return cfg
}

func (b *backend) pubSub(t *testing.T, group string) (message.Publisher, message.Subscriber) {
	logger := watermill.NopLogger{}
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client:             b.client,
		CreateStream:       true,
		CreateStreamShards: b.shards,
		RetryBackoff:       10 * time.Millisecond,
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := kinesis.NewSubscriber(b.subscriberConfig(group), logger)
	if err != nil {
		t.Fatal(err)
	}
	return pub, sub
}

// TestPubSubConsumerGroups: consumer groups on 4-shard streams. Records of different
// messages land on different shards, so order across the stream is not claimed.
func TestPubSubConsumerGroups(t *testing.T) {
	b := newBackend(4)
	tests.TestPubSub(t,
		tests.Features{ConsumerGroups: true, Persistent: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.pubSub(t, "test") },
		b.pubSub,
	)
}

// TestPubSubSingleShardOrdered: one shard, so every message of the stream is in one sequence
// and the group delivers it in order, one message at a time.
func TestPubSubSingleShardOrdered(t *testing.T) {
	b := newBackend(1)
	tests.TestPubSub(t,
		tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.pubSub(t, "test") },
		b.pubSub,
	)
}

// TestPubSubFanOut: consumer groups reading with enhanced fan-out (SubscribeToShard) on
// 4-shard streams; each group's consumer is registered by its first subscriber.
func TestPubSubFanOut(t *testing.T) {
	b := newBackend(4)
	b.fanOut = true
	calls := streams.CountOps(b.client.(*memlog.Log))
	t.Cleanup(func() { calls.NoPolling(t) }) // after the suite's parallel tests
	tests.TestPubSub(t,
		tests.Features{ConsumerGroups: true, Persistent: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.pubSub(t, "test") },
		b.pubSub,
	)
}

// TestPubSubNoGroup: without a consumer group every subscriber reads every shard from the
// oldest record, so a new subscriber receives old messages.
func TestPubSubNoGroup(t *testing.T) {
	b := newBackend(4)
	tests.TestPubSub(t,
		tests.Features{Persistent: true, NewSubscriberReceivesOldMessages: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.pubSub(t, "") },
		nil,
	)
}
