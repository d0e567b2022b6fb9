package kinesis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// subscription is one Subscribe call: a coordinator goroutine and a reader goroutine per shard
// it reads.
//
// Ownership: the coordinator (start, then run) owns readers, shards, leases, tracker, ended and
// progress; nothing else touches them. Readers share out and exits. The coordinator closes out
// (after every reader has reported its exit, so no send can follow) and then done.
type subscription struct {
	cfg    SubscriberConfig
	logger watermill.LoggerAdapter
	stream string

	ctx    context.Context
	cancel context.CancelFunc
	out    chan *message.Message
	exits  chan readerExit
	done   chan struct{}

	readers  map[string]*shardReader
	shards   map[string]types.Shard // the last shard listing
	leases   map[string]lease.Lease // the group's leases at the last lease sync
	tracker  *lease.Tracker
	asked    map[string]time.Time // shards whose lease this worker asked for, and when
	ended    map[string]bool      // without a group: shards read to their end
	progress map[string]string    // without a group: where a restarted reader resumes
}

func newSubscription(ctx context.Context, cfg SubscriberConfig, logger watermill.LoggerAdapter, stream string) *subscription {
	ctx, cancel := context.WithCancel(ctx)
	return &subscription{
		cfg: cfg, logger: logger, stream: stream,
		ctx: ctx, cancel: cancel,
		out:      make(chan *message.Message),
		exits:    make(chan readerExit),
		done:     make(chan struct{}),
		readers:  map[string]*shardReader{},
		shards:   map[string]types.Shard{},
		leases:   map[string]lease.Lease{},
		tracker:  lease.NewTracker(),
		asked:    map[string]time.Time{},
		ended:    map[string]bool{},
		progress: map[string]string{},
	}
}

func (c *subscription) grouped() bool { return c.cfg.ConsumerGroup != "" }

func (c *subscription) logFields() watermill.LogFields {
	return watermill.LogFields{"stream": c.stream, "group": c.cfg.ConsumerGroup, "worker": c.cfg.WorkerID}
}

// start lists the shards, takes what leases it can and starts their readers; it returns once
// every reader it started holds its iterator, so that a record published after Subscribe
// returns is one this subscription reads.
func (c *subscription) start() error {
	if err := c.syncShards(); err != nil {
		return err
	}
	return c.startReaders()
}

// run is the coordinator goroutine: periodic lease and shard syncs, and reader exits.
//
// Shutdown order: the context is cancelled (Close or the Subscribe context); every reader
// stops, checkpoints and releases its lease, then reports its exit; once all have, out is
// closed, then done.
func (c *subscription) run() {
	defer c.shutdown()
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
	for {
		select {
		case <-c.ctx.Done():
			return
		case ex := <-c.exits:
			c.readerExited(ex)
			if ex.shardEnded {
				// The children of a finished shard may start now, not at the next sync.
				c.logIfFailed("listing shards", c.syncShards())
				c.logIfFailed("starting readers", c.startReaders())
			}
		case <-leaseSync.C():
			c.logIfFailed("syncing leases", c.startReaders())
			c.armExpiry(expiry)
		case <-expiry.C():
			c.logIfFailed("syncing leases at a lease's expiry", c.startReaders())
			c.armExpiry(expiry)
		case <-shardSync.C():
			c.logIfFailed("listing shards", c.syncShards())
		}
	}
}

func (c *subscription) logIfFailed(what string, err error) {
	if err != nil && c.ctx.Err() == nil {
		c.logger.Error("Coordinator failed "+what+"; will retry", err, c.logFields())
	}
}

// shutdown waits for every reader's exit, then closes out and done.
func (c *subscription) shutdown() {
	c.cancel()
	for len(c.readers) > 0 {
		c.readerExited(<-c.exits)
	}
	close(c.out)
	close(c.done)
}

func (c *subscription) readerExited(ex readerExit) {
	delete(c.readers, ex.shardID)
	if ex.lastAcked != "" {
		c.progress[ex.shardID] = ex.lastAcked
	}
	if ex.shardEnded {
		c.ended[ex.shardID] = true
	}
}

// syncShards lists the stream's shards and, in a group, creates the leases of new ones.
func (c *subscription) syncShards() error {
	shards, err := listShards(c.ctx, c.cfg.Client, c.stream)
	if err != nil {
		return err
	}
	c.shards = shards
	if !c.grouped() {
		return nil
	}
	if err := c.refreshLeases(); err != nil {
		return err
	}
	for _, id := range sortedKeys(shards) {
		if _, ok := c.leases[id]; ok {
			continue
		}
		l, err := c.cfg.LeaseStore.Create(c.ctx, lease.Lease{
			Group: c.cfg.ConsumerGroup, Stream: c.stream, ShardID: id, Parents: parentsOf(shards[id]),
		})
		if err != nil && !errors.Is(err, lease.ErrLeaseExists) {
			return fmt.Errorf("kinesis: creating the lease of shard %q of stream %q: %w", id, c.stream, err)
		}
		if err == nil {
			c.leases[id] = l
		}
	}
	return nil
}

func (c *subscription) refreshLeases() error {
	list, err := c.cfg.LeaseStore.List(c.ctx, c.cfg.ConsumerGroup, c.stream)
	if err != nil {
		return fmt.Errorf("kinesis: listing the leases of group %q on stream %q: %w", c.cfg.ConsumerGroup, c.stream, err)
	}
	c.tracker.Observe(list, c.cfg.Clock.Now())
	clear(c.leases)
	for _, l := range list {
		c.leases[l.ShardID] = l
	}
	return nil
}

// startReaders starts readers for the shards this subscription should read and has not
// started yet, and waits until each holds its iterator.
func (c *subscription) startReaders() error {
	var started []*shardReader
	var err error
	if c.grouped() {
		started, err = c.takeLeases()
	} else {
		started = c.startUnleased()
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range started {
		select {
		case rerr := <-r.ready:
			if rerr != nil {
				errs = append(errs, rerr)
			} else if r.leased {
				c.hook(c.cfg.OnShardAcquired, r.shardID)
			}
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// startUnleased starts a reader for every shard not read yet whose parents are done.
func (c *subscription) startUnleased() []*shardReader {
	var started []*shardReader
	for _, id := range sortedKeys(c.shards) {
		if c.readers[id] != nil || c.ended[id] || !c.parentsDone(parentsOf(c.shards[id])) {
			continue
		}
		pos := position{after: c.progress[id], initial: c.cfg.InitialPosition}
		started = append(started, c.startReader(id, pos, nil, time.Time{}))
	}
	return started
}

// takeLeases brings this worker to its fair share (lease.PlanShare): it fences readers whose
// lease moved on, tells readers whose lease another worker asked for to hand it over, starts
// readers for leases handed to it, takes free or expired leases up to its target, and, below
// target with nothing free, asks the most loaded worker for one lease (taking it itself if
// the owner has not handed it over within HandoffTimeout).
func (c *subscription) takeLeases() ([]*shardReader, error) {
	if err := c.refreshLeases(); err != nil {
		return nil, err
	}
	now := c.cfg.Clock.Now()
	me := c.cfg.WorkerID
	for id, r := range c.readers {
		l, ok := c.leases[id]
		switch {
		case !ok || l.Owner != me || l.Generation != r.generation:
			r.markLost()
		case l.PendingOwner != "":
			r.requestHandoff()
		}
	}
	list := make([]lease.Lease, 0, len(c.leases))
	for _, id := range sortedKeys(c.leases) {
		list = append(list, c.leases[id])
	}
	plan := lease.PlanShare(lease.ShareInput{
		Self:     me,
		Leases:   list,
		Live:     func(l lease.Lease) bool { return !c.tracker.Expired(l, now, c.cfg.LeaseDuration) },
		Eligible: c.eligible,
	})
	var started []*shardReader
	for _, l := range list {
		// Ours with no reader: handed to this worker, or left by a reader that stopped when
		// it could not renew. Taking it again bumps the counter and the generation, so that
		// nobody judges it expired from before and no earlier reader of ours can write.
		if l.Owner == me && c.readers[l.ShardID] == nil && c.eligible(l) {
			if r := c.take(l); r != nil {
				started = append(started, r)
			}
		}
	}
	for _, l := range plan.Take {
		if r := c.take(l); r != nil {
			started = append(started, r)
		}
	}
	if plan.Steal != nil {
		c.ask(*plan.Steal)
	}
	started = append(started, c.takeOverdue(now)...)
	return started, nil
}

// take takes one lease and starts its reader; nil if another worker was faster.
func (c *subscription) take(l lease.Lease) *shardReader {
	takenAt := c.cfg.Clock.Now()
	taken, err := c.cfg.LeaseStore.Take(c.ctx, l, c.cfg.WorkerID)
	if err != nil {
		c.logger.Debug("Lease not taken", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		return nil
	}
	delete(c.asked, l.ShardID)
	c.leases[l.ShardID] = taken
	return c.startReader(l.ShardID, position{after: taken.Checkpoint, initial: c.cfg.InitialPosition}, &taken, takenAt)
}

// ask marks this worker as the pending owner of a lease of the most loaded worker.
func (c *subscription) ask(l lease.Lease) {
	asked, err := c.cfg.LeaseStore.RequestHandoff(c.ctx, l, c.cfg.WorkerID)
	if err != nil {
		c.logger.Debug("Handoff not requested", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		return
	}
	c.logger.Info("Asked for a lease to even out the group", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "owner": l.Owner}))
	c.leases[l.ShardID] = asked
	c.asked[l.ShardID] = c.cfg.Clock.Now()
}

// takeOverdue takes the leases this worker asked for and did not get within HandoffTimeout,
// and forgets requests that another change of owner made moot.
func (c *subscription) takeOverdue(now time.Time) []*shardReader {
	var started []*shardReader
	for _, id := range sortedKeys(c.asked) {
		l, ok := c.leases[id]
		switch {
		case !ok || l.Owner == c.cfg.WorkerID || l.PendingOwner != c.cfg.WorkerID:
			delete(c.asked, id)
		case now.Sub(c.asked[id]) >= c.cfg.HandoffTimeout && c.eligible(l):
			c.logger.Info("Owner did not hand the lease over in time; taking it", c.logFields().Add(watermill.LogFields{"shard": id, "owner": l.Owner}))
			if r := c.take(l); r != nil {
				started = append(started, r)
			}
		}
	}
	return started
}

// eligible: a listed shard, not finished, whose parents are finished, which keeps each key's
// records in order across a reshard.
func (c *subscription) eligible(l lease.Lease) bool {
	if _, listed := c.shards[l.ShardID]; !listed || l.Checkpoint == lease.ShardEnd {
		return false
	}
	return c.parentsDone(l.Parents)
}

// armExpiry sets the expiry timer to the next expiry of another worker's lease, if that comes
// before the next periodic lease sync.
func (c *subscription) armExpiry(expiry clock.Timer) {
	expiry.Stop()
	if !c.grouped() {
		return
	}
	now := c.cfg.Clock.Now()
	if at, ok := c.tracker.NextExpiry(c.cfg.WorkerID, now, c.cfg.LeaseDuration); ok && at.Sub(now) < c.cfg.LeaseSyncInterval {
		expiry.Reset(at.Sub(now))
	}
}

// hook calls one of the SubscriberConfig hooks, if set.
func (c *subscription) hook(f func(ShardEvent), shardID string) {
	if f != nil {
		f(ShardEvent{Stream: c.stream, ShardID: shardID, ConsumerGroup: c.cfg.ConsumerGroup, WorkerID: c.cfg.WorkerID})
	}
}

// parentsDone: every parent is finished, or no longer listed (aged out of the stream).
func (c *subscription) parentsDone(parents []string) bool {
	for _, p := range parents {
		if _, listed := c.shards[p]; !listed {
			continue
		}
		if c.grouped() {
			if l, ok := c.leases[p]; !ok || l.Checkpoint != lease.ShardEnd {
				return false
			}
		} else if !c.ended[p] {
			return false
		}
	}
	return true
}

func (c *subscription) startReader(shardID string, pos position, held *lease.Lease, takenAt time.Time) *shardReader {
	ctx, cancel := context.WithCancel(c.ctx)
	r := &shardReader{
		sub: c, shardID: shardID, ctx: ctx, cancel: cancel,
		lost: make(chan struct{}), handoff: make(chan struct{}, 1), ready: make(chan error, 1),
		start: pos, held: held, renewed: takenAt,
	}
	if held != nil {
		r.leased, r.generation = true, held.Generation
	}
	c.readers[shardID] = r
	go r.run()
	return r
}

// listShards returns every shard of the stream, following NextToken.
func listShards(ctx context.Context, client KinesisAPI, stream string) (map[string]types.Shard, error) {
	shards := map[string]types.Shard{}
	in := &awskinesis.ListShardsInput{StreamName: &stream}
	for {
		out, err := client.ListShards(ctx, in)
		if err != nil {
			if classify(err) == classNotFound {
				return nil, fmt.Errorf("%w: %q (create it, or set CreateStream in the config): %w", ErrStreamNotFound, stream, err)
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
