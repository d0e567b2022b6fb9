package shard

import (
	"context"
	"sync"
	"time"
)

// RecordInfo is pkg/kinesis.RecordInfo, field for field: that one converts from this one, so a
// field added to one and not the other does not compile. It lives here because it is made with
// each delivery, in the same allocation as the message's context.
type RecordInfo struct {
	Stream, ShardID, SequenceNumber string
	Aggregated                      bool
	SubSequenceNumber               int
	PartitionKey                    string
	ArrivalTime                     time.Time
	MillisBehindLatest              int64
	DecodeError                     error
	LeaseGeneration                 int64
}

type recordInfoKey struct{}

// messageContext is a message's context: cancelled on Ack, Nack and Close, and carrying the
// record's facts. It is made with its delivery, in the same allocation, and costs nothing more
// unless a handler asks for Done (or derives a context from it): a context.WithCancel per
// message cost two allocations and a lock on the reader's context for every record, to build
// a channel few handlers read.
//
// The reader goroutine cancels it (cancel) when it sees the message settled and when it stops;
// handlers read it from any goroutine, so its state is behind mu.
type messageContext struct {
	parent context.Context // the reader's values (Reader.msgParent); cancel alone ends this one
	info   RecordInfo

	mu        sync.Mutex
	cancelled bool
	// live, made on first need, is a child of parent that cancel cancels: Done and AfterFunc
	// are its, so that cancellation reaches derived contexts as it does for any cancelCtx,
	// without a goroutine per derived context.
	live     context.Context
	stopLive context.CancelFunc
}

// liveContext returns live, making it first if need be.
func (c *messageContext) liveContext() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live == nil {
		c.live, c.stopLive = context.WithCancel(c.parent)
		if c.cancelled {
			c.stopLive()
		}
	}
	return c.live
}

func (c *messageContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Done is closed when the message is settled, or when its reader stops.
func (c *messageContext) Done() <-chan struct{} { return c.liveContext().Done() }

func (c *messageContext) Err() error {
	c.mu.Lock()
	live, cancelled := c.live, c.cancelled
	c.mu.Unlock()
	switch {
	case live != nil:
		return live.Err()
	case cancelled:
		return context.Canceled
	}
	return c.parent.Err()
}

// AfterFunc lets context.WithCancel and friends, and context.AfterFunc, follow this context
// without a goroutine each (Watermill's Timeout middleware derives one for every message).
func (c *messageContext) AfterFunc(f func()) func() bool {
	return context.AfterFunc(c.liveContext(), f)
}

func (c *messageContext) Value(key any) any {
	if key == (recordInfoKey{}) {
		return &c.info
	}
	return c.parent.Value(key)
}

// cancel ends the context; later calls do nothing.
func (c *messageContext) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.cancelled {
		c.cancelled = true
		if c.stopLive != nil {
			c.stopLive()
		}
	}
}

// RecordFromContext returns the facts a message's context carries, from this package's
// messages only.
func RecordFromContext(ctx context.Context) (*RecordInfo, bool) {
	if ctx == nil {
		return nil, false
	}
	info, ok := ctx.Value(recordInfoKey{}).(*RecordInfo)
	return info, ok
}
