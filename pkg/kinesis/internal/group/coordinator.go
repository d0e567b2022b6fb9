package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Subscription is one Subscribe call: a coordinator goroutine and a reader goroutine per shard
// it reads. In a group, each subscription is its own member, named by cfg.WorkerID (see
// Subscriber.memberID).
//
// Ownership: the coordinator (start, then run, then shutdown) owns readers, shards, learned,
// leases, tracker, members, member, asked, deletable, finished, skipped, ended and progress;
// nothing else touches them. Readers send
// on out, exits and (through forwardReady) readied. The coordinator closes quit when it stops
// taking exit reports, then out (after every reader has finished, so no send can follow), then
// done.
type Subscription struct {
	cfg    Config
	logger watermill.LoggerAdapter
	stream string
	slot   int // member slot on the Subscriber (takeMemberSlot); 0 without a group

	ctx    context.Context
	cancel context.CancelFunc
	out    chan *message.Message
	exits  chan shard.Exit
	quit   chan struct{} // closed once the coordinator takes no more exit reports
	done   chan struct{}
	// readied brings run the first report of each reader it started (see syncReaders).
	readied chan readyReport

	readers *readerTable
	// links are what every reader is handed to report upward: out, exits, quit, the
	// subscription's context, the Changes nudge and the reader count.
	links shard.Links
	// fanOut, with enhanced fan-out, is the stream consumer the readers subscribe through;
	// nil when they poll. Set by start before any reader starts; the pointer is read-only
	// after (the consumer's ARN changes only through its own refresh).
	fanOut *fanOutConsumer
	shards map[string]types.Shard // the last shard listing, plus learned
	// learned are shards known from the ChildShards of a read that reached a parent's end and
	// not yet seen in a listing (ListShards may lag behind a reshard for a moment).
	learned map[string]types.Shard
	leases  map[string]lease.Lease // the group's leases at the last listing, and as this worker's writes left them
	tracker *lease.Tracker
	members *lease.MemberTracker // the group's members at the last lease sync
	hb      heartbeat            // this subscription's member record (its own goroutine; see heartbeat)
	// liveAtList and recordsAtList are the live members and every member record as of the
	// last lease listing of a lease sync (nil before the first): one gone since lists again.
	liveAtList, recordsAtList []string
	// syncListed: a lease sync has listed the leases (the fields ...AtList are set).
	syncListed bool
	// listTimeouts counts the lease listings that timed out in a row (refreshLeases).
	listTimeouts int
	// quietListed: members seen quiet (quietMember), with the heartbeat counter they were
	// quiet at, for which the leases were listed: once per quiet spell.
	quietListed map[string]int64
	// listSoon: something since the last listing (a reader's exit, a take or request that
	// failed) makes the next lease sync list the leases.
	listSoon bool
	// changes is this worker's lease.Member.Changes, which its heartbeats carry: moved through
	// changed (by the coordinator and the readers) when it created leases, released one, asked
	// for one or a reader paused, so that the others list the leases. changesAtList are the
	// others' as of the last listing.
	changes       atomic.Int64
	changesAtList map[string]int64
	// warnedMembers: a member record could not be removed, and WARN said so once.
	warnedMembers bool
	asked         map[string]handoffAsk // shards whose lease this worker asked for: when, and of whom
	// deletable are finished shards whose lease nothing can need again, and since when (on
	// the clock): cleanFinished deletes the lease once that has lasted deleteFinishedAfter.
	deletable map[string]time.Time
	// finished caches finishedWithoutLease; nil until worked out after a change.
	finished map[string]bool
	// leasesListedAt is when the last lease listing was sent (on the clock), for createLeases.
	leasesListedAt time.Time
	// warnedDeletes: a finished shard's lease could not be deleted, and WARN said so once.
	warnedDeletes bool
	ended         map[string]bool   // without a group: shards read to their end
	skipped       map[string]bool   // closed shards a LATEST start skips (logged once each)
	progress      map[string]string // without a group: where a restarted reader resumes
	failures      map[string]int    // coordinator steps failed in a row, by step (logIfFailed)
	// joinDue, when start left the join wait to run (see start), fires when it ends.
	joinDue clock.Timer
	// lastLeaseSync is when the lease store last answered a lease sync's member read or a
	// lease listing (UnixNano, on the clock), for Subscriber.Health on other goroutines.
	lastLeaseSync atomic.Int64
}

func newSubscription(ctx context.Context, cfg Config, logger watermill.LoggerAdapter, stream string) *Subscription {
	ctx, cancel := context.WithCancel(ctx)
	c := &Subscription{
		cfg: cfg, logger: logger, stream: stream,
		ctx: ctx, cancel: cancel,
		out:         make(chan *message.Message),
		exits:       make(chan shard.Exit),
		quit:        make(chan struct{}),
		done:        make(chan struct{}),
		readied:     make(chan readyReport),
		readers:     newReaderTable(),
		shards:      map[string]types.Shard{},
		learned:     map[string]types.Shard{},
		leases:      map[string]lease.Lease{},
		tracker:     lease.NewTracker(),
		members:     lease.NewMemberTracker(),
		hb:          heartbeat{nudge: make(chan struct{}, 1)},
		quietListed: map[string]int64{},
		asked:       map[string]handoffAsk{},
		deletable:   map[string]time.Time{},
		ended:       map[string]bool{},
		skipped:     map[string]bool{},
		progress:    map[string]string{},
		failures:    map[string]int{},
	}
	c.links = shard.Links{
		Out: c.out, Exits: c.exits, Quit: c.quit, Closing: ctx, Changed: c.changed,
		Readers: func() int { return int(c.readers.count.Load()) },
	}
	return c
}

func (c *Subscription) grouped() bool { return c.cfg.Group != "" }

func (c *Subscription) logFields() watermill.LogFields {
	return watermill.LogFields{"stream": c.stream, "group": c.cfg.Group, "worker": c.cfg.WorkerID}
}

// start writes the first heartbeat (in a group), lists the shards, takes what leases it can and
// starts their readers; it returns once every reader it started holds its iterator, so that a
// record published after Subscribe returns is one this subscription reads.
func (c *Subscription) start() error {
	if c.grouped() {
		c.startHeartbeat()
	}
	if err := c.firstSync(); err != nil {
		return err
	}
	if c.grouped() {
		c.syncMembers() // the first read: the lease sync after the wait tells who moved or appeared
	}
	// Before any reader can start, here or at the first lease sync after the join wait.
	if err := c.startFanOut(); err != nil {
		return err
	}
	if c.grouped() && (c.anyFree() || c.othersRecorded()) {
		if !c.anyToStart() {
			// Nothing here is read until the plan after the wait, and then only leases
			// handed over or expired, which carry their checkpoints, so the wait need not
			// hold up Subscribe: run makes the first lease sync when it ends. Waited here,
			// the 50 Subscribe calls Watermill's TestConcurrentSubscribe makes one after
			// another each took joinWait (3.8 s of the 4.0 s on memlog).
			c.joinDue = c.cfg.Clock.NewTimer(joinWait(c.cfg))
			return nil
		}
		if err := c.awaitJoiners(); err != nil {
			return err
		}
	}
	return c.startReaders()
}

// anyToStart: the leases listed show one that the first plan could start reading at once, and
// so that Subscribe must wait for: a free one (read from its checkpoint or InitialPosition, so
// a reader started after Subscribe returned would miss what is published meanwhile at LATEST),
// or one held under this worker's id with no reader (a restart), which it takes whatever the
// shares. Expired leases cannot be told yet: that needs a counter seen not to move.
func (c *Subscription) anyToStart() bool {
	for _, l := range c.leases {
		if (l.Free() || l.Owner == c.cfg.WorkerID) && c.eligible(l) {
			return true
		}
	}
	return false
}

// firstSync is Subscribe's first shard sync (and, in a group, lease listing and creation),
// tried again after failures that pass: a lease store or Kinesis slow for a moment (the
// universal suite's 50 concurrent subscriptions on dynalite under a loaded machine: a listing
// of 16 Queries past RequestTimeout) should delay Subscribe, not fail it.
func (c *Subscription) firstSync() error {
	for attempt := 1; ; attempt++ {
		err := c.syncShards()
		if err == nil || attempt == firstSyncTries {
			return err
		}
		if class := awscall.Classify(c.ctx, err); class != awscall.Transient && class != awscall.Throttled {
			return err
		}
		c.logger.Info("Subscribe's first sync failed; retrying", c.logFields().Add(watermill.LogFields{"err": err, "attempt": attempt}))
		if err := awscall.SleepOn(c.ctx, c.cfg.Clock, awscall.Backoff(attempt-1, 100*time.Millisecond, time.Second)); err != nil {
			return err
		}
	}
}

// firstSyncTries is how many times Subscribe tries its first sync.
const firstSyncTries = 3

// joinWait is how long a grouped Subscribe that finds free leases waits for instances starting
// with it: one and a half heartbeat intervals (1.5 s at the defaults), so that every member
// that heartbeats is seen to move, but at most maxJoinWait, where a new record is the sign.
func joinWait(cfg Config) time.Duration { return min(quietMember(cfg), maxJoinWait) }

// maxJoinWait bounds joinWait with long lease syncs.
const maxJoinWait = 2 * time.Second

// othersRecorded: the last member read shows records of other workers. Read once, they cannot
// be told apart from those of workers long gone until they move, and a plan that counted only
// the owners would ask for more than this worker's share (ten instances joining 50 on 1,000
// shards asked for the same leases: 109 of 295 requests failed).
func (c *Subscription) othersRecorded() bool {
	for _, m := range c.members.Observed() {
		if m.Worker != c.cfg.WorkerID {
			return true
		}
	}
	return false
}

// anyFree: the leases listed show a free lease this worker could read.
func (c *Subscription) anyFree() bool {
	for _, l := range c.leases {
		if l.Free() && c.eligible(l) {
			return true
		}
	}
	return false
}

// awaitJoiners holds a subscription that would take free leases, or that joins a group with
// other members, for joinWait after its first read of the members, so that the lease sync that
// follows counts every instance that started about when this one did, and every member that is
// alive: their records appear in between (lease.MemberTracker counts a record that appeared
// since its first read), or their heartbeats move. Without it, of instances that start
// together, the first took every free lease and the others then had to ask for theirs; and
// newcomers joining together asked for the same leases. (A newcomer with nothing to start at
// once waits in run instead: see start.)
func (c *Subscription) awaitJoiners() error {
	wait := c.cfg.Clock.NewTimer(joinWait(c.cfg))
	defer wait.Stop()
	select {
	case <-wait.C():
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// run is the coordinator goroutine: periodic lease and shard syncs, and reader exits.
//
// It ends when the context is cancelled (Close or the Subscribe context); shutdown then stops
// the readers in order.
func (c *Subscription) run() {
	defer c.shutdown()
	if c.joinDue != nil {
		// start left the join wait to run: the first lease sync once it ends.
		select {
		case <-c.joinDue.C():
		case <-c.ctx.Done():
			c.joinDue.Stop()
			return
		}
		c.logIfFailed("syncing leases", c.syncReaders())
	}
	leaseSync := c.cfg.Clock.NewTicker(c.cfg.LeaseSyncInterval)
	defer leaseSync.Stop()
	shardSync := c.cfg.Clock.NewTicker(c.cfg.ShardSyncInterval)
	defer shardSync.Stop()
	// expiry fires when an observed lease of another worker expires before the next periodic
	// sync, so that a crashed worker's shards move after LeaseDuration, not up to a sync later.
	expiry := c.cfg.Clock.NewTimer(c.cfg.LeaseSyncInterval)
	expiry.Stop()
	defer expiry.Stop()
	c.armExpiry(expiry)
	// late fires when a new reader's lease needs renewing and the reader has no iterator yet.
	late := c.cfg.Clock.NewTimer(c.cfg.LeaseSyncInterval)
	defer late.Stop()
	for {
		c.armLate(late)
		select {
		case <-c.ctx.Done():
			return
		case rep := <-c.readied:
			err := c.readerReady(rep.r, rep.err)
			c.logIfFailed("starting a reader", err)
			c.recheckIfNotFound(err)
		case <-late.C():
			c.giveUpLate()
		case ex := <-c.exits:
			if !c.readerExited(ex) {
				continue
			}
			c.recheckIfNotFound(ex.Err)
			if ex.ShardEnded {
				// The children of a finished shard may start now, not at the next sync. The
				// read that reached the end named them; a Kinesis that does not (older
				// emulators) is asked for a listing.
				if len(ex.Children) > 0 {
					c.logIfFailed("creating the leases of child shards", c.learnChildren(ex.Children))
				} else {
					c.logIfFailed("listing shards", c.syncShards())
				}
				c.logIfFailed("starting readers", c.syncReaders())
			}
		case <-leaseSync.C():
			c.logIfFailed("syncing leases", c.syncReaders())
			c.armExpiry(expiry)
		case <-expiry.C():
			c.logIfFailed("syncing leases at a lease's expiry", c.syncReaders())
			c.armExpiry(expiry)
		case <-shardSync.C():
			c.logIfFailed("listing shards", c.syncShards())
		}
	}
}

// callContext bounds one lease store call of the coordinator by RequestTimeout: a store that
// hangs must not hold up lease syncs, reader exits and handoff signals for good.
func (c *Subscription) callContext() (context.Context, context.CancelFunc) {
	return clock.WithTimeout(c.ctx, c.cfg.Clock, c.cfg.RequestTimeout)
}

// logIfFailed logs a failed coordinator step, which the next sync retries: WARN, and ERROR
// once when the same step keeps failing (shard.ReadFailuresBeforeError in a row: 16 s of lease
// syncs, 4 minutes of shard listings at the defaults), since a lease store or Kinesis that
// stays unreachable needs someone to look. Each step counts on its own: lease syncs that
// succeed do not hide shard listings that keep failing.
func (c *Subscription) logIfFailed(what string, err error) {
	if err == nil {
		delete(c.failures, what)
		return
	}
	if c.ctx.Err() != nil {
		return
	}
	c.failures[what]++
	n := c.failures[what]
	fields := c.logFields().Add(watermill.LogFields{"failures": n})
	if n == shard.ReadFailuresBeforeError {
		c.logger.Error("Coordinator keeps failing "+what+"; will retry", err, fields)
		return
	}
	logs.Warn(c.logger, "Coordinator failed "+what+"; will retry", err, fields)
}

// syncShards lists the stream's shards and, in a group, creates the leases of new ones.
func (c *Subscription) syncShards() error {
	shards, err := listShards(c.ctx, c.cfg, c.stream)
	if errors.Is(err, awscall.ErrStreamNotFound) && len(c.shards) > 0 {
		// The stream is gone: forget its shards, so that no reader is started on it until a
		// listing finds it again (a stream created again under the same name is read from
		// the checkpoints, or from TRIM_HORIZON where they are not its own).
		c.logger.Error("Stream not found (deleted?); no shard of it is read until a shard listing finds it again", err,
			c.logFields().Add(watermill.LogFields{"shard_sync_interval": c.cfg.ShardSyncInterval}))
		clear(c.shards)
		c.invalidateFinished()
		clear(c.learned)
		return nil
	}
	if err != nil {
		return err
	}
	for id, s := range c.learned {
		if _, listed := shards[id]; listed {
			delete(c.learned, id)
		} else {
			shards[id] = s
		}
	}
	c.shards = shards
	c.invalidateFinished()
	c.forgetUnlisted()
	if !c.grouped() {
		return nil
	}
	// The lease syncs list the leases when the group changes; a shard sync lists them only
	// when nothing else has for leaseListMaxAge (createLeases lists again by itself before
	// it creates a lease missing from an older listing).
	if c.cfg.Clock.Now().Sub(c.leasesListedAt) >= leaseListMaxAge(c.cfg) {
		if err := c.refreshLeases(); err != nil {
			return err
		}
	}
	c.cleanFinished()
	return c.createLeases(sortedKeys(shards))
}

// forgetUnlisted drops what the subscription kept of shards the listing no longer shows: they
// left the stream (retention passed them), nothing will read them again, and a parent that is
// not listed counts as finished for its children anyway. Without it, the maps grew with every
// reshard for as long as the subscription ran.
func (c *Subscription) forgetUnlisted() {
	for _, m := range []map[string]bool{c.ended, c.skipped} {
		for id := range m {
			if _, listed := c.shards[id]; !listed {
				delete(m, id)
			}
		}
	}
	for id := range c.progress {
		if _, listed := c.shards[id]; !listed {
			delete(c.progress, id)
		}
	}
}

// cleanFinished deletes the leases of finished shards (SHARD_END, released) once nothing can
// need them again: every child the listing shows was taken (childrenStarted), or the shard has
// left the stream. Either must have held for deleteFinishedAfter, as this worker saw it, so that
// a worker acting on an older listing cannot create the lease again. No child waits on such a
// parent (finishedWithoutLease, or not listed), so the lease table no longer keeps, and every
// lease sync no longer reads, every shard a reshard ever closed. Deletion is conditioned on the
// lease still being at SHARD_END as listed.
func (c *Subscription) cleanFinished() {
	now := c.cfg.Clock.Now()
	deletes := 0
	for _, id := range sortedKeys(c.leases) {
		l := c.leases[id]
		why := c.deletableBecause(l)
		if why == "" {
			delete(c.deletable, id)
			continue
		}
		since, seen := c.deletable[id]
		if !seen {
			c.deletable[id] = now
			continue
		}
		if now.Sub(since) < deleteFinishedAfter(c.cfg) {
			continue
		}
		if deletes == maxDeletesPerSync {
			return // the rest at the next shard sync: a backlog must not hold up the coordinator
		}
		deletes++
		if !c.deleteFinished(l, why) {
			return
		}
	}
	for id := range c.deletable {
		if _, leased := c.leases[id]; !leased { // deleted by another worker
			delete(c.deletable, id)
		}
	}
}

// deletableBecause says why a lease may be deleted now, or "" if it may not.
func (c *Subscription) deletableBecause(l lease.Lease) string {
	if l.Checkpoint != lease.ShardEnd || !l.Free() {
		return ""
	}
	if _, listed := c.shards[l.ShardID]; !listed {
		return "shard finished and gone from the stream"
	}
	if c.childrenStarted(l.ShardID) {
		return "shard finished and its children read"
	}
	return ""
}

// leaseViewMaxAge is how old a listing of the leases createLeases may act on: a quarter of
// ShardSyncInterval, but at least a call timeout.
func leaseViewMaxAge(cfg Config) time.Duration {
	return max(cfg.ShardSyncInterval/4, cfg.RequestTimeout)
}

// deleteFinishedAfter is how long a finished shard's lease must have been deletable, as this
// worker saw it, before it deletes it: longer than the oldest listing another worker may act
// on (sent up to a call timeout before it answered, leaseViewMaxAge old at most, and then a
// Create that may take a call timeout to land), with as much again for clock rates and the
// time the evidence took to reach this worker. Another worker that saw neither the lease nor
// its children then cannot create the lease again after it is deleted.
func deleteFinishedAfter(cfg Config) time.Duration {
	return 2 * (leaseViewMaxAge(cfg) + 2*cfg.RequestTimeout)
}

// maxDeletesPerSync bounds the leases of finished shards one shard sync deletes, one call each,
// on the coordinator goroutine: after a large reshard, or on the first run of a table that kept
// every finished lease, the rest wait for the next syncs.
const maxDeletesPerSync = 25

// childrenStarted: every child of a finished shard that the listing shows has a lease that was
// taken (there is at least one), so no reader will ever wait on the shard again, and no
// listing will create its lease again (finishedWithoutLease). The children of a split are
// created together, so a listing that shows one shows the other; a lease of a child the
// listing does not show yet waits on nothing that is deleted, since finishedWithoutLease needs
// only one started child.
func (c *Subscription) childrenStarted(id string) bool {
	n := 0
	for cid, s := range c.shards {
		if !slices.Contains(parentsOf(s), id) {
			continue
		}
		n++
		if l, ok := c.leases[cid]; !ok || l.Generation == 0 && l.Checkpoint == "" {
			return false
		}
	}
	return n > 0
}

// deleteFinished deletes the lease of a finished shard (conditioned on it being at SHARD_END as
// listed) and forgets it. It reports whether the next deletion is worth trying: not after a
// failure other than the lease having moved on (DeleteItem refused, the store down), which is
// logged at WARN once per subscription.
func (c *Subscription) deleteFinished(l lease.Lease, why string) bool {
	ctx, cancel := c.callContext()
	err := c.cfg.LeaseStore.DeleteFinished(ctx, l)
	cancel()
	switch {
	case errors.Is(err, lease.ErrLeaseChanged):
		return true
	case err != nil && !c.warnedDeletes:
		c.warnedDeletes = true
		logs.Warn(c.logger, "Deleting the lease of a finished shard failed (is dynamodb:DeleteItem allowed on the lease table?); it stays, and every lease listing reads it", err,
			c.logFields().Add(watermill.LogFields{"shard": l.ShardID}))
		return false
	case err != nil:
		c.logger.Debug("Lease of a finished shard not deleted", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		return false
	}
	delete(c.leases, l.ShardID)
	delete(c.deletable, l.ShardID)
	c.invalidateFinished()
	c.logger.Info("Lease deleted", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "reason": why}))
	return true
}

// recheckIfNotFound lists the shards at once when a reader met ResourceNotFound. Without it, a
// deleted stream's shards stayed known: in the fault suite, two instances started a reader of
// each shard at every lease sync for as long as the stream was gone (313 GetShardIterator calls,
// 671 lease takes and releases and 321 error lines in two minutes). The listing tells a stream
// that is gone (syncShards then forgets its shards) from a shard that aged out of the stream
// (no longer listed, so not read again).
func (c *Subscription) recheckIfNotFound(err error) {
	if err == nil || c.ctx.Err() != nil || len(c.shards) == 0 || awscall.Classify(c.ctx, err) != awscall.NotFound {
		return
	}
	c.logIfFailed("listing shards", c.syncShards())
}

// learnChildren adds the children a finished shard named to the known shards and, in a group,
// creates their leases, with their parents, so they can be taken at once.
func (c *Subscription) learnChildren(children []types.ChildShard) error {
	var ids []string
	unknownParent := false
	for _, ch := range children {
		if ch.ShardId == nil || *ch.ShardId == "" {
			continue
		}
		id := *ch.ShardId
		if _, known := c.shards[id]; known {
			continue
		}
		s := types.Shard{ShardId: ch.ShardId, HashKeyRange: ch.HashKeyRange}
		if len(ch.ParentShards) > 0 {
			s.ParentShardId = &ch.ParentShards[0]
		}
		if len(ch.ParentShards) > 1 {
			s.AdjacentParentShardId = &ch.ParentShards[1]
		}
		c.shards[id], c.learned[id] = s, s
		c.invalidateFinished()
		ids = append(ids, id)
		for _, p := range ch.ParentShards {
			if _, known := c.shards[p]; !known {
				unknownParent = true
			}
		}
	}
	if unknownParent {
		// A parent missing from the last listing is taken as aged out of the stream, which
		// lets its children start. A merge's other parent may simply be newer than that
		// listing (another worker read its parents), so list again before judging it.
		return c.syncShards()
	}
	if !c.grouped() || len(ids) == 0 {
		return nil
	}
	if err := c.refreshLeases(); err != nil {
		return err
	}
	return c.createLeases(ids)
}

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
			Group: c.cfg.Group, Stream: c.stream, ShardID: id, Parents: parentsOf(c.shards[id]),
		})
		cancel()
		switch {
		case errors.Is(err, lease.ErrLeaseExists):
			existed++
		case err != nil:
			return fmt.Errorf("kinesis: creating the lease of shard %q of stream %q: %w", id, c.stream, err)
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
	list, err := c.cfg.LeaseStore.List(ctx, c.cfg.Group, c.stream)
	timedOut := err != nil && c.ctx.Err() == nil && context.Cause(ctx) == context.DeadlineExceeded
	cancel()
	if timedOut {
		c.listTimeouts++
	}
	if err != nil {
		return fmt.Errorf("kinesis: listing the leases of group %q on stream %q: %w", c.cfg.Group, c.stream, err)
	}
	c.listTimeouts = 0
	now := c.cfg.Clock.Now()
	c.lastLeaseSync.Store(now.UnixNano())
	c.leasesListedAt = sent
	c.tracker.Observe(list, now)
	c.invalidateFinished()
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
	if at, ok := c.tracker.NextExpiryOf(watch, now, c.cfg.LeaseDuration); ok && at.Sub(now) < c.cfg.LeaseSyncInterval {
		expiry.Reset(at.Sub(now))
	}
}

// listShards returns every shard of the stream, following NextToken.
// Each call is bounded by RequestTimeout.
func listShards(ctx context.Context, cfg Config, stream string) (map[string]types.Shard, error) {
	shards := map[string]types.Shard{}
	in := &awskinesis.ListShardsInput{StreamName: &stream}
	for {
		callCtx, cancel := clock.WithTimeout(ctx, cfg.Clock, cfg.RequestTimeout)
		out, err := cfg.Kinesis.ListShards(callCtx, in)
		cancel()
		if err != nil {
			if awscall.Classify(ctx, err) == awscall.NotFound {
				return nil, fmt.Errorf("%w: %q (create it, or set CreateStream in the config): %w", awscall.ErrStreamNotFound, stream, err)
			}
			return nil, fmt.Errorf("kinesis: listing the shards of stream %q: %w", stream, err)
		}
		for _, s := range out.Shards {
			if s.ShardId != nil {
				shards[*s.ShardId] = s
			}
		}
		if out.NextToken == nil || *out.NextToken == "" {
			return shards, nil
		}
		in = &awskinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

func parentsOf(s types.Shard) []string {
	var parents []string
	for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
		if p != nil && *p != "" {
			parents = append(parents, *p)
		}
	}
	return parents
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
