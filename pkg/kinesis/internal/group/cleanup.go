package group

import (
	"errors"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// cleanFinished deletes the leases of finished shards (SHARD_END, and released, or held by an
// owner that could not release it and has not written it for LeaseDuration: a crash, a Close
// that met a store outage; nobody takes a finished lease, so it would stay) once nothing can
// need them again: every child the listing shows was taken (childrenStarted), or the shard has
// left the stream. Either must have held for deleteFinishedAfter, as this worker saw it, so that
// a worker acting on an older listing cannot create the lease again. No child waits on such a
// parent (finishedWithoutLease, or not listed), so the lease table no longer keeps, and every
// lease sync no longer reads, every shard a reshard ever closed. Deletion is conditioned on the
// lease still being at SHARD_END as listed.
func (c *Subscription) cleanFinished() {
	now := time.Now()
	deletes := 0
	for _, id := range sortedKeys(c.leases.byShard) {
		l := c.leases.byShard[id]
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
		if _, leased := c.leases.byShard[id]; !leased { // deleted by another worker
			delete(c.deletable, id)
		}
	}
}

// deletableBecause says why a lease may be deleted now, or "" if it may not.
func (c *Subscription) deletableBecause(l lease.Lease) string {
	if l.Checkpoint != lease.ShardEnd || !l.Free() && !c.stoodStill(l) {
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

// stoodStill: the last listing, sent at or after l's expiry (expiresAt), still showed l.
func (c *Subscription) stoodStill(l lease.Lease) bool {
	at, ok := c.expiresAt(l)
	return ok && !c.leases.listedAt.Before(at)
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
		if l, ok := c.leases.byShard[cid]; !ok || l.Generation == 0 && l.Checkpoint == "" {
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
		logs.Warn(c.cfg.Logger, "Deleting the lease of a finished shard failed (is dynamodb:DeleteItem allowed on the lease table?); it stays, and every lease listing reads it", err,
			c.logFields().Add(watermill.LogFields{"shard": l.ShardID}))
		return false
	case err != nil:
		c.cfg.Logger.Debug("Lease of a finished shard not deleted", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		return false
	}
	delete(c.leases.byShard, l.ShardID)
	delete(c.deletable, l.ShardID)
	c.invalidateFinished()
	c.cfg.Logger.Info("Lease deleted", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "reason": why}))
	return true
}
