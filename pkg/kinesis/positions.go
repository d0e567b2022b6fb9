package kinesis

import (
	"fmt"
	"time"
)

// PositionType says where a consumer group with no checkpoint starts reading a shard.
type PositionType int

func (p PositionType) String() string {
	switch p {
	case TrimHorizon:
		return "TRIM_HORIZON"
	case Latest:
		return "LATEST"
	case AtTimestamp:
		return "AT_TIMESTAMP"
	}
	return fmt.Sprintf("PositionType(%d)", int(p))
}

// Position is where reading starts when there is no checkpoint.
type Position struct {
	Type PositionType
	// Timestamp is used with AtTimestamp.
	Timestamp time.Time
}

// ShardEvent names a shard whose ownership changed, for the ShardHooks.
type ShardEvent struct {
	Stream  string
	ShardID string
	// ConsumerGroup is the GroupConfig.Name of the subscriber.
	ConsumerGroup string
	// WorkerID is the subscription's name in the lease table: GroupConfig.WorkerID for the
	// first subscription of a stream, WorkerID#2, #3, ... for others open beside it.
	WorkerID string
}

// Ordering is SubscriberConfig.Ordering: which messages of one shard a subscriber may have
// out (delivered and not acked) at the same time.
type Ordering int

func (o Ordering) String() string {
	switch o {
	case OrderDefault:
		return "OrderDefault"
	case OrderByShard:
		return "OrderByShard"
	case OrderByKey:
		return "OrderByKey"
	case Unordered:
		return "Unordered"
	}
	return fmt.Sprintf("Ordering(%d)", int(o))
}

// NoSleep, as SubscriberConfig.NackResendSleep, resends a nacked message at once.
const NoSleep time.Duration = -1
