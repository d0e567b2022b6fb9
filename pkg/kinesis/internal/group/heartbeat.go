package group

import (
	"errors"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// heartbeat is a grouped subscription's member record, written by a goroutine of its own
// (beat) twice per LeaseSyncInterval, but at most every minHeartbeatInterval, so that no
// coordinator step (a long run of lease creations after a reshard, a slow Subscribe) holds it up.
//
// The others read the members at every lease sync. A member that heartbeats twice per sync and
// shows no move across a whole sync has missed a heartbeat (quietMember): it may have crashed,
// so they list the leases then, and its leases expire LeaseDuration after that listing by their
// own counters, as always. Membership never decides who may read a shard; it only tells the
// others when to look, so that in a quiet group nobody lists every lease at every sync.
//
// The beat goroutine writes member under mu; the coordinator reads it through lastMember.
// shutdown waits for done (closed by beat) before leave removes the record.
type heartbeat struct {
	mu     sync.Mutex
	member lease.Member // the record as the last heartbeat that succeeded left it
	fails  int          // heartbeats failed in a row (beat goroutine only)
	done   chan struct{}
	// nudge (buffered, 1) has beat heartbeat at once: this worker's Changes moved (changed).
	nudge chan struct{}
}

// changed moves this worker's lease.Member.Changes and has beat write it at once (at most once
// between two scheduled heartbeats), so that the others see the move at their next lease sync,
// not up to a heartbeat interval later. The
// others list the leases only when a member's Changes move or a member goes (see
// leaseListDue), not when one appears, so a newcomer's requests reach their owners this way.
// Safe from any goroutine (the readers call it too).
func (c *Subscription) changed() {
	c.changes.Add(1)
	c.nudgeHeartbeat()
}

// nudgeHeartbeat has beat heartbeat at once (at most once between two scheduled heartbeats),
// for a move of what the heartbeat carries. Safe from any goroutine.
func (c *Subscription) nudgeHeartbeat() {
	select {
	case c.hb.nudge <- struct{}{}:
	default: // a nudged heartbeat is pending already, and it carries this move too
	}
}

// heartbeatInterval is how often a member heartbeats: twice per lease sync, so that a member
// read once per sync that shows no move has missed one (quietMember), but never more often
// than minHeartbeatInterval.
func heartbeatInterval(cfg Config) time.Duration {
	return max(cfg.LeaseSyncInterval/2, minHeartbeatInterval)
}

// minHeartbeatInterval is the shortest heartbeat interval, reached with LeaseSyncInterval
// under 500 ms. Every member's heartbeats go to one partition key, so twice per sync at the
// 100 ms lease syncs of the universal test suite is 20 writes a second per member: in
// TestConcurrentSubscribe, 50 members were due to write 1,000 a second, as much as one
// DynamoDB partition takes (1,000 WCU) and more than dynalite answered besides everything
// else (24,000 of the run's 72,800 calls in 60 s), and the late heartbeats looked like missed
// ones. What it costs: a crashed member is seen quiet within about 2.5 heartbeat intervals and
// a lease sync of its last heartbeat instead of two lease syncs (under a second more before
// LeaseDuration starts), and is counted out after memberFresh.
const minHeartbeatInterval = 250 * time.Millisecond

// quietMember is how long a member's heartbeat may show no move before the others list the
// leases to watch its leases' counters: one and a half heartbeat intervals.
func quietMember(cfg Config) time.Duration { return 3 * heartbeatInterval(cfg) / 2 }

// heartbeatOnce writes the member record once, bounded by RequestTimeout: a Join until one
// succeeds, then Heartbeats. A heartbeat refused because the record was fenced (another worker
// found it still for a lease duration) or replaced ends this incarnation: its readers stop by
// what its heartbeats vouched for, and the worker joins again at once as a new incarnation.
func (c *Subscription) heartbeatOnce() error {
	m := c.lastMember()
	m.Group, m.Stream, m.Worker, m.Changes = c.cfg.Group, c.cfg.Stream, c.cfg.WorkerID, c.changes.Load()
	m.Roster, m.Seen = c.pubRoster.Load(), c.pubSeen.Load()
	ctx, cancel := c.callContext()
	defer cancel()
	sent := c.cfg.Clock.Now()
	var got lease.Member
	var err error
	if m.Counter == 0 {
		m.Incarnation = newIncarnation(m.Incarnation)
		got, err = c.cfg.LeaseStore.Join(ctx, m)
	} else if got, err = c.cfg.LeaseStore.Heartbeat(ctx, m); errors.Is(err, lease.ErrMemberFenced) {
		c.vouch.end(m.Incarnation)
		logs.Warn(c.cfg.Logger, "Member record fenced or replaced: another worker judged this one gone; joining again as a new incarnation",
			err, c.logFields().Add(watermill.LogFields{"incarnation": m.Incarnation}))
		m.Incarnation, sent = newIncarnation(m.Incarnation), c.cfg.Clock.Now()
		got, err = c.cfg.LeaseStore.Join(ctx, m)
	}
	if err != nil {
		return err // a Join that failed is tried again: the next Heartbeat finds the old incarnation over
	}
	c.vouch.succeeded(got, sent)
	c.hb.mu.Lock()
	first := c.hb.member.Counter == 0
	if got.Asked != c.hb.member.Asked && got.Incarnation == c.hb.member.Incarnation {
		// Another worker asked for a lease of this one: a lease sync now lists the leases,
		// and the readers asked hand over.
		c.askedOf.Store(true)
		c.readAllSoon.Store(true)
		select {
		case c.askedNow <- struct{}{}:
		default:
		}
	}
	c.hb.member = got
	c.hb.mu.Unlock()
	if first { // the first heartbeat that succeeds, at start or later from beat
		c.cfg.Logger.Info("Joined the group: member record written", c.logFields().Add(watermill.LogFields{"incarnation": got.Incarnation}))
	}
	return nil
}

// lastMember is the member record as the last heartbeat that succeeded left it.
func (c *Subscription) lastMember() lease.Member {
	c.hb.mu.Lock()
	defer c.hb.mu.Unlock()
	return c.hb.member
}

// startHeartbeat writes the first heartbeat, so that the first lease sync counts this worker,
// and starts beat. A failure is beat's to retry: membership only sizes the shares.
func (c *Subscription) startHeartbeat() {
	if err := c.heartbeatOnce(); err != nil {
		c.hb.fails++
		c.cfg.Logger.Info("Member heartbeat failed; will retry", c.logFields().Add(watermill.LogFields{"err": err}))
	}
	c.hb.done = make(chan struct{})
	go c.beat()
}

// beat is the heartbeat goroutine. It ends with the subscription's context and then closes
// hb.done. A failed heartbeat is retried at the next interval; one that keeps failing is logged
// once at WARN (the others list the leases when they see it miss a heartbeat, and count this worker out of the
// shares), and the lease syncs, which meet the same store, report a store that is down.
func (c *Subscription) beat() {
	defer close(c.hb.done)
	tick := c.cfg.Clock.NewTicker(heartbeatInterval(c.cfg))
	defer tick.Stop()
	// At most one nudged heartbeat between two ticks: Changes can move many times in a row (a
	// reshard's lease creations, one per call), and a heartbeat for each, back to back, would
	// load the member partition as the heartbeat interval is there to prevent.
	nudge := c.hb.nudge
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C():
			nudge = c.hb.nudge
			select {
			case <-c.hb.nudge: // this heartbeat carries every move so far
			default:
			}
		case <-nudge:
			nudge = nil // the next one waits for the tick
		}
		err := c.heartbeatOnce()
		switch {
		case err == nil:
			c.hb.fails = 0
		case c.ctx.Err() != nil:
			return
		default:
			c.hb.fails++
			fields := c.logFields().Add(watermill.LogFields{"failures": c.hb.fails})
			if c.hb.fails == awscall.FailuresBeforeError {
				logs.Warn(c.cfg.Logger, "Member heartbeat keeps failing; this worker keeps its shards by renewing their leases, and the others list the leases to see them move", err, fields)
			} else {
				c.cfg.Logger.Debug("Member heartbeat failed; will retry", fields.Add(watermill.LogFields{"err": err}))
			}
		}
	}
}

// stopHeartbeat waits for beat to end (the subscription's context is cancelled by now).
func (c *Subscription) stopHeartbeat() {
	if c.hb.done != nil {
		<-c.hb.done
	}
}
