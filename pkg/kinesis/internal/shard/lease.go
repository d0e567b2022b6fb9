package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// leaseState is a reader's hold on its lease: when it last proved itself alive, when the next
// renewal and checkpoint are due, and where a handoff or a pause stands. The reader goroutine
// owns it; decide reads it through view.
type leaseState struct {
	renewFailures int       // renewals failed in a row
	saved         string    // last checkpoint written
	renewed       time.Time // when the last successful renewal (at first: the take) was sent
	renewAt       time.Time // when the next renewal is due
	checkpointAt  time.Time // when the next periodic checkpoint is due
	// finishRetry: after a failed SHARD_END write, the next one is not sent before this.
	finishRetry    time.Time
	finishFailures int
	// handingOff: another worker asked for the lease; nothing more is sent, and once the
	// messages in flight are settled (or at handoffBy) the lease is handed over.
	handingOff bool
	handoffBy  time.Time
	// handoffRetry: the next Handoff call is not sent before this: after a failed one, and,
	// with fan-out, before Kinesis takes the next owner's subscription (beginHandoff).
	handoffRetry time.Time
	handedTo     string // the worker the lease was handed over to ("" while it is held)
	// paused: past the stop point with no renewal since; nothing is sent or read until a
	// renewal succeeds.
	paused  bool
	revoked bool // Hooks.OnRevoked (or, at a pause, Hooks.OnLost) was called
}

// stopAt is when deliveries must stop unless a renewal succeeds first: LeaseStopAfter after
// the last successful owner write was sent. Another worker may take the lease once it has seen
// the lease's counter stand still for LeaseDuration on its own clock, which it can only start
// timing after that write landed.
func (r *Reader) stopAt() time.Time { return r.renewed.Add(LeaseStopAfter(r.cfg)) }

// startLease sets the first renewal and checkpoint times once the reader holds its iterator.
// The stop point counts from the take (renewed), since others may have timed the lease from
// then, and so does the first renewal: counted from when the iterator came, it fell after the
// stop point whenever GetShardIterator took longer than LeaseDuration/2, and the reader paused
// for nothing.
func (r *Reader) startLease(now time.Time) {
	r.renewAt = r.renewed.Add(r.cfg.LeaseRenewInterval)
	r.checkpointAt = now.Add(r.cfg.CheckpointInterval)
}

// renewedWith records a successful owner write (renewal or checkpoint) sent at sentAt: the
// lease as it now is, and a stop point counted from sentAt.
//
// The lease as written also says whether another worker asked for it: the reader starts
// handing over at once, not only when its coordinator's next lease sync passes the request on.
// A coordinator cut off from the store passes nothing on, and the taker takes the lease once
// max(HandoffTimeout, LeaseDuration) is up: an owner that renewed, saw no request and went on delivering read the
// shard together with the taker (found by the simulation in tests/sim).
func (r *Reader) renewedWith(l lease.Lease, sentAt time.Time) {
	r.held = &l
	r.renewed = sentAt
	if HandoffAsked(l) {
		r.beginHandoff()
	}
}

// HandoffAsked: another worker waits for the lease.
func HandoffAsked(l lease.Lease) bool { return l.PendingOwner != "" && l.PendingOwner != l.Owner }

// beginHandoff stops sending: another worker asked for the lease. The messages in flight get
// up to half of HandoffTimeout, counted from now, to be settled.
//
// With fan-out, the lease goes over no sooner than SubscriptionTakeover after this reader's
// last subscription, or its last SubscribeToShard call if one is out or was cut off (reading
// stops while handing over, so no later one starts): Kinesis refuses the next owner's until then, and a next owner that could not
// subscribe before its lease needed renewing gave the lease back, which the group then evened
// out again, the same way. With a LeaseDuration of 5 s (a first subscription due within 4 s) a
// shard went back and forth for minutes (the simulation's seed 502, in about 1% of its runs).
func (r *Reader) beginHandoff() {
	if !r.handingOff {
		r.handingOff = true
		r.handoffBy = r.now().Add(r.cfg.HandoffTimeout / 2)
		if last := later(r.push.subscribedAt, r.push.subscribeSentAt); r.pushed() && !last.IsZero() {
			if at := last.Add(SubscriptionTakeover); at.After(r.now()) && at.After(r.handoffRetry) {
				r.handoffRetry = at
			}
		}
	}
}

// leaseCall runs one lease store call for the reader, bounded by storeTimeout and, unless the
// reader is paused already, by its stop point: a store that hangs
// must not hold the reader, still delivering, past the point where it has to pause. Past the
// stop point the call is cancelled and fails; the reader pauses and tries again.
func (r *Reader) leaseCall(parent context.Context, call func(context.Context) (lease.Lease, error)) (lease.Lease, error) {
	limit, byStop := r.storeTimeout(), false
	if !r.paused {
		untilStop := r.stopAt().Sub(r.now())
		if untilStop <= 0 {
			// Not sent at all: the reader's turn came after its stop point, as after a
			// process pause. The pause that follows says so.
			return lease.Lease{}, fmt.Errorf("%w: not sent, the stop point passed %s before this turn (no renewal for %s)",
				errLeaseStale, (-untilStop).Round(time.Millisecond), r.now().Sub(r.renewed).Round(time.Millisecond))
		}
		if untilStop < limit {
			limit, byStop = untilStop, true
		}
	}
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	l, err := call(ctx)
	if err != nil && byStop && ctx.Err() != nil && parent.Err() == nil {
		return lease.Lease{}, fmt.Errorf("%w: the lease store gave no answer before the stop point: %w", errLeaseStale, err)
	}
	return l, err
}

// storeTimeout bounds one lease store call, so that a hung store cannot hold a reader past
// the point where it must give the shard up.
func (r *Reader) storeTimeout() time.Duration { return r.cfg.LeaseRenewInterval }

// stopOn is what stops the reader after a failed owner write (what names it): the lost lease,
// or the end of the reader's context; nil when the write may be tried again.
func (r *Reader) stopOn(what string, err error) error {
	switch {
	case errors.Is(err, lease.ErrLeaseLost):
		return fmt.Errorf("%w: %s: %w", lease.ErrLeaseLost, what, err)
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	}
	return nil
}

// errLeaseStale: the owner could not renew its lease in time and may be taken over.
var errLeaseStale = errors.New("lease not renewed in time")

// renew proves this worker alive. A lost lease stops the reader at once; other failures are
// retried at the next renewal time or shortly before the stop point, whichever comes first,
// and the reader pauses at the stop point if none succeeds in time.
func (r *Reader) renew() error {
	cfg := r.cfg
	sentAt, held := r.now(), *r.held
	l, err := r.leaseCall(r.ctx, func(ctx context.Context) (lease.Lease, error) {
		return cfg.LeaseStore.Renew(ctx, held)
	})
	now := r.now()
	if err == nil {
		r.renewFailures = 0
		r.renewedWith(l, sentAt)
		r.renewAt = nextTick(r.renewAt, now, cfg.LeaseRenewInterval)
		return nil
	}
	if stop := r.stopOn("renewing", err); stop != nil {
		return stop
	}
	r.logRenewFailed(err)
	if r.paused {
		// A quarter of the renewal interval: the reader resumes soon after the store is
		// back, at a few calls per outage.
		r.renewAt = now.Add(cfg.LeaseRenewInterval / 4)
		return nil
	}
	// The next try comes at the usual time, or, if that is later, once more shortly before
	// the stop point. With the usual time alone, the try after a failure could come only
	// after the stop point: in the fault suite, lease store outages of 4 s (under half of
	// LeaseDuration) stopped 7 of 16 readers, some with the store back 3 s before their stop
	// point, and each stop redelivered what was acked since its last checkpoint. The last try
	// keeps a reader through any outage that ends by then, at one more store call per outage.
	next := nextTick(r.renewAt, now, cfg.LeaseRenewInterval)
	if lastTry := r.renewed.Add(LeaseStopAfter(cfg) - renewLastTry(cfg)); lastTry.After(now) && lastTry.Before(next) {
		next = lastTry
	}
	r.renewAt = next
	return nil
}

// logRenewFailed logs a failed renewal that will be tried again. A failure costs nothing as
// long as a later renewal succeeds before the stop point, so it is INFO, as a failed read is;
// one that missed the stop point is not logged at all: the pause that follows says so, at
// WARN. While paused, each retry is DEBUG. A store that keeps failing is the coordinator's
// ERROR, once per subscription (its lease syncs fail too), not one per shard.
func (r *Reader) logRenewFailed(err error) {
	r.renewFailures++
	fields := r.LogFields().Add(watermill.LogFields{"failures": r.renewFailures, "err": err})
	switch {
	case errors.Is(err, errLeaseStale):
	case r.paused:
		r.cfg.Logger.Debug("Renewing the lease failed while paused; will retry", fields)
	default:
		r.cfg.Logger.Info("Renewing the lease failed; will retry", fields)
	}
}

// pause stops deliveries at the stop point (stopAt), when no renewal succeeded in time.
//
// Paused, the reader sends and reads nothing, so it delivers nothing once another worker may
// take the lease, and keeps trying to renew. A renewal is a write conditioned on this owner
// and generation, so one that succeeds proves nobody took the lease in between: the reader
// goes on where it was (the messages in flight at the pause, whose contexts it cancelled, are
// sent again with the same UUIDs), and a lease store outage that ends before anyone takes over
// rewinds nothing. One that fails with lease.ErrLeaseLost stops the reader, and the new owner
// redelivers from the checkpoint.
func (r *Reader) pause(now time.Time) {
	cfg := r.cfg
	r.paused = true
	r.health.paused.Store(true)
	logs.Warn(r.cfg.Logger, "Lease not renewed in time; deliveries paused until a renewal succeeds (another worker may take the shard)",
		fmt.Errorf("%w: no renewal succeeded for %s", errLeaseStale, now.Sub(r.renewed).Round(time.Millisecond)), r.LogFields())
	r.suspendWindow(now)
	// For the application the shard is lost: another worker may take it from here on.
	// If a renewal succeeds first, it is acquired again; no revoke follows a loss.
	r.revoked = true
	r.hook(r.cfg.Hooks.OnLost)
	r.renewAt = now.Add(cfg.LeaseRenewInterval / 4)
}

// resume goes on delivering after a renewal succeeded while paused.
func (r *Reader) resume() {
	r.paused, r.revoked = false, false
	r.health.paused.Store(false)
	r.cfg.Logger.Info("Lease renewed; deliveries resumed", r.LogFields())
	r.hook(r.cfg.Hooks.OnAcquired)
}

// checkpoint writes the checkpoint target if it moved. Checkpoint writes also renew the lease.
func (r *Reader) checkpoint(ctx context.Context) error {
	target := r.checkpointTarget()
	if r.held == nil || target == "" || target == r.saved {
		return nil
	}
	return r.writeCheckpoint(ctx, target)
}

// checkpointTarget is where the shard's checkpoint belongs now: SHARD_END once the shard is
// read to its end and every record of it is done, the watermark before that. Every write of
// the reader (periodic, handoff, final) aims there, so the checkpoint never moves back: a
// SHARD_END whose answer was lost (the write passed, the call timed out) was followed by the
// watermark of the last record in the simulation.
func (r *Reader) checkpointTarget() string {
	if r.atEnd() {
		return lease.ShardEnd
	}
	return r.acked
}

// writeCheckpoint writes seq as the shard's checkpoint. A failure other than a lost lease is
// logged and left to the next checkpoint time.
func (r *Reader) writeCheckpoint(ctx context.Context, seq string) error {
	sentAt, held := r.now(), *r.held
	l, err := r.leaseCall(ctx, func(ctx context.Context) (lease.Lease, error) {
		return r.cfg.LeaseStore.Checkpoint(ctx, held, seq)
	})
	if err == nil {
		r.metrics.Count(CountCheckpoints, 1)
		r.saved = seq
		r.renewedWith(l, sentAt)
		// The checkpoint proved this owner alive as a renewal would have (it moved the
		// counter, conditioned on owner and generation): the next renewal is due an interval
		// after it, so that a busy shard does not pay for both.
		if next := sentAt.Add(r.cfg.LeaseRenewInterval); next.After(r.renewAt) {
			r.renewAt = next
		}
		return nil
	}
	r.metrics.Count(CountCheckpointFailures, 1)
	if stop := r.stopOn("checkpointing", err); stop != nil {
		return stop
	}
	// As a failed renewal (logRenewFailed): it costs nothing if a later write succeeds before
	// the stop point, and the pause that follows if none does is the WARN. Past the stop point
	// the pause says so; while paused, each retry is DEBUG.
	fields := r.LogFields().Add(watermill.LogFields{"sequence_number": seq, "err": err})
	switch {
	case errors.Is(err, errLeaseStale):
	case r.paused:
		r.cfg.Logger.Debug("Writing a checkpoint failed while paused; will retry", fields)
	default:
		r.cfg.Logger.Info("Writing a checkpoint failed; will retry", fields)
	}
	return nil
}

// finish writes SHARD_END once the shard is read to its end and every record is acked. While
// the lease is held, a failure is retried with backoff like any other write: the reader keeps
// renewing meanwhile, and an outage that ends before anyone may take the lease costs no
// redelivery. (Tried once on the way out, a failed SHARD_END made the next owner deliver the
// whole shard's tail again: 233 records in one run.)
func (r *Reader) finish() error {
	err := r.checkpoint(r.ctx)
	if err != nil || r.saved == lease.ShardEnd {
		r.finishFailures = 0
		return err
	}
	r.finishFailures++
	r.finishRetry = r.now().Add(awscall.Backoff(r.finishFailures-1, 100*time.Millisecond, r.cfg.LeaseRenewInterval))
	return nil
}

// handOver gives the lease to the worker that asked for it: the revoked hook, the checkpoint
// of what was acked, then the conditional handoff. Messages still unsettled (the owner waited
// up to half of HandoffTimeout) are redelivered by the new owner. If nobody is waiting for the
// lease any more, the reader simply goes on.
func (r *Reader) handOver() error {
	r.revokeOnce()
	r.settleAll(r.now())
	if err := r.checkpoint(r.ctx); err != nil {
		return err
	}
	l, err := r.leaseCall(r.ctx, func(ctx context.Context) (lease.Lease, error) {
		return r.cfg.LeaseStore.Handoff(ctx, *r.held)
	})
	switch {
	case err == nil:
		r.cfg.Logger.Info("Lease handed over", r.LogFields().Add(watermill.LogFields{"to": l.Owner}))
		r.metrics.Count(CountHandedOver, 1)
		r.held, r.handedTo = nil, l.Owner
		return nil
	case errors.Is(err, lease.ErrNoPendingOwner):
		// Nobody waits for the lease any more: go on delivering. The application was told
		// the shard was revoked, so it is told it has the shard again.
		r.handingOff = false
		if r.revoked {
			r.revoked = false
			r.hook(r.cfg.Hooks.OnAcquired)
		}
		return nil
	}
	if stop := r.stopOn("handing over", err); stop != nil {
		return stop
	}
	logs.Warn(r.cfg.Logger, "Handing over the lease failed; will retry", err, r.LogFields())
	r.handoffRetry = r.now().Add(r.cfg.LeaseRenewInterval)
	return nil
}

// revokeOnce calls Hooks.OnRevoked, once per reader: a handoff that is retried, or a Close
// after a handoff attempt, does not revoke the shard again.
func (r *Reader) revokeOnce() {
	if !r.revoked {
		r.revoked = true
		r.hook(r.cfg.Hooks.OnRevoked)
	}
}

// giveUp writes the final checkpoint (SHARD_END if the shard is done) and releases the lease,
// on a context of its own since the reader's is usually cancelled by now. Half of
// CloseTimeout bounds it, so that Close still returns in time, with every channel closed,
// when the store hangs.
func (r *Reader) giveUp(reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.CloseTimeout/2)
	defer cancel()
	r.revokeOnce()
	r.settleAll(r.now()) // the hook may have acked
	if seq := r.checkpointTarget(); seq != "" && seq != r.saved {
		l, err := r.cfg.LeaseStore.Checkpoint(ctx, *r.held, seq)
		switch {
		case errors.Is(err, lease.ErrLeaseLost):
			r.logLost(fmt.Errorf("final checkpoint: %w", err))
			return
		case err != nil:
			r.metrics.Count(CountCheckpointFailures, 1)
			logs.Warn(r.cfg.Logger, "Final checkpoint failed; the next owner will redeliver since the last one", err,
				r.LogFields().Add(watermill.LogFields{"sequence_number": seq}))
		default:
			r.metrics.Count(CountCheckpoints, 1)
			r.held, r.saved = &l, seq
		}
	}
	_, err := r.cfg.LeaseStore.Release(ctx, *r.held)
	switch {
	case err == nil:
		r.cfg.Logger.Info("Lease released", r.LogFields().Add(watermill.LogFields{"reason": reason, "checkpoint": r.saved}))
		r.metrics.Count(CountReleased, 1)
	case errors.Is(err, lease.ErrLeaseLost):
		r.logLost(err)
	default:
		logs.Warn(r.cfg.Logger, "Releasing the lease failed; another worker takes it once it expires", err, r.LogFields())
	}
}

// Why a reader releases its lease, in the "Lease released" log line.
const (
	ReleaseShardFinished = "shard finished (SHARD_END written)"
	releaseClosing       = "subscription closing"
	releaseStopped       = "reader stopped"
)
