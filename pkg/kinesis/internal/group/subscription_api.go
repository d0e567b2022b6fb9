package group

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
)

// New makes the coordinator of one Subscribe call on cfg.Stream; ctx is Subscribe's context.
// Nothing runs until Start.
func New(ctx context.Context, cfg Config) *Subscription {
	if cfg.Metrics == nil {
		cfg.Metrics = NoMetrics{}
	}
	return newSubscription(ctx, cfg)
}

// Start makes the first heartbeat (in a group), lists the shards, takes what leases it can
// and starts their readers; it returns once every reader it started holds its iterator, so a
// record published after it returns is one this subscription reads. On an error the caller
// calls Shutdown.
func (c *Subscription) Start() error { return c.start() }

// Run is the coordinator goroutine, after a Start that succeeded: lease and shard syncs until
// the subscription's context ends, then Shutdown. Messages is closed when it returns.
func (c *Subscription) Run() { c.run() }

// Shutdown stops every reader, waits until each has given its lease up, and closes Messages
// and Done. Only for a subscription whose Start failed: Run does it otherwise.
func (c *Subscription) Shutdown() { c.shutdown() }

// Cancel ends the subscription's context: Run then shuts it down. Safe from any goroutine.
func (c *Subscription) Cancel() { c.cancel() }

// Context is the subscription's context, which Cancel ends.
func (c *Subscription) Context() context.Context { return c.ctx }

// Done is closed once the subscription has shut down.
func (c *Subscription) Done() <-chan struct{} { return c.done }

// Messages is the subscription's output, closed at shutdown after every reader finished.
func (c *Subscription) Messages() <-chan *message.Message { return c.out }

// Stream is the stream the subscription reads.
func (c *Subscription) Stream() string { return c.cfg.Stream }

// LogFields are the subscription's log fields: stream, group and worker.
func (c *Subscription) LogFields() watermill.LogFields { return c.logFields() }

// Started describes a subscription that Start returned from, for its log line: how many
// shards it knows, how many it reads, and its fan-out consumer's ARN ("" when polling).
// Call it before Run.
func (c *Subscription) Started() (shards, reading int, consumerARN string) {
	if c.readerCfg.FanOut != nil {
		consumerARN = c.readerCfg.FanOut.ARN()
	}
	return len(c.shards), c.readers.len(), consumerARN
}

// Status is what other goroutines may see of a running subscription.
type Status struct {
	Stream, Group, WorkerID string
	// LastLeaseSync is when the lease store last answered a lease sync (zero before).
	LastLeaseSync time.Time
	// Readers are the subscription's readers, live or stopping, in shard order.
	Readers []*shard.Reader
}

// Status is a snapshot of the subscription; safe from any goroutine.
func (c *Subscription) Status() Status {
	s := Status{Stream: c.cfg.Stream, Group: c.cfg.Group, WorkerID: c.cfg.WorkerID}
	if n := c.lastLeaseSync.Load(); n != 0 {
		s.LastLeaseSync = time.Unix(0, n)
	}
	s.Readers = c.readers.snapshot()
	return s
}
