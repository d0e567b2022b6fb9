package group

import (
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// start writes the first heartbeat (in a group), lists the shards, takes what leases it can and
// starts their readers; it returns once every reader it started holds its iterator, so that a
// record published after Subscribe returns is one this subscription reads.
func (c *Subscription) start() error {
	if c.grouped() {
		c.startHeartbeat()
	}
	if err := c.firstSync(); err != nil {
		return err
	}
	if c.grouped() {
		c.syncMembers() // the first read: the lease sync after the wait tells who moved or appeared
	}
	// Before any reader can start, here or at the first lease sync after the join wait.
	if err := c.startFanOut(); err != nil {
		return err
	}
	if c.grouped() && (c.anyFree() || c.othersRecorded()) {
		if !c.anyToStart() {
			// Nothing here is read until the plan after the wait, and then only leases
			// handed over or expired, which carry their checkpoints, so the wait need not
			// hold up Subscribe: run makes the first lease sync when it ends. Waited here,
			// the 50 Subscribe calls Watermill's TestConcurrentSubscribe makes one after
			// another each took joinWait (3.8 s of the 4.0 s on memlog).
			c.joinDue = c.cfg.Clock.NewTimer(joinWait(c.cfg))
			return nil
		}
		if err := c.awaitJoiners(); err != nil {
			return err
		}
	}
	return c.startReaders()
}

// anyToStart: the leases listed show one that the first plan could start reading at once, and
// so that Subscribe must wait for: a free one (read from its checkpoint or InitialPosition, so
// a reader started after Subscribe returned would miss what is published meanwhile at LATEST),
// or one held under this worker's id with no reader (a restart), which it takes whatever the
// shares. Expired leases cannot be told yet: that needs a counter seen not to move.
func (c *Subscription) anyToStart() bool {
	for _, l := range c.leases {
		if (l.Free() || l.Owner == c.cfg.WorkerID) && c.eligible(l) {
			return true
		}
	}
	return false
}

// firstSync is Subscribe's first shard sync (and, in a group, lease listing and creation),
// tried again after failures that pass: a lease store or Kinesis slow for a moment (the
// universal suite's 50 concurrent subscriptions on dynalite under a loaded machine: a listing
// of 16 Queries past RequestTimeout) should delay Subscribe, not fail it.
func (c *Subscription) firstSync() error {
	for attempt := 1; ; attempt++ {
		err := c.syncShards()
		if err == nil || attempt == firstSyncTries {
			return err
		}
		if class := awscall.Classify(c.ctx, err); class != awscall.Transient && class != awscall.Throttled {
			return err
		}
		c.cfg.Logger.Info("Subscribe's first sync failed; retrying", c.logFields().Add(watermill.LogFields{"err": err, "attempt": attempt}))
		if err := awscall.SleepOn(c.ctx, c.cfg.Clock, awscall.Backoff(attempt-1, 100*time.Millisecond, time.Second)); err != nil {
			return err
		}
	}
}

// firstSyncTries is how many times Subscribe tries its first sync.
const firstSyncTries = 3

// joinWait is how long a grouped Subscribe that finds free leases waits for instances starting
// with it: one and a half heartbeat intervals (1.5 s at the defaults), so that every member
// that heartbeats is seen to move, but at most maxJoinWait, where a new record is the sign.
func joinWait(cfg Config) time.Duration { return min(quietMember(cfg), maxJoinWait) }

// maxJoinWait bounds joinWait with long lease syncs.
const maxJoinWait = 2 * time.Second

// othersRecorded: the last member read shows records of other workers. Read once, they cannot
// be told apart from those of workers long gone until they move, and a plan that counted only
// the owners would ask for more than this worker's share (ten instances joining 50 on 1,000
// shards asked for the same leases: 109 of 295 requests failed).
func (c *Subscription) othersRecorded() bool {
	for _, m := range c.members.Observed() {
		if m.Worker != c.cfg.WorkerID {
			return true
		}
	}
	return false
}

// anyFree: the leases listed show a free lease this worker could read.
func (c *Subscription) anyFree() bool {
	for _, l := range c.leases {
		if l.Free() && c.eligible(l) {
			return true
		}
	}
	return false
}

// awaitJoiners holds a subscription that would take free leases, or that joins a group with
// other members, for joinWait after its first read of the members, so that the lease sync that
// follows counts every instance that started about when this one did, and every member that is
// alive: their records appear in between (lease.MemberTracker counts a record that appeared
// since its first read), or their heartbeats move. Without it, of instances that start
// together, the first took every free lease and the others then had to ask for theirs; and
// newcomers joining together asked for the same leases. (A newcomer with nothing to start at
// once waits in run instead: see start.)
func (c *Subscription) awaitJoiners() error {
	wait := c.cfg.Clock.NewTimer(joinWait(c.cfg))
	defer wait.Stop()
	select {
	case <-wait.C():
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}
