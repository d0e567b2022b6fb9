package group

import (
	"errors"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Another worker's lease expires by whichever comes first:
//
//   - its own counter: unchanged for LeaseDuration since this worker first saw it in a listing
//     (lease.Tracker), as the KCL judges leases;
//   - its owner's heartbeats, when the lease carries the owner's incarnation
//     (lease.Lease.Incarnation): LeaseDuration after lease.MemberTracker.HeartbeatSince, once
//     the member record is fenced at the counter last read, so that no later heartbeat of
//     that incarnation can vouch for the lease again.
//
// The owner stops delivering at the earlier of its two stop points (shard.Reader.stopAt), so
// either may be used. The heartbeats are read at every lease sync, the leases rarely; a crashed
// owner's leases so expire LeaseDuration after its heartbeats stopped, as seen at the next sync
// (BeatsBehind heartbeats earlier, which takes that read's delay out), not after the listing
// that a missed heartbeat brings, two lease syncs later.

// expiredByHeartbeat reports whether l expired by its owner's heartbeats, and the owner's
// record as last read (for fenceOwner).
func (c *Subscription) expiredByHeartbeat(l lease.Lease, now time.Time) (lease.Member, bool) {
	at, m, ok := c.heartbeatExpiry(l)
	return m, ok && !now.Before(at)
}

// heartbeatExpiry is when l expires by its owner's heartbeats, with the owner's record as last
// read: when this worker first saw the record fenced at the lease's incarnation (the worker
// that fenced it waited LeaseDuration first, see fenceGone), or LeaseDuration after
// MemberTracker.HeartbeatSince where this worker reads the owner's record at every sync (those
// it does not read it cannot time). false for a lease of nobody, of this worker, or that no
// heartbeat vouches for.
func (c *Subscription) heartbeatExpiry(l lease.Lease) (time.Time, lease.Member, bool) {
	if l.Owner == "" || l.Owner == c.cfg.WorkerID || l.Incarnation == 0 {
		return time.Time{}, lease.Member{}, false
	}
	if seen, ok := c.members.FencedSince(l.Owner, l.Incarnation); ok {
		m, _ := c.members.Record(l.Owner)
		return seen, m, true
	}
	if !c.readSet[l.Owner] {
		return time.Time{}, lease.Member{}, false
	}
	since, m, ok := c.members.HeartbeatSince(l.Owner, l.Incarnation)
	return since.Add(c.cfg.LeaseDuration), m, ok
}

// fenceOwner fences the member record of an owner whose leases expired by its heartbeats, at
// the counter last read, before any of them is taken; false if it could not be (the heartbeat
// moved: the owner is alive after all, or the store failed), and the leases are not taken. One
// call per owner per lease sync: fenced remembers the answers.
//
// lead says whether this member is the group's leader (fenceGone), whose fence is one INFO line
// in the group's logs; any other member's (of a leading member whose heartbeats it timed
// itself) is DEBUG, so that a fence seen by many is logged once.
func (c *Subscription) fenceOwner(m lease.Member, fenced map[string]bool, lead bool) bool {
	if m.Fenced {
		return true
	}
	if ok, tried := fenced[m.Worker]; tried {
		return ok
	}
	m.Group, m.Stream = c.cfg.Group, c.cfg.Stream
	ctx, cancel := c.callContext()
	err := c.cfg.LeaseStore.FenceMember(ctx, m)
	cancel()
	fenced[m.Worker] = err == nil
	fields := c.logFields().Add(watermill.LogFields{"member": m.Worker, "incarnation": m.Incarnation, "counter": m.Counter})
	switch {
	case err == nil && lead:
		c.cfg.Logger.Info("Fenced a member whose heartbeat stood still for LeaseDuration: its leases may be taken", fields)
	case err == nil:
		c.cfg.Logger.Debug("Fenced a member whose heartbeat stood still for LeaseDuration: its leases may be taken", fields)
	case errors.Is(err, lease.ErrMemberChanged):
		c.cfg.Logger.Debug("Member not fenced: its heartbeat moved", fields)
		c.listSoon = true
	default:
		c.cfg.Logger.Debug("Fencing a member failed", fields.Add(watermill.LogFields{"err": err}))
		c.listSoon = true
	}
	return err == nil
}

// nextHeartbeatExpiry is the earliest time after now at which a lease of an owner watch selects
// expires by its owner's heartbeats, as last read; false if none will.
func (c *Subscription) nextHeartbeatExpiry(watch func(owner string) bool, now time.Time) (time.Time, bool) {
	var next time.Time
	found := false
	for _, l := range c.leases {
		if l.Owner == "" || !watch(l.Owner) {
			continue
		}
		if at, _, ok := c.heartbeatExpiry(l); ok && at.After(now) && (!found || at.Before(next)) {
			next, found = at, true
		}
	}
	return next, found
}

// expiredUnlisted: a lease of a worker that is not alive (counted out, quiet, or without a
// record), which this worker could take, expires now, by its own counter or by its owner's
// heartbeats, and the last listing was sent before that moment. It may have moved since: its
// owner's heartbeats may stall while its renewals succeed (a hot or throttled member
// partition, a hung call), and those renewals leave the heartbeats out (Lease.Incarnation 0).
// Listing first costs one read of the leases; taking on the old listing cost a failed write and
// a read for each lease, once per LeaseDuration, and fenced an owner that was still alive. A
// listing sent after the expiry that still showed the lease unchanged settles it: the lease is
// taken, not listed again at every sync (nor is one nobody may take: a finished or unlisted
// shard's). (The leases of a live member are judged only by a listing of the same sync.)
func (c *Subscription) expiredUnlisted(now time.Time) bool {
	alive := c.aliveMembers(now)
	for _, l := range c.leases {
		if l.Owner == "" || l.Owner == c.cfg.WorkerID || alive[l.Owner] || !c.eligible(l) {
			continue
		}
		if at, ok := c.expiresAt(l); ok && !now.Before(at) && c.leasesListedAt.Before(at) {
			return true
		}
	}
	return false
}

// expiresAt is when l expires by the earlier of its two clocks, as this worker has observed it.
func (c *Subscription) expiresAt(l lease.Lease) (time.Time, bool) {
	var at time.Time
	if since, ok := c.tracker.Since(l); ok {
		at = since.Add(c.cfg.LeaseDuration)
	}
	if byBeat, _, ok := c.heartbeatExpiry(l); ok && (at.IsZero() || byBeat.Before(at)) {
		at = byBeat
	}
	return at, !at.IsZero()
}
