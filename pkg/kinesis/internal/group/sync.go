package group

import (
	"errors"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// launch starts readers for the shards this subscription should read and has not started yet.
func (c *Subscription) launch() ([]*shard.Reader, error) {
	if c.grouped() {
		return c.leaseSync()
	}
	return c.startUnleased(), nil
}

// leaseSync is one lease sync: read the members, list the leases if listDue says so, decide
// and act. It returns the readers it started.
//
// A take or request that another worker won (workers acting on one listing at once: the
// survivors of a crash, newcomers joining together) is followed at once by a second pass on a
// fresh listing, which finds what is still free or askable: left to the next lease sync, the
// loser stayed below its share while the winner was at its own, and evening that out took a
// handoff (the 4,000-shard crash of the scale run was even 4 s after every shard was read
// again).
func (c *Subscription) leaseSync() ([]*shard.Reader, error) {
	c.readMembers()
	var started []*shard.Reader
	for pass := 0; pass < 2; pass++ {
		now := time.Now()
		v := c.view(now)
		if pass > 0 || listDue(c.listing(v)) {
			if err := c.refreshLeases(); err != nil {
				c.leases.soon = true // what made it due (a member gone, say) is not seen twice
				return started, err
			}
			c.leases.soon = false
			v = c.view(now)
			v.listed = true
		}
		if c.confirmForeign(now) {
			c.yieldToForeign()
			return started, nil
		}
		more, lostRace := c.act(decide(v))
		started = append(started, more...)
		if !lostRace {
			break
		}
	}
	return started, nil
}

// listing gathers what listDue looks at, from the view of the sync.
func (c *Subscription) listing(v view) listing {
	now := v.now
	alive := c.aliveMembers(now)
	next, ok := nextExpiry(v, func(w string) bool { return slices.Contains(alive, w) })
	return listing{
		now: now, listedAt: c.leases.listedAt, maxAge: c.listMaxAge(), soon: c.leases.soon,
		noMembers: c.members.store == nil, foreign: c.foreignW.held,
		aliveAtList: c.leases.aliveAtList, aliveNow: alive, expiry: ok && !now.Before(next),
	}
}

// armExpiry sets the expiry timer to the next expiry of a lease of a worker that is not alive
// (nextExpiry), when that is still to come. One that has passed already is the next lease
// sync's to list (listDue): a timer set for it again after a listing that failed would fire at
// once, and again, for as long as the store is down.
func (c *Subscription) armExpiry(expiry *time.Timer) {
	expiry.Stop()
	if !c.grouped() {
		return
	}
	now := time.Now()
	alive := c.aliveMembers(now)
	if next, ok := nextExpiry(c.view(now), func(w string) bool { return slices.Contains(alive, w) }); ok && next.After(now) {
		expiry.Reset(next.Sub(now))
	}
}

// view is what the coordinator knows now, for decide.
func (c *Subscription) view(now time.Time) view {
	v := view{
		now: now, self: c.cfg.WorkerID, listedAt: c.leases.listedAt, members: c.liveMembers(now),
		expiresAt: map[string]time.Time{}, eligible: map[string]bool{}, reading: map[string]int64{},
		asked: c.asked, takeAskedAfter: handoffTakeAfter(c.cfg),
	}
	for _, id := range sortedKeys(c.leases.byShard) {
		l := c.leases.byShard[id]
		v.leases = append(v.leases, l)
		if at, ok := c.expiresAt(l); ok && l.Owner != c.cfg.WorkerID {
			v.expiresAt[id] = at
		}
		if c.eligible(l) {
			v.eligible[id] = true
		}
	}
	for id, e := range c.readers.byShard {
		v.reading[id] = e.r.Generation()
	}
	return v
}

// act carries a plan out and returns the readers it started, and whether a take or request
// failed because the lease had moved on (another worker was first).
func (c *Subscription) act(p plan) (started []*shard.Reader, lostRace bool) {
	for _, l := range p.lost {
		c.readers.get(l.ShardID).MarkLost(l.Owner)
	}
	for _, id := range p.handOver {
		c.readers.get(id).RequestHandoff()
	}
	for _, l := range p.release {
		c.releaseFinished(l, shard.ReleaseShardFinished)
	}
	for _, l := range p.releaseIdle {
		c.releaseFinished(l, releaseNotReadable)
	}
	c.asked = p.asked
	for _, t := range p.take {
		r, err := c.take(t)
		if r != nil {
			started = append(started, r)
		}
		lostRace = lostRace || errors.Is(err, lease.ErrLeaseChanged)
	}
	owners := map[string]bool{}
	for _, l := range p.ask {
		err := c.ask(l)
		if err == nil {
			owners[l.Owner] = true
		}
		lostRace = lostRace || errors.Is(err, lease.ErrLeaseChanged)
	}
	if len(owners) > 0 {
		// The owners hand over once they see the requests: at their next heartbeat with a
		// notice, rather than at their readers' next renewals.
		ctx, cancel := c.callContext()
		c.notify(ctx, sortedKeys(owners))
		cancel()
	}
	c.leases.soon = c.leases.soon || p.unsettled
	return started, lostRace
}

// takeReasonCodes are the reasons of a take as the kinesis.lease.reason metric attribute.
var takeReasonCodes = map[string]string{
	takeFree: "free", takeExpired: "expired", takeHandedOver: "handed_over", takeOverdue: "handoff_timeout", takeOwnIdle: "restarted",
}

// take takes one lease and starts its reader; nil if the take failed (err says why), or if this
// subscription still has a reader of the shard (one that is stopping: the lease is taken at a
// later sync, once its exit report is in).
func (c *Subscription) take(t takeStep) (*shard.Reader, error) {
	l := t.lease
	if c.readers.has(l.ShardID) {
		return nil, nil
	}
	takenAt := time.Now()
	ctx, cancel := c.callContext()
	taken, err := c.cfg.LeaseStore.Take(ctx, l, c.cfg.WorkerID)
	cancel()
	if err != nil {
		c.cfg.Logger.Debug("Lease not taken", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		c.leases.soon = true
		return nil, err
	}
	delete(c.asked, l.ShardID)
	c.leases.byShard[l.ShardID] = taken
	fields := c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "generation": taken.Generation, "reason": t.why})
	if t.from != "" {
		fields["from"] = t.from
	}
	c.cfg.Logger.Info("Lease taken", fields)
	m := c.cfg.Metrics.ForShard(l.ShardID)
	m.LeaseAcquired(takeReasonCodes[t.why])
	r := c.startReader(l.ShardID, c.startOf(taken), &taken, takenAt)
	if r == nil {
		m.Count(shard.CountLeasesHeld, -1) // no reader holds it: the lease expires
	}
	return r, nil
}

// ask makes this worker the pending owner of a lease of a worker above its share.
func (c *Subscription) ask(l lease.Lease) error {
	ctx, cancel := c.callContext()
	asked, err := c.cfg.LeaseStore.RequestHandoff(ctx, l, c.cfg.WorkerID)
	cancel()
	if err != nil {
		c.cfg.Logger.Debug("Handoff not requested", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		c.leases.soon = true
		return err
	}
	c.cfg.Logger.Debug("Asked for a lease to even out the group", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "owner": l.Owner}))
	c.leases.byShard[l.ShardID] = asked
	c.asked[l.ShardID] = handoffAsk{at: time.Now(), owner: l.Owner}
	return nil
}

// releaseNotReadable is why a lease held under this worker's id with no reader is released
// when it may not be read yet (plan.releaseIdle).
const releaseNotReadable = "held under this worker's id with no reader, and not to be read before its parents are finished"

// releaseFinished releases a lease of ours that no reader of ours holds: one at SHARD_END whose
// reader could not release it (the store failed at that moment), so that the lease table shows
// no owner for a finished shard, or one not to be read yet (plan.releaseIdle). A failure is
// left to the next sync.
func (c *Subscription) releaseFinished(l lease.Lease, why string) {
	ctx, cancel := c.callContext()
	defer cancel()
	released, err := c.cfg.LeaseStore.Release(ctx, l)
	if err != nil {
		c.cfg.Logger.Debug("Finished shard's lease not released", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		return
	}
	c.cfg.Logger.Info("Lease released", c.logFields().Add(watermill.LogFields{
		"shard": l.ShardID, "generation": l.Generation, "reason": why, "checkpoint": l.Checkpoint}))
	c.cfg.Metrics.ForShard(l.ShardID).Count(shard.CountReleased, 1)
	c.leases.byShard[l.ShardID] = released
}

// handoffTakeAfter is how long after asking for a lease a worker takes it itself:
// HandoffTimeout, but never before LeaseDuration has passed since the request. An owner whose
// last successful renewal came before the request has stopped delivering by then (at its stop
// point, 0.8 × LeaseDuration, with the same margin for clock rates as an expiry has); one whose
// renewal came after it saw the request in that renewal and stopped sending. So the taker never
// reads the shard while the owner still delivers, whatever HandoffTimeout is set to.
func handoffTakeAfter(cfg Config) time.Duration {
	return max(cfg.HandoffTimeout, cfg.LeaseDuration)
}

// listMaxAge is how long this worker goes without listing the leases when nothing else makes
// a listing due: 30 lease syncs (a minute at the defaults), or LeaseDuration on a table shared
// with foreign workers (lease.ForeignTable), whose takes of free leases nothing announces. This
// listing finds what nothing announces: a lease whose reader stopped renewing while its worker
// goes on heartbeating, and leases a reshard made that another worker created.
func (c *Subscription) listMaxAge() time.Duration {
	if c.foreignW.shared {
		return min(c.cfg.LeaseDuration, 30*c.cfg.LeaseSyncInterval)
	}
	return 30 * c.cfg.LeaseSyncInterval
}
