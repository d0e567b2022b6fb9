package group

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Who reads which member records, so that a group's reads of member state grow with its size,
// not with its square.
//
// The first allReaders live members in worker order (the leader and its deputy) read every
// member record at every lease sync, as every member once did. Every other member reads only
// the first leadingRead records (lease.Store.LeadingMembers), where the leader's and the
// deputy's are, and the others only when the leader says they changed:
//
//   - The readers of all publish, with their heartbeats, a digest of the records they read
//     (Member.Roster: workers, incarnations, fences) and the sum of their Changes
//     (Member.Seen). A member reads every record again when the leader's digest differs from
//     that of its own last full read (someone joined, left or was fenced), and lists the
//     leases when the leader's Seen moves (someone created, released or asked for leases).
//   - The leader fences a member whose heartbeat stood still for LeaseDuration
//     (fenceGone). A fenced record means, to everyone, that the leases relying on that
//     incarnation's heartbeats may be taken (expiredByHeartbeat): the leader waited
//     LeaseDuration on its own clock before fencing, the fence is before anyone reads it,
//     and no heartbeat of that incarnation succeeds after it. So only the readers of all
//     time every member's heartbeats; the others time only the leader's and the deputy's
//     (which they read at every sync), and take over as readers of all when those go.
//
// Per lease sync the group reads 2 × members + leadingRead × (members − 2) records, plus
// every record once per member after a change of membership. (Records that sort first and do
// not publish, dead ones not yet fenced or removed and legacy ones, leave fewer live leaders
// among the leading records; a member that finds none publishing reads them all, until the
// leader fences or removes them.) The cost: a member's Changes
// and a membership change reach the others one of the leader's lease syncs later, and a
// crash's leases are taken by members other than the leader up to a lease sync after the
// leader fenced it.
const (
	allReaders  = 2
	leadingRead = 4
)

// fullReadDue: this sync reads every member record. The first two reads of a subscription are
// full (the second is the one before its first plan, which must count everyone starting with
// it), and so are all of a member's reads while it is among the first allReaders live members,
// and the first after another member told it of a change (Member.Asked moved: a request for
// one of its leases, or leases released by a member that left and its record gone).
func (c *Subscription) fullReadDue() bool {
	soon := c.readAllSoon.Swap(false) // taken whatever else makes the read full
	return soon || c.fullReads < 2 || c.readsAll
}

// leaderRoster is the Roster published by the first member of the last leading read that is
// alive in this worker's view and publishes one (0 if none does): the leader, whose view of the
// records the others follow.
func (c *Subscription) leaderRoster(now time.Time) (roster, seen int64, ok bool) {
	for _, w := range c.readNow {
		m, known := c.members.Record(w)
		if !known || m.Fenced || m.Legacy || m.Roster == 0 || w == c.cfg.WorkerID || c.members.Quiet(w, now, memberFresh(c.cfg)) {
			continue
		}
		return m.Roster, m.Seen, true
	}
	return 0, 0, false
}

// rosterDigest is the digest of the records that a change of membership moves: the workers,
// their incarnations and fences (not the counters, which move at every heartbeat). Never 0,
// which means "none published".
func rosterDigest(records []lease.Member) int64 {
	h := fnv.New64a()
	for _, m := range records {
		h.Write([]byte(m.Worker))
		h.Write([]byte{0})
		h.Write(strconv.AppendInt(nil, m.Incarnation, 10))
		if m.Fenced {
			h.Write([]byte{1})
		}
		h.Write([]byte{0})
	}
	if d := int64(h.Sum64()); d != 0 {
		return d
	}
	return 1
}

// changesSum is the sum of the records' Changes: it moves whenever one of them does (each
// only grows) or a record goes.
func changesSum(records []lease.Member) int64 {
	var sum int64
	for _, m := range records {
		sum += m.Changes
	}
	return sum
}

// publish sets what this member's heartbeats publish after a full read (0 after a leading
// read: it reads not all), and writes a heartbeat at once when that changed, so that the
// others see it at their next lease sync.
func (c *Subscription) publish(records []lease.Member, full bool) {
	var roster, seen int64
	if full && c.readsAll {
		roster, seen = rosterDigest(records), changesSum(records)
	}
	if c.pubRoster.Swap(roster) != roster || c.pubSeen.Swap(seen) != seen {
		c.nudgeHeartbeat()
	}
}

// liveMembers are the members counted for the shares. A reader of all judges every member by
// its heartbeats (lease.MemberTracker.Live). Another member counts every record of its last
// full read that is neither fenced nor Legacy, except one it read at this sync whose heartbeat has not moved
// for memberFresh: the records it does not read it takes as the leader saw them, who fences
// those gone.
func (c *Subscription) liveMembers(now time.Time) []string {
	fresh := memberFresh(c.cfg)
	if c.readsAll {
		var live []string
		for _, w := range c.members.Live(now, fresh) {
			if m, _ := c.members.Record(w); !m.Fenced {
				live = append(live, w)
			}
		}
		return live
	}
	var live []string
	for _, m := range c.members.Observed() {
		if m.Fenced || m.Legacy || c.readSet[m.Worker] && m.Worker != c.cfg.WorkerID && c.members.Quiet(m.Worker, now, fresh) {
			continue
		}
		live = append(live, m.Worker)
	}
	return live
}

// decideRole makes this member a reader of all when it is among the first allReaders live
// members in its view.
func (c *Subscription) decideRole(live []string) {
	was := c.readsAll
	i := slices.Index(live, c.cfg.WorkerID)
	c.readsAll = i >= 0 && i < allReaders
	if was != c.readsAll {
		c.cfg.Logger.Debug("Member reads changed", c.logFields().Add(watermill.LogFields{"reads_all": c.readsAll}))
	}
}

// fenceGone fences, on the leader alone (a reader of all, first among the live), the records
// of members whose heartbeat stood still for LeaseDuration (lease.MemberTracker.HeartbeatSince):
// to the others, who do not time their heartbeats, the fence says that the leases relying on
// them may be taken, and that the member no longer counts. A member whose leases, as last
// listed, all go by their own counters (Lease.Incarnation 0: its heartbeats failed, its
// renewals did not) is left alone: it is alive, and counted by its leases.
func (c *Subscription) fenceGone(now time.Time, live []string) {
	if !c.readsAll || len(live) == 0 || live[0] != c.cfg.WorkerID {
		return
	}
	owns, relies := map[string]bool{}, map[string]bool{}
	for _, l := range c.leases {
		owns[l.Owner] = true
		if l.Incarnation != 0 {
			relies[l.Owner] = true
		}
	}
	fenced := map[string]bool{}
	for _, m := range c.members.Observed() {
		if m.Worker == c.cfg.WorkerID || m.Fenced || m.Incarnation == 0 || owns[m.Worker] && !relies[m.Worker] {
			continue
		}
		if since, rec, ok := c.members.HeartbeatSince(m.Worker, m.Incarnation); ok && now.Sub(since) >= c.cfg.LeaseDuration {
			c.fenceOwner(rec, fenced, true)
		}
	}
	c.notifyTakers(live, fenced)
}

// notifyTakers tells the live members below their quota once the members just fenced are
// counted out (lease.Store.NotifyMember), when a fence freed leases: they read the members and
// list at their next heartbeat and take the freed leases, rather than at their next lease sync
// after this member's roster shows the fence. At most one call per freed lease, and at most
// maxTakerNotices, those furthest below their quota first: the calls are writes on the member
// partition, where every heartbeat lands too; the rest learn of it from the roster. (The leader
// alone makes them, once per fence; with 8, crash failover of 400 leases in the scale run took
// 14.0 s instead of 9.8 s.)
func (c *Subscription) notifyTakers(live []string, fenced map[string]bool) {
	freed := 0
	for _, l := range c.leases {
		if fenced[l.Owner] { // true only for the fences that succeeded
			freed++
		}
	}
	if freed == 0 {
		return
	}
	var survivors []string
	for _, w := range live {
		if !fenced[w] {
			survivors = append(survivors, w)
		}
	}
	held, open := map[string]int{}, 0
	for _, l := range c.leases {
		if l.Checkpoint == lease.ShardEnd {
			continue
		}
		open++
		if slices.Contains(survivors, l.Owner) {
			held[l.Owner]++
		}
	}
	quotas := lease.Quotas(open, survivors, held)
	var takers []string
	for _, w := range survivors {
		if w != c.cfg.WorkerID && held[w] < quotas[w] {
			takers = append(takers, w)
		}
	}
	slices.SortStableFunc(takers, func(a, b string) int { return (held[a] - quotas[a]) - (held[b] - quotas[b]) })
	ctx, cancel := c.callContext()
	defer cancel()
	c.notify(ctx, takers[:min(len(takers), freed, maxTakerNotices)], "Telling a member of leases freed by a fence failed")
}

// maxTakerNotices and maxHeirNotices bound the lease.Store.NotifyMember calls of one fence (by
// the leader) and of one Close (by each member closing: many may close at once, and 10 closing
// together at 4,000 shards, each telling all 49 others, made 652 writes in one second on the
// member partition in the scale run).
const (
	maxTakerNotices = 64
	maxHeirNotices  = 8
)

// notify calls lease.Store.NotifyMember for each member on ctx, stopping at the first failure
// (the members learn of the change from the roster anyway).
func (c *Subscription) notify(ctx context.Context, members []string, failed string) {
	for _, w := range members {
		if err := c.cfg.LeaseStore.NotifyMember(ctx, c.cfg.Group, c.cfg.Stream, w); err != nil {
			c.cfg.Logger.Debug(failed, c.logFields().Add(watermill.LogFields{"member": w, "err": err}))
			return
		}
	}
}
