package group

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Subscription is one Subscribe call: a coordinator goroutine and a reader goroutine per shard
// it reads. In a group, each subscription is its own member, named by cfg.WorkerID (see
// pkg/kinesis's Subscriber.memberID).
//
// Ownership: the coordinator (start, then run, then shutdown) owns everything here but what
// says otherwise: the member record the heartbeat goroutine writes (members.last), the notice
// channel and what Status publishes through atomics. Readers send on out and exits (through the
// links they were handed) and, through forwardReady, readied. The coordinator closes quit when
// it stops taking exit reports, then out (after every reader has finished, so no send can
// follow), then done.
type Subscription struct {
	// cfg is read-only after New: the heartbeat goroutine reads it from the start.
	cfg Config
	// readerCfg is what every reader is given by pointer: cfg.Config and, with enhanced
	// fan-out, the stream consumer (FanOut), which start sets before any reader starts.
	// Read-only after that.
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
	// subscription's context and the reader count.
	links  shard.Links
	shards map[string]types.Shard // the last shard listing, plus learned
	// learned are shards known from the ChildShards of a read that reached a parent's end and
	// not yet seen in a listing (ListShards may lag behind a reshard for a moment).
	learned map[string]types.Shard
	leases  leaseView             // the group's leases as last listed (leases.go)
	members memberView            // this member's record and the others' (members.go)
	asked   map[string]handoffAsk // leases this worker asked for
	// deletable are finished shards whose lease nothing can need again, and since when (on
	// the clock): cleanFinished deletes the lease once that has lasted deleteFinishedAfter.
	deletable map[string]time.Time
	// finished caches finishedWithoutLease; nil until worked out after a change.
	finished map[string]bool
	ended    map[string]bool   // without a group: shards read to their end
	skipped  map[string]bool   // closed shards a LATEST start skips (logged once each)
	progress map[string]string // without a group: where a restarted reader resumes
	failures map[string]int    // coordinator steps failed in a row, by step (logIfFailed)
	// warnedDeletes: deleting a finished shard's lease failed, and one WARN said so.
	warnedDeletes bool
	foreignW      foreignWatch // live workers outside the group's protocol (foreign.go)
	// lastLeaseSync is when the lease store last answered a member read or a lease listing
	// (UnixNano, on the clock), for Subscriber.Health on other goroutines.
	lastLeaseSync atomic.Int64
}

func newSubscription(ctx context.Context, cfg Config) *Subscription {
	ctx, cancel := context.WithCancel(ctx)
	c := &Subscription{
		cfg: cfg, readerCfg: cfg.Config,
		ctx: ctx, cancel: cancel,
		out:       make(chan *message.Message),
		exits:     make(chan shard.Exit),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		readied:   make(chan readyReport),
		readers:   newReaderTable(),
		shards:    map[string]types.Shard{},
		learned:   map[string]types.Shard{},
		leases:    leaseView{byShard: map[string]lease.Lease{}, seen: tracker{}},
		asked:     map[string]handoffAsk{},
		deletable: map[string]time.Time{},
		ended:     map[string]bool{},
		skipped:   map[string]bool{},
		progress:  map[string]string{},
		failures:  map[string]int{},
		foreignW:  newForeignWatch(cfg.LeaseStore),
	}
	c.members.init(cfg.LeaseStore)
	c.links = shard.Links{
		Out: c.out, Exits: c.exits, Quit: c.quit, Closing: ctx,
		Readers: func() int { return int(c.readers.count.Load()) },
	}
	return c
}

func (c *Subscription) grouped() bool { return c.cfg.Group != "" }

func (c *Subscription) logFields() watermill.LogFields {
	return c.cfg.LogFields()
}

// run is the coordinator goroutine: periodic lease and shard syncs, reader exits, and a lease
// sync at once when another worker sends a notice or a lease expires.
//
// It ends when the context is cancelled (Close or the Subscribe context); shutdown then stops
// the readers in order.
func (c *Subscription) run() {
	defer c.shutdown()
	leaseSync := time.NewTicker(c.cfg.LeaseSyncInterval)
	defer leaseSync.Stop()
	shardSync := time.NewTicker(c.cfg.ShardSyncInterval)
	defer shardSync.Stop()
	// expiry fires when a lease of a worker that is not alive expires (nextExpiry), so that a
	// crashed worker's shards move after LeaseDuration, not up to a lease sync later.
	expiry := time.NewTimer(c.cfg.LeaseSyncInterval)
	defer expiry.Stop()
	c.armExpiry(expiry)
	// late fires when a new reader's lease needs renewing and the reader has no iterator yet.
	late := time.NewTimer(c.cfg.LeaseSyncInterval)
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
			continue
		case <-late.C:
			c.giveUpLate()
			continue
		case ex := <-c.exits:
			if !c.readerExited(ex) {
				continue
			}
			c.recheckIfNotFound(ex.Err)
			if ex.HandedTo != "" {
				// The new owner sees the lease is its own at its next listing; a notice
				// brings that forward to its next heartbeat.
				ctx, cancel := c.callContext()
				c.notify(ctx, []string{ex.HandedTo})
				cancel()
			}
			if !ex.ShardEnded {
				continue
			}
			// The children of a finished shard may start now, not at the next sync. The read
			// that reached the end named them; a Kinesis that does not (older emulators) is
			// asked for a listing.
			if len(ex.Children) > 0 {
				c.logIfFailed("creating the leases of child shards", c.learnChildren(ex.Children))
			} else {
				c.logIfFailed("listing shards", c.syncShards())
			}
			c.logIfFailed("starting readers", c.syncReaders())
			c.notifyFree()
		case <-shardSync.C:
			c.logIfFailed("listing shards", c.syncShards())
			continue
		case <-leaseSync.C:
			c.logIfFailed("syncing leases", c.syncReaders())
		case <-expiry.C:
			c.logIfFailed("syncing leases at a lease's expiry", c.syncReaders())
		case <-c.members.notice:
			c.leases.soon = true
			c.logIfFailed("syncing leases for a notice from another worker", c.syncReaders())
		}
		c.armExpiry(expiry)
	}
}

// callContext bounds one lease store call of the coordinator by RequestTimeout: a store that
// hangs must not hold up lease syncs, reader exits and handoff signals for good.
func (c *Subscription) callContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
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
