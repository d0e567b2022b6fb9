package universal_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/streams"
)

// TestPubSubConsumerGroups: consumer groups on 4-shard streams. Records of different
// messages land on different shards, so order across the stream is not claimed.
func TestPubSubConsumerGroups(t *testing.T) {
	b := streams.NewMemlogBackend(4)
	tests.TestPubSub(t,
		tests.Features{ConsumerGroups: true, Persistent: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "test") },
		b.PubSub,
	)
}

// TestPubSubSingleShardOrdered: one shard, so every message of the stream is in one sequence
// and the group delivers it in order, one message at a time.
func TestPubSubSingleShardOrdered(t *testing.T) {
	b := streams.NewMemlogBackend(1)
	tests.TestPubSub(t,
		tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "test") },
		b.PubSub,
	)
}

// TestPubSubFanOut: consumer groups reading with enhanced fan-out (SubscribeToShard) on
// 4-shard streams; each group's consumer is registered by its first subscriber.
func TestPubSubFanOut(t *testing.T) {
	b := streams.NewMemlogBackend(4)
	b.FanOut = true
	calls := streams.CountOps(b.Client.(*memlog.Log))
	t.Cleanup(func() { calls.NoPolling(t) }) // after the suite's parallel tests
	tests.TestPubSub(t,
		tests.Features{ConsumerGroups: true, Persistent: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "test") },
		b.PubSub,
	)
}

// TestPubSubNoGroup: without a consumer group every subscriber reads every shard from the
// oldest record, so a new subscriber receives old messages.
func TestPubSubNoGroup(t *testing.T) {
	b := streams.NewMemlogBackend(4)
	tests.TestPubSub(t,
		tests.Features{Persistent: true, NewSubscriberReceivesOldMessages: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "") },
		nil,
	)
}
