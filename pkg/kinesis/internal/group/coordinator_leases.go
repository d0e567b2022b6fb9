package group

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// takeLeases brings this worker to its fair share (lease.PlanShare): it reads the group's
// members, lists the leases when something may have changed (leaseListDue), fences readers whose
// lease moved on, tells readers whose lease another worker asked for to hand it over, starts
// readers for leases handed to it, takes free or expired leases up to its target, and, with
// nothing free, asks the workers above their share for all it lacks at once. A lease asked for
// that is not handed over within HandoffTimeout it takes itself.
//
// A lease expires when its counter has not moved for LeaseDuration since this worker first saw
// it, as always. Between listings that is known only for the leases of members that are not
// alive (counted out, quiet or without a record): their counters were seen when they went
// quiet, and a take conditioned on them fails if they moved. The leases of a live member are
// judged only by a listing made in this sync.
func (c *Subscription) takeLeases() ([]*shard.Reader, error) {
	members := c.syncMembers()
	now := c.cfg.Clock.Now()
	listed := false
	if c.leaseListDue(now, members) {
		if err := c.refreshLeases(); err != nil {
			c.listSoon = true // what made it due (a member gone quiet, say) is not seen twice
			return nil, err
		}
		listed, c.liveAtList, c.recordsAtList, c.listSoon = true, members, c.memberRecords(), false
		c.changesAtList, c.syncListed = c.memberChanges(), true
		c.learnFromLeases()
		c.fenceReaders()
	}
	me := c.cfg.WorkerID
	for id, l := range c.leases {
		// Asked for under this worker's id before a restart: wait for it as for any lease
		// asked for, and take it if it does not come in time.
		if _, asked := c.asked[id]; !asked && l.PendingOwner == me && l.Owner != me && l.Owner != "" {
			c.asked[id] = handoffAsk{at: now, owner: l.Owner}
		}
	}
	list := make([]lease.Lease, 0, len(c.leases))
	for _, id := range sortedKeys(c.leases) {
		list = append(list, c.leases[id])
	}
	alive := c.aliveMembers(now)
	plan := lease.PlanShare(lease.ShareInput{
		Self:   me,
		Leases: list,
		Live: func(l lease.Lease) bool {
			expired := c.tracker.Expired(l, now, c.cfg.LeaseDuration) // records l either way
			return !expired || !listed && alive[l.Owner]
		},
		Eligible: c.eligible,
		Members:  members,
	})
	if len(plan.Take) > 0 || len(plan.Ask) > 0 || plan.Held < plan.Quota {
		// This worker is not at its share yet: the next lease sync lists again to see how
		// its takes and requests went (and, if what it lacks was asked for by others, whether
		// they got it). A worker at its share waits for a change: an uneven split between
		// others is theirs to mend.
		c.listSoon = true
	}
	var started []*shard.Reader
	for _, l := range list {
		if l.Owner == me && l.Checkpoint == lease.ShardEnd && !c.readers.has(l.ShardID) {
			c.releaseFinished(l)
			continue
		}
		// Ours with no reader: handed to this worker, or left by a reader that stopped when
		// it could not renew. Taking it again bumps the counter and the generation, so that
		// nobody judges it expired from before and no earlier reader of ours can write.
		if l.Owner == me && !c.readers.has(l.ShardID) && c.eligible(l) {
			why, from := takeOwnIdle, ""
			if ask, ok := c.asked[l.ShardID]; ok {
				why, from = takeHandedOver, ask.owner
			}
			if r := c.take(l, why, from); r != nil {
				started = append(started, r)
			}
		}
	}
	for _, l := range plan.Take {
		why := takeFree
		if l.Owner != "" {
			why = takeExpired
		}
		if r := c.take(l, why, l.Owner); r != nil {
			started = append(started, r)
		}
	}
	for _, l := range plan.Ask {
		c.ask(l)
	}
	started = append(started, c.takeOverdue(now)...)
	return started, nil
}

// leaseListMaxAge is how long a quiet group goes without listing its leases: 30 lease syncs
// (a minute at the defaults). A listing reads every lease of the group: the one cost of the
// lease table that grows with the shards of the stream rather than with those a worker reads.
// Whatever a listing would show between two of them makes one at once (leaseListDue); this one
// finds what nothing announces: a lease whose reader stopped renewing while its worker goes on
// heartbeating, and leases a reshard made that another worker created.
func leaseListMaxAge(cfg Config) time.Duration { return 30 * cfg.LeaseSyncInterval }

// leaseListDue: the lease sync lists the leases, because no lease sync of this worker did yet,
// something changed since (a member counted out or whose record went; another member's Changes,
// moved when it created or released leases, asked for one, or a reader of it paused; a member
// that went quiet; a reader of this worker that exited; a take or request that failed; a member
// read that failed, which may have hidden any of these), the last plan left this worker below
// its quota, it waits for a lease it asked for (the handoff shows only in a listing), or the
// last listing is leaseListMaxAge old.
//
// A member that appears (a new record, or one counted in) lists nothing: it only lowers the
// others' quotas, and what it lacks it asks for, which moves its Changes, so the owners it asked
// list then. Listing at every start made each join cost a listing (16 Queries) by every member:
// in TestConcurrentSubscribe on dynalite, 50 subscriptions opened one after another made 1,188
// of the 2,635 listings, and the lease store was the bottleneck of the run.
func (c *Subscription) leaseListDue(now time.Time, live []string) bool {
	return !c.syncListed || c.listSoon || len(c.asked) > 0 || c.newlyQuiet(now) ||
		anyGone(c.liveAtList, live) || anyGone(c.recordsAtList, c.memberRecords()) ||
		changesMoved(c.memberChanges(), c.changesAtList) || now.Sub(c.leasesListedAt) >= leaseListMaxAge(c.cfg)
}

// anyGone: a worker of before is not in now.
func anyGone(before, now []string) bool {
	for _, w := range before {
		if !slices.Contains(now, w) {
			return true
		}
	}
	return false
}

// changesMoved: a member's Changes differ from those at the last listing, where a member not
// seen then counts as 0 (one that created leases, or asked, before this worker first read it).
// A member gone is not a change of Changes (anyGone of the records tells that).
func changesMoved(now, atList map[string]int64) bool {
	for w, n := range now {
		if atList[w] != n {
			return true
		}
	}
	return false
}

// memberChanges are the other members' lease.Member.Changes as last read.
func (c *Subscription) memberChanges() map[string]int64 {
	ch := map[string]int64{}
	for _, m := range c.members.Observed() {
		if m.Worker != c.cfg.WorkerID {
			ch[m.Worker] = m.Changes
		}
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

// newlyQuiet: a member other than this one missed a heartbeat (quietMember) at a counter for
// which the leases have not been listed yet. Listing now sees its leases' last counters, so
// that, if it crashed, they expire LeaseDuration after its last writes were first seen, not
// after the next listing.
func (c *Subscription) newlyQuiet(now time.Time) bool {
	found := false
	for _, m := range c.members.Observed() {
		if m.Worker == c.cfg.WorkerID || !c.members.Quiet(m.Worker, now, quietMember(c.cfg)) {
			delete(c.quietListed, m.Worker)
			continue
		}
		if at, ok := c.quietListed[m.Worker]; !ok || at != m.Counter {
			c.quietListed[m.Worker] = m.Counter
			found = true
		}
	}
	return found
}

// aliveMembers are the members counted for the shares that have not missed a heartbeat.
func (c *Subscription) aliveMembers(now time.Time) map[string]bool {
	alive := map[string]bool{}
	for _, w := range c.members.Live(now, memberFresh(c.cfg)) {
		if !c.members.Quiet(w, now, quietMember(c.cfg)) {
			alive[w] = true
		}
	}
	return alive
}

// learnFromLeases adds to the known shards those that only the leases show: children of a
// reshard whose leases another worker created when its read reached the parent's end. Without
// them this worker could not take such a lease (eligible needs a known shard) until its next
// shard listing, up to ShardSyncInterval later. A lease of an unfinished shard is created only
// for a shard that a listing or a read's ChildShards showed; the next shard listing confirms
// it, as it does the children learnChildren adds.
func (c *Subscription) learnFromLeases() {
	for id, l := range c.leases {
		if _, known := c.shards[id]; known || l.Checkpoint == lease.ShardEnd || len(l.Parents) == 0 || !c.allKnown(l.Parents) {
			continue // only a reshard's children, of parents still listed: not a shard gone from the stream
		}
		s := types.Shard{ShardId: aws.String(id)}
		if len(l.Parents) > 0 {
			s.ParentShardId = aws.String(l.Parents[0])
		}
		if len(l.Parents) > 1 {
			s.AdjacentParentShardId = aws.String(l.Parents[1])
		}
		c.shards[id], c.learned[id] = s, s
		c.invalidateFinished()
	}
}

// allKnown: every shard is in the known shards.
func (c *Subscription) allKnown(ids []string) bool {
	for _, id := range ids {
		if _, ok := c.shards[id]; !ok {
			return false
		}
	}
	return true
}

// fenceReaders, right after a listing, stops the readers whose lease moved on and tells those
// whose lease another worker asked for to hand it over. (Each reader also learns both from its
// own renewals; this catches what a renewal in flight has not shown yet.)
func (c *Subscription) fenceReaders() {
	me := c.cfg.WorkerID
	for id, e := range c.readers.byShard {
		r := e.r
		l, ok := c.leases[id]
		switch {
		case !ok || l.Owner != me || l.Generation != r.Generation():
			r.MarkLost(l.Owner)
		case shard.HandoffAsked(l):
			r.RequestHandoff()
		}
	}
}

// staleMembersAfter is how many lease durations a member record may go without a heartbeat
// before the group removes it: long past the point where it stopped counting, so that a member
// slowed down rather than gone is not removed under its feet (it would only heartbeat a new
// record anyway).
const staleMembersAfter = 6

// syncMembers reads the group's members, for the shares of the lease sync that follows and to
// see members that missed a heartbeat (newlyQuiet). A failure is logged and the lease sync goes
// on with what the last read showed. The first live member in name order removes the records of members
// long gone, so that the table does not keep every worker that ever crashed. It returns the
// live members, for the shares.
func (c *Subscription) syncMembers() []string {
	ctx, cancel := c.callContext()
	members, err := c.cfg.LeaseStore.Members(ctx, c.cfg.Group, c.stream)
	cancel()
	if err != nil {
		c.logger.Debug("Listing the group's members failed", c.logFields().Add(watermill.LogFields{"err": err}))
		c.listSoon = true
		return c.members.Live(c.cfg.Clock.Now(), memberFresh(c.cfg))
	}
	now := c.cfg.Clock.Now()
	c.lastLeaseSync.Store(now.UnixNano())
	c.members.Observe(members, now)
	live := c.members.Live(now, memberFresh(c.cfg))
	if len(live) == 0 || live[0] != c.cfg.WorkerID {
		return live
	}
	// One record per sync: a backlog of them (DeleteItem denied for a while) must not hold
	// up the coordinator.
	if stale := c.members.Stale(c.cfg.Group, c.stream, now, staleMembersAfter*c.cfg.LeaseDuration); len(stale) > 0 {
		c.removeMember(stale[0], "Removed the member record of a member long gone")
	}
	return live
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
		c.logger.Debug(done, c.logFields().Add(watermill.LogFields{"member": m.Worker}))
	case errors.Is(err, lease.ErrMemberChanged):
	case !c.warnedMembers:
		c.warnedMembers = true
		logs.Warn(c.logger, "Removing a member record failed (is dynamodb:DeleteItem allowed on the lease table?); it stays until it goes stale", err,
			c.logFields().Add(watermill.LogFields{"member": m.Worker}))
	default:
		c.logger.Debug("Removing a member record failed", c.logFields().Add(watermill.LogFields{"member": m.Worker, "err": err}))
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
		if members, err = c.cfg.LeaseStore.Members(ctx, c.cfg.Group, c.stream); err == nil {
			for _, m := range members {
				if m.Worker == c.cfg.WorkerID {
					err = c.cfg.LeaseStore.RemoveMember(ctx, m)
				}
			}
		}
	}
	if err != nil {
		logs.Warn(c.logger, "Member record not removed on close; the others count this worker out a few lease syncs later", err, c.logFields())
	}
}

// releaseFinished releases a lease of ours at SHARD_END whose reader could not release it (the
// store failed at that moment), so that the lease table shows no owner for a finished shard.
// Nobody reads the shard again either way; a failure is left to the next sync.
func (c *Subscription) releaseFinished(l lease.Lease) {
	ctx, cancel := c.callContext()
	defer cancel()
	released, err := c.cfg.LeaseStore.Release(ctx, l)
	if err != nil {
		c.logger.Debug("Finished shard's lease not released", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		return
	}
	c.changed()
	c.logger.Info("Lease released", c.logFields().Add(watermill.LogFields{
		"shard": l.ShardID, "generation": l.Generation, "reason": shard.ReleaseShardFinished, "checkpoint": l.Checkpoint}))
	c.cfg.Metrics.ForShard(l.ShardID).Count(shard.CountReleased, 1)
	c.leases[l.ShardID] = released
}

// Why a worker takes a lease, in the "Lease taken" log line.
const (
	takeFree       = "free"
	takeExpired    = "expired: its owner stopped renewing it"
	takeHandedOver = "handed over"
	takeOverdue    = "not handed over within HandoffTimeout: taken from its owner"
	takeOwnIdle    = "held under this worker's id with no reader here (a restart of this worker, or a reader of it that stopped)"
)

// takeReasonCodes are the reasons of a take as the kinesis.lease.reason metric attribute.
var takeReasonCodes = map[string]string{
	takeFree: "free", takeExpired: "expired", takeHandedOver: "handed_over", takeOverdue: "handoff_timeout", takeOwnIdle: "restarted",
}

// handoffAsk is a lease this worker asked another worker for.
type handoffAsk struct {
	at    time.Time // on the subscription's clock
	owner string    // the owner asked
}

// take takes one lease and starts its reader; nil if another worker was faster, or if this
// subscription still has a reader of the shard (one that is stopping: the lease is taken at a
// later sync, once its exit report is in). why and from (the previous owner, "" if none) are
// for the log line.
func (c *Subscription) take(l lease.Lease, why, from string) *shard.Reader {
	if c.readers.has(l.ShardID) {
		return nil
	}
	takenAt := c.cfg.Clock.Now()
	ctx, cancel := c.callContext()
	taken, err := c.cfg.LeaseStore.Take(ctx, l, c.cfg.WorkerID)
	cancel()
	if err != nil {
		c.logger.Debug("Lease not taken", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		c.listSoon = true
		return nil
	}
	delete(c.asked, l.ShardID)
	c.leases[l.ShardID] = taken
	fields := c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "generation": taken.Generation, "reason": why})
	if from != "" && from != c.cfg.WorkerID {
		fields["from"] = from
	}
	c.logger.Info("Lease taken", fields)
	m := c.cfg.Metrics.ForShard(l.ShardID)
	m.LeaseAcquired(takeReasonCodes[why])
	r := c.startReader(l.ShardID, shard.Start{After: taken.Checkpoint, Initial: c.startPosition(taken)}, &taken, takenAt)
	if r == nil {
		m.Count(shard.CountLeasesHeld, -1) // no reader holds it: the lease expires
	}
	return r
}

// ask marks this worker as the pending owner of a lease of a worker above its share.
func (c *Subscription) ask(l lease.Lease) {
	ctx, cancel := c.callContext()
	asked, err := c.cfg.LeaseStore.RequestHandoff(ctx, l, c.cfg.WorkerID)
	cancel()
	if err != nil {
		c.logger.Debug("Handoff not requested", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		c.listSoon = true
		return
	}
	c.changed() // the owner lists at its next lease sync and hands over, not at its next renewal
	c.logger.Debug("Asked for a lease to even out the group", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "owner": l.Owner}))
	c.leases[l.ShardID] = asked
	c.asked[l.ShardID] = handoffAsk{at: c.cfg.Clock.Now(), owner: l.Owner}
}

// takeOverdue takes the leases this worker asked for and did not get within HandoffTimeout,
// and forgets requests that another change of owner made moot.
func (c *Subscription) takeOverdue(now time.Time) []*shard.Reader {
	var started []*shard.Reader
	for _, id := range sortedKeys(c.asked) {
		l, ok := c.leases[id]
		switch {
		case !ok || l.Owner == c.cfg.WorkerID || l.PendingOwner != c.cfg.WorkerID:
			delete(c.asked, id)
		case now.Sub(c.asked[id].at) >= handoffTakeAfter(c.cfg) && c.eligible(l):
			if r := c.take(l, takeOverdue, l.Owner); r != nil {
				started = append(started, r)
			}
		}
	}
	return started
}

// eligible: a listed shard, not finished, whose parents are finished, which keeps each key's
// records in order across a reshard.
func (c *Subscription) eligible(l lease.Lease) bool {
	if _, listed := c.shards[l.ShardID]; !listed || l.Checkpoint == lease.ShardEnd || c.skipLease(l) {
		return false
	}
	return c.parentsDone(l.Parents)
}

// skipLease: a closed shard that this group, starting at LATEST, never read, and none of whose
// parents it read. Its records all came before any reader of the group could have started
// there, so LATEST skips them: it is never taken and counts as finished for its children.
// Generation 0 means nobody ever took the lease, so nothing of the shard was delivered; a shard
// the group did read is finished by reading it to its end, as usual. A shard that closed while
// its parent was still being read holds records the group has not read yet: it is read.
func (c *Subscription) skipLease(l lease.Lease) bool {
	return l.Checkpoint == "" && l.Generation == 0 && l.Owner == "" && !c.parentRead(l) && c.skipClosed(l.ShardID)
}

// parentRead: the group read a parent of the lease's shard (its lease was taken, or it is
// finished and its lease deleted). Then the shard's records all follow what the group read,
// whatever InitialPosition says: it is read from its start (startPosition).
func (c *Subscription) parentRead(l lease.Lease) bool {
	for _, p := range l.Parents {
		if pl, ok := c.leases[p]; ok && (pl.Generation > 0 || pl.Checkpoint != "") || !ok && c.finishedWithoutLease(p) {
			return true
		}
	}
	return false
}

// startPosition is where a shard with no checkpoint is read from: InitialPosition, unless the
// group read one of its parents. A child of a shard the group read at LATEST or AT_TIMESTAMP
// started at LATEST would skip what was written to it before its reader came.
func (c *Subscription) startPosition(l lease.Lease) shard.Position {
	if c.cfg.InitialPosition.Type != shard.TrimHorizon && c.parentRead(l) {
		return shard.Position{Type: shard.TrimHorizon}
	}
	return c.cfg.InitialPosition
}

// skipClosed: the subscription starts at LATEST and the shard is closed (the listing shows an
// ending sequence number). It logs the first time it skips a shard.
func (c *Subscription) skipClosed(id string) bool {
	s, listed := c.shards[id]
	if c.cfg.InitialPosition.Type != shard.Latest || !listed || s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
		return false
	}
	if !c.skipped[id] {
		c.skipped[id] = true
		c.logger.Info("Skipping a closed shard never read: the subscription starts at LATEST", c.logFields().Add(watermill.LogFields{"shard": id}))
	}
	return true
}

// parentsDone: every parent is finished, or no longer listed (aged out of the stream).
func (c *Subscription) parentsDone(parents []string) bool {
	for _, p := range parents {
		if _, listed := c.shards[p]; !listed {
			continue
		}
		if c.grouped() {
			l, ok := c.leases[p]
			if !ok && !c.finishedWithoutLease(p) || ok && l.Checkpoint != lease.ShardEnd && !c.skipLease(l) {
				return false
			}
		} else if !c.ended[p] && !(c.progress[p] == "" && !c.readers.has(p) && c.skipClosed(p)) {
			return false
		}
	}
	return true
}

// finishedWithoutLease: a listed shard with no lease whose lease was deleted after it was
// finished (cleanFinished). That is known from its children: one of them has a lease that was
// taken (a child is taken only once all its parents are finished), or is itself finished and
// without a lease. A shard with no such child is not: it may simply have no lease yet. The
// children come from both the leases (their parents, as strongly consistent as the store) and
// the listing.
//
// The answers are kept (c.finished) until the leases or the shards change: refreshLeases,
// deleteFinished and every change of c.shards drop them (invalidateFinished). A lease taken
// between two listings could only turn a false into a true, which the next listing brings;
// createLeases, which must not act on a stale false, asks again after a listing no older than
// leaseViewMaxAge.
func (c *Subscription) finishedWithoutLease(id string) bool {
	if _, ok := c.leases[id]; ok {
		return false
	}
	if c.finished == nil {
		c.indexFinished()
	}
	return c.finished[id]
}

// indexFinished works out finishedWithoutLease for every shard at once: one pass to index the
// children (from the leases' parents and the listing), one walk from the taken children up.
func (c *Subscription) indexFinished() {
	parents := map[string][]string{} // child -> parents
	for cid, l := range c.leases {
		parents[cid] = append(parents[cid], l.Parents...)
	}
	for cid, s := range c.shards {
		if _, ok := c.leases[cid]; !ok {
			parents[cid] = append(parents[cid], parentsOf(s)...)
		}
	}
	var taken []string
	for cid, l := range c.leases {
		if l.Generation > 0 || l.Checkpoint != "" {
			taken = append(taken, cid)
		}
	}
	c.finished = FinishedAncestors(taken, func(id string) []string { return parents[id] }, func(id string) bool {
		_, leased := c.leases[id]
		return !leased
	})
}

// FinishedAncestors walks up from the shards whose leases were taken through the ancestors
// that have no lease (unleased), and returns those: a shard is taken only once all its parents
// are finished, so such an ancestor is finished, and its lease was deleted after that. Each is
// visited once, however often split and merge made paths to it.
func FinishedAncestors(taken []string, parents func(string) []string, unleased func(string) bool) map[string]bool {
	finished := map[string]bool{}
	var mark func(id string)
	mark = func(id string) {
		for _, p := range parents(id) {
			if unleased(p) && !finished[p] {
				finished[p] = true
				mark(p)
			}
		}
	}
	for _, id := range taken {
		mark(id)
	}
	return finished
}

// invalidateFinished drops the answers of finishedWithoutLease.
func (c *Subscription) invalidateFinished() { c.finished = nil }

// handoffTakeAfter is how long after asking for a lease a worker takes it itself:
// HandoffTimeout, but never before LeaseDuration has passed since the request. An owner whose
// last successful renewal came before the request has stopped delivering by then (at its stop
// point, 0.8 × LeaseDuration, with the same margin for clock rates as an expiry has); one whose
// renewal came after it saw the request in that renewal and stopped sending. So the taker never
// reads the shard while the owner still delivers, whatever HandoffTimeout is set to.
func handoffTakeAfter(cfg Config) time.Duration {
	return max(cfg.HandoffTimeout, cfg.LeaseDuration)
}
