package group

import (
	"slices"
	"sort"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Workers outside the group's protocol. On a lease table shared with them (lease.ForeignTable:
// a KCL application's, lease.KCLStore) leases may be held by workers with no member record. A
// stopped one's leases expire by their counters, like any, and are taken. A live one (a KCL
// worker still running: its counters move) cannot share the shards: a KCL worker below its
// target takes ("steals") a lease that is being read and reads it at once, while the reader it
// took it from goes on until its next renewal fails, and that cannot be turned off
// (maxLeasesToStealAtOneTime is at least 1). So the group refuses to read beside one: while
// any is alive, this worker takes no lease and stops its readers (each checkpoints what was
// acked and releases its lease), and says so in an ERROR line; it goes on once none has
// renewed or taken a lease for LeaseDuration.
//
// A worker is foreign when this worker's member reads have no record of it. An owner seen
// renewing or taking with no record in the last read is a suspect until a full member read
// after that still has none (a member that joined since a partial read would otherwise look
// foreign).

// foreignExpiryMargin is how much longer than LeaseDuration a foreign worker's lease must stand
// still before it is taken. A KCL worker times its lease from the answer to its last renewal,
// not from sending it, and stops a shard's consumer at its next dispatch (every
// shardConsumerDispatchPollIntervalMillis, 1 s by default), so it may read for a moment after
// a taker that timed the same lease from its own listing sees it expire.
const foreignExpiryMargin = 2 * time.Second

// expiresAfter is how long l's counter must stand still before l is taken: LeaseDuration, and
// foreignExpiryMargin more for a foreign owner's.
func (c *Subscription) expiresAfter(l lease.Lease) time.Duration {
	if c.foreignW.kind != "" && c.foreign(l.Owner) {
		return c.cfg.LeaseDuration + foreignExpiryMargin
	}
	return c.cfg.LeaseDuration
}

// listMaxAge is how long this worker goes without listing the leases when nothing else makes
// a listing due: leaseListMaxAge, or LeaseDuration on a table shared with foreign workers,
// whose takes no member announces (a KCL worker started again takes the free leases), so that
// one is seen within about a lease duration.
func (c *Subscription) listMaxAge() time.Duration {
	if c.foreignW.kind != "" {
		return min(c.cfg.LeaseDuration, leaseListMaxAge(c.cfg))
	}
	return leaseListMaxAge(c.cfg)
}

// foreignWatch is what the coordinator knows of foreign workers. Owned by the coordinator
// goroutine.
type foreignWatch struct {
	kind     string               // lease.ForeignTable.ForeignWorkers of the store; "" ends the watch
	suspects map[string]bool      // seen renewing or taking, not yet confirmed by a full member read
	alive    map[string]time.Time // confirmed: when last seen renewing or taking (on the clock)
	yielding bool                 // this worker holds no lease because of them
	// held: the last listing showed leases of foreign workers; every lease sync lists then
	// (leaseListDue), to see their counters move.
	held bool
}

func newForeignWatch(store lease.Store) foreignWatch {
	w := foreignWatch{suspects: map[string]bool{}, alive: map[string]time.Time{}}
	if t, ok := store.(lease.ForeignTable); ok {
		w.kind = t.ForeignWorkers()
	}
	return w
}

// foreign reports whether owner has no member record in this worker's last read.
func (c *Subscription) foreign(owner string) bool {
	if owner == "" || owner == c.cfg.WorkerID {
		return false
	}
	_, ok := c.members.Record(owner)
	return !ok
}

// watchForeign compares a new listing with the last one, before it replaces it: a foreign
// owner whose counter moved (it renewed) or that took a lease is alive. While foreign workers
// hold leases, every lease sync lists (foreignWatch.held), to see their counters move.
func (c *Subscription) watchForeign(list []lease.Lease, now time.Time) {
	if c.foreignW.kind == "" {
		return
	}
	c.foreignW.held = false
	for _, l := range list {
		if !c.foreign(l.Owner) {
			continue
		}
		c.foreignW.held = true
		before, seen := c.leases[l.ShardID]
		if !seen || before.Owner == l.Owner && before.Counter == l.Counter {
			continue
		}
		if _, confirmed := c.foreignW.alive[l.Owner]; confirmed {
			c.foreignW.alive[l.Owner] = now
			continue
		}
		c.foreignW.suspects[l.Owner] = true
		c.readAllSoon.Store(true)
	}
}

// confirmForeign settles the suspects after a full member read (full): those still without a
// record are alive foreign workers. It then forgets those not seen for LeaseDuration, and
// reports whether this worker must yield to one: hold no lease.
func (c *Subscription) confirmForeign(now time.Time, full bool) bool {
	if c.foreignW.kind == "" {
		return false
	}
	var found []string
	if full {
		for w := range c.foreignW.suspects {
			if c.foreign(w) {
				c.foreignW.alive[w] = now
				found = append(found, w)
			}
		}
		clear(c.foreignW.suspects)
	}
	for w, at := range c.foreignW.alive {
		if now.Sub(at) >= c.cfg.LeaseDuration || !c.foreign(w) {
			delete(c.foreignW.alive, w)
		}
	}
	yield := len(c.foreignW.alive) > 0
	switch {
	case yield && (!c.foreignW.yielding || len(found) > 0):
		c.cfg.Logger.Error("Live "+c.foreignW.kind+" hold leases of this group's lease table: they take shards that are being read,"+
			" so two would read one shard. This worker stops its readers and takes no lease until they stop: stop every worker"+
			" of the other application (or give this group a lease table of its own)",
			nil, c.logFields().Add(watermill.LogFields{"foreign_workers": c.foreignNames()}))
	case !yield && c.foreignW.yielding:
		c.cfg.Logger.Info("No "+c.foreignW.kind+" renewed a lease for LeaseDuration: taking leases again", c.logFields())
	}
	c.foreignW.yielding = yield
	return yield
}

// foreignNames are the live foreign workers, sorted, for the log line.
func (c *Subscription) foreignNames() []string {
	names := make([]string, 0, len(c.foreignW.alive))
	for w := range c.foreignW.alive {
		names = append(names, w)
	}
	sort.Strings(names)
	return slices.Clip(names)
}

// yieldToForeign stops every reader of this worker: each stops delivering, checkpoints what
// was acked and releases its lease.
func (c *Subscription) yieldToForeign() {
	for _, r := range c.readers.snapshot() {
		r.Stop()
	}
}
