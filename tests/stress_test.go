//go:build stress

package tests_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
)

func TestPubSubStressConsumerGroups(t *testing.T) {
	b := newBackend(4)
	tests.TestPubSubStressTest(t,
		tests.Features{ConsumerGroups: true, Persistent: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.pubSub(t, "test") },
		b.pubSub,
	)
}

func TestPubSubStressSingleShardOrdered(t *testing.T) {
	b := newBackend(1)
	tests.TestPubSubStressTest(t,
		tests.Features{ConsumerGroups: true, Persistent: true, GuaranteedOrder: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.pubSub(t, "test") },
		b.pubSub,
	)
}

func TestPubSubStressNoGroup(t *testing.T) {
	b := newBackend(4)
	tests.TestPubSubStressTest(t,
		tests.Features{Persistent: true, NewSubscriberReceivesOldMessages: true},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.pubSub(t, "") },
		nil,
	)
}
