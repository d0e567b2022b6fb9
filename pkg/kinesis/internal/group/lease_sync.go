package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// createLeases creates the leases of the given known shards that have none yet. Another worker
// creating one first is fine: the lease is the same.
//
// It decides from a listing of the leases no older than leaseViewMaxAge, listing again when
// the loop has run longer: a lease missing from an old listing may have been created, read to
// its end and deleted since, and creating it again would read the shard twice. Deletions wait
// longer than that (deleteFinishedAfter).
//
// Instances that start together on a new group all find every lease missing. Each goes through
// the shards in an order of its own (lease.TakeOrder), and one that meets createdByOthers leases
// created by another worker in a row lists again and skips what is there by then: in the scale
// run, 50 instances on 4,000 shards sent 33,666 creates, 29,666 of them failed, and failed
// conditional writes cost write units as the others do.
func (c *Subscription) createLeases(ids []string) error {
	ids = slices.Clone(ids)
	slices.SortStableFunc(ids, func(a, b string) int {
		return cmp.Compare(lease.TakeOrder(c.cfg.WorkerID, a), lease.TakeOrder(c.cfg.WorkerID, b))
	})
	existed := 0
	for _, id := range ids {
		if _, ok := c.leases[id]; ok || c.finishedWithoutLease(id) {
			// Leases are deleted only at SHARD_END, and then not created again; a shard known
			// to be finished stays so, whatever listing said it. Only a shard that may need a
			// lease is worth a fresh listing.
			continue
		}
		if existed >= createdByOthers || c.cfg.Clock.Now().Sub(c.leasesListedAt) > leaseViewMaxAge(c.cfg) {
			existed = 0
			if err := c.refreshLeases(); err != nil {
				return err
			}
		}
		if _, ok := c.leases[id]; ok || c.finishedWithoutLease(id) {
			continue // a finished shard whose lease was deleted is not read again
		}
		ctx, cancel := c.callContext()
		l, err := c.cfg.LeaseStore.Create(ctx, lease.Lease{
			Group: c.cfg.Group, Stream: c.cfg.Stream, ShardID: id, Parents: parentsOf(c.shards[id]),
		})
		cancel()
		switch {
		case errors.Is(err, lease.ErrLeaseExists):
			existed++
		case err != nil:
			return fmt.Errorf("kinesis: creating the lease of shard %q of stream %q: %w", id, c.cfg.Stream, err)
		default:
			existed = 0
			c.leases[id] = l
			c.changed() // the others see new leases at their next listing: list now
		}
	}
	return nil
}

// createdByOthers is how many leases createLeases finds created by another worker in a row
// before it lists the leases again.
const createdByOthers = 8

func (c *Subscription) refreshLeases() error {
	sent := c.cfg.Clock.Now() // the listing is as of some moment after this
	// A listing is up to 16 Queries (one per partition of the group's leases) in one call.
	// After listings that timed out, the next may take longer, as a reader's reads may
	// (shard.Reader.callContext): a slow store's answers get through, a hung call is still cut.
	ctx, cancel := clock.WithTimeout(c.ctx, c.cfg.Clock, c.cfg.RequestTimeout<<min(c.listTimeouts, shard.MaxTimeoutDoublings))
	list, err := c.cfg.LeaseStore.List(ctx, c.cfg.Group, c.cfg.Stream)
	timedOut := err != nil && c.ctx.Err() == nil && context.Cause(ctx) == context.DeadlineExceeded
	cancel()
	if timedOut {
		c.listTimeouts++
	}
	if err != nil {
		return fmt.Errorf("kinesis: listing the leases of group %q on stream %q: %w", c.cfg.Group, c.cfg.Stream, err)
	}
	c.listTimeouts = 0
	now := c.cfg.Clock.Now()
	c.lastLeaseSync.Store(now.UnixNano())
	c.leasesListedAt = sent
	c.tracker.Observe(list, now)
	c.invalidateFinished()
	c.watchForeign(list, now)
	clear(c.leases)
	for _, l := range list {
		c.leases[l.ShardID] = l
	}
	return nil
}

// launch starts readers for the shards this subscription should read and has not started yet.
func (c *Subscription) launch() ([]*shard.Reader, error) {
	if c.grouped() {
		return c.takeLeases()
	}
	return c.startUnleased(), nil
}

// armExpiry sets the expiry timer to the next expiry of another worker's lease, if that comes
// before the next periodic lease sync.
func (c *Subscription) armExpiry(expiry clock.Timer) {
	expiry.Stop()
	if !c.grouped() {
		return
	}
	now := c.cfg.Clock.Now()
	// Only the leases of members that are not alive can expire before the next listing shows
	// whether they moved (see takeLeases).
	alive := c.aliveMembers(now)
	watch := func(owner string) bool { return owner != c.cfg.WorkerID && !alive[owner] }
	at, ok := c.tracker.NextExpiryOf(watch, now, c.cfg.LeaseDuration)
	if byBeat, beatOK := c.nextHeartbeatExpiry(watch, now); beatOK && (!ok || byBeat.Before(at)) {
		at, ok = byBeat, true
	}
	if ok && at.Sub(now) < c.cfg.LeaseSyncInterval {
		expiry.Reset(at.Sub(now))
	}
}

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
	if c.leaseListDue(now, members) || c.expiredUnlisted(now) {
		if err := c.refreshLeases(); err != nil {
			c.listSoon = true // what made it due (a member gone quiet, say) is not seen twice
			return nil, err
		}
		listed, c.liveAtList, c.recordsAtList, c.listSoon = true, members, c.memberRecords(), false
		c.changesAtList, c.syncListed = c.memberChanges(), true
		c.learnFromLeases()
		c.fenceReaders()
	}
	if c.confirmForeign(now) {
		c.yieldToForeign()
		return nil, nil
	}
	c.fenceGone(now, members)
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
	foreignOwners := c.foreignOwners()
	plan := lease.PlanShare(lease.ShareInput{
		Self:   me,
		Leases: list,
		Live: func(l lease.Lease) bool {
			expired := c.tracker.Expired(l, now, c.expiresAfter(l)) // records l either way
			if l.Owner == me {
				// This worker's own: alive as long as it runs, whatever its heartbeats and
				// listings show. (Judged by its own member record, a worker whose heartbeats
				// failed counted its leases out, asked for others' and handed them back.)
				return true
			}
			if _, byBeat := c.expiredByHeartbeat(l, now); byBeat && !alive[l.Owner] {
				expired = true
			}
			return !expired || !listed && alive[l.Owner]
		},
		Eligible: c.eligible,
		Members:  members,
		// A KCL worker on a KCL lease table (lease.Lease.Foreign) would not hand a lease over:
		// it is not asked.
		Foreign: func(owner string) bool { return foreignOwners[owner] },
	})
	if len(plan.Take) > 0 || len(plan.Ask) > 0 || plan.Held < plan.Quota {
		// This worker is not at its share yet: the next lease sync lists again to see how
		// its takes and requests went (and, if what it lacks was asked for by others, whether
		// they got it). A worker at its share waits for a change: an uneven split between
		// others is theirs to mend.
		c.listSoon = true
	}
	started := c.takePlanned(list, plan, now)
	started = append(started, c.takeOverdue(now)...)
	return started, nil
}

// takePlanned starts readers for the leases of this worker that have none (handed to it, or
// held under its id from before), takes what plan says to (fencing first the owners whose
// leases expired by their heartbeats alone) and asks for what it says to ask for.
func (c *Subscription) takePlanned(list []lease.Lease, plan lease.SharePlan, now time.Time) []*shard.Reader {
	me := c.cfg.WorkerID
	var started []*shard.Reader
	for _, l := range list {
		if l.Owner == me && l.Checkpoint == lease.ShardEnd && !c.readers.has(l.ShardID) {
			c.releaseFinished(l)
			continue
		}
		// Ours with no reader: handed to this worker, or left by a reader that stopped when
		// it could not renew. Taking it again bumps the counter and the generation, so that
		// nobody judges it expired from before and no earlier reader of ours can write.
		if l.Owner == me && !l.Foreign && !c.readers.has(l.ShardID) && c.eligible(l) {
			why, from := takeOwnIdle, ""
			if ask, ok := c.asked[l.ShardID]; ok {
				why, from = takeHandedOver, ask.owner
			}
			if r := c.take(l, why, from); r != nil {
				started = append(started, r)
			}
		}
	}
	fenced := map[string]bool{}
	for _, l := range plan.Take {
		why := takeFree
		if l.Owner != "" {
			why = takeExpired
		}
		if m, byBeat := c.expiredByHeartbeat(l, now); byBeat && !c.tracker.Expired(l, now, c.cfg.LeaseDuration) {
			if !c.fenceOwner(m, fenced, false) {
				continue
			}
			why = takeHeartbeatStopped
		}
		if r := c.take(l, why, l.Owner); r != nil {
			started = append(started, r)
		}
	}
	asked := map[string]bool{}
	for _, l := range plan.Ask {
		if c.ask(l) {
			asked[l.Owner] = true
		}
	}
	c.notifyAsked(asked)
	return started
}

// leaseListMaxAge is how long a quiet group goes without listing its leases: 30 lease syncs
// (a minute at the defaults). A listing reads every lease of the group: the one cost of the
// lease table that grows with the shards of the stream rather than with those a worker reads.
// Whatever a listing would show between two of them makes one at once (leaseListDue); this one
// finds what nothing announces: a lease whose reader stopped renewing while its worker goes on
// heartbeating, and leases a reshard made that another worker created.
func leaseListMaxAge(cfg Config) time.Duration { return 30 * cfg.LeaseSyncInterval }

// leaseListDue: the lease sync lists the leases, because no lease sync of this worker did yet,
// another worker asked for one of this worker's leases (Member.Asked moved), something changed
// since (a member counted out or whose record went; another member's Changes,
// moved when it created or released leases, asked for one, or a reader of it paused; a member
// that went quiet; a reader of this worker that exited; a take or request that failed; a member
// read that failed, which may have hidden any of these), the last plan left this worker below
// its quota, it waits for a lease it asked for (the handoff shows only in a listing), foreign
// workers held leases at the last listing (foreign.go), or the last listing is
// leaseListMaxAge old.
//
// A member that appears (a new record, or one counted in) lists nothing: it only lowers the
// others' quotas, and what it lacks it asks for, which moves its Changes, so the owners it asked
// list then. Listing at every start made each join cost a listing (16 Queries) by every member:
// in TestConcurrentSubscribe on dynalite, 50 subscriptions opened one after another made 1,188
// of the 2,635 listings, and the lease store was the bottleneck of the run.
func (c *Subscription) leaseListDue(now time.Time, live []string) bool {
	asked := c.askedOf.Swap(false) // taken whatever else makes the listing due
	return asked || !c.syncListed || c.listSoon || c.foreignW.held || len(c.asked) > 0 || c.newlyQuiet(now) ||
		anyGone(c.liveAtList, live) || anyGone(c.recordsAtList, c.memberRecords()) ||
		changesMoved(c.memberChanges(), c.changesAtList) || now.Sub(c.leasesListedAt) >= c.listMaxAge()
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
