package kinesis

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/group"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
)

// Health is what a Subscriber is doing, for a readiness probe and for an operator: per
// subscription, the shards it reads and when each last read successfully, and one answer,
// Healthy, with the problems that make it false.
type Health struct {
	// Healthy: the Subscriber is open; every shard it reads is reading (a successful
	// GetRecords within ReadWithin, unless it holds records its handlers have not finished:
	// a shard waiting on the application has no need to read), is not stuck (holding, it
	// delivered a message or saw one acked or nacked within StuckWithin: a handler that
	// hangs, or a channel nobody drains, stops a shard too) and is not paused; and, in a
	// consumer group, the lease store answered a lease sync within LeaseSyncWithin.
	Healthy bool
	// Problems says what is wrong, one line each, naming stream and shard; empty if Healthy.
	Problems []string
	// At is when this was taken.
	At time.Time
	// ReadWithin, StuckWithin and LeaseSyncWithin are the limits applied: a shard reads
	// within 10 PollIntervals (at least two RequestTimeouts: a read that timed out and its
	// retry; with FanOut, at least 35 s and a RequestTimeout: a subscription that went silent,
	// made again), an event of a FanOut subscription counting as a read; a shard that holds records its handlers have not finished delivers or sees one
	// settled within 10 ReadWithins (at least HandoffTimeout); the lease store answers a
	// lease sync within 3 LeaseSyncIntervals (at least one plus a RequestTimeout).
	ReadWithin, StuckWithin, LeaseSyncWithin time.Duration
	// Subscriptions are the Subscriber's open subscriptions, by stream.
	Subscriptions []SubscriptionHealth
}

// Err is nil when Healthy, else an error joining the problems: for a probe handler that
// answers 503 with the reason.
func (h Health) Err() error {
	if h.Healthy {
		return nil
	}
	errs := make([]error, len(h.Problems))
	for i, p := range h.Problems {
		errs[i] = errors.New(p)
	}
	return fmt.Errorf("kinesis subscriber unhealthy: %w", errors.Join(errs...))
}

// SubscriptionHealth is one subscription (one Subscribe call).
type SubscriptionHealth struct {
	Stream        string
	ConsumerGroup string // "" without a group
	WorkerID      string // the member of the group this subscription is
	// LastLeaseSync is when the lease store last answered this subscription's lease sync;
	// zero without a group, or before the first.
	LastLeaseSync time.Time
	// Shards are the shards it reads now, by id.
	Shards []ShardHealth
}

// ShardHealth is one shard a subscription reads.
type ShardHealth struct {
	ShardID string
	// Generation is the lease generation this worker holds the shard at; 0 without a group.
	Generation int64
	// Started is when the reader of the shard started; LastRead is when a GetRecords of it
	// (with FanOut, a pushed event) last succeeded (zero before the first).
	Started, LastRead time.Time
	// MillisBehindLatest is what the last successful GetRecords said: how far the reader is
	// behind the shard's newest record.
	MillisBehindLatest int64
	// Holding: the reader holds records its handlers have not finished (delivered and not
	// acked, or not delivered yet).
	Holding bool
	// LastProgress is when the reader last delivered a message or saw one acked or nacked
	// (zero before the first).
	LastProgress time.Time
	// Paused: the lease could not be renewed in time; nothing is delivered until a renewal
	// succeeds (or another worker takes the shard).
	Paused bool
}

// Health reports what the Subscriber reads and whether it is healthy (see Health.Healthy). It
// is safe to call from any goroutine, at any time, and costs no call to Kinesis or the lease
// store: it reads what the readers and coordinators last recorded.
func (s *Subscriber) Health() Health {
	cfg := s.config
	readWithin := max(10*cfg.PollInterval, 2*cfg.RequestTimeout)
	if cfg.FanOut.Enabled {
		// A subscription silent for pushSilenceLimit is made again, at most 5 s after the
		// last (subscriptionTakeover), in at most a RequestTimeout.
		readWithin = max(readWithin, shard.PushSilenceLimit+shard.SubscriptionTakeover+cfg.RequestTimeout)
	}
	h := Health{
		At:              time.Now(),
		ReadWithin:      readWithin,
		StuckWithin:     max(10*readWithin, cfg.Group.HandoffTimeout),
		LeaseSyncWithin: max(3*cfg.Group.LeaseSyncInterval, cfg.Group.LeaseSyncInterval+cfg.RequestTimeout),
	}
	s.mu.Lock()
	closed := s.closed
	subs := s.subscriptions()
	s.mu.Unlock()
	for _, sub := range subs {
		h.Subscriptions = append(h.Subscriptions, subscriptionHealth(sub))
	}
	slices.SortFunc(h.Subscriptions, func(a, b SubscriptionHealth) int { return strings.Compare(a.Stream, b.Stream) })
	h.Problems = healthProblems(h, closed)
	h.Healthy = len(h.Problems) == 0
	return h
}

// subscriptionHealth is one subscription's part of Health.
func subscriptionHealth(sub *group.Subscription) SubscriptionHealth {
	st := sub.Status()
	sh := SubscriptionHealth{Stream: st.Stream, ConsumerGroup: st.Group, WorkerID: st.WorkerID, LastLeaseSync: st.LastLeaseSync}
	for _, r := range st.Readers {
		sh.Shards = append(sh.Shards, ShardHealth(r.Health()))
	}
	return sh
}

// healthProblems is Health's verdict: pure, so that its rules have a table test.
func healthProblems(h Health, closed bool) []string {
	var problems []string
	if closed {
		problems = append(problems, "the subscriber is closed")
	}
	for _, sub := range h.Subscriptions {
		if sub.ConsumerGroup != "" {
			if sub.LastLeaseSync.IsZero() {
				problems = append(problems, fmt.Sprintf("stream %q, group %q: no lease sync has succeeded yet", sub.Stream, sub.ConsumerGroup))
			} else if d := h.At.Sub(sub.LastLeaseSync); d > h.LeaseSyncWithin {
				problems = append(problems, fmt.Sprintf("stream %q, group %q: the lease store has not answered a lease sync for %s (limit %s)",
					sub.Stream, sub.ConsumerGroup, d.Round(time.Millisecond), h.LeaseSyncWithin))
			}
		}
		for _, sh := range sub.Shards {
			last := sh.LastRead
			if last.IsZero() {
				last = sh.Started
			}
			moved := last
			if sh.LastProgress.After(moved) {
				moved = sh.LastProgress
			}
			switch d := h.At.Sub(last); {
			case sh.Paused:
				problems = append(problems, fmt.Sprintf("stream %q, shard %s: paused, its lease was not renewed in time", sub.Stream, sh.ShardID))
			case sh.Holding && h.At.Sub(moved) > h.StuckWithin:
				problems = append(problems, fmt.Sprintf("stream %q, shard %s: stuck: holds records, and delivered none and saw none acked for %s (limit %s); is a handler hanging, or the channel not read?",
					sub.Stream, sh.ShardID, h.At.Sub(moved).Round(time.Millisecond), h.StuckWithin))
			case !sh.Holding && d > h.ReadWithin:
				what := "no successful read"
				if sh.LastRead.IsZero() {
					what = "no successful read since the reader started"
				}
				problems = append(problems, fmt.Sprintf("stream %q, shard %s: %s for %s (limit %s)",
					sub.Stream, sh.ShardID, what, d.Round(time.Millisecond), h.ReadWithin))
			}
		}
	}
	return problems
}
