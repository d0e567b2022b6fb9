package group

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// readerTable is a subscription's live readers: at most one per shard, by construction.
//
// A reader stays in the table from its start until the coordinator has its exit report, so
// the table also holds readers that are stopping (fenced, given up, finishing their last
// checkpoint). add refuses a second reader for a shard that has one; remove takes a reader
// out only if it is the one the table holds. Without the identity check, the late exit of a
// stopping reader removed the successor a lease sync had started meanwhile: the shard then
// counted as "ours with no reader" at every sync and got another reader each time, while the
// untracked ones kept delivering (lease generation 6 → 37 in 3 s, every message delivered
// twice, goroutines left after Close).
//
// The coordinator goroutine owns the table; count is its size for the readers, which size
// their reads by their share of the memory budget (holdLimit).
type readerTable struct {
	byShard map[string]*readerEntry
	count   atomic.Int32
	// readers is a copy of the table's readers in shard order, replaced at each add and
	// remove, for Subscriber.Health on other goroutines.
	readers atomic.Pointer[[]*shard.Reader]
}

// readerEntry is one live reader; readyBy is when, with a lease, it must hold its first
// iterator (the point where an owner that has not renewed stops), zero once it does.
type readerEntry struct {
	r       *shard.Reader
	readyBy time.Time
}

func newReaderTable() *readerTable { return &readerTable{byShard: map[string]*readerEntry{}} }

// errReaderLive: a shard already has a live reader in this subscription.
var errReaderLive = errors.New("the shard has a live reader in this subscription")

// add records r as its shard's reader; it fails if the shard has one, live or stopping.
func (t *readerTable) add(r *shard.Reader, readyBy time.Time) error {
	if cur, ok := t.byShard[r.ShardID()]; ok {
		return fmt.Errorf("%w (generation %d)", errReaderLive, cur.r.Generation())
	}
	t.byShard[r.ShardID()] = &readerEntry{r: r, readyBy: readyBy}
	t.published()
	return nil
}

// published updates what other goroutines see of the table: count and readers.
func (t *readerTable) published() {
	t.count.Store(int32(len(t.byShard)))
	readers := make([]*shard.Reader, 0, len(t.byShard))
	for _, id := range sortedKeys(t.byShard) {
		readers = append(readers, t.byShard[id].r)
	}
	t.readers.Store(&readers)
}

// snapshot is the table's readers at its last change, in shard order; any goroutine may call it.
func (t *readerTable) snapshot() []*shard.Reader {
	if p := t.readers.Load(); p != nil {
		return *p
	}
	return nil
}

// remove forgets r, and reports whether r was the shard's reader; an exit report from a
// reader the table does not hold changes nothing.
func (t *readerTable) remove(r *shard.Reader) bool {
	if cur, ok := t.byShard[r.ShardID()]; ok && cur.r == r {
		delete(t.byShard, r.ShardID())
		t.published()
		return true
	}
	return false
}

// get returns the shard's reader, or nil.
func (t *readerTable) get(shardID string) *shard.Reader {
	if e, ok := t.byShard[shardID]; ok {
		return e.r
	}
	return nil
}

// has reports whether the shard has a reader, live or stopping.
func (t *readerTable) has(shardID string) bool { _, ok := t.byShard[shardID]; return ok }

func (t *readerTable) len() int { return len(t.byShard) }

// readied notes that r holds its first iterator (or gave up trying).
func (t *readerTable) readied(r *shard.Reader) {
	if e, ok := t.byShard[r.ShardID()]; ok && e.r == r {
		e.readyBy = time.Time{}
	}
}

// late returns the readers past their readyBy at now, in shard order, and clears their
// readyBy so that each is returned once.
func (t *readerTable) late(now time.Time) []*shard.Reader {
	var late []*shard.Reader
	for _, id := range sortedKeys(t.byShard) {
		e := t.byShard[id]
		if !e.readyBy.IsZero() && !now.Before(e.readyBy) {
			e.readyBy = time.Time{}
			late = append(late, e.r)
		}
	}
	return late
}

// firstReadyBy is the earliest readyBy of the table, zero if none.
func (t *readerTable) firstReadyBy() time.Time {
	var first time.Time
	for _, e := range t.byShard {
		first = shard.Earliest(first, e.readyBy)
	}
	return first
}

// startReader starts a reader of shardID unless the shard has one; nil then. held is the lease
// it reads under (nil without a group), taken at takenAt.
func (c *Subscription) startReader(shardID string, pos shard.Start, held *lease.Lease, takenAt time.Time) *shard.Reader {
	r := shard.New(&c.readerCfg, &c.links, c.cfg.Metrics.ForShard(shardID), shardID, pos, held, takenAt)
	var readyBy time.Time
	if held != nil {
		readyBy = takenAt.Add(shard.LeaseStopAfter(&c.cfg.Config))
	}
	if err := c.readers.add(r, readyBy); err != nil {
		r.Stop()
		c.cfg.Logger.Error("Not starting a second reader of a shard", err, r.LogFields())
		return nil
	}
	go r.Run()
	return r
}

// readerExited takes an exit report: the table forgets the reader, if it is the one the
// table holds, and what the reader achieved is noted. It reports whether the exit was that
// reader's; any other is ignored.
func (c *Subscription) readerExited(ex shard.Exit) bool {
	r := ex.Reader
	if !c.readers.remove(r) {
		c.cfg.Logger.Error("Exit report of a reader that is not the shard's; ignored", ex.Err, r.LogFields())
		return false
	}
	if ex.LastAcked != "" {
		c.progress[r.ShardID()] = ex.LastAcked
	}
	if ex.ShardEnded {
		c.ended[r.ShardID()] = true
	}
	c.leases.soon = true // its lease was released, lost or handed over: the next lease sync sees how
	return true
}

// startReaders, for Subscribe, starts readers and waits until each holds its iterator. A
// reader still without one at its lease's stop point is given up (giveUpLate), as at a lease
// sync: now that a timed-out GetShardIterator is retried, a hung one would otherwise hold
// Subscribe for as long as it hangs, with the lease expiring unrenewed.
func (c *Subscription) startReaders() error {
	started, err := c.launch()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	late := time.NewTimer(c.cfg.LeaseSyncInterval)
	defer late.Stop()
	reports := make([]error, len(started))
	reported := make([]bool, len(started))
	// collect takes the first reports already in, so that a reader that holds its iterator is
	// never given up for waiting behind a slower one.
	collect := func() {
		for i, r := range started {
			if reported[i] {
				continue
			}
			select {
			case reports[i] = <-r.Ready():
				reported[i] = true
				c.readers.readied(r)
			default:
			}
		}
	}
	for i, r := range started {
		for !reported[i] {
			c.armLate(late)
			select {
			case reports[i] = <-r.Ready():
				reported[i] = true
			case <-late.C:
				collect()
				c.giveUpLate()
			case <-c.ctx.Done():
				return c.ctx.Err()
			}
		}
	}
	for i, r := range started {
		if err := c.readerReady(r, reports[i]); err != nil {
			errs = append(errs, err)
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
func (c *Subscription) syncReaders() error {
	started, err := c.launch()
	for _, r := range started {
		go c.forwardReady(r)
	}
	return err
}

// forwardReady passes r's first report to run; it ends with the subscription.
func (c *Subscription) forwardReady(r *shard.Reader) {
	select {
	case err := <-r.Ready():
		select {
		case c.readied <- readyReport{r: r, err: err}:
		case <-c.ctx.Done():
		}
	case <-c.ctx.Done():
	}
}

// readyReport is a reader's first report: nil once it holds its iterator, or why not.
type readyReport struct {
	r   *shard.Reader
	err error
}

// readerReady notes a reader's first report and returns its error. A reader stopped on
// purpose (giveUpLate, Close) reports context.Canceled, which is not an error here.
func (c *Subscription) readerReady(r *shard.Reader, err error) error {
	c.readers.readied(r)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// giveUpLate stops the readers still without an iterator at their lease's stop point: a reader
// renews its lease only once it reads, so the lease would otherwise expire under it. Stopped,
// the reader releases the lease; a later lease sync tries again.
func (c *Subscription) giveUpLate() {
	for _, r := range c.readers.late(time.Now()) {
		err := &awscall.ShardError{Stream: c.cfg.Stream, ShardID: r.ShardID(), Err: fmt.Errorf("no shard iterator within %s of taking the lease", shard.LeaseStopAfter(&c.cfg.Config))}
		logs.Warn(c.cfg.Logger, "Giving the lease back: the reader could not get a shard iterator before the lease needed renewing; a later lease sync tries again",
			err, r.LogFields())
		r.Stop()
	}
}

// armLate sets the late timer to the first stop point of a starting reader with a lease.
func (c *Subscription) armLate(late *time.Timer) {
	late.Stop()
	if first := c.readers.firstReadyBy(); !first.IsZero() {
		late.Reset(first.Sub(time.Now()))
	}
}

// startUnleased starts a reader for every shard not read yet whose parents are done.
func (c *Subscription) startUnleased() []*shard.Reader {
	var started []*shard.Reader
	for _, id := range sortedKeys(c.shards) {
		if c.readers.has(id) || c.ended[id] || !c.parentsDone(parentsOf(c.shards[id])) {
			continue
		}
		if c.progress[id] == "" && c.skipClosed(id) {
			c.ended[id] = true
			continue
		}
		pos := shard.Start{After: c.progress[id], Initial: c.cfg.InitialPosition}
		if r := c.startReader(id, pos, nil, time.Time{}); r != nil {
			started = append(started, r)
		}
	}
	return started
}

// shutdown stops every reader and waits until each has given its lease up, then closes out
// and done. It runs on the coordinator goroutine, or on Subscribe's when starting failed.
//
// Order: cancel the readers' contexts (and the heartbeat's); close quit, so that no exit
// report blocks any more; wait for the heartbeat goroutine and for each reader in the table to
// finish (checkpoint, release); release what was handed over to this worker meanwhile
// (releaseHandedOver); remove the member record (leave), which makes the others list the
// leases and find the released ones free; close out, so that no send can follow; close done,
// which Close waits for.
func (c *Subscription) shutdown() {
	c.cancel()
	close(c.quit)
	c.stopHeartbeat()
	for _, id := range sortedKeys(c.readers.byShard) {
		<-c.readers.byShard[id].r.Finished()
	}
	c.releaseHandedOver()
	c.leave()
	close(c.out)
	close(c.done)
}
