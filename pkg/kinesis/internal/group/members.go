package group

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Membership only counts. Each member heartbeats its own record (lease.Membership) twice per
// lease sync on a goroutine of its own, and reads every member record at every lease sync.
// A record counts for the fair shares until its counter has stood still for memberFresh on
// the reader's clock (a record seen for the first time counts from then: it may be that of a
// worker starting with this one); one whose counter has stood still for missedBeat has missed
// a heartbeat, and the leases are listed then, so that the expiry of its leases is timed from
// their last counters. Neither ever makes a lease takeable or stops a reader: that is the
// lease's counter, owner and generation alone (decide.go).
//
// Notices (lease.Membership.NotifyMember) make a member look at the leases at once rather
// than at its next lease sync: a worker asking for a lease tells its owner, and a worker
// leaving tells the members most likely to take what it released. The member sees the notice
// in what its next heartbeat returns. They buy the measured handoff and leave times
// (docs/consumer-groups.md); without them a change waits for the next lease sync.

// memberView is this member's record and what it saw of the others'.
//
// Ownership: seen is the coordinator goroutine's. last is written by the first heartbeat (on
// Subscribe's goroutine, before beat starts), then by the heartbeat goroutine (beat) alone, and
// read by leave once beat has ended (done); notice is sent on by beat (never closed), and done
// is closed by beat when it ends.
type memberView struct {
	store  lease.Membership // nil: the store keeps no member records
	seen   tracker          // every record at the last read
	last   lease.Member     // this member's record as the last heartbeat that succeeded left it
	notice chan struct{}    // buffered (1): a heartbeat showed Notices moved
	done   chan struct{}
}

// init makes the view of a store that keeps member records, or of one that does not.
func (v *memberView) init(store lease.Store) {
	v.seen = tracker{}
	if m, ok := store.(lease.Membership); ok {
		v.store, v.notice = m, make(chan struct{}, 1)
	}
}

// heartbeatInterval is how often a member heartbeats: twice per lease sync, so that a member
// read once per sync that shows no move has missed one (missedBeat), but never more often than
// minHeartbeatInterval.
func heartbeatInterval(cfg Config) time.Duration {
	return max(cfg.LeaseSyncInterval/2, minHeartbeatInterval)
}

// minHeartbeatInterval is the shortest heartbeat interval, reached with LeaseSyncInterval under
// 500 ms (the universal test suite's 100 ms): every member's heartbeats go to one partition key,
// and 50 members at 20 writes a second each would load it with 1,000, all DynamoDB serves.
const minHeartbeatInterval = 250 * time.Millisecond

// missedBeat is how long a member's counter may stand still before the others list the leases:
// one and a half heartbeat intervals.
func missedBeat(cfg Config) time.Duration { return 3 * heartbeatInterval(cfg) / 2 }

// memberFresh is how long a member's counter may stand still before it stops counting for the
// shares: six heartbeat intervals (three lease syncs), at most LeaseDuration, so that a worker
// that stopped never holds the others below their share by the time its leases expire.
func memberFresh(cfg Config) time.Duration {
	return min(cfg.LeaseDuration, 6*heartbeatInterval(cfg))
}

// staleMemberAfter is how long a record may stand still before a member removes it: long past
// the point where it stopped counting, so that a member slowed down rather than gone is not
// removed under its feet (its next heartbeat would write the record again anyway).
func staleMemberAfter(cfg Config) time.Duration { return 6 * cfg.LeaseDuration }

// startHeartbeat writes the first heartbeat, so that the others count this worker from their
// next lease sync, and starts beat; it does nothing once beat runs, or without a membership
// store. A failure is beat's to retry.
func (c *Subscription) startHeartbeat() {
	if c.members.store == nil || c.members.done != nil {
		return
	}
	if err := c.heartbeatOnce(); err != nil {
		c.cfg.Logger.Info("Member heartbeat failed; will retry", c.logFields().Add(watermill.LogFields{"err": err}))
	}
	c.members.done = make(chan struct{})
	go c.beat()
}

// beat is the heartbeat goroutine. It ends with the subscription's context and then closes
// members.done. A heartbeat that keeps failing is logged once at WARN: this worker keeps its
// shards by renewing their leases, and the lease syncs, which meet the same store, report a
// store that is down.
func (c *Subscription) beat() {
	defer close(c.members.done)
	tick := time.NewTicker(heartbeatInterval(c.cfg))
	defer tick.Stop()
	fails := 0
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}
		err := c.heartbeatOnce()
		switch {
		case err == nil:
			fails = 0
		case c.ctx.Err() != nil:
			return
		default:
			fails++
			fields := c.logFields().Add(watermill.LogFields{"failures": fails})
			if fails == awscall.FailuresBeforeError {
				logs.Warn(c.cfg.Logger, "Member heartbeat keeps failing; this worker keeps its shards by renewing their leases", err, fields)
			} else {
				c.cfg.Logger.Debug("Member heartbeat failed; will retry", fields.Add(watermill.LogFields{"err": err}))
			}
		}
	}
}

// heartbeatOnce writes the member record once, bounded by RequestTimeout, and has run make a
// lease sync at once when the record's Notices moved since the last heartbeat.
func (c *Subscription) heartbeatOnce() error {
	ctx, cancel := c.callContext()
	defer cancel()
	got, err := c.members.store.Heartbeat(ctx, lease.Member{Group: c.cfg.Group, Stream: c.cfg.Stream, Worker: c.cfg.WorkerID})
	if err != nil {
		return err
	}
	prev := c.members.last
	c.members.last = got
	switch {
	case prev.Counter == 0:
		c.cfg.Logger.Info("Joined the group: member record written", c.logFields())
	case got.Notices != prev.Notices:
		select {
		case c.members.notice <- struct{}{}:
		default: // a lease sync is due already
		}
	}
	return nil
}

// readMembers reads every member record, for the lease sync that follows. A failure is logged,
// makes the sync list the leases (it may hide a change), and leaves the last read in place.
func (c *Subscription) readMembers() {
	if c.members.store == nil {
		return
	}
	ctx, cancel := c.callContext()
	records, err := c.members.store.Members(ctx, c.cfg.Group, c.cfg.Stream)
	cancel()
	if err != nil {
		c.cfg.Logger.Debug("Reading the group's members failed", c.logFields().Add(watermill.LogFields{"err": err}))
		c.leases.soon = true
		return
	}
	now := time.Now()
	c.lastLeaseSync.Store(now.UnixNano())
	c.members.seen.observeMembers(records, now)
	c.removeStaleMember(now)
}

// liveMembers are the members counted for the shares: this one, and those whose counter has not
// stood still for memberFresh. Nil without member records.
func (c *Subscription) liveMembers(now time.Time) []string {
	return c.membersMoving(now, memberFresh(c.cfg))
}

// aliveMembers are the members that have not missed a heartbeat: a lease of another worker is
// watched for its expiry (nextExpiry), and one gone since the last listing lists again, unless
// its owner is among them.
func (c *Subscription) aliveMembers(now time.Time) []string {
	return c.membersMoving(now, missedBeat(c.cfg))
}

func (c *Subscription) membersMoving(now time.Time, within time.Duration) []string {
	if c.members.store == nil {
		return nil
	}
	moving := []string{c.cfg.WorkerID}
	for w := range c.members.seen {
		if w != c.cfg.WorkerID && !c.members.seen.still(w, now, within) {
			moving = append(moving, w)
		}
	}
	slices.Sort(moving)
	return moving
}

// removeStaleMember removes, on the first live member in name order alone, one record a
// lease sync that has stood still for staleMemberAfter: a crashed worker's record would
// otherwise stay for good, and every member reads every record.
func (c *Subscription) removeStaleMember(now time.Time) {
	if live := c.liveMembers(now); len(live) == 0 || live[0] != c.cfg.WorkerID {
		return
	}
	for _, w := range sortedKeys(c.members.seen) {
		if w == c.cfg.WorkerID || !c.members.seen.still(w, now, staleMemberAfter(c.cfg)) {
			continue
		}
		m := lease.Member{Group: c.cfg.Group, Stream: c.cfg.Stream, Worker: w, Counter: c.members.seen[w].counter}
		ctx, cancel := c.callContext()
		err := c.members.store.RemoveMember(ctx, m)
		cancel()
		switch {
		case err == nil:
			c.cfg.Logger.Info("Removed the member record of a member long gone", c.logFields().Add(watermill.LogFields{"member": w}))
		case !errors.Is(err, lease.ErrMemberChanged):
			c.cfg.Logger.Debug("Removing a member record failed", c.logFields().Add(watermill.LogFields{"member": w, "err": err}))
		}
		return
	}
}

// leave removes this member's record as the subscription closes, once its readers have
// released their leases, and tells the members most likely to take them (notifyHeirs). A
// heartbeat cut short by the close may have landed, so a removal refused for a moved counter is
// tried once more with the record read back. The calls run on a context of their own (the
// subscription's is cancelled by now), bounded by CloseTimeout/4, after the readers' last
// writes (CloseTimeout/2), so that Close still returns within CloseTimeout.
func (c *Subscription) leave() {
	me := c.members.last // beat has ended (shutdown waited for it)
	if !c.grouped() || me.Counter == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.CloseTimeout/4)
	defer cancel()
	err := c.members.store.RemoveMember(ctx, me)
	if errors.Is(err, lease.ErrMemberChanged) {
		var records []lease.Member
		if records, err = c.members.store.Members(ctx, c.cfg.Group, c.cfg.Stream); err == nil {
			for _, m := range records {
				if m.Worker == c.cfg.WorkerID {
					err = c.members.store.RemoveMember(ctx, m)
				}
			}
		}
	}
	if err != nil {
		logs.Warn(c.cfg.Logger, "Member record not removed on close; the others count this worker out a few lease syncs later", err, c.logFields())
		return
	}
	c.cfg.Logger.Info("Left the group: member record removed", c.logFields())
	released := 0
	for _, l := range c.leases.byShard {
		if l.Owner == c.cfg.WorkerID {
			released++
		}
	}
	c.notifyHeirs(ctx, released)
}

// releaseHandedOver, as the subscription closes with requests of its own pending, releases the
// leases that were handed over to it meanwhile (its own, with no reader now), so that the
// others find them free rather than waiting for them to expire. A request still pending then
// may yet be handed over to this worker, which is gone: that lease expires as a crashed
// worker's does. Bounded by CloseTimeout/8, on a context of its own.
func (c *Subscription) releaseHandedOver() {
	if len(c.asked) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.CloseTimeout/8)
	defer cancel()
	list, err := c.cfg.LeaseStore.List(ctx, c.cfg.Group, c.cfg.Stream)
	if err != nil {
		c.cfg.Logger.Debug("Listing the leases on close failed", c.logFields().Add(watermill.LogFields{"err": err}))
		return
	}
	for _, l := range list {
		if l.Owner != c.cfg.WorkerID || l.Foreign {
			continue
		}
		if _, err := c.cfg.LeaseStore.Release(ctx, l); err == nil {
			c.cfg.Metrics.ForShard(l.ShardID).Count(shard.CountReleased, 1)
			c.cfg.Logger.Info("Lease released", c.logFields().Add(watermill.LogFields{
				"shard": l.ShardID, "generation": l.Generation, "reason": "subscription closing (handed over as it closed)", "checkpoint": l.Checkpoint}))
		}
	}
}

// notifyFree, after a shard end, tells the members most likely to take them of the leases its
// lease sync left free (the finished shard's children, when this worker is at its share):
// the others see new leases only in a listing, and a quiet group lists once a minute.
func (c *Subscription) notifyFree() {
	free := 0
	for _, l := range c.leases.byShard {
		if l.Free() && c.eligible(l) {
			free++
		}
	}
	ctx, cancel := c.callContext()
	defer cancel()
	c.notifyHeirs(ctx, free)
}

// notifyHeirs tells the live members holding the fewest leases, one per lease left free (n)
// and at most maxHeirNotices (many members may close at once, and every notice is a write on
// the member partition), so that they list the leases and take the free ones at their next
// heartbeat rather than at their next lease sync.
func (c *Subscription) notifyHeirs(ctx context.Context, n int) {
	held := map[string]int{}
	for _, l := range c.leases.byShard {
		held[l.Owner]++
	}
	var heirs []string
	for _, w := range c.liveMembers(time.Now()) {
		if w != c.cfg.WorkerID {
			heirs = append(heirs, w)
		}
	}
	slices.SortStableFunc(heirs, func(a, b string) int { return held[a] - held[b] })
	c.notify(ctx, heirs[:min(n, len(heirs), maxHeirNotices)])
}

// maxHeirNotices bounds the notices of one Close: 10 instances closing together at 4,000 shards,
// each telling all 49 others, made 652 writes in one second on the member partition.
const maxHeirNotices = 8

// notify sends a notice to each worker on ctx, stopping at the first failure: the workers learn
// of the change at their next lease sync anyway.
func (c *Subscription) notify(ctx context.Context, workers []string) {
	if c.members.store == nil {
		return
	}
	for _, w := range workers {
		if err := c.members.store.NotifyMember(ctx, lease.Member{Group: c.cfg.Group, Stream: c.cfg.Stream, Worker: w}); err != nil {
			c.cfg.Logger.Debug("Sending a notice to a member failed", c.logFields().Add(watermill.LogFields{"member": w, "err": err}))
			return
		}
	}
}

// stopHeartbeat waits for beat to end (the subscription's context is cancelled by now).
func (c *Subscription) stopHeartbeat() {
	if c.members.done != nil {
		<-c.members.done
	}
}
