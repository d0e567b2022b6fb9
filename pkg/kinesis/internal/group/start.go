package group

import (
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// start lists the shards, writes the first heartbeat (in a group, once the listing found the
// stream: a Subscribe to a stream that does not exist leaves no member record behind), takes
// what leases it can and starts their readers; it returns once every reader it started holds
// its iterator, so that a record published after Subscribe returns is one this subscription
// reads.
//
// Nothing waits for other instances: a lone instance reads as soon as it holds its leases, and
// instances started together even out by handoff, as a join does (docs/consumer-groups.md).
func (c *Subscription) start() error {
	if err := c.firstSync(); err != nil {
		return err
	}
	// Before any reader can start.
	if err := c.startFanOut(); err != nil {
		return err
	}
	return c.startReaders()
}

// firstSync is Subscribe's first shard sync (and, in a group, lease listing and creation),
// tried again after failures that pass: a lease store or Kinesis slow for a moment (the
// universal suite's 50 concurrent subscriptions on dynalite under a loaded machine: a listing
// of 16 Queries past RequestTimeout) should delay Subscribe, not fail it.
func (c *Subscription) firstSync() error {
	for attempt := 1; ; attempt++ {
		err := c.syncShards()
		if err == nil || attempt == firstSyncTries {
			return err
		}
		if class := awscall.Classify(c.ctx, err); class != awscall.Transient && class != awscall.Throttled {
			return err
		}
		c.cfg.Logger.Info("Subscribe's first sync failed; retrying", c.logFields().Add(watermill.LogFields{"err": err, "attempt": attempt}))
		if err := awscall.Sleep(c.ctx, awscall.Backoff(attempt-1, 100*time.Millisecond, time.Second)); err != nil {
			return err
		}
	}
}

// firstSyncTries is how many times Subscribe tries its first sync: with the backoff above (up
// to 1 s), 4 to 7 s of failures that pass. The SDK does not retry Kinesis calls under the
// driver's (pkg/kinesis sdk.go), so this is the one layer that rides out a throttled listing.
const firstSyncTries = awscall.FailuresBeforeError
