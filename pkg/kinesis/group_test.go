package kinesis_test

// Consumer groups with several instances in one process: convergence, handoff, failover after
// a crash and fencing of a paused owner (issue 4). Every instance shares one memlog and one
// lease.MemoryStore in one testing/synctest bubble; fake time moves only by steps, and after
// each step the test waits until the driver has settled (see group_helpers_test.go), so the
// fake-time figures logged here are the same on any machine. The lease settings are the
// driver's defaults: LeaseDuration 10 s, renewals every 10 s / 3, lease sync every 2 s,
// HandoffTimeout 10 s, checkpoints every 5 s.
//
// Not parallel: goleak sees every goroutine.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Instances join and leave one at a time; the shards spread evenly after each change, no shard
// is read by two instances at once, and every message published meanwhile (one per shard per
// step) is delivered exactly once and in order.
func TestGroupConvergence(t *testing.T) {
	for _, shards := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ignore := goleak.IgnoreCurrent()
				w := newGrpWorld(t, shards)
				w.publishing = true
				limit := time.Duration(shards+4) * 2 * grpSyncInterval

				w1 := w.start("w1")
				d := w.runUntil("w1 reads every shard", limit, func() bool { return w.spread("w1") })
				t.Logf("convergence, start of w1: %s (%s)", d, w.counts("w1"))
				w.stable("w1")

				w2 := w.start("w2")
				d = w.runUntil("spread over w1 and w2", limit, func() bool { return w.spread("w1", "w2") })
				t.Logf("convergence, start of w2: %s (%s)", d, w.counts("w1", "w2"))
				w.stable("w1", "w2")

				w3 := w.start("w3")
				d = w.runUntil("spread over w1, w2 and w3", limit, func() bool { return w.spread("w1", "w2", "w3") })
				t.Logf("convergence, start of w3: %s (%s)", d, w.counts("w1", "w2", "w3"))
				w.stable("w1", "w2", "w3")
				if shards == 1 {
					for _, idle := range []*grpWorker{w2, w3} {
						if got := idle.store.opsOf(lease.OpTake, ""); len(got) != 0 {
							t.Errorf("%s took a lease of the only shard, which w1 holds: %+v", idle.id, got)
						}
					}
				}

				w.leave(w3, "w1", "w2")
				w.stable("w1", "w2")
				w.leave(w2, "w1")
				w.stable("w1")
				if got := w.owned("w1"); len(got) != shards {
					t.Errorf("w1 owns %d of %d shards after the others left", len(got), shards)
				}

				w.publishing = false
				w.allDelivered(2 * grpSyncInterval)
				w.close(w1)
				dups := w.duplicates()
				t.Logf("%d messages, %d delivered twice or more", len(w.pubOrder), len(dups))
				if len(dups) != 0 {
					t.Errorf("duplicates after graceful changes only: %v", dups)
				}
				w.inOrderOnce()
				_ = w.pub.Close()
				_ = w.e.pub.Close()
				goleak.VerifyNone(t, ignore)
			})
		})
	}
}

// stable takes steps for two lease syncs and checks that nothing moves: the spread holds and
// nobody takes or asks for a lease.
func (w *grpWorld) stable(ids ...string) {
	w.t.Helper()
	before := w.changes()
	w.steps(2*grpSyncInterval + grpStep)
	if !w.spread(ids...) {
		w.t.Errorf("the spread over %v did not hold: %s", ids, w.leaseSummary())
	}
	if after := w.changes(); after != before {
		w.t.Errorf("leases kept moving after the group converged: %d takes and requests, then %d; %s", before, after, w.leaseSummary())
	}
	// Every shard is read at every step: nothing published before this step is waiting.
	publishing := w.publishing
	w.publishing = false
	w.step()
	if miss := w.missing(); len(miss) > 0 {
		w.t.Errorf("%d published messages not delivered by a converged group: %v", len(miss), miss[:min(5, len(miss))])
	}
	w.publishing = publishing
}

// changes counts the successful takes, handoff requests and handoffs of every instance.
func (w *grpWorld) changes() int {
	n := 0
	for _, wk := range w.workerList() {
		for _, op := range []string{lease.OpTake, lease.OpRequestHandoff, lease.OpHandoff} {
			for _, o := range wk.store.opsOf(op, "") {
				if o.err == nil {
					n++
				}
			}
		}
	}
	return n
}

// leave closes wk and waits for the rest to spread again. It logs the convergence time and
// the graceful handoff time: from Close until another instance delivered a record of each
// shard wk held (a record is published to every shard at every step).
func (w *grpWorld) leave(wk *grpWorker, rest ...string) {
	w.t.Helper()
	held := w.owned(wk.id)
	closedAt := w.now()
	w.close(wk)
	w.mu.Lock()
	closeEpoch := w.epoch
	w.mu.Unlock()
	for _, l := range w.leases() {
		if l.Owner == wk.id {
			w.t.Errorf("%s still owns %s after Close", wk.id, l.ShardID)
		}
	}
	limit := time.Duration(w.n+4) * 2 * grpSyncInterval
	var handoff time.Duration
	handed := false
	d := w.runUntil(fmt.Sprintf("spread over %v after %s left", rest, wk.id), limit, func() bool {
		if !handed {
			taken := map[string]bool{}
			for _, d := range w.deliveriesOf(func(d grpDelivery) bool { return d.epoch > closeEpoch && d.worker != wk.id }) {
				taken[d.shard] = true
			}
			all := true
			for _, s := range held {
				all = all && taken[s]
			}
			if all {
				handoff, handed = w.since(closedAt), true
			}
		}
		return handed && w.spread(rest...)
	})
	if len(held) == 0 {
		w.t.Logf("convergence, Close of %s (it held no lease): %s (%s)", wk.id, d, w.counts(rest...))
		return
	}
	w.t.Logf("convergence, Close of %s: %s (%s); graceful handoff of its %d shard(s), Close to first delivery by another instance: %s",
		wk.id, d, w.counts(rest...), len(held), handoff)
	if handoff > 3*time.Second {
		w.t.Errorf("graceful handoff took %s, the goal is under 3 s", handoff)
	}
}

// A worker below its share asks the owner for one lease; the owner lets the message in flight
// finish (or gives up waiting after HandoffTimeout/2), checkpoints and hands over; the taker
// goes on right after the checkpoint. An owner that never hands over loses the lease to the
// taker after HandoffTimeout.
func TestGroupHandoff(t *testing.T) {
	for _, mode := range []string{"in-flight message acked", "in-flight message never acked", "owner never hands over"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ignore := goleak.IgnoreCurrent()
				w := newGrpWorld(t, 4)
				w1 := w.start("w1")
				if !w.spread("w1") {
					t.Fatalf("w1 did not take every lease at Subscribe: %s", w.leaseSummary())
				}
				// One acked message on every shard, so that every shard has a checkpoint to move
				// on from.
				w.publishRound()
				w.step()
				// PlanShare asks for the last lease, in shard order, of the most loaded worker.
				x := subShard(3)
				if mode != "owner never hands over" {
					w1.setHold(func(shard string) bool { return shard == x })
				}
				msgs := w.publishTo(3, 3) // m1 is in flight on x when w2 asks; m2, m3 wait behind it
				w.step()
				m0 := w.deliveriesOf(func(d grpDelivery) bool { return d.uuid == "s03-00000" })
				if len(m0) != 1 || !m0[0].acked {
					t.Fatalf("m0 of %s: %+v, want acked by w1", x, m0)
				}
				var m1 grpDelivery
				if mode != "owner never hands over" {
					held := w1.heldMsgs()
					if len(held) != 1 || held[0].uuid != msgs[0] {
						t.Fatalf("w1 holds %+v, want %s in flight", held, msgs[0])
					}
					m1 = held[0]
				} else {
					w.e.store.SetFault(func(_ context.Context, op string, _ lease.Key) error {
						if op == lease.OpHandoff {
							return errors.New("the owner's handoff never gets through")
						}
						return nil
					})
					if got := w.deliveriesOf(func(d grpDelivery) bool { return d.shard == x && d.acked }); len(got) != 4 {
						t.Fatalf("w1 acked %d messages of %s, want m0..m3", len(got), x)
					}
				}
				revokedBefore := len(w1.eventsOf("revoked", x))

				w2 := w.start("w2")
				// w2 finds no free lease: it asks in its first lease sync, inside Subscribe.
				w.runUntil("w2 asks for "+x, grpStep, func() bool { return len(w2.store.opsOf(lease.OpRequestHandoff, x)) > 0 })
				askedAt := w2.store.opsOf(lease.OpRequestHandoff, x)[0].at
				if l := w.lease(x); l.PendingOwner != "w2" || l.Owner != "w1" {
					t.Fatalf("after w2's first lease sync, the lease of %s is %+v; want w1's with w2 pending", x, l)
				}
				// seenAt is when w1 first learned of the request: a listing of the leases, or a
				// renewal or checkpoint of x, which returns the lease with w2 pending.
				seenAt := func() time.Time {
					var first time.Time
					for _, op := range []struct{ op, key string }{{lease.OpList, ""}, {lease.OpRenew, x}, {lease.OpCheckpoint, x}} {
						for _, o := range w1.store.opsOf(op.op, op.key) {
							if o.err == nil && !o.at.Before(askedAt) && (first.IsZero() || o.at.Before(first)) {
								first = o.at
							}
						}
					}
					return first
				}
				handedAt := func() time.Time {
					for _, o := range w1.store.opsOf(lease.OpHandoff, x) {
						if o.err == nil {
							return o.at
						}
					}
					return time.Time{}
				}
				stillW1 := func(what string) {
					t.Helper()
					if l := w.lease(x); l.Owner != "w1" || l.PendingOwner != "w2" {
						t.Fatalf("%s: w1 handed %s over %s after it saw the request (HandoffTimeout/2 is %s); lease %+v, want still w1's with w2 pending",
							what, x, handedAt().Sub(seenAt()), grpHandoffTimeout/2, l)
					}
					// (An owner whose Handoff fails has revoked the shard already: it
					// checkpoints and stops delivering before it tries.)
					if got := len(w1.eventsOf("revoked", x)); got != revokedBefore && mode != "owner never hands over" {
						t.Fatalf("%s: OnRevoked fired for %s", what, x)
					}
				}

				switch mode {
				case "in-flight message acked":
					w.runUntil("w1 sees the request", 2*grpSyncInterval, func() bool { return !seenAt().IsZero() })
					// Well past the point where w1 learned of the request, and before its own
					// limit of HandoffTimeout/2: it waits for the message.
					for w.since(seenAt()) < grpHandoffTimeout/2-time.Second {
						w.step()
						stillW1("m1 in flight")
						subNotDone(t, m1.msg.Context(), "m1 in flight")
					}
					ackedAt := w.now()
					m1.msg.Ack()
					w.settle() // no time passes: the Ack alone lets w1 hand over
					if got := handedAt(); !got.Equal(ackedAt) {
						t.Fatalf("handed over at %s, want at the Ack (%s); lease %+v", grpRel(got), grpRel(ackedAt), w.lease(x))
					}
					l := w.lease(x)
					if l.Owner != "w2" || l.PendingOwner != "" || l.Checkpoint != m1.seq {
						t.Fatalf("after the Ack the lease of %s is %+v; want w2's, checkpoint at m1 %s", x, l, m1.seq)
					}
					t.Logf("handoff: asked at %s, w1 saw the request %s later, m1 acked %s after that; handed over at the Ack",
						grpRel(askedAt), seenAt().Sub(askedAt), ackedAt.Sub(seenAt()))
					w.handedOn(w2, x, ackedAt, msgs[1:])

				case "in-flight message never acked":
					w.runUntil("w1 sees the request", 2*grpSyncInterval, func() bool { return !seenAt().IsZero() })
					for handedAt().IsZero() {
						if w.since(seenAt()) > grpHandoffTimeout {
							t.Fatalf("w1 never handed %s over: %s", x, w.leaseSummary())
						}
						stillW1("m1 in flight, unacked")
						w.step()
					}
					waited := handedAt().Sub(seenAt())
					t.Logf("handoff with an unacked message: w1 saw the request %s after it was made and handed over %s later (HandoffTimeout/2 = %s)",
						seenAt().Sub(askedAt), waited, grpHandoffTimeout/2)
					if waited < grpHandoffTimeout/2 || waited > grpHandoffTimeout/2+grpStep {
						t.Errorf("w1 handed over %s after it saw the request, want HandoffTimeout/2 = %s", waited, grpHandoffTimeout/2)
					}
					subDone(t, m1.msg.Context(), "w1's unacked m1 after the handoff")
					if l := w.lease(x); l.Owner != "w2" || l.Checkpoint != m0[0].seq {
						t.Fatalf("after the handoff the lease of %s is %+v; want w2's, checkpoint at m0 %s", x, l, m0[0].seq)
					}
					w.handedOn(w2, x, handedAt(), msgs)
					m1.msg.Ack() // late: ignored
					w.step()

				case "owner never hands over":
					var takenAt time.Time
					w.runUntil("w2 takes the lease", grpHandoffTimeout+3*grpSyncInterval, func() bool {
						for _, o := range w2.store.opsOf(lease.OpTake, x) {
							if o.err == nil {
								takenAt = o.at
								return true
							}
						}
						stillW1("handoff failing")
						return false
					})
					waited := takenAt.Sub(askedAt)
					attempts := len(w1.store.opsOf(lease.OpHandoff, x))
					t.Logf("owner stuck: w2 took the lease %s after asking (HandoffTimeout %s); w1 tried to hand over %d time(s), OnRevoked fired %d time(s)",
						waited, grpHandoffTimeout, attempts, len(w1.eventsOf("revoked", x))-revokedBefore)
					if waited < grpHandoffTimeout || waited > grpHandoffTimeout+2*grpSyncInterval {
						t.Errorf("w2 took the lease %s after asking, want HandoffTimeout (%s) plus at most two lease syncs", waited, grpHandoffTimeout)
					}
					if max := int(waited/grpRenewInterval) + 2; attempts > max {
						t.Errorf("w1 tried Handoff %d times in %s, want at most one per LeaseRenewInterval (%d)", attempts, waited, max)
					}
					if got := len(w1.eventsOf("revoked", x)) - revokedBefore; got != 1 {
						t.Errorf("OnRevoked fired %d times on w1 for %s, want once", got, x)
					}
					w.e.store.SetFault(nil)
					next := w.publishTo(3, 2)
					w.handedOn(w2, x, takenAt, next)
				}

				if got := w2.eventsOf("acquired", x); len(got) != 1 {
					t.Errorf("OnAcquired for %s on w2: %+v, want once", x, got)
				}
				if got := w1.eventsOf("revoked", x); len(got) == 0 {
					t.Errorf("OnRevoked never fired for %s on w1", x)
				}
				d := w.runUntil("spread over w1 and w2", 6*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
				t.Logf("then spread over w1 and w2 in %s more (%s)", d, w.counts("w1", "w2"))
				w.allDelivered(2 * grpSyncInterval)
				w.close(w2)
				w.close(w1)
				dups := w.duplicates()
				want := map[string]int{}
				if mode == "in-flight message never acked" {
					want[m1.uuid] = 2
				}
				if fmt.Sprint(dups) != fmt.Sprint(want) {
					t.Errorf("duplicates %v, want %v (only an unacked message is delivered again)", dups, want)
				}
				_ = w.pub.Close()
				_ = w.e.pub.Close()
				goleak.VerifyNone(t, ignore)
			})
		})
	}
}

// handedOn checks that taker goes on with shard where the previous owner stopped: its first
// deliveries of the shard are exactly next (nothing acked comes again, nothing is skipped),
// and logs the fake time from `from` to its first delivery.
func (w *grpWorld) handedOn(taker *grpWorker, shard string, from time.Time, next []string) {
	w.t.Helper()
	got := func() []grpDelivery {
		return w.deliveriesOf(func(d grpDelivery) bool { return d.worker == taker.id && d.shard == shard })
	}
	w.runUntil(taker.id+" delivers "+shard, 2*grpSyncInterval+grpStep, func() bool { return len(got()) >= len(next) })
	ds := got()
	var uuids []string
	for _, d := range ds[:len(next)] {
		uuids = append(uuids, d.uuid)
	}
	if fmt.Sprint(uuids) != fmt.Sprint(next) {
		w.t.Errorf("%s's first deliveries of %s: %v, want %v", taker.id, shard, uuids, next)
	}
	w.t.Logf("%s delivered %s's next record %s after the handover point", taker.id, shard, ds[0].at.Sub(from))
}

// A crashed instance (its store calls and reads fail, its consumer is gone) keeps its leases
// until their counters have not moved for LeaseDuration as the survivor sees them; then the
// survivor takes them all and redelivers what was acked after the last checkpoint.
//
// The crash comes at several points of w1's checkpoint interval (checkpoints every 5 s); the
// failover time depends on where it falls between w1's renewals and w2's lease syncs.
func TestGroupCrashFailover(t *testing.T) {
	for _, after := range []time.Duration{grpStep, grpCheckpointEvery / 2, grpCheckpointEvery - grpStep} {
		t.Run(fmt.Sprintf("crash %s after a checkpoint", after), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				groupCrash(t, after)
			})
		})
	}
}

func groupCrash(t *testing.T, after time.Duration) {
	ignore := goleak.IgnoreCurrent()
	w := newGrpWorld(t, 4)
	w.publishing = true
	w1 := w.start("w1")
	w.steps(grpSyncInterval / 2) // out of phase, as separate processes are
	w2 := w.start("w2")
	w.runUntil("spread over w1 and w2", 4*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
	// Run on for a while, and stop `after` one of w1's checkpoints, so that there is acked
	// progress the crash loses.
	w.steps(grpCheckpointEvery)
	lastCkpt := func() time.Time {
		var at time.Time
		for _, o := range w1.store.opsOf(lease.OpCheckpoint, "") {
			if o.err == nil && o.at.After(at) {
				at = o.at
			}
		}
		return at
	}
	w.runUntil("w1 checkpoints", grpCheckpointEvery+grpStep, func() bool { return w.since(lastCkpt()) == 0 })
	w.steps(after)

	victims := w.owned("w1")
	if len(victims) != 2 {
		t.Fatalf("w1 owns %v, want 2 shards", victims)
	}
	ckpt := map[string]string{}
	for _, s := range victims {
		ckpt[s] = w.lease(s).Checkpoint
	}
	cutAt := w.now()
	w1.dead.Store(true)
	w1.client.dead.Store(true)
	w1.store.setMode(grpFail)
	w.mu.Lock()
	lastChange := map[string]time.Time{}
	for _, s := range victims {
		lastChange[s] = w.leaseSeen[s].since
	}
	w.mu.Unlock()

	takenAt := map[string]time.Time{}
	var firstDelivery time.Time
	w.runUntil("w2 delivers w1's shards", 2*grpLeaseDuration, func() bool {
		for _, s := range victims {
			if _, ok := takenAt[s]; ok {
				continue
			}
			if l := w.lease(s); l.Owner == "w2" {
				takenAt[s] = w.now()
			}
		}
		if firstDelivery.IsZero() {
			if ds := w.deliveriesOf(func(d grpDelivery) bool {
				return d.worker == "w2" && d.at.After(cutAt) && (d.shard == victims[0] || d.shard == victims[1])
			}); len(ds) > 0 {
				firstDelivery = ds[0].at
			}
		}
		return len(takenAt) == len(victims) && !firstDelivery.IsZero()
	})
	for _, s := range victims {
		take := w2.store.opsOf(lease.OpTake, s)
		var observed lease.Lease
		var at time.Time
		for _, o := range take {
			if o.err == nil && o.at.After(cutAt) {
				observed, at = o.in, o.at
			}
		}
		// When w2 first saw the counter value it took the lease at: the one clock a take goes by.
		var seen time.Time
		for _, o := range w2.store.opsOf(lease.OpList, "") {
			for _, l := range o.list {
				if seen.IsZero() && l.ShardID == s && l.Owner == observed.Owner && l.Generation == observed.Generation && l.Counter == observed.Counter {
					seen = o.at
				}
			}
		}
		t.Logf("%s: w1's last write at crash%s; w2 first saw that counter at crash%s and took the lease at crash%s",
			s, grpSigned(lastChange[s].Sub(cutAt)), grpSigned(seen.Sub(cutAt)), grpSigned(at.Sub(cutAt)))
		// The safety rule: LeaseDuration after the lease's counter was first seen.
		if seen.IsZero() || at.Sub(seen) < grpLeaseDuration {
			t.Errorf("%s taken %s after w2 first saw its counter, before LeaseDuration (%s)", s, at.Sub(seen), grpLeaseDuration)
		}
		if lost := w1.eventsOf("lost", s); len(lost) != 1 {
			t.Errorf("w1's OnLost for %s: %+v, want once", s, lost)
		}
	}
	// The goal: LeaseDuration + 2 lease syncs. w2 lists the leases at the lease sync that
	// finds w1's heartbeat still (at most two syncs after the crash) and takes them
	// LeaseDuration after that listing first showed their last counters.
	failover := firstDelivery.Sub(cutAt)
	goal := grpLeaseDuration + 2*grpSyncInterval
	t.Logf("crash failover: from the crash to w2's first delivery of w1's shards: %s (goal: LeaseDuration + 2 lease syncs = %s)",
		failover, goal)
	if failover > goal {
		t.Errorf("failover took %s, goal %s", failover, goal)
	}

	w.allDelivered(2 * grpSyncInterval)
	w.publishing = false
	// Redelivered: exactly what w1 acked after its last checkpoint.
	want := map[string]bool{}
	for _, d := range w.deliveriesOf(func(d grpDelivery) bool { return d.worker == "w1" && ckpt[d.shard] != "" }) {
		if subSeqLess(t, ckpt[d.shard], d.seq) {
			want[d.uuid] = true
		}
	}
	got := map[string]bool{}
	for u := range w.duplicates() {
		got[u] = true
	}
	t.Logf("duplicates after the crash: %d, against %d records w1 acked since its last checkpoint (checkpoints every %s, crash %s after the last)",
		len(got), len(want), grpCheckpointEvery, after)
	if fmt.Sprint(sortedSet(got)) != fmt.Sprint(sortedSet(want)) {
		t.Errorf("redelivered %v, want what w1 acked after its last checkpoint %v", sortedSet(got), sortedSet(want))
	}
	w.close(w2)
	w.close(w1)
	_ = w.pub.Close()
	_ = w.e.pub.Close()
	goleak.VerifyNone(t, ignore)
}

// grpSigned writes d with its sign, for offsets from an event.
func grpSigned(d time.Duration) string {
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// An instance that cannot reach the lease store (its calls hang, as in a paused process or a
// network that drops packets, or fail) stops delivering its shards before LeaseDuration has
// passed since its last successful renewal: OnLost fires and its messages' contexts are
// done. The other instance then takes the leases and redelivers what was not checkpointed;
// once the first instance is back, its late writes are refused and the checkpoint is the new
// owner's.
func TestGroupPausedOwnerFenced(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode int
	}{{"store hangs", grpHang}, {"store fails", grpFail}} {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ignore := goleak.IgnoreCurrent()
				w := newGrpWorld(t, 4)
				w.publishing = true
				w1 := w.start("w1")
				w.steps(grpSyncInterval / 2) // out of phase, as separate processes are
				w2 := w.start("w2")
				w.runUntil("spread over w1 and w2", 4*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
				w.steps(grpSyncInterval)
				victims := w.owned("w1")
				if len(victims) != 2 {
					t.Fatalf("w1 owns %v, want 2 shards", victims)
				}
				s := victims[0]
				w1.setHold(func(shard string) bool { return shard == s })
				w.step()
				held := w1.heldMsgs()
				if len(held) != 1 {
					t.Fatalf("w1 holds %+v, want one message of %s in flight", held, s)
				}
				inFlight := held[0]

				pausedAt := w.now()
				w1.store.setMode(mode.mode)
				lastOK := map[string]time.Time{}
				heldLease := map[string]lease.Lease{}
				for _, v := range victims {
					lastOK[v], heldLease[v] = w1.store.lastOwnerWrite(v)
				}

				stoppedAt := map[string]time.Time{}
				takenAt := map[string]time.Time{}
				w.runUntil("w2 takes w1's shards", 2*grpLeaseDuration, func() bool {
					for _, v := range victims {
						if _, ok := stoppedAt[v]; !ok {
							if lost := w1.eventsOf("lost", v); len(lost) > 0 {
								stoppedAt[v] = lost[0].at
							} else if w.since(lastOK[v]) >= grpLeaseDuration {
								t.Errorf("%s: w1 still delivers it %s after its last successful renewal (LeaseDuration %s); no OnLost",
									v, w.since(lastOK[v]), grpLeaseDuration)
								stoppedAt[v] = time.Time{}
							}
						}
						if _, ok := takenAt[v]; !ok && w.lease(v).Owner == "w2" {
							takenAt[v] = w.now()
						}
					}
					if w.since(lastOK[s]) >= grpLeaseDuration && inFlight.msg.Context().Err() == nil {
						t.Errorf("w1's in-flight message of %s still has a live context %s after w1's last renewal", s, w.since(lastOK[s]))
					}
					return len(takenAt) == len(victims)
				})
				for _, v := range victims {
					if stoppedAt[v].IsZero() {
						continue
					}
					t.Logf("%s: w1 stopped delivering %s after its last successful renewal (the store was cut %s after it); w2 took it %s after that renewal",
						v, stoppedAt[v].Sub(lastOK[v]), pausedAt.Sub(lastOK[v]), takenAt[v].Sub(lastOK[v]))
					if d := stoppedAt[v].Sub(lastOK[v]); d >= grpLeaseDuration {
						t.Errorf("%s: w1 stopped %s after its last renewal, not before LeaseDuration (%s)", v, d, grpLeaseDuration)
					}
				}
				subDone(t, inFlight.msg.Context(), "w1's in-flight message after it lost the lease")
				// w2 delivers the message w1 never acked, with the same UUID.
				w.runUntil("w2 redelivers w1's unacked message", 2*grpSyncInterval, func() bool {
					return len(w.deliveriesOf(func(d grpDelivery) bool { return d.worker == "w2" && d.uuid == inFlight.uuid })) > 0
				})
				// Let w2 checkpoint its progress on the shards it took.
				w.steps(grpCheckpointEvery + grpStep)
				resumedAt := w.now()
				w1.store.setMode(grpPass)
				inFlight.msg.Ack() // w1's handler finishes, too late
				w.steps(grpSyncInterval + grpStep)

				for _, v := range victims {
					// Whatever w1 sent to the store about v after the takeover was refused.
					for _, o := range w1.store.opsOf("", v) {
						if o.reached && !o.at.Before(pausedAt) && o.err == nil && o.op != lease.OpTake && o.op != lease.OpRequestHandoff {
							t.Errorf("w1's %s of %s (made at %s, after the pause) succeeded: %+v", o.op, v, grpRel(o.at), o.out)
						}
					}
					// The writes a resumed w1 could still make with the lease it held are refused.
					ctx := context.Background()
					if _, err := w1.store.Renew(ctx, heldLease[v]); !errors.Is(err, lease.ErrLeaseLost) {
						t.Errorf("w1's late Renew of %s: %v, want ErrLeaseLost", v, err)
					}
					if _, err := w1.store.Checkpoint(ctx, heldLease[v], inFlight.seq); !errors.Is(err, lease.ErrLeaseLost) {
						t.Errorf("w1's late Checkpoint of %s: %v, want ErrLeaseLost", v, err)
					}
					// The stored checkpoint is the last one w2 wrote.
					var w2ckpt string
					for _, o := range w2.store.opsOf(lease.OpCheckpoint, v) {
						if o.err == nil {
							w2ckpt = o.out.Checkpoint
						}
					}
					if l := w.lease(v); w2ckpt == "" || l.Checkpoint != w2ckpt {
						t.Errorf("checkpoint of %s is %q, want w2's last %q", v, l.Checkpoint, w2ckpt)
					}
				}
				var late []string
				for _, o := range w1.store.opsOf("", "") {
					if o.reached && !o.at.Before(pausedAt) && o.at.Before(resumedAt) {
						late = append(late, fmt.Sprintf("%s %s: %v", o.op, o.shard, o.err))
					}
				}
				t.Logf("w1's calls made while paused that reached the store once it resumed: %s", strings.Join(late, "; "))

				w.runUntil("spread over w1 and w2 again", 6*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
				t.Logf("w1 rejoined: spread again %s after it resumed (%s)", w.since(resumedAt), w.counts("w1", "w2"))
				w.publishing = false
				w.allDelivered(2 * grpSyncInterval)
				w.close(w2)
				w.close(w1)
				// What came twice: w1's unacked message, and what w1 acked after the last
				// checkpoint it could write (the checkpoint w2 took the lease at).
				ckpt, took := map[string]string{}, map[string]time.Time{}
				for _, v := range victims {
					for _, o := range w2.store.opsOf(lease.OpTake, v) {
						if o.err == nil && o.at.After(pausedAt) && took[v].IsZero() {
							ckpt[v], took[v] = o.in.Checkpoint, o.at
						}
					}
				}
				want := map[string]bool{inFlight.uuid: true}
				for _, dl := range w.deliveriesOf(func(d grpDelivery) bool {
					return d.worker == "w1" && d.acked && !took[d.shard].IsZero() && d.at.Before(took[d.shard])
				}) {
					if ckpt[dl.shard] == "" || subSeqLess(t, ckpt[dl.shard], dl.seq) {
						want[dl.uuid] = true
					}
				}
				got := map[string]bool{}
				for u := range w.duplicates() {
					got[u] = true
				}
				t.Logf("duplicates: %d (w1's unacked message and what it acked after its last checkpoint)", len(got))
				if fmt.Sprint(sortedSet(got)) != fmt.Sprint(sortedSet(want)) {
					t.Errorf("redelivered %v, want %v", sortedSet(got), sortedSet(want))
				}
				_ = w.pub.Close()
				_ = w.e.pub.Close()
				goleak.VerifyNone(t, ignore)
			})
		})
	}
}
