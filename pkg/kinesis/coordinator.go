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
// Ownership: the coordinator (start, then run) owns readers, starting, shards, learned, leases,
// tracker, asked, skipped, ended and progress; nothing else touches them. Readers share out and exits. The coordinator closes out
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
	// readied brings run the first report of each reader it started (see syncReaders).
	readied chan readyReport

	readers map[string]*shardReader
	// starting are the readers started that have not reported their first iterator yet.
	starting map[string]startingReader
	shards   map[string]types.Shard // the last shard listing, plus learned
	// learned are shards known from the ChildShards of a read that reached a parent's end and
	// not yet seen in a listing (ListShards may lag behind a reshard for a moment).
	learned  map[string]types.Shard
	leases   map[string]lease.Lease // the group's leases at the last lease sync
	tracker  *lease.Tracker
	asked    map[string]time.Time // shards whose lease this worker asked for, and when
	ended    map[string]bool      // without a group: shards read to their end
	skipped  map[string]bool      // closed shards a LATEST start skips (logged once each)
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
		readied:  make(chan readyReport),
		readers:  map[string]*shardReader{},
		starting: map[string]startingReader{},
		shards:   map[string]types.Shard{},
		learned:  map[string]types.Shard{},
		leases:   map[string]lease.Lease{},
		tracker:  lease.NewTracker(),
		asked:    map[string]time.Time{},
		ended:    map[string]bool{},
		skipped:  map[string]bool{},
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
			c.readerExited(ex)
			c.recheckIfNotFound(ex.err)
			if ex.shardEnded {
				// The children of a finished shard may start now, not at the next sync. The
				// read that reached the end named them; a Kinesis that does not (older
				// emulators) is asked for a listing.
				if len(ex.children) > 0 {
					c.logIfFailed("creating the leases of child shards", c.learnChildren(ex.children))
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
func (c *subscription) callContext() (context.Context, context.CancelFunc) {
	return clock.WithTimeout(c.ctx, c.cfg.Clock, c.cfg.RequestTimeout)
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
	shards, err := listShards(c.ctx, c.cfg, c.stream)
	if errors.Is(err, ErrStreamNotFound) && len(c.shards) > 0 {
		// The stream is gone: forget its shards, so that no reader is started on it until a
		// listing finds it again (a stream created again under the same name is read from
		// the checkpoints, or from TRIM_HORIZON where they are not its own).
		c.logger.Error("Stream not found (deleted?); no shard of it is read until a shard listing finds it again", err,
			c.logFields().Add(watermill.LogFields{"shard_sync_interval": c.cfg.ShardSyncInterval}))
		clear(c.shards)
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
	if !c.grouped() {
		return nil
	}
	if err := c.refreshLeases(); err != nil {
		return err
	}
	return c.createLeases(sortedKeys(shards))
}

// recheckIfNotFound lists the shards at once when a reader met ResourceNotFound. Without it, a
// deleted stream's shards stayed known: in the fault suite, two instances started a reader of
// each shard at every lease sync for as long as the stream was gone (313 GetShardIterator calls,
// 671 lease takes and releases and 321 error lines in two minutes). The listing tells a stream
// that is gone (syncShards then forgets its shards) from a shard that aged out of the stream
// (no longer listed, so not read again).
func (c *subscription) recheckIfNotFound(err error) {
	if err == nil || c.ctx.Err() != nil || len(c.shards) == 0 || classify(c.ctx, err) != classNotFound {
		return
	}
	c.logIfFailed("listing shards", c.syncShards())
}

// learnChildren adds the children a finished shard named to the known shards and, in a group,
// creates their leases, with their parents, so they can be taken at once.
func (c *subscription) learnChildren(children []types.ChildShard) error {
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
func (c *subscription) createLeases(ids []string) error {
	for _, id := range ids {
		if _, ok := c.leases[id]; ok {
			continue
		}
		ctx, cancel := c.callContext()
		l, err := c.cfg.LeaseStore.Create(ctx, lease.Lease{
			Group: c.cfg.ConsumerGroup, Stream: c.stream, ShardID: id, Parents: parentsOf(c.shards[id]),
		})
		cancel()
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
	ctx, cancel := c.callContext()
	list, err := c.cfg.LeaseStore.List(ctx, c.cfg.ConsumerGroup, c.stream)
	cancel()
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

// launch starts readers for the shards this subscription should read and has not started yet.
func (c *subscription) launch() ([]*shardReader, error) {
	if c.grouped() {
		return c.takeLeases()
	}
	return c.startUnleased(), nil
}

// startReaders, for Subscribe, starts readers and waits until each holds its iterator.
func (c *subscription) startReaders() error {
	started, err := c.launch()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range started {
		select {
		case rerr := <-r.ready:
			if rerr = c.readerReady(r, rerr); rerr != nil {
				errs = append(errs, rerr)
			}
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// syncReaders, for run, starts readers without waiting for their first iterators: each
// reader's report comes to run through readied. Waiting here held the coordinator up for as
// long as GetShardIterator failed: in the fault suite, a 30 s iterator outage while an instance
// joined stopped its lease syncs for 28 s (no lost lease fenced, no handoff request passed on,
// no expired lease taken), and the new reader's lease, which no one renews before the reader
// holds its iterator, expired and went to another instance while this one still counted it
// as its own. giveUpLate now stops such a reader before its lease could expire.
func (c *subscription) syncReaders() error {
	started, err := c.launch()
	for _, r := range started {
		go c.forwardReady(r)
	}
	return err
}

// forwardReady passes r's first report to run; it ends with the subscription.
func (c *subscription) forwardReady(r *shardReader) {
	select {
	case err := <-r.ready:
		select {
		case c.readied <- readyReport{r: r, err: err}:
		case <-c.ctx.Done():
		}
	case <-c.ctx.Done():
	}
}

// startingReader is a reader that has not reported its first iterator yet; by is when, with a
// lease, it must have it (the point where an owner that has not renewed stops), zero without.
type startingReader struct {
	r  *shardReader
	by time.Time
}

// readyReport is a reader's first report: nil once it holds its iterator, or why not.
type readyReport struct {
	r   *shardReader
	err error
}

// readerReady notes a reader's first report and returns its error. A reader stopped on
// purpose (giveUpLate, Close) reports context.Canceled, which is not an error here.
func (c *subscription) readerReady(r *shardReader, err error) error {
	if s, ok := c.starting[r.shardID]; ok && s.r == r {
		delete(c.starting, r.shardID)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return nil
	case err != nil:
		return err
	case r.leased && c.readers[r.shardID] == r:
		c.hook(c.cfg.OnShardAcquired, r.shardID)
	}
	return nil
}

// giveUpLate stops the readers still without an iterator at their lease's stop point: a reader
// renews its lease only once it reads, so the lease would otherwise expire under it. Stopped,
// the reader releases the lease; a later lease sync tries again.
func (c *subscription) giveUpLate() {
	now := c.cfg.Clock.Now()
	for _, id := range sortedKeys(c.starting) {
		s := c.starting[id]
		if s.by.IsZero() || now.Before(s.by) {
			continue
		}
		err := &ShardError{Stream: c.stream, ShardID: id, Err: fmt.Errorf("no shard iterator within %s of taking the lease", leaseStopAfter(c.cfg))}
		c.logger.Error("Giving the lease back: the reader could not get a shard iterator before the lease needed renewing; a later lease sync tries again",
			err, c.logFields().Add(watermill.LogFields{"shard": id}))
		s.r.cancel()
		delete(c.starting, id)
	}
}

// armLate sets the late timer to the first stop point of a starting reader with a lease.
func (c *subscription) armLate(late clock.Timer) {
	late.Stop()
	var first time.Time
	for _, s := range c.starting {
		if !s.by.IsZero() && (first.IsZero() || s.by.Before(first)) {
			first = s.by
		}
	}
	if !first.IsZero() {
		late.Reset(first.Sub(c.cfg.Clock.Now()))
	}
}

// startUnleased starts a reader for every shard not read yet whose parents are done.
func (c *subscription) startUnleased() []*shardReader {
	var started []*shardReader
	for _, id := range sortedKeys(c.shards) {
		if c.readers[id] != nil || c.ended[id] || !c.parentsDone(parentsOf(c.shards[id])) {
			continue
		}
		if c.progress[id] == "" && c.skipClosed(id) {
			c.ended[id] = true
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
	ctx, cancel := c.callContext()
	taken, err := c.cfg.LeaseStore.Take(ctx, l, c.cfg.WorkerID)
	cancel()
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
	ctx, cancel := c.callContext()
	asked, err := c.cfg.LeaseStore.RequestHandoff(ctx, l, c.cfg.WorkerID)
	cancel()
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
	if _, listed := c.shards[l.ShardID]; !listed || l.Checkpoint == lease.ShardEnd || c.skipLease(l) {
		return false
	}
	return c.parentsDone(l.Parents)
}

// skipLease: a closed shard that this group, starting at LATEST, never read. Its records all
// came before any reader of the group could have started there, so LATEST skips them: it is
// never taken and counts as finished for its children. Generation 0 means nobody ever took
// the lease, so nothing of the shard was delivered; a shard the group did read is finished by
// reading it to its end, as usual.
func (c *subscription) skipLease(l lease.Lease) bool {
	return l.Checkpoint == "" && l.Generation == 0 && l.Owner == "" && c.skipClosed(l.ShardID)
}

// skipClosed: the subscription starts at LATEST and the shard is closed (the listing shows an
// ending sequence number). It logs the first time it skips a shard.
func (c *subscription) skipClosed(id string) bool {
	s, listed := c.shards[id]
	if c.cfg.InitialPosition.Type != Latest || !listed || s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
		return false
	}
	if !c.skipped[id] {
		c.skipped[id] = true
		c.logger.Info("Skipping a closed shard never read: the subscription starts at LATEST", c.logFields().Add(watermill.LogFields{"shard": id}))
	}
	return true
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
			if l, ok := c.leases[p]; !ok || (l.Checkpoint != lease.ShardEnd && !c.skipLease(l)) {
				return false
			}
		} else if !c.ended[p] && !(c.progress[p] == "" && c.readers[p] == nil && c.skipClosed(p)) {
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
	var by time.Time
	if held != nil {
		r.leased, r.generation = true, held.Generation
		by = takenAt.Add(leaseStopAfter(c.cfg))
	}
	c.readers[shardID] = r
	c.starting[shardID] = startingReader{r: r, by: by}
	go r.run()
	return r
}

// listShards returns every shard of the stream, following NextToken.
// Each call is bounded by RequestTimeout.
func listShards(ctx context.Context, cfg SubscriberConfig, stream string) (map[string]types.Shard, error) {
	shards := map[string]types.Shard{}
	in := &awskinesis.ListShardsInput{StreamName: &stream}
	for {
		callCtx, cancel := clock.WithTimeout(ctx, cfg.Clock, cfg.RequestTimeout)
		out, err := cfg.Client.ListShards(callCtx, in)
		cancel()
		if err != nil {
			if classify(ctx, err) == classNotFound {
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
