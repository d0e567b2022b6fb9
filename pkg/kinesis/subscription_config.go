package kinesis

import (
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/group"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
)

// Compile-time checks that the internal mirrors of public values agree with them: a constant
// that moves on one side only makes an array length negative here.
var (
	_ [int(shard.OrderByShard) - int(OrderByShard)]struct{}
	_ [int(OrderByShard) - int(shard.OrderByShard)]struct{}
	_ [int(shard.OrderByKey) - int(OrderByKey)]struct{}
	_ [int(OrderByKey) - int(shard.OrderByKey)]struct{}
	_ [int(shard.Unordered) - int(Unordered)]struct{}
	_ [int(Unordered) - int(shard.Unordered)]struct{}
	_ [int(shard.Latest) - int(Latest)]struct{}
	_ [int(Latest) - int(shard.Latest)]struct{}
	_ [int(shard.AtTimestamp) - int(AtTimestamp)]struct{}
	_ [int(AtTimestamp) - int(shard.AtTimestamp)]struct{}
)

// internal builds the configuration of one subscription of stream, for the layers below, from
// a config that has its defaults set, is valid, and names the subscription's member
// (Group.WorkerID). It is built once per Subscribe; nothing below changes it.
func (c SubscriberConfig) internal(stream string, logger watermill.LoggerAdapter, metrics *subscriberMetrics) group.Config {
	g := c.Group
	cfg := group.Config{
		Config: shard.Config{
			Stream: stream, Group: g.Name, WorkerID: g.WorkerID,
			Client: c.Client, Logger: logger,
			RequestTimeout: c.RequestTimeout, CloseTimeout: c.CloseTimeout,
			GetRecordsLimit: c.GetRecordsLimit, PollInterval: c.PollInterval, MinReadInterval: c.MinReadInterval,
			MaxBufferedRecords: c.MaxBufferedRecords, MaxBufferedBytes: c.MaxBufferedBytes,
			KeepKPLAggregates: c.KeepKPLAggregates,
			MaxInFlight:       c.MaxInFlight, Ordering: shard.Ordering(c.Ordering), NackResendSleep: c.NackResendSleep,
			Unmarshaler: c.Unmarshaler,
			Poison:      poisonHandler(c.PoisonHandler),
			PoisonRaw:   poisonRaw,
			LeaseStore:  g.LeaseStore, LeaseDuration: g.LeaseDuration, LeaseRenewInterval: g.LeaseRenewInterval,
			CheckpointInterval: g.CheckpointInterval, HandoffTimeout: g.HandoffTimeout,
			Hooks: g.Hooks.internal(stream, g.Name, g.WorkerID),
		},
		Kinesis:           c.Client,
		LeaseSyncInterval: g.LeaseSyncInterval,
		ShardSyncInterval: c.ShardSyncInterval,
		InitialPosition:   shard.Position{Type: shard.PositionType(c.InitialPosition.Type), Timestamp: c.InitialPosition.Timestamp},
		Metrics:           metrics.forSubscription(stream, g.Name),
	}
	if c.FanOut.Enabled {
		api := c.Client.(FanOutAPI) // Validate checked it
		cfg.FanOutEnabled, cfg.Consumers, cfg.FanOutAPI = true, api, api
		cfg.FanOutConsumer, cfg.FanOutRegister = c.FanOut.ConsumerName, c.FanOut.RegisterTimeout
	}
	return cfg
}

// internal gives each hook the ShardEvent of its shard.
func (h ShardHooks) internal(stream, group, workerID string) shard.Hooks {
	with := func(f func(ShardEvent)) func(string) {
		if f == nil {
			return nil
		}
		return func(shardID string) {
			f(ShardEvent{Stream: stream, ShardID: shardID, ConsumerGroup: group, WorkerID: workerID})
		}
	}
	return shard.Hooks{OnAcquired: with(h.OnAcquired), OnRevoked: with(h.OnRevoked), OnLost: with(h.OnLost)}
}

// poisonHandler adapts the application's PoisonHandler to the reader's record type.
func poisonHandler(h PoisonHandler) func(shard.PoisonRecord) (*message.Message, error) {
	return func(p shard.PoisonRecord) (*message.Message, error) { return h(publicPoison(p)) }
}

// poisonRaw is DeliverPoisonRaw for the reader, which falls back on it when the handler fails.
func poisonRaw(p shard.PoisonRecord) *message.Message {
	msg, _ := DeliverPoisonRaw(publicPoison(p))
	return msg
}

func publicPoison(p shard.PoisonRecord) PoisonRecord {
	return PoisonRecord{Info: RecordInfo(p.Info), Data: p.Data, Err: p.Err, Decoded: p.Decoded}
}
