package group

import (
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// releaseFinished releases a lease of ours at SHARD_END whose reader could not release it (the
// store failed at that moment), so that the lease table shows no owner for a finished shard.
// Nobody reads the shard again either way; a failure is left to the next sync.
func (c *Subscription) releaseFinished(l lease.Lease) {
	ctx, cancel := c.callContext()
	defer cancel()
	released, err := c.cfg.LeaseStore.Release(ctx, l)
	if err != nil {
		c.cfg.Logger.Debug("Finished shard's lease not released", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		return
	}
	c.changed()
	c.cfg.Logger.Info("Lease released", c.logFields().Add(watermill.LogFields{
		"shard": l.ShardID, "generation": l.Generation, "reason": shard.ReleaseShardFinished, "checkpoint": l.Checkpoint}))
	c.cfg.Metrics.ForShard(l.ShardID).Count(shard.CountReleased, 1)
	c.leases[l.ShardID] = released
}

// Why a worker takes a lease, in the "Lease taken" log line.
const (
	takeFree    = "free"
	takeExpired = "expired: its owner stopped renewing it"
	// takeHeartbeatStopped: expired by its owner's heartbeats (see expiry.go).
	takeHeartbeatStopped = "expired: its owner's heartbeat stood still (member fenced)"
	takeHandedOver       = "handed over"
	takeOverdue          = "not handed over within HandoffTimeout: taken from its owner"
	takeOwnIdle          = "held under this worker's id with no reader here (a restart of this worker, or a reader of it that stopped)"
)

// takeReasonCodes are the reasons of a take as the kinesis.lease.reason metric attribute.
var takeReasonCodes = map[string]string{
	takeFree: "free", takeExpired: "expired", takeHeartbeatStopped: "expired", takeHandedOver: "handed_over", takeOverdue: "handoff_timeout", takeOwnIdle: "restarted",
}

// handoffAsk is a lease this worker asked another worker for.
type handoffAsk struct {
	at    time.Time // on the subscription's clock
	owner string    // the owner asked
}

// take takes one lease and starts its reader; nil if another worker was faster, or if this
// subscription still has a reader of the shard (one that is stopping: the lease is taken at a
// later sync, once its exit report is in). why and from (the previous owner, "" if none) are
// for the log line.
func (c *Subscription) take(l lease.Lease, why, from string) *shard.Reader {
	if c.readers.has(l.ShardID) {
		return nil
	}
	takenAt := c.cfg.Clock.Now()
	ctx, cancel := c.callContext()
	taken, err := c.cfg.LeaseStore.Take(ctx, l, c.cfg.WorkerID)
	cancel()
	if err != nil {
		c.cfg.Logger.Debug("Lease not taken", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		c.listSoon = true
		return nil
	}
	delete(c.asked, l.ShardID)
	c.leases[l.ShardID] = taken
	fields := c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "generation": taken.Generation, "reason": why})
	if from != "" && from != c.cfg.WorkerID {
		fields["from"] = from
	}
	c.cfg.Logger.Info("Lease taken", fields)
	m := c.cfg.Metrics.ForShard(l.ShardID)
	m.LeaseAcquired(takeReasonCodes[why])
	r := c.startReader(l.ShardID, shard.Start{After: taken.Checkpoint, Initial: c.startPosition(taken)}, &taken, takenAt)
	if r == nil {
		m.Count(shard.CountLeasesHeld, -1) // no reader holds it: the lease expires
	}
	return r
}

// ask marks this worker as the pending owner of a lease of a worker above its share, and
// reports whether it did.
func (c *Subscription) ask(l lease.Lease) bool {
	ctx, cancel := c.callContext()
	asked, err := c.cfg.LeaseStore.RequestHandoff(ctx, l, c.cfg.WorkerID)
	cancel()
	if err != nil {
		c.cfg.Logger.Debug("Handoff not requested", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "err": err}))
		c.listSoon = true
		return false
	}
	c.changed() // the owner lists at its next lease sync and hands over, not at its next renewal
	c.cfg.Logger.Debug("Asked for a lease to even out the group", c.logFields().Add(watermill.LogFields{"shard": l.ShardID, "owner": l.Owner}))
	c.leases[l.ShardID] = asked
	c.asked[l.ShardID] = handoffAsk{at: c.cfg.Clock.Now(), owner: l.Owner}
	return true
}

// notifyAsked tells each owner asked for leases at this sync (lease.Store.NotifyMember), once:
// it sees that in what its next heartbeat returns and lists the leases, which hands them over,
// where it would otherwise learn of the requests only from its leader's next roster (a lease
// sync later) or its readers' next renewals. A failure is left to those.
func (c *Subscription) notifyAsked(owners map[string]bool) {
	ctx, cancel := c.callContext()
	defer cancel()
	c.notify(ctx, sortedKeys(owners), "Telling an owner of a handoff request failed")
}

// takeOverdue takes the leases this worker asked for and did not get within HandoffTimeout,
// and forgets requests that another change of owner made moot.
func (c *Subscription) takeOverdue(now time.Time) []*shard.Reader {
	var started []*shard.Reader
	for _, id := range sortedKeys(c.asked) {
		l, ok := c.leases[id]
		switch {
		case !ok || l.Owner == c.cfg.WorkerID || l.PendingOwner != c.cfg.WorkerID:
			delete(c.asked, id)
		case now.Sub(c.asked[id].at) >= handoffTakeAfter(c.cfg) && c.eligible(l):
			if r := c.take(l, takeOverdue, l.Owner); r != nil {
				started = append(started, r)
			}
		}
	}
	return started
}

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

// handoffTakeAfter is how long after asking for a lease a worker takes it itself:
// HandoffTimeout, but never before LeaseDuration has passed since the request. An owner whose
// last successful renewal came before the request has stopped delivering by then (at its stop
// point, 0.8 × LeaseDuration, with the same margin for clock rates as an expiry has); one whose
// renewal came after it saw the request in that renewal and stopped sending. So the taker never
// reads the shard while the owner still delivers, whatever HandoffTimeout is set to.
func handoffTakeAfter(cfg Config) time.Duration {
	return max(cfg.HandoffTimeout, cfg.LeaseDuration)
}
