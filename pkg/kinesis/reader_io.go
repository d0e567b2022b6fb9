package kinesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// fetch reads the next batch. Throttling and transient failures only postpone the next read
// (same iterator, no rewind, nothing reaches the handler); an expired iterator is replaced
// by one after the last record read. Only errors no retry can fix are returned.
func (r *shardReader) fetch() error {
	cfg := r.sub.cfg
	limit := cfg.GetRecordsLimit
	started := r.now()
	ctx, cancel := r.callContext()
	out, err := cfg.Client.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: &r.iterator, Limit: &limit})
	cancel()
	if err != nil {
		return r.fetchFailed(err)
	}
	r.failures = 0
	r.records, r.next = expand(out.Records, cfg.KeepKPLAggregates, r.skipSeq, r.skipThrough), 0
	if len(out.Records) > 0 {
		r.skipSeq = "" // the aggregate to resume inside is the first record read
	}
	if out.MillisBehindLatest != nil {
		r.behind = *out.MillisBehindLatest
	}
	if n := len(out.Records); n > 0 {
		r.lastRead = deref(out.Records[n-1].SequenceNumber)
	}
	if out.NextShardIterator == nil {
		r.ended, r.iterator, r.children = true, "", out.ChildShards
		return nil
	}
	r.iterator = *out.NextShardIterator
	switch {
	case len(out.Records) == 0 && r.behind == 0:
		r.fetchAt = started.Add(cfg.PollInterval)
	default:
		// More may be waiting: read again as soon as Kinesis's per-shard rate allows.
		r.fetchAt = started.Add(cfg.MinReadInterval)
	}
	return nil
}

func (r *shardReader) fetchFailed(err error) error {
	r.failures++
	fields := r.logFields().Add(watermill.LogFields{"err": err, "failures": r.failures})
	switch classify(r.ctx, err) {
	case classThrottled:
		r.sub.logger.Debug("Read throttled; backing off", fields)
		// Capped at 1 s: a shard's read limits (5 reads/s, 2 MB/s) refill within a second.
		// With a 5 s cap, reads throttled at random half the time in the fault suite waited
		// up to 21 s (runs of failures double the wait); only a 10 MB read earns a 5 s
		// penalty, which this cap meets with a few more throttled calls.
		r.fetchAt = r.now().Add(backoff(r.failures-1, 250*time.Millisecond, readThrottleMaxBackoff))
		return nil
	case classTransient:
		// A blip is routine and logged at INFO. Reads that keep failing are an outage that
		// someone should see: the fault suite's 30 s GetRecords outage logged nothing above
		// INFO. From the readFailuresBeforeError-th failure in a row (6 to 13 s into an
		// outage, by the backoff below) each retry logs at ERROR, at most one line per shard
		// every 5 to 10 s.
		if r.failures >= readFailuresBeforeError {
			r.sub.logger.Error("Reads keep failing; retrying", err, fields)
		} else {
			r.sub.logger.Info("Read failed; retrying", fields)
		}
		r.fetchAt = r.now().Add(backoff(r.failures-1, 100*time.Millisecond, 10*time.Second))
		return nil
	case classExpiredIterator:
		// Resume right after the last record read: never LATEST (that skips records), never
		// the checkpoint (that redelivers what is in flight).
		pos := r.start
		switch {
		case r.lastRead != "":
			pos = position{after: r.lastRead}
		case pos.after == "" && pos.initial.Type == Latest:
			// Nothing read yet from a LATEST start: a new LATEST iterator would skip what
			// arrived since the first one was taken. Start where that was, by time, less a
			// margin for clock skew: a few older records may come again, none is lost.
			pos = position{initial: Position{Type: AtTimestamp, Timestamp: r.askedAt.Add(-latestSkewMargin)}}
		}
		it, gerr := r.getIterator(pos)
		if gerr != nil {
			if c := classify(r.ctx, gerr); c == classThrottled || c == classTransient {
				r.sub.logger.Info("Replacing an expired iterator failed; retrying", r.logFields().Add(watermill.LogFields{"err": gerr, "failures": r.failures}))
				r.fetchAt = r.now().Add(backoff(r.failures-1, 100*time.Millisecond, 5*time.Second))
				return nil
			}
			if r.fallBackFromTrimmed(pos.after, gerr) {
				// The last record read aged out while the iterator sat unused: what came
				// after it may have too, and the oldest record left is next.
				r.start, r.lastRead = position{initial: Position{Type: TrimHorizon}}, ""
				r.fetchAt = r.now()
				return nil
			}
			return &ShardError{Stream: r.sub.stream, ShardID: r.shardID, Err: fmt.Errorf("replacing an expired iterator: %w", gerr)}
		}
		r.sub.logger.Debug("Iterator expired; replaced after the last record read", fields)
		r.iterator = it
		return nil
	case classNotFound:
		return &ShardError{Stream: r.sub.stream, ShardID: r.shardID, Err: fmt.Errorf("%w: %w", ErrStreamNotFound, err)}
	default:
		return &ShardError{Stream: r.sub.stream, ShardID: r.shardID, Err: fmt.Errorf("reading records: %w", err)}
	}
}

// callContext bounds one Kinesis call of the reader by RequestTimeout, on the subscription's
// clock. A call that outlasts it fails with a context error while r.ctx is live, which
// classify counts as transient.
func (r *shardReader) callContext() (context.Context, context.CancelFunc) {
	return clock.WithTimeout(r.ctx, r.sub.cfg.Clock, r.sub.cfg.RequestTimeout)
}

// readFailuresBeforeError is how many reads of a shard in a row fail (throttled or transient)
// before a transient failure is logged at ERROR instead of INFO.
const readFailuresBeforeError = 8

// readThrottleMaxBackoff caps the wait after throttled reads.
const readThrottleMaxBackoff = time.Second

// latestSkewMargin is how far before its first LATEST iterator a reader that has read nothing
// resumes when that iterator expired: Kinesis stamps arrival times by its own clock.
const latestSkewMargin = time.Second

// renewedWith records a successful owner write (renewal or checkpoint) sent at sentAt: the
// lease as it now is, and a lease deadline counted from sentAt.
func (r *shardReader) renewedWith(l lease.Lease, sentAt time.Time) {
	r.held = &l
	r.renewed = sentAt
	r.timers.renewedAt(r.now(), sentAt, r.sub.cfg)
}

// leaseCall runs one lease store call for the reader, bounded by storeTimeout and by the
// lease deadline on the subscription's clock: a store that hangs must not hold the reader,
// still delivering, past the point where it has to pause. Past the deadline the call is
// cancelled and fails; the reader pauses and tries again.
func (r *shardReader) leaseCall(parent context.Context, call func(context.Context) (lease.Lease, error)) (lease.Lease, error) {
	ctx, cancel := clock.WithTimeout(parent, r.sub.cfg.Clock, r.storeTimeout())
	defer cancel()
	type result struct {
		l   lease.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := call(ctx)
		done <- result{l, err}
	}()
	select {
	case res := <-done:
		return res.l, res.err
	case <-r.timers.leaseDeadline:
		cancel()
		<-done // the store returns once its context is cancelled
		return lease.Lease{}, fmt.Errorf("%w: a lease store call outlasted the stop point", errLeaseStale)
	}
}

// storeTimeout bounds one lease store call, so that a hung store cannot hold a reader past
// the point where it must give the shard up.
func (r *shardReader) storeTimeout() time.Duration { return r.sub.cfg.LeaseRenewInterval }

// renew proves this worker alive. A lost lease stops the reader at once; other failures are
// retried at the next renewal time or shortly before the stop point, whichever comes first,
// and the lease deadline stops the reader if none succeeds in time.
func (r *shardReader) renew() error {
	sentAt := r.now()
	l, err := r.leaseCall(r.ctx, func(ctx context.Context) (lease.Lease, error) {
		return r.sub.cfg.LeaseStore.Renew(ctx, *r.held)
	})
	switch {
	case err == nil:
		r.renewedWith(l, sentAt)
		r.timers.nextRenewal(r.now(), r.sub.cfg.LeaseRenewInterval, time.Time{})
		return nil
	case errors.Is(err, lease.ErrLeaseLost), errors.Is(err, ErrLeaseLost):
		return fmt.Errorf("%w: renewing: %w", ErrLeaseLost, err)
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	}
	r.sub.logger.Error("Renewing the lease failed; will retry", err, r.logFields())
	// The next try comes at the usual time, or, if that is later, once more shortly before
	// the stop point. With the usual time alone, the try after a failure could come only
	// after the stop point: in the fault suite, lease store outages of 4 s (under half of
	// LeaseDuration) stopped 7 of 16 readers, some with the store back 3 s before their stop
	// point, and each stop redelivered what was acked since its last checkpoint. The last try
	// keeps a reader through any outage that ends by then, at one more store call per outage.
	cfg := r.sub.cfg
	if r.paused {
		r.timers.retrySoon(r.now(), cfg.LeaseRenewInterval)
		return nil
	}
	r.timers.nextRenewal(r.now(), cfg.LeaseRenewInterval, r.renewed.Add(leaseStopAfter(cfg)-renewLastTry(cfg)))
	return nil
}

// renewLastTry is how long before its stop point a reader whose renewals failed tries once
// more: time for the call to come back.
func renewLastTry(cfg SubscriberConfig) time.Duration { return cfg.LeaseRenewInterval / 8 }

// checkpoint writes the watermark if it moved. Checkpoint writes also renew the lease.
func (r *shardReader) checkpoint(ctx context.Context) error {
	if r.held == nil || r.acked == r.saved {
		return nil
	}
	return r.writeCheckpoint(ctx, r.acked)
}

func (r *shardReader) writeCheckpoint(ctx context.Context, seq string) error {
	sentAt := r.now()
	l, err := r.leaseCall(ctx, func(ctx context.Context) (lease.Lease, error) {
		return r.sub.cfg.LeaseStore.Checkpoint(ctx, *r.held, seq)
	})
	switch {
	case err == nil:
		r.saved = seq
		r.renewedWith(l, sentAt)
		return nil
	case errors.Is(err, lease.ErrLeaseLost), errors.Is(err, ErrLeaseLost):
		return fmt.Errorf("%w: checkpointing: %w", ErrLeaseLost, err)
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	}
	r.sub.logger.Error("Writing a checkpoint failed; will retry", err, r.logFields().Add(watermill.LogFields{"sequence_number": seq}))
	return nil
}

// handOver gives the lease to the worker that asked for it: the revoked hook, the checkpoint
// of what was acked, then the conditional handoff. Messages still unsettled (the owner waited
// up to half of HandoffTimeout) are redelivered by the new owner. If nobody is waiting for the
// lease any more, the reader simply goes on.
func (r *shardReader) handOver() error {
	r.revokeOnce()
	r.settleWindow(r.now())
	if err := r.checkpoint(r.ctx); err != nil {
		return err
	}
	l, err := r.leaseCall(r.ctx, func(ctx context.Context) (lease.Lease, error) {
		return r.sub.cfg.LeaseStore.Handoff(ctx, *r.held)
	})
	switch {
	case err == nil:
		r.sub.logger.Info("Lease handed over", r.logFields().Add(watermill.LogFields{"to": l.Owner}))
		r.held, r.handedOff = nil, true
		return nil
	case errors.Is(err, lease.ErrNoPendingOwner):
		r.handingOff = false
		return nil
	case errors.Is(err, lease.ErrLeaseLost), errors.Is(err, ErrLeaseLost):
		return fmt.Errorf("%w: handing over: %w", ErrLeaseLost, err)
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	}
	r.sub.logger.Error("Handing over the lease failed; will retry", err, r.logFields())
	r.handoffRetry = r.now().Add(r.sub.cfg.LeaseRenewInterval)
	return nil
}

// revokeOnce calls OnShardRevoked, once per reader: a handoff that is retried, or a Close
// after a handoff attempt, does not revoke the shard again.
func (r *shardReader) revokeOnce() {
	if !r.revoked {
		r.revoked = true
		r.sub.hook(r.sub.cfg.OnShardRevoked, r.shardID)
	}
}

// giveUp writes the final checkpoint (SHARD_END if the shard is done) and releases the lease,
// on a context of its own since the reader's is usually cancelled by now. Half of
// CloseTimeout bounds it, so that Close still returns in time, with every channel closed,
// when the store hangs.
func (r *shardReader) giveUp(shardEnded bool) {
	ctx, cancel := context.WithTimeout(context.Background(), r.sub.cfg.CloseTimeout/2)
	defer cancel()
	seq := r.acked
	if shardEnded {
		seq = lease.ShardEnd
	} else {
		r.revokeOnce()
		r.settleWindow(r.now()) // the hook may have acked
		seq = r.acked
	}
	if seq != "" && seq != r.saved {
		l, err := r.sub.cfg.LeaseStore.Checkpoint(ctx, *r.held, seq)
		if err != nil {
			r.sub.logger.Error("Final checkpoint failed; the next owner will redeliver since the last one", err,
				r.logFields().Add(watermill.LogFields{"sequence_number": seq}))
			if errors.Is(err, lease.ErrLeaseLost) {
				return
			}
		} else {
			r.held, r.saved = &l, seq
		}
	}
	if _, err := r.sub.cfg.LeaseStore.Release(ctx, *r.held); err != nil && !errors.Is(err, lease.ErrLeaseLost) {
		r.sub.logger.Error("Releasing the lease failed; another worker takes it once it expires", err, r.logFields())
	}
}

// readerTimers are a reader's tickers and timers, on the subscription's clock; nil channels
// where a group is not used.
type readerTimers struct {
	checkpointTicker           clock.Ticker
	renewTimer, deadline, wake clock.Timer
	renewDue                   time.Time // when the renewal timer is set to fire
	renew, checkpoint          <-chan time.Time
	leaseDeadline              <-chan time.Time
}

// start starts the lease timers; the stop deadline counts from taken, when the take was sent,
// since others may have started timing the lease from then.
func (t *readerTimers) start(cfg SubscriberConfig, leased bool, taken time.Time) {
	if !leased {
		return
	}
	clk := cfg.Clock
	// A timer, not a ticker: renew sets when the next renewal is due (nextRenewal).
	t.renewDue = clk.Now().Add(cfg.LeaseRenewInterval)
	t.renewTimer = clk.NewTimer(cfg.LeaseRenewInterval)
	t.checkpointTicker = clk.NewTicker(cfg.CheckpointInterval)
	t.deadline = clk.NewTimer(taken.Add(leaseStopAfter(cfg)).Sub(clk.Now()))
	t.renew, t.checkpoint, t.leaseDeadline = t.renewTimer.C(), t.checkpointTicker.C(), t.deadline.C()
}

// nextRenewal sets the renewal timer to the next multiple of interval after the last due time
// that is after now, as a ticker would fire (no catching up on missed ones), or to lastTry if
// that is after now and comes first.
func (t *readerTimers) nextRenewal(now time.Time, interval time.Duration, lastTry time.Time) {
	if t.renewTimer == nil {
		return
	}
	next := t.renewDue.Add(interval)
	if !next.After(now) {
		next = next.Add((now.Sub(next)/interval + 1) * interval)
	}
	if lastTry.After(now) && lastTry.Before(next) {
		next = lastTry
	}
	t.renewDue = next
	t.renewTimer.Reset(next.Sub(now))
}

// retrySoon sets the renewal timer for a paused reader: a quarter of the renewal interval, so
// that it resumes soon after the store is back, at a few calls per outage.
func (t *readerTimers) retrySoon(now time.Time, interval time.Duration) {
	if t.renewTimer == nil {
		return
	}
	t.renewDue = now.Add(interval / 4)
	t.renewTimer.Reset(interval / 4)
}

// leaseStopMargin is how much before LeaseDuration an owner that could not renew stops
// delivering (lease.MustStop), so that it stops before any other worker may take the lease.
func leaseStopMargin(cfg SubscriberConfig) time.Duration { return cfg.LeaseDuration / 5 }

// leaseStopAfter is how long after its last successful renewal an owner stops delivering.
func leaseStopAfter(cfg SubscriberConfig) time.Duration {
	return cfg.LeaseDuration - leaseStopMargin(cfg)
}

func (t *readerTimers) renewedAt(now, at time.Time, cfg SubscriberConfig) {
	if t.deadline != nil {
		t.deadline.Reset(at.Add(leaseStopAfter(cfg)).Sub(now))
	}
}

// wakeAt returns a channel that fires at 'at' (nil for the zero time). One timer per reader
// is reused.
func (t *readerTimers) wakeAt(clk clock.Clock, now, at time.Time) <-chan time.Time {
	if at.IsZero() {
		return nil
	}
	d := at.Sub(now)
	if t.wake == nil {
		t.wake = clk.NewTimer(d)
	} else {
		t.wake.Reset(d)
	}
	return t.wake.C()
}

func (t *readerTimers) stop() {
	if t.checkpointTicker != nil {
		t.checkpointTicker.Stop()
	}
	for _, tm := range []clock.Timer{t.renewTimer, t.deadline, t.wake} {
		if tm != nil {
			tm.Stop()
		}
	}
}
