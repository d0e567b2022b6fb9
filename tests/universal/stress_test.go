//go:build stress

package universal_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/streams"
)

func TestPubSubStressConsumerGroups(t *testing.T) {
	b := streams.NewMemlogBackend(4)
	tests.TestPubSubStressTest(t,
		tests.Features{ConsumerGroups: true, Persistent: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "test") },
		b.PubSub,
	)
}

func TestPubSubStressSingleShardOrdered(t *testing.T) {
	b := streams.NewMemlogBackend(1)
	tests.TestPubSubStressTest(t,
		tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "test") },
		b.PubSub,
	)
}

func TestPubSubStressNoGroup(t *testing.T) {
	b := streams.NewMemlogBackend(4)
	tests.TestPubSubStressTest(t,
		tests.Features{Persistent: true, NewSubscriberReceivesOldMessages: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "") },
		nil,
	)
}
