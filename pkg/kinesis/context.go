package kinesis

import (
	"context"
	"sync"
	"time"
)

// RecordInfo holds the facts about the Kinesis record a message was read from. They travel in
// the message's context (as in watermill-kafka), not in its metadata, so republishing a
// consumed message does not carry them along.
type RecordInfo struct {
	Stream         string
	ShardID        string
	SequenceNumber string
	// Aggregated is set for a user record unpacked from a KPL aggregated record; then
	// SequenceNumber is the aggregate's and SubSequenceNumber the user record's index in it,
	// and PartitionKey is the user record's own.
	Aggregated        bool
	SubSequenceNumber int
	PartitionKey      string
	// ArrivalTime is when Kinesis accepted the record (ApproximateArrivalTimestamp).
	ArrivalTime time.Time
	// MillisBehindLatest is how far the read that returned the record was from the tip of
	// the shard.
	MillisBehindLatest int64
	// DecodeError is set when the Unmarshaler rejected the record; the message is then what
	// the PoisonHandler made of it (by default the record's data as a raw payload).
	DecodeError error
	// LeaseGeneration is the generation of the consumer group's lease the record was read
	// under (0 without a group). It grows with every change of the shard's owner, so a
	// handler that writes to another system can use it as a fencing token: a write that
	// carries a lower generation than one already seen for the shard comes from a reader
	// that has been replaced. Generations compare only within one consumer group, stream and
	// shard, and start over if the lease table is created anew.
	LeaseGeneration int64
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
	parent context.Context // the reader's values (shardReader.msgParent); cancel alone ends this one
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

// RecordFromContext returns the facts of the record a consumed message came from.
func RecordFromContext(ctx context.Context) (RecordInfo, bool) {
	if ctx == nil {
		return RecordInfo{}, false
	}
	info, ok := ctx.Value(recordInfoKey{}).(*RecordInfo)
	if !ok {
		return RecordInfo{}, false
	}
	return *info, true
}

// StreamFromContext returns the stream a consumed message was read from.
func StreamFromContext(ctx context.Context) (string, bool) {
	info, ok := RecordFromContext(ctx)
	return info.Stream, ok
}

// ShardIDFromContext returns the shard a consumed message was read from.
func ShardIDFromContext(ctx context.Context) (string, bool) {
	info, ok := RecordFromContext(ctx)
	return info.ShardID, ok
}

// SequenceNumberFromContext returns the sequence number of a consumed message's record.
func SequenceNumberFromContext(ctx context.Context) (string, bool) {
	info, ok := RecordFromContext(ctx)
	return info.SequenceNumber, ok
}

// PartitionKeyFromContext returns the partition key of a consumed message's record.
func PartitionKeyFromContext(ctx context.Context) (string, bool) {
	info, ok := RecordFromContext(ctx)
	return info.PartitionKey, ok
}

// ArrivalTimeFromContext returns when Kinesis accepted a consumed message's record.
func ArrivalTimeFromContext(ctx context.Context) (time.Time, bool) {
	info, ok := RecordFromContext(ctx)
	return info.ArrivalTime, ok
}

// DecodeErrorFromContext returns the error that made a consumed message a raw payload,
// or nil.
func DecodeErrorFromContext(ctx context.Context) error {
	info, _ := RecordFromContext(ctx)
	return info.DecodeError
}
