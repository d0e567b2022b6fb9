package shard

import (
	"sync/atomic"
	"time"
)

// Health is what Subscriber.Health shows of one reader: pkg/kinesis.ShardHealth, field for
// field (that one converts from this one, so the two cannot drift apart).
type Health struct {
	ShardID            string
	Generation         int64
	Started, LastRead  time.Time
	MillisBehindLatest int64
	Holding            bool
	LastProgress       time.Time
	Paused             bool
}

// Metrics is the sink the reader counts with, as New was given it; safe from any goroutine.
func (r *Reader) Metrics() Metrics { return r.metrics }

// readerHealth is what other goroutines may read of a reader while it runs: the reader
// goroutine stores, Health loads.
type readerHealth struct {
	started  time.Time    // set before the reader starts; read-only after
	lastRead atomic.Int64 // UnixNano of the last successful GetRecords, 0 before
	progress atomic.Int64 // UnixNano of the last turn that delivered or settled a message, 0 before
	behind   atomic.Int64 // MillisBehindLatest of that read
	holding  atomic.Bool
	paused   atomic.Bool
}

// Health is a snapshot of the reader's health; safe from any goroutine.
func (r *Reader) Health() Health {
	h := &r.health
	s := Health{
		ShardID: r.shardID, Generation: r.generation, Started: h.started,
		MillisBehindLatest: h.behind.Load(), Holding: h.holding.Load(), Paused: h.paused.Load(),
	}
	if n := h.lastRead.Load(); n != 0 {
		s.LastRead = time.Unix(0, n)
	}
	if n := h.progress.Load(); n != 0 {
		s.LastProgress = time.Unix(0, n)
	}
	return s
}
