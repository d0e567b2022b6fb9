package kinesis

import (
	"context"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
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

// RecordFromContext returns the facts of the record a consumed message came from.
func RecordFromContext(ctx context.Context) (RecordInfo, bool) {
	info, ok := shard.RecordFromContext(ctx)
	if !ok {
		return RecordInfo{}, false
	}
	return RecordInfo(info), true
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
