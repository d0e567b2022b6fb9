package streams

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Backend is one in-memory Kinesis and one lease store shared by every publisher and
// subscriber of a suite run, as one AWS account and one lease table would be.
type Backend struct {
	Client kinesis.KinesisAPI
	Leases lease.Store
	Shards int32
	// PollInterval is how often an idle shard is read: short on memlog, longer against a
	// server so that 50 subscribers do not swamp it.
	PollInterval time.Duration
	// Unmarshaler, when set, replaces the default (to count deliveries, say).
	Unmarshaler kinesis.Unmarshaler
	// FanOut makes grouped subscribers read with enhanced fan-out.
	FanOut bool
}

// NewMemlogBackend is a Backend on a fresh memlog and lease.MemoryStore.
func NewMemlogBackend(shards int32) *Backend {
	return &Backend{
		Client: memlog.New(memlog.Config{}), Leases: lease.NewMemoryStore(), Shards: shards,
		PollInterval: 20 * time.Millisecond,
	}
}

// SubscriberConfig shortens the intervals that only set how fast an idle shard is polled and
// how soon a released lease is taken; delivery semantics are the defaults'.
func (b *Backend) SubscriberConfig(group string) kinesis.SubscriberConfig {
	cfg := kinesis.SubscriberConfig{
		Client: b.Client,
		Group: kinesis.GroupConfig{
			Name:               group,
			LeaseSyncInterval:  100 * time.Millisecond,
			CheckpointInterval: 100 * time.Millisecond,
		},
		CreateStream:       true,
		CreateStreamShards: b.Shards,
		Unmarshaler:        b.Unmarshaler,
		PollInterval:       b.PollInterval,
		MinReadInterval:    time.Millisecond,
		NackResendSleep:    10 * time.Millisecond,
	}
	if group != "" {
		cfg.Group.LeaseStore = b.Leases
		cfg.FanOut.Enabled = b.FanOut
	}
	return cfg
}

// PubSub is a publisher and a subscriber (in group, none if empty) on the backend, for
// Watermill's universal suite.
func (b *Backend) PubSub(t *testing.T, group string) (message.Publisher, message.Subscriber) {
	logger := watermill.NopLogger{}
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client:             b.Client,
		CreateStream:       true,
		CreateStreamShards: b.Shards,
		RetryBackoff:       10 * time.Millisecond,
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := kinesis.NewSubscriber(b.SubscriberConfig(group), logger)
	if err != nil {
		t.Fatal(err)
	}
	return pub, sub
}
