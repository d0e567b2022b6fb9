package admin

// The waits of a reset: for owners to hand over (Settle), for KCL workers to show they are
// gone, and for owners to apply the reset (Wait).

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// settle asks each owner of a lease to move for a handoff to the reset, and waits up to
// SettleTimeout for them to hand over; the leases handed over are held. Those that are not
// (the owner is gone or slow, or another worker asked first) are taken by run as without
// Settle.
func (r *resetter) settle(ctx context.Context, shards []ShardReset, byShard map[string]lease.Lease) error {
	asked := map[string]string{} // shard -> owner asked
	for _, s := range shards {
		l, ok := byShard[s.ShardID]
		if s.Action != ResetActionMove || !ok || l.Free() || l.Foreign {
			continue
		}
		callCtx, cancel := r.call(ctx)
		_, err := r.cfg.LeaseStore.RequestHandoff(callCtx, l, r.self)
		cancel()
		if err == nil {
			asked[s.ShardID], r.asked[s.ShardID] = l.Owner, l.Owner
		}
	}
	owners := map[string]bool{}
	for _, o := range asked {
		owners[o] = true
	}
	for o := range owners {
		if m, ok := r.cfg.LeaseStore.(lease.Membership); ok {
			callCtx, cancel := r.call(ctx)
			_ = m.NotifyMember(callCtx, lease.Member{Group: r.cfg.ConsumerGroup, Stream: r.cfg.Stream, Worker: o})
			cancel()
		}
	}
	deadline := time.Now().Add(r.cfg.SettleTimeout)
	for len(asked) > 0 {
		leases, err := r.list(ctx)
		if err != nil {
			return err
		}
		for _, l := range leases {
			owner, ok := asked[l.ShardID]
			if !ok {
				continue
			}
			switch {
			case l.Owner == r.self:
				r.held[l.ShardID], r.owners[l.ShardID] = l, owner
				delete(asked, l.ShardID)
				for i := range shards {
					if shards[i].ShardID == l.ShardID {
						shards[i].Settled = true
					}
				}
			case l.PendingOwner != r.self:
				delete(asked, l.ShardID) // the request is gone (the lease changed hands): fence it
			}
			byShard[l.ShardID] = l
		}
		if len(asked) == 0 || !time.Now().Before(deadline) {
			return nil
		}
		r.renewHeld(ctx) // the group would take a lease whose counter stands still as expired
		if err := awscall.Sleep(ctx, resetPollInterval); err != nil {
			return err
		}
	}
	return nil
}

// renewHeld renews the leases the reset holds while it waits, so that no worker of the group
// takes one as expired. A failed renewal is left to the write, which then says the lease
// was lost.
func (r *resetter) renewHeld(ctx context.Context) {
	for id, l := range r.held {
		callCtx, cancel := r.call(ctx)
		if renewed, err := r.cfg.LeaseStore.Renew(callCtx, l); err == nil {
			r.held[id] = renewed
		}
		cancel()
	}
}

// checkForeign refuses a reset while a KCL worker is live on the table: it holds a lease whose
// counter moved within KCLFailoverTime. A reset takes the leases of KCL workers that are gone
// (their counters stood still that long) as a KCL worker would, and releases them.
func (r *resetter) checkForeign(ctx context.Context, leases []lease.Lease) error {
	first := map[string]lease.Lease{}
	for _, l := range leases {
		if l.Foreign && !l.Free() && r.moves(l.ShardID) {
			first[l.ShardID] = l
		}
	}
	r.vetted = first // those that move make the check below refuse the reset
	if len(first) == 0 {
		return nil
	}
	r.cfg.Logger.Info("Leases held by KCL workers: watching their counters before the reset", watermill.LogFields{
		"stream": r.cfg.Stream, "group": r.cfg.ConsumerGroup, "leases": len(first), "for": r.cfg.KCLFailoverTime})
	// As a group times a KCL worker's lease (group's foreignExpiryMargin): the KCL stops a
	// shard's consumer only at its next dispatch, up to a second or so after its lease expired.
	if err := awscall.Sleep(ctx, r.cfg.KCLFailoverTime+kclExpiryMargin); err != nil {
		return err
	}
	again, err := r.list(ctx)
	if err != nil {
		return err
	}
	for _, l := range again {
		was, ok := first[l.ShardID]
		if l.Foreign && !l.Free() && (!ok || l.Owner != was.Owner || l.Counter != was.Counter) {
			return fmt.Errorf("kinesis: resetting group %q on stream %q: KCL worker %q is live (it renewed the lease of shard %q within the last %s); stop every worker of the KCL application before a reset, which moves only leases no KCL worker holds",
				r.cfg.ConsumerGroup, r.cfg.Stream, l.Owner, l.ShardID, r.cfg.KCLFailoverTime)
		}
	}
	return nil
}

// moves: the reset moves this shard's lease.
func (r *resetter) moves(shardID string) bool { return r.cfg.ShardID == "" || r.cfg.ShardID == shardID }

// wait lists the leases until every moved shard is applied (taken after the reset, or read to
// its end already) or waits for its parents, or cfg.Wait is up, and fills in the report.
func (r *resetter) wait(ctx context.Context, shards []ShardReset) error {
	written := time.Now()
	deadline := written.Add(r.cfg.Wait)
	for {
		leases, err := r.list(ctx)
		if err != nil {
			return err
		}
		byShard := map[string]lease.Lease{}
		for _, l := range leases {
			byShard[l.ShardID] = l
		}
		pending := 0
		for i := range shards {
			s := &shards[i]
			if (s.Action != ResetActionMove && s.Action != ResetActionCreate) || s.AppliedBy != "" {
				continue
			}
			l, ok := byShard[s.ShardID]
			switch {
			case !ok || l.Checkpoint == lease.ShardEnd:
				s.AppliedBy, s.AppliedAfter, s.Waiting = "(read to its end)", time.Since(written), ""
			case l.Generation > s.Generation && l.Owner != "":
				s.AppliedBy, s.AppliedAfter, s.Waiting = l.Owner, time.Since(written), ""
			case waitsForParents(l, byShard):
				s.Waiting = "waits for its parents to be read to their end"
			case l.Free():
				s.Waiting, pending = "no worker has taken the lease yet (a stopped group applies the reset when it starts)", pending+1
			default:
				s.Waiting, pending = fmt.Sprintf("%s has not taken the lease again yet (its fenced reader stops at its next renewal)", l.Owner), pending+1
			}
		}
		if pending == 0 || !time.Now().Before(deadline) {
			return nil
		}
		if err := awscall.Sleep(ctx, resetPollInterval); err != nil {
			return err
		}
	}
}

// waitsForParents: a parent of the lease's shard has a lease not read to its end yet.
func waitsForParents(l lease.Lease, byShard map[string]lease.Lease) bool {
	for _, p := range l.Parents {
		if pl, ok := byShard[p]; ok && pl.Checkpoint != lease.ShardEnd {
			return true
		}
	}
	return false
}
