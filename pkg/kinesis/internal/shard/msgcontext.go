package shard

import (
	"context"
	"sync"
	"time"
)

// RecordInfo is pkg/kinesis.RecordInfo, field for field: that one converts from this one, so a
// field added to one and not the other does not compile. A message's context keeps the facts
// more compactly (messageContext) and builds a RecordInfo only when asked.
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

// readerFacts are what every message of one reader shares: kept once, not in each message's
// context (40 bytes a message).
type readerFacts struct {
	parent          context.Context // the reader's values, not its end: cancel alone ends a message's context
	stream, shardID string
	generation      int64
}

// messageContext is a message's context: cancelled on Ack, Nack and Close, and carrying the
// record's facts. It is made with its delivery, in the same allocation, and costs nothing more
// unless a handler asks for Done (or derives a context from it): a context.WithCancel per
// message cost two allocations and a lock on the reader's context for every record, to build
// a channel few handlers read. Its fields are laid out to fit a delivery in 176 bytes, not 256
// (B2: bytes per message).
//
// The reader goroutine sets the record's fields before the message goes out and never after,
// and cancels it (cancel) when it sees the message settled and when it stops; handlers read it
// from any goroutine, so cancelled and live are behind mu.
type messageContext struct {
	facts       *readerFacts
	seq, key    string
	arrival     time.Time
	behind      int64
	decodeError error
	sub         int32
	aggregated  bool

	cancelled bool // behind mu
	mu        sync.Mutex
	// live, made on first need (behind mu), is a child of the reader's values that cancel
	// cancels: Done and AfterFunc are its, so that cancellation reaches derived contexts as
	// it does for any cancelCtx, without a goroutine per derived context.
	live *liveContext
}

// liveContext is a messageContext's cancellable part, made when a handler first needs it.
type liveContext struct {
	ctx  context.Context
	stop context.CancelFunc
}

// info is the record's facts as pkg/kinesis hands them out.
func (c *messageContext) info() RecordInfo {
	return RecordInfo{
		Stream: c.facts.stream, ShardID: c.facts.shardID, SequenceNumber: c.seq,
		Aggregated: c.aggregated, SubSequenceNumber: int(c.sub), PartitionKey: c.key,
		ArrivalTime: c.arrival, MillisBehindLatest: c.behind, DecodeError: c.decodeError,
		LeaseGeneration: c.facts.generation,
	}
}

// sameRecord copies the record's facts of from, for a fresh context of the same record.
func (c *messageContext) sameRecord(from *messageContext) {
	c.facts, c.seq, c.key, c.arrival = from.facts, from.seq, from.key, from.arrival
	c.behind, c.decodeError, c.sub, c.aggregated = from.behind, from.decodeError, from.sub, from.aggregated
}

// liveContext returns live's context, making it first if need be.
func (c *messageContext) liveContext() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live == nil {
		ctx, stop := context.WithCancel(c.facts.parent)
		c.live = &liveContext{ctx: ctx, stop: stop}
		if c.cancelled {
			stop()
		}
	}
	return c.live.ctx
}

func (c *messageContext) Deadline() (time.Time, bool) { return c.facts.parent.Deadline() }

// Done is closed when the message is settled, or when its reader stops.
func (c *messageContext) Done() <-chan struct{} { return c.liveContext().Done() }

func (c *messageContext) Err() error {
	c.mu.Lock()
	live, cancelled := c.live, c.cancelled
	c.mu.Unlock()
	switch {
	case live != nil:
		return live.ctx.Err()
	case cancelled:
		return context.Canceled
	}
	return c.facts.parent.Err()
}

// AfterFunc lets context.WithCancel and friends, and context.AfterFunc, follow this context
// without a goroutine each (Watermill's Timeout middleware derives one for every message).
func (c *messageContext) AfterFunc(f func()) func() bool {
	return context.AfterFunc(c.liveContext(), f)
}

func (c *messageContext) Value(key any) any {
	if key == (recordInfoKey{}) {
		return c
	}
	return c.facts.parent.Value(key)
}

// cancel ends the context; later calls do nothing.
func (c *messageContext) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.cancelled {
		c.cancelled = true
		if c.live != nil {
			c.live.stop()
		}
	}
}

// RecordFromContext returns the facts a message's context carries, from this package's
// messages only.
func RecordFromContext(ctx context.Context) (RecordInfo, bool) {
	if ctx == nil {
		return RecordInfo{}, false
	}
	c, ok := ctx.Value(recordInfoKey{}).(*messageContext)
	if !ok {
		return RecordInfo{}, false
	}
	return c.info(), true
}
