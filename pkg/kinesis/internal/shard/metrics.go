package shard

// Metrics is where a reader counts what it does, for one shard: pkg/kinesis implements it
// with OpenTelemetry instruments, and a nil-free no-op (NoMetrics) stands in without a
// MeterProvider. Count runs on the reader's goroutine, per message for some counts: it must
// not block.
type Metrics interface {
	Count(c Count, n int64)
	// LeaseAcquired counts a take, with its reason, and one more lease held.
	LeaseAcquired(reason string)
}

// Count names what a reader or its coordinator counts.
type Count int

// The counts, each one instrument of pkg/kinesis's metrics.
const (
	CountConsumed Count = iota
	CountBytes
	CountAcks
	CountNacks
	CountRedeliveries
	CountThrottles
	CountIteratorRenewals
	CountCheckpoints
	CountCheckpointFailures
	CountLeasesHeld
	CountHandedOver
	CountReleased
	CountLost
	NumCounts
)

// NoMetrics counts nothing.
type NoMetrics struct{}

// Count does nothing.
func (NoMetrics) Count(Count, int64) {}

// LeaseAcquired does nothing.
func (NoMetrics) LeaseAcquired(string) {}
