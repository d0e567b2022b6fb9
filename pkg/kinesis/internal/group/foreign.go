package group

import (
	"sort"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Workers outside the group's protocol. On a lease table shared with them (a KCL
// application's, kcl.Store) a lease may be held by one: lease.Lease.Foreign, which the
// store reads from the item (a KCL worker writes leaseOwner and none of this package's
// attributes). A stopped one's leases expire by their counters, like any, and are taken, after
// foreignExpiryMargin more. A live one (a KCL worker still running: its counters move, or it
// takes leases) cannot share the shards: a KCL worker below its target takes ("steals") a
// lease that is being read and reads it at once, while the reader it took it from goes on
// until its next renewal fails, and that cannot be turned off (maxLeasesToStealAtOneTime is at
// least 1). So the group refuses to read beside one: while any is alive, this worker takes no
// lease and stops its readers (each checkpoints what was acked and releases its lease), and
// says so at ERROR; it goes on once none has renewed or taken a lease for LeaseDuration.
//
// The judgement rests on the lease alone, not on member records: a member whose heartbeats
// fail, one that joined since this worker's last read of the members, or one that keeps its
// records in another member table, is never taken for a foreign worker.

// foreignExpiryMargin is how much longer than LeaseDuration a foreign worker's lease must stand
// still before it is taken. A KCL worker times its lease from the answer to its last renewal,
// not from sending it, and stops a shard's consumer at its next dispatch (every
// shardConsumerDispatchPollIntervalMillis, 1 s by default), so it may read for a moment after
// a taker that timed the same lease from its own listing sees it expire.
const foreignExpiryMargin = 2 * time.Second

// expiresAt is when an owned lease l expires as this worker observed it: expiresAfter after its
// listings first showed l's owner, generation and counter; false for a free lease, or one whose
// values no listing showed (this worker's own write since).
func (c *Subscription) expiresAt(l lease.Lease) (time.Time, bool) {
	since, ok := c.leases.seen.leaseSince(l)
	if !ok || l.Free() {
		return time.Time{}, false
	}
	return since.Add(c.expiresAfter(l)), true
}

// expiresAfter is how long l's counter must stand still before l is taken: LeaseDuration, and
// foreignExpiryMargin more for a foreign owner's.
func (c *Subscription) expiresAfter(l lease.Lease) time.Duration {
	if mutant == "takehalf" {
		return c.cfg.LeaseDuration / 2
	}
	if l.Foreign {
		return c.cfg.LeaseDuration + foreignExpiryMargin
	}
	return c.cfg.LeaseDuration
}

// foreignWatch is what the coordinator knows of foreign workers. Owned by the coordinator
// goroutine.
type foreignWatch struct {
	// name names them in log lines: lease.ForeignTable.ForeignWorkers of the store, or a
	// description of any for a store that does not say (a wrapper of a kcl.Store, say).
	name string
	// shared: the store is a lease.ForeignTable that says foreign workers may share it.
	shared   bool
	alive    map[string]time.Time // when each was last seen renewing or taking (on the clock)
	yielding bool                 // this worker holds no lease because of them
	// held: the last listing showed leases of foreign workers that are still being watched
	// (not finished, not expired); every lease sync lists then (listDue), to see their
	// counters move.
	held bool
	// watchFrom is when this worker first listed such leases (zero while it lists none): until
	// it has watched them for LeaseDuration it cannot tell a live foreign worker (which renews
	// every failoverTimeMillis/3) from a stopped one, and takes no lease.
	watchFrom time.Time
	// found are those first seen alive since the last confirmForeign, for its ERROR line.
	found bool
	// sameID: a foreign worker uses this worker's id (logged once).
	sameID bool
}

func newForeignWatch(store lease.Store) foreignWatch {
	w := foreignWatch{name: "workers of another application", alive: map[string]time.Time{}}
	if t, ok := store.(lease.ForeignTable); ok && t.ForeignWorkers() != "" {
		w.name, w.shared = t.ForeignWorkers(), true
	}
	return w
}

// watchForeign compares a new listing with the last one, before it replaces it: a foreign
// owner whose counter moved (it renewed) or that took a lease is alive.
func (c *Subscription) watchForeign(list []lease.Lease, now time.Time) {
	c.foreignW.held = false
	for _, l := range list {
		if !l.Foreign {
			continue
		}
		if l.Owner == c.cfg.WorkerID {
			// A KCL worker under this worker's id: its writes and this worker's would pass each
			// other's owner conditions. Yield to it for as long as it holds the lease.
			if !c.foreignW.sameID {
				c.foreignW.sameID = true
				c.cfg.Logger.Error("One of the "+c.foreignW.name+" uses this worker's id and holds a lease of this group's lease table: "+
					"the two would both read its shard. Give this group's workers ids of their own (Group.WorkerID)",
					nil, c.logFields().Add(watermill.LogFields{"shard": l.ShardID}))
			}
			c.foreignW.alive[l.Owner] = now
		}
		if l.Checkpoint != lease.ShardEnd && !c.leases.seen.still(l.ShardID, now, c.expiresAfter(l)) {
			// A finished lease, or one that stood still long enough to be taken, needs no
			// listing at every sync: a KCL worker that comes back is seen at the next one
			// (listMaxAge), or when it steals a lease of this worker.
			c.foreignW.held = true
		}
		before, seen := c.leases.byShard[l.ShardID]
		if !seen || before.Owner == l.Owner && before.Counter == l.Counter {
			continue
		}
		if _, known := c.foreignW.alive[l.Owner]; !known {
			c.foreignW.found = true
		}
		c.foreignW.alive[l.Owner] = now
	}
	switch {
	case !c.foreignW.held:
		c.foreignW.watchFrom = time.Time{}
	case c.foreignW.watchFrom.IsZero():
		c.foreignW.watchFrom = now
	}
}

// confirmForeign forgets the foreign workers not seen renewing or taking for LeaseDuration and
// reports whether this worker must yield to one, or hold no lease while it watches foreign
// leases it has not watched for LeaseDuration yet. It logs ERROR when it starts to yield, or
// finds another, and INFO when it stops.
func (c *Subscription) confirmForeign(now time.Time) bool {
	for w, at := range c.foreignW.alive {
		if now.Sub(at) >= c.cfg.LeaseDuration {
			delete(c.foreignW.alive, w)
		}
	}
	yield := len(c.foreignW.alive) > 0
	// Foreign leases not yet watched for LeaseDuration: their owner may be alive, and taking
	// even a free lease now would read beside it until it showed itself. (A group moving in
	// waits that long for the foreign leases anyway.)
	settling := !c.foreignW.watchFrom.IsZero() && now.Sub(c.foreignW.watchFrom) < c.cfg.LeaseDuration
	switch {
	case yield && (!c.foreignW.yielding || c.foreignW.found):
		c.cfg.Logger.Error("Live "+c.foreignW.name+" hold leases of this group's lease table: they take shards that are being read,"+
			" so two would read one shard. This worker stops its readers and takes no lease until they stop: stop every worker"+
			" of the other application (or give this group a lease table of its own)",
			nil, c.logFields().Add(watermill.LogFields{"foreign_workers": c.foreignNames()}))
	case !yield && c.foreignW.yielding:
		c.cfg.Logger.Info("No "+c.foreignW.name+" renewed a lease for LeaseDuration: taking leases again", c.logFields())
	}
	c.foreignW.yielding, c.foreignW.found = yield, false
	return yield || settling
}

// foreignNames are the live foreign workers, sorted, for the log line.
func (c *Subscription) foreignNames() []string {
	names := make([]string, 0, len(c.foreignW.alive))
	for w := range c.foreignW.alive {
		names = append(names, w)
	}
	sort.Strings(names)
	return names
}

// yieldToForeign stops every reader of this worker: each stops delivering, checkpoints what
// was acked and releases its lease.
func (c *Subscription) yieldToForeign() {
	for _, r := range c.readers.snapshot() {
		r.Stop()
	}
}
