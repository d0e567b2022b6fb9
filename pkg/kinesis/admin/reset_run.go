package admin

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// resetAttempts is how many times a reset tries to take a lease that changed since it listed
// it (renewed, taken, asked for) before it gives up on the reset.
const resetAttempts = 8

// kclExpiryMargin is added to KCLFailoverTime before a KCL worker's lease counts as given up.
const kclExpiryMargin = 2 * time.Second

// resetPollInterval is how often a reset lists the leases while it waits for owners to hand
// over (Settle) or to apply the reset (Wait).
const resetPollInterval = 100 * time.Millisecond

// run holds every lease to move, writes the position, and gives them back, in three passes,
// so that a failure before the writes leaves every shard where it was (and a failure after
// some writes is reported per shard: ShardReset.Generation is set once a lease is given back).
// A whole-stream reset lists the leases again after holding: a child a split made since the
// first listing, and read already, is moved too, so that no child goes on beside a parent
// read again.
//
// Whatever fails, the leases it holds or asked for are given back before it returns (with a
// context of their own: a cancelled reset must not leave leases under its id until they
// expire).
func (r *resetter) run(ctx context.Context, report *ResetReport, listed []lease.Lease) (err error) {
	r.owners, r.asked, r.tried = map[string]string{}, map[string]string{}, map[string]string{}
	byShard := map[string]lease.Lease{}
	for _, l := range listed {
		byShard[l.ShardID] = l
	}
	defer func() {
		if err != nil {
			giveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*r.cfg.RequestTimeout)
			defer cancel()
			r.cleanUp(giveCtx, report)
		}
	}()
	if r.cfg.Settle {
		if err := r.settle(ctx, report.Shards, byShard); err != nil {
			return err
		}
	}
	for i := range report.Shards {
		s := &report.Shards[i]
		if _, held := r.held[s.ShardID]; held || s.Action != ResetActionMove && s.Action != ResetActionCreate {
			continue // handed over (settle), or not moved
		}
		l, ok := byShard[s.ShardID]
		if err := r.hold(ctx, s, l, ok); err != nil {
			return err
		}
	}
	if err := r.holdLate(ctx, report); err != nil {
		return err
	}
	for _, s := range report.Shards {
		if _, held := r.held[s.ShardID]; held {
			if err := r.write(ctx, s.ShardID); err != nil {
				return err
			}
		}
	}
	for i := range report.Shards {
		if _, held := r.held[report.Shards[i].ShardID]; held {
			if err := r.giveBack(ctx, &report.Shards[i]); err != nil {
				return err
			}
		}
	}
	r.notifyOwners(ctx, report.Shards)
	return nil
}

// holdLate lists the leases again, for a whole-stream reset, and holds those the first
// listing did not have (a split's children), until a listing shows none new.
func (r *resetter) holdLate(ctx context.Context, report *ResetReport) error {
	if r.cfg.ShardID != "" {
		return nil // one shard is moved alone; its children go on
	}
	planned := map[string]bool{}
	for _, s := range report.Shards {
		planned[s.ShardID] = true
	}
	for round := 0; round < resetAttempts; round++ {
		leases, err := r.list(ctx)
		if err != nil {
			return err
		}
		found := false
		for _, l := range leases {
			if planned[l.ShardID] {
				continue
			}
			planned[l.ShardID], found = true, true
			report.Shards = append(report.Shards, ShardReset{ShardID: l.ShardID, State: ShardOpen, Parents: append([]string{}, l.Parents...),
				Action: ResetActionMove, Owner: l.Owner, From: l.Checkpoint})
			if err := r.hold(ctx, &report.Shards[len(report.Shards)-1], l, true); err != nil {
				return err
			}
		}
		if !found {
			return nil
		}
	}
	return nil
}

// cleanUp gives back, after a failure, every lease the reset holds or asked for: those it
// knows it holds, and, from a fresh listing, any under its id it does not know of (a take
// applied whose answer was lost) and any it asked for (Settle), which it takes and gives back
// to clear the request: otherwise the owner would hand the lease to an id nobody answers for.
func (r *resetter) cleanUp(ctx context.Context, report *ResetReport) {
	for i := range report.Shards {
		if _, held := r.held[report.Shards[i].ShardID]; held {
			_ = r.giveBack(ctx, &report.Shards[i]) // best effort: what is not given back expires
		}
	}
	leases, err := r.list(ctx)
	if err != nil {
		return
	}
	for _, l := range leases {
		owner := r.asked[l.ShardID]
		switch {
		case l.Owner == r.self:
			if owner == "" {
				owner = r.tried[l.ShardID]
			}
		case l.PendingOwner == r.self:
			owner = l.Owner
			callCtx, cancel := r.call(ctx)
			taken, err := r.cfg.LeaseStore.Take(callCtx, l, r.self)
			cancel()
			if err != nil {
				continue
			}
			l = taken
		default:
			continue
		}
		r.held[l.ShardID], r.owners[l.ShardID] = l, owner
		_ = r.giveBack(ctx, &ShardReset{ShardID: l.ShardID})
	}
}

// checkSequenceNumber asks Kinesis for an iterator at the sequence number of a one-shard
// reset: a number of another shard, or one that aged out, is refused now, naming the shard,
// rather than read by the group as a checkpoint past the trim horizon (from TRIM_HORIZON).
func (r *resetter) checkSequenceNumber(ctx context.Context) error {
	if r.cfg.To.Type != ResetToSequenceNumber && r.cfg.To.Type != ResetAfterSequenceNumber {
		return nil
	}
	callCtx, cancel := r.call(ctx)
	defer cancel()
	_, err := r.cfg.Client.GetShardIterator(callCtx, &awskinesis.GetShardIteratorInput{
		StreamName: aws.String(r.cfg.Stream), ShardId: aws.String(r.cfg.ShardID),
		ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String(r.cfg.To.SequenceNumber),
	})
	if err != nil {
		return r.errorf(r.cfg.ShardID, "Kinesis refuses sequence number %s on this shard (is it a record of another shard, or older than the stream's retention?): %w", r.cfg.To.SequenceNumber, err)
	}
	return nil
}

// hold takes the shard's lease under the reset's id (or creates it there), conditioned on what
// was observed: observed (ok false: no lease was listed). A lease the group deleted meanwhile
// (a finished parent) is created, and s.Action says so: its generations start again at 0.
func (r *resetter) hold(ctx context.Context, s *ShardReset, observed lease.Lease, ok bool) error {
	for attempt := 0; ; attempt++ {
		if v, seen := r.vetted[s.ShardID]; ok && observed.Foreign && observed.Owner != "" && (!seen || v.Owner != observed.Owner || v.Counter != observed.Counter) {
			return r.errorf(s.ShardID, "a KCL worker (%s) took the lease while the reset ran: stop the KCL application first", observed.Owner)
		}
		if ok && !observed.Foreign && observed.Owner != r.self {
			r.tried[s.ShardID] = observed.Owner
		}
		if err := otherReset(r.cfg, observed, r.self); ok && err != nil {
			return err // it began after this one listed: the one that holds a lease first goes on
		}
		callCtx, cancel := r.call(ctx)
		var l lease.Lease
		var err error
		if !ok {
			l, err = r.cfg.LeaseStore.Create(callCtx, lease.Lease{
				Group: r.cfg.ConsumerGroup, Stream: r.cfg.Stream, ShardID: s.ShardID,
				Owner: r.self, Checkpoint: r.to, Parents: s.Parents,
			})
		} else {
			l, err = r.cfg.LeaseStore.Take(callCtx, observed, r.self)
		}
		cancel()
		switch {
		case err == nil:
			r.held[s.ShardID] = l
			if !ok {
				s.Action = ResetActionCreate
			}
			switch {
			case ok && observed.Owner == r.self:
				if owner, asked := r.asked[s.ShardID]; asked { // handed over (Settle) after the last settle listing
					r.owners[s.ShardID], s.Settled = owner, true
				} else { // a take of ours applied whose answer was lost: back to the owner it fenced
					r.owners[s.ShardID] = r.tried[s.ShardID]
				}
			case ok && !observed.Foreign:
				r.owners[s.ShardID] = observed.Owner // "" for a free lease: released again
			}
			return nil
		case !errors.Is(err, lease.ErrLeaseChanged) && !errors.Is(err, lease.ErrLeaseNotFound) && !errors.Is(err, lease.ErrLeaseExists):
			return r.errorf(s.ShardID, "holding the lease to move it: %w", err)
		case attempt+1 >= resetAttempts:
			return r.errorf(s.ShardID, "the lease changed under the reset %d times in a row (renewed, taken or asked for between a listing and the take); run the reset again: %w", resetAttempts, err)
		}
		leases, lerr := r.list(ctx)
		if lerr != nil {
			return lerr
		}
		observed, ok = lease.Lease{}, false
		for _, l := range leases {
			if l.ShardID == s.ShardID {
				observed, ok = l, true
			}
		}
		if ok && observed.Foreign && observed.Owner != "" {
			return r.errorf(s.ShardID, "a KCL worker (%s) took the lease while the reset ran: stop the KCL application first", observed.Owner)
		}
	}
}

// write replaces the checkpoint of a lease the reset holds (one it created has it already).
func (r *resetter) write(ctx context.Context, shardID string) error {
	held := r.held[shardID]
	if held.Checkpoint == r.to && held.Owner == r.self && held.Generation == 0 {
		return nil // created at the position
	}
	callCtx, cancel := r.call(ctx)
	l, err := r.cfg.LeaseStore.Checkpoint(callCtx, held, r.to)
	cancel()
	if err != nil {
		return r.errorf(shardID, "writing the position %s: %w", r.to, err)
	}
	r.held[shardID] = l
	return nil
}

// giveBack hands a lease the reset holds to the worker that owned it (a take for that worker,
// in a new generation: it reads at the new position once its fenced reader has exited), or
// releases it. A handoff request that came in meanwhile moved the counter: the lease is
// listed again and, still the reset's, given back as listed.
func (r *resetter) giveBack(ctx context.Context, s *ShardReset) error {
	held := r.held[s.ShardID]
	owner := r.owners[s.ShardID]
	for attempt := 0; ; attempt++ {
		callCtx, cancel := r.call(ctx)
		var l lease.Lease
		var err error
		if owner != "" {
			l, err = r.cfg.LeaseStore.Take(callCtx, held, owner)
		} else {
			l, err = r.cfg.LeaseStore.Release(callCtx, held)
		}
		cancel()
		if err == nil {
			delete(r.held, s.ShardID)
			s.GivenTo, s.Generation = owner, l.Generation
			fields := r.fields(s.ShardID).Add(watermill.LogFields{"generation": l.Generation, "from": s.From, "to": l.Checkpoint, "owner": owner})
			r.cfg.Logger.Info("Lease reset", fields)
			return nil
		}
		if !errors.Is(err, lease.ErrLeaseChanged) || attempt+1 >= resetAttempts {
			return r.errorf(s.ShardID, "giving the lease back to %q: %w", owner, err)
		}
		leases, lerr := r.list(ctx)
		if lerr != nil {
			return lerr
		}
		i := slices.IndexFunc(leases, func(l lease.Lease) bool { return l.ShardID == s.ShardID })
		if i < 0 || leases[i].Owner != r.self || leases[i].Generation != held.Generation {
			return r.errorf(s.ShardID, "the lease was taken from the reset before it was given back (it is no longer the reset's)")
		}
		held = leases[i]
	}
}

// notifyOwners tells each worker a lease was given back to, when the store keeps member
// records, so that it looks at its leases at once rather than at its reader's next renewal.
// When a lease was released (free: its owner was gone, or it had none), every member is told:
// nothing else announces a free lease, and a quiet group would find it only at its periodic
// listing (30 lease syncs, a minute at the defaults).
func (r *resetter) notifyOwners(ctx context.Context, shards []ShardReset) {
	m, ok := r.cfg.LeaseStore.(lease.Membership)
	if !ok {
		return
	}
	tell := map[string]bool{}
	released := false
	for _, s := range shards {
		switch {
		case s.GivenTo != "":
			tell[s.GivenTo] = true
		case s.Action == ResetActionMove || s.Action == ResetActionCreate:
			released = true
		}
	}
	if released {
		callCtx, cancel := r.call(ctx)
		members, err := m.Members(callCtx, r.cfg.ConsumerGroup, r.cfg.Stream)
		cancel()
		if err == nil {
			for _, mb := range members {
				tell[mb.Worker] = true
			}
		}
	}
	for _, worker := range slices.Sorted(maps.Keys(tell)) {
		callCtx, cancel := r.call(ctx)
		// A failed notice costs time only: the owner's reader learns at its next renewal, the
		// others at their periodic listing.
		_ = m.NotifyMember(callCtx, lease.Member{Group: r.cfg.ConsumerGroup, Stream: r.cfg.Stream, Worker: worker})
		cancel()
	}
}
