package group

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// memberChanges are what makes this worker list the leases when it moves: the other members'
// lease.Member.Changes as last read, for a reader of all; for another member, the Changes of
// the records it read at this sync and the leader's Seen (the sum of everyone's), under "".
func (c *Subscription) memberChanges() map[string]int64 {
	ch := map[string]int64{}
	for _, m := range c.members.Observed() {
		if m.Worker != c.cfg.WorkerID && (c.readsAll || c.readSet[m.Worker]) {
			ch[m.Worker] = m.Changes
		}
	}
	if !c.readsAll {
		ch[""] = c.leaderSeen
	}
	return ch
}

// memberRecords are the workers whose member records the last member read showed, live or not:
// a record that appears or goes (a worker starting, or leaving after releasing its leases)
// lists the leases, also when the worker was never counted live.
func (c *Subscription) memberRecords() []string {
	var ws []string
	for _, m := range c.members.Observed() {
		ws = append(ws, m.Worker)
	}
	return ws
}

// newlyQuiet: a member other than this one, read at this sync, missed a heartbeat
// (quietMember) at a counter for which the leases have not been listed yet. Listing now sees its
// leases' last counters, so that, if it crashed, they expire LeaseDuration after its last writes
// were first seen, not after the next listing.
func (c *Subscription) newlyQuiet(now time.Time) bool {
	found := false
	for w := range c.quietListed {
		if !c.readSet[w] {
			delete(c.quietListed, w) // not read at this sync: judged by the leader, not here
		}
	}
	for _, w := range c.readNow {
		m, _ := c.members.Record(w)
		if w == c.cfg.WorkerID || !c.members.Quiet(w, now, quietMember(c.cfg)) {
			delete(c.quietListed, w)
			continue
		}
		if at, ok := c.quietListed[w]; !ok || at != m.Counter {
			c.quietListed[w] = m.Counter
			found = true
		}
	}
	return found
}

// aliveMembers are the members counted for the shares that have not missed a heartbeat (of
// those read at this sync: the others as the leader saw them).
func (c *Subscription) aliveMembers(now time.Time) map[string]bool {
	alive := map[string]bool{}
	for _, w := range c.liveMembers(now) {
		if !c.readSet[w] || !c.members.Quiet(w, now, quietMember(c.cfg)) {
			alive[w] = true
		}
	}
	return alive
}

// staleMembersAfter is how many lease durations a member record may go without a heartbeat
// before the group removes it: long past the point where it stopped counting, so that a member
// slowed down rather than gone is not removed under its feet (it would only heartbeat a new
// record anyway).
const staleMembersAfter = 6

// syncMembers reads the group's members, for the shares of the lease sync that follows and to
// see members that missed a heartbeat (newlyQuiet): all of them, or the leading ones and all
// only when the leader's roster changed (see roster.go). A failure is logged and the lease
// sync goes on with what the last read showed. The first live member in name order removes
// the records of members long gone, so that the table does not keep every worker that ever
// crashed (and, once the leases are listed, fences those gone: fenceGone). It returns the
// live members, for the shares.
func (c *Subscription) syncMembers() []string {
	full := c.fullReadDue()
	members, err := c.readMembers(full)
	if err != nil {
		c.cfg.Logger.Debug("Listing the group's members failed", c.logFields().Add(watermill.LogFields{"err": err}))
		c.listSoon = true
		c.publish(nil, false) // what it published is no longer its view: the others read for themselves
		return c.liveMembers(c.cfg.Clock.Now())
	}
	now := c.cfg.Clock.Now()
	c.lastLeaseSync.Store(now.UnixNano())
	if !full {
		c.members.ObserveSome(members, now)
		c.setReadNow(members)
		roster, seen, ok := c.leaderRoster(now)
		c.leaderSeen = seen
		if !ok || roster != c.rosterRead {
			// No leader publishes, or its roster is not the one this worker last read: read
			// them all now.
			if all, err := c.readMembers(true); err == nil {
				members, full = all, true
			}
		}
	}
	if full {
		c.members.Observe(members, now)
		c.setReadNow(members)
		c.rosterRead = rosterDigest(members)
		c.fullReads++
	}
	live := c.liveMembers(now)
	c.decideRole(live)
	c.publish(members, full)
	c.logMemberChanges(live, members)
	if !full || len(live) == 0 || live[0] != c.cfg.WorkerID {
		return live
	}
	// One record per sync: a backlog of them (DeleteItem denied for a while) must not hold
	// up the coordinator.
	if stale := c.members.Stale(c.cfg.Group, c.cfg.Stream, now, staleMembersAfter*c.cfg.LeaseDuration); len(stale) > 0 {
		c.removeMember(stale[0], "Removed the member record of a member long gone")
	}
	return live
}

// readMembers reads every member record, or the first leadingRead.
func (c *Subscription) readMembers(all bool) ([]lease.Member, error) {
	ctx, cancel := c.callContext()
	defer cancel()
	if all {
		return c.cfg.LeaseStore.Members(ctx, c.cfg.Group, c.cfg.Stream)
	}
	return c.cfg.LeaseStore.LeadingMembers(ctx, c.cfg.Group, c.cfg.Stream, leadingRead)
}

// setReadNow records which workers' records this sync read.
func (c *Subscription) setReadNow(records []lease.Member) {
	c.readNow = make([]string, len(records))
	c.readSet = make(map[string]bool, len(records))
	for i, m := range records {
		c.readNow[i] = m.Worker
		c.readSet[m.Worker] = true
	}
}

// memberFresh is how recently a member's heartbeat must have been seen to move for it to
// count for the shares: six heartbeat intervals (three lease syncs, unless minHeartbeatInterval
// spaces the heartbeats out), within the lease duration. A worker that stops is counted out
// well before its leases expire, so it never holds the others below their share when they come
// to take its leases.
func memberFresh(cfg Config) time.Duration {
	return min(cfg.LeaseDuration, 6*heartbeatInterval(cfg))
}

// removeMember removes a member record. A failure that is not a condition failure (DeleteItem
// not allowed, say) is logged at WARN once per subscription: records then stay until they go
// stale, which only makes shares uneven for a few lease syncs, but the table keeps them.
func (c *Subscription) removeMember(m lease.Member, done string) {
	ctx, cancel := c.callContext()
	err := c.cfg.LeaseStore.RemoveMember(ctx, m)
	cancel()
	switch {
	case err == nil:
		c.cfg.Logger.Info(done, c.logFields().Add(watermill.LogFields{"member": m.Worker}))
	case errors.Is(err, lease.ErrMemberChanged):
	case !c.warnedMembers:
		c.warnedMembers = true
		logs.Warn(c.cfg.Logger, "Removing a member record failed (is dynamodb:DeleteItem allowed on the lease table?); it stays until it goes stale", err,
			c.logFields().Add(watermill.LogFields{"member": m.Worker}))
	default:
		c.cfg.Logger.Debug("Removing a member record failed", c.logFields().Add(watermill.LogFields{"member": m.Worker, "err": err}))
	}
}

// leave removes this subscription's member record as it closes, once its readers have
// released their leases: the record going makes the others list the leases at their next
// lease sync and take the released ones. (Removed while the readers were still releasing, a
// listing in between showed the leaver's leases held, and the others then found them free only
// about a LeaseDuration later.) A heartbeat cut short by the close may have landed, so a
// removal refused for a moved counter is tried once more with the counter read back. The calls
// run on a context of their own (the subscription's is cancelled by now), bounded by
// CloseTimeout/4, after the readers' last writes (CloseTimeout/2), so that Close still returns
// within CloseTimeout.
func (c *Subscription) leave() {
	member := c.lastMember()
	if !c.grouped() || member.Counter == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.CloseTimeout/4)
	defer cancel()
	err := c.cfg.LeaseStore.RemoveMember(ctx, member)
	if errors.Is(err, lease.ErrMemberChanged) {
		var members []lease.Member
		if members, err = c.cfg.LeaseStore.Members(ctx, c.cfg.Group, c.cfg.Stream); err == nil {
			for _, m := range members {
				if m.Worker == c.cfg.WorkerID {
					err = c.cfg.LeaseStore.RemoveMember(ctx, m)
				}
			}
		}
	}
	if err != nil {
		logs.Warn(c.cfg.Logger, "Member record not removed on close; the others count this worker out a few lease syncs later", err, c.logFields())
		return
	}
	c.cfg.Logger.Info("Left the group: member record removed", c.logFields())
	c.notifyHeirs(ctx)
}

// notifyHeirs tells the members most likely to take this worker's released leases
// (lease.Store.NotifyMember): those holding the fewest, one per lease, at most maxHeirNotices (the
// calls are writes on the member partition, and many members may close at once). They see it
// in what their next heartbeat returns, read the members and list the leases at once, rather
// than a lease sync after the leader's roster shows this member gone; the others follow then.
func (c *Subscription) notifyHeirs(ctx context.Context) {
	held, mine := map[string]int{}, 0
	for _, l := range c.leases {
		switch l.Owner {
		case c.cfg.WorkerID:
			mine++
		case "":
		default:
			held[l.Owner]++
		}
	}
	var heirs []string
	for _, w := range c.liveMembers(c.cfg.Clock.Now()) {
		if w != c.cfg.WorkerID {
			heirs = append(heirs, w)
		}
	}
	slices.SortStableFunc(heirs, func(a, b string) int { return held[a] - held[b] })
	c.notify(ctx, heirs[:min(mine, len(heirs), maxHeirNotices)], "Telling a member of the leases released failed")
}
