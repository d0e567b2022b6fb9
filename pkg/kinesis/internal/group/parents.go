package group

import (
	"github.com/ThreeDotsLabs/watermill"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// parentRead: the group read a parent of the lease's shard (its lease was taken, or it is
// finished and its lease deleted). Then the shard's records all follow what the group read,
// whatever InitialPosition says: it is read from its start (startPosition).
func (c *Subscription) parentRead(l lease.Lease) bool {
	for _, p := range l.Parents {
		if pl, ok := c.leases.byShard[p]; ok && (pl.Generation > 0 || pl.Checkpoint != "") || !ok && c.finishedWithoutLease(p) {
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

// startOf is where the reader of a lease just taken starts: after its checkpoint, at the
// position a reset wrote as its checkpoint (lease.Start), or, with no checkpoint, at
// startPosition.
func (c *Subscription) startOf(taken lease.Lease) shard.Start {
	s, isStart, err := lease.ParseStart(taken.Checkpoint)
	switch {
	case err != nil:
		// Nothing this package writes; a hand-edited table. Read as no checkpoint, which
		// loses nothing the subscriber's InitialPosition would read, and say so.
		c.cfg.Logger.Error("Lease checkpoint cannot be read; starting the shard at the subscriber's InitialPosition", err,
			c.logFields().Add(watermill.LogFields{"shard": taken.ShardID, "generation": taken.Generation}))
		return shard.Start{Initial: c.startPosition(taken)}
	case !isStart:
		return shard.Start{After: taken.Checkpoint, Initial: c.startPosition(taken)}
	}
	switch s.Type {
	case lease.StartAtTimestamp:
		return shard.Start{Initial: shard.Position{Type: shard.AtTimestamp, Timestamp: s.Timestamp}}
	case lease.StartAtSequenceNumber:
		return shard.Start{Initial: shard.Position{Type: shard.AtSequenceNumber, SequenceNumber: s.SequenceNumber}}
	}
	return shard.Start{Initial: shard.Position{Type: shard.TrimHorizon}}
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
		c.cfg.Logger.Info("Skipping a closed shard never read: the subscription starts at LATEST", c.logFields().Add(watermill.LogFields{"shard": id}))
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
			l, ok := c.leases.byShard[p]
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
	if _, ok := c.leases.byShard[id]; ok {
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
	for cid, l := range c.leases.byShard {
		parents[cid] = append(parents[cid], l.Parents...)
	}
	for cid, s := range c.shards {
		if _, ok := c.leases.byShard[cid]; !ok {
			parents[cid] = append(parents[cid], parentsOf(s)...)
		}
	}
	var taken []string
	for cid, l := range c.leases.byShard {
		if l.Generation > 0 || l.Checkpoint != "" {
			taken = append(taken, cid)
		}
	}
	c.finished = FinishedAncestors(taken, func(id string) []string { return parents[id] }, func(id string) bool {
		_, leased := c.leases.byShard[id]
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
