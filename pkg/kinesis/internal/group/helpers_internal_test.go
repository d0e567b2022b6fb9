package group

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// testConfig is a grouped subscription's config with pkg/kinesis's defaults.
func testConfig(store lease.Store) Config {
	return Config{
		Config: shard.Config{
			Stream: "s", Group: "g", WorkerID: "w1", Logger: watermill.NopLogger{},
			RequestTimeout: 10 * time.Second, CloseTimeout: 30 * time.Second,
			GetRecordsLimit: 10000, PollInterval: 400 * time.Millisecond, MinReadInterval: 200 * time.Millisecond,
			MaxBufferedRecords: 10000, MaxBufferedBytes: 64 << 20, MaxInFlight: 1, Ordering: shard.OrderByShard,
			NackResendSleep: 100 * time.Millisecond,
			LeaseStore:      store, LeaseDuration: 10 * time.Second, LeaseRenewInterval: 10 * time.Second / 3,
			CheckpointInterval: 5 * time.Second, HandoffTimeout: 10 * time.Second,
		},
		LeaseSyncInterval: 2 * time.Second,
		ShardSyncInterval: 30 * time.Second,
		Metrics:           NoMetrics{},
	}
}

// testReader is a reader of shardID at generation (none at 0) that is never run.
func testReader(shardID string, generation int64) *shard.Reader {
	var held *lease.Lease
	if generation > 0 {
		held = &lease.Lease{ShardID: shardID, Generation: generation}
	}
	cfg := &shard.Config{}
	return shard.New(cfg, &shard.Links{Closing: context.Background()}, shard.NoMetrics{}, shardID, shard.Start{}, held, time.Time{})
}
