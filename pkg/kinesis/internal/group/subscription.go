package group

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Subscription is one Subscribe call: a coordinator goroutine and a reader goroutine per shard
// it reads. In a group, each subscription is its own member, named by cfg.WorkerID (see
// pkg/kinesis's Subscriber.memberID).
//
// Ownership: the coordinator (start, then run, then shutdown) owns readers, shards, learned,
// leases, tracker, members, member, asked, deletable, finished, skipped, ended and progress;
// nothing else touches them. Readers send on out and exits (through the links they were
// handed) and, through forwardReady, readied. The coordinator closes quit when it stops
// taking exit reports, then out (after every reader has finished, so no send can follow), then
// done.
type Subscription struct {
	// cfg is read-only after New: the heartbeat goroutine reads it from the start.
	cfg Config
	// readerCfg is what every reader is given by pointer: cfg.Config and, with enhanced
	// fan-out, the stream consumer (FanOut), which start sets on Subscribe's goroutine before
	// any reader starts. Read-only after that. Kept apart from cfg, since writing FanOut into
	// cfg raced with the heartbeat goroutine's reads of it.
	readerCfg shard.Config

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
	links  shard.Links
	shards map[string]types.Shard // the last shard listing, plus learned
	// learned are shards known from the ChildShards of a read that reached a parent's end and
	// not yet seen in a listing (ListShards may lag behind a reshard for a moment).
	learned map[string]types.Shard
	leases  map[string]lease.Lease // the group's leases at the last listing, and as this worker's writes left them
	tracker *lease.Tracker
	members *lease.MemberTracker // the group's members at the last lease sync
	hb      heartbeat            // this subscription's member record (its own goroutine; see heartbeat)
	vouch   *vouching            // what the heartbeats promise the readers (written by beat)
	// liveAtList and recordsAtList are the live members and every member record as of the
	// last lease listing of a lease sync (nil before the first): one gone since lists again.
	liveAtList, recordsAtList []string
	// liveSeen are the live members at the last member read (nil before the first), for the
	// log of member changes (logMemberChanges).
	liveSeen []string
	// syncListed: a lease sync has listed the leases (the fields ...AtList are set).
	syncListed bool
	// listTimeouts counts the lease listings that timed out in a row (refreshLeases).
	listTimeouts int
	// readsAll: this member reads every member record at every lease sync (roster.go);
	// fullReads counts the full reads it made; readNow are the workers whose records the
	// last read showed, in order: those whose heartbeats this worker can time; rosterRead is
	// the digest of the last full read, leaderSeen the leader's Seen as last read. pubRoster
	// and pubSeen are what the heartbeats publish (written by the coordinator, read by the
	// beat goroutine).
	readsAll           bool
	fullReads          int
	readNow            []string
	readSet            map[string]bool // readNow as a set
	rosterRead         int64
	leaderSeen         int64
	pubRoster, pubSeen atomic.Int64
	// askedOf: a heartbeat showed Member.Asked moved (set by the beat goroutine, taken by
	// leaseListDue); askedNow (buffered, 1) has run make a lease sync at once for it.
	askedOf     atomic.Bool
	readAllSoon atomic.Bool // set with askedOf, taken by fullReadDue
	askedNow    chan struct{}
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
	// foreignW watches for live workers outside the group's protocol (foreign.go).
	foreignW foreignWatch
	// lastLeaseSync is when the lease store last answered a lease sync's member read or a
	// lease listing (UnixNano, on the clock), for Subscriber.Health on other goroutines.
	lastLeaseSync atomic.Int64
}

func newSubscription(ctx context.Context, cfg Config) *Subscription {
	ctx, cancel := context.WithCancel(ctx)
	c := &Subscription{
		cfg: cfg, readerCfg: cfg.Config,
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
		askedNow:    make(chan struct{}, 1),
		quietListed: map[string]int64{},
		asked:       map[string]handoffAsk{},
		deletable:   map[string]time.Time{},
		ended:       map[string]bool{},
		skipped:     map[string]bool{},
		progress:    map[string]string{},
		failures:    map[string]int{},
		foreignW:    newForeignWatch(cfg.LeaseStore),
	}
	c.links = shard.Links{
		Out: c.out, Exits: c.exits, Quit: c.quit, Closing: ctx, Changed: c.changed,
		Readers: func() int { return int(c.readers.count.Load()) },
	}
	if c.grouped() {
		c.vouch = newVouching(shard.LeaseStopAfter(&c.cfg.Config))
		c.links.Vouch = c.vouch
	}
	return c
}

func (c *Subscription) grouped() bool { return c.cfg.Group != "" }

func (c *Subscription) logFields() watermill.LogFields {
	return c.cfg.LogFields()
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
		case <-c.askedNow:
			c.logIfFailed("syncing leases for a handoff request", c.syncReaders())
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
// once when the same step keeps failing (awscall.FailuresBeforeError in a row: 16 s of lease
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
	if n == awscall.FailuresBeforeError {
		c.cfg.Logger.Error("Coordinator keeps failing "+what+"; will retry", err, fields)
		return
	}
	logs.Warn(c.cfg.Logger, "Coordinator failed "+what+"; will retry", err, fields)
}
