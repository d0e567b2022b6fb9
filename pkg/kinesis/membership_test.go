package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// memberNames reads the group's member records from the shared store.
func memberNames(t *testing.T, w *grpWorld) []string {
	t.Helper()
	ms, err := w.e.store.Members(t.Context(), subGroup, w.e.stream)
	if err != nil {
		t.Fatalf("Members: %v", err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Worker)
	}
	return names
}

// A newcomer asks for its whole share in its first lease sync, inside Subscribe, and has it once
// the owner's readers hand over, within one lease sync; a closing instance removes its member
// record, and the record of a crashed one is removed once stale (6 lease durations), by the
// first live member in name order.
func TestGroupMembership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 8)
		w.publishing = true
		w1 := w.start("w1")
		if got := memberNames(t, w); !slices.Equal(got, []string{"w1"}) {
			t.Fatalf("members after w1 subscribed: %v, want [w1]", got)
		}
		w.steps(grpSyncInterval / 2)

		joined := w.now()
		w2 := w.start("w2")
		asks := func() []string {
			var asked []string
			for _, o := range w2.store.opsOf(lease.OpRequestHandoff, "") {
				if o.err == nil {
					asked = append(asked, o.shard)
				}
			}
			return asked
		}
		// w2 finds no free lease and asks in the lease sync Subscribe makes.
		askedAfter := w.runUntil("w2 asks", grpStep, func() bool { return len(asks()) > 0 })
		asked := asks()
		if len(asked) != 4 {
			t.Fatalf("w2 asked for %v in its first lease sync, want its whole share of 4 at once; %s", asked, w.leaseSummary())
		}
		d := w.runUntil("spread over w1 and w2", grpSyncInterval+grpStep, func() bool { return w.spread("w1", "w2") })
		t.Logf("w2 joined 8 shards held by w1: asked for %v %s after Subscribe returned, spread %s later (%s)", asked, askedAfter, d, w.counts("w1", "w2"))
		if got := memberNames(t, w); !slices.Equal(got, []string{"w1", "w2"}) {
			t.Fatalf("members: %v, want [w1 w2]", got)
		}

		w3 := w.start("w3")
		w.runUntil("spread over w1, w2 and w3", 2*grpSyncInterval, func() bool { return w.spread("w1", "w2", "w3") })
		t.Logf("w3 joined: spread %s after w2 joined (%s)", w.since(joined), w.counts("w1", "w2", "w3"))

		w.close(w3)
		if got := memberNames(t, w); !slices.Equal(got, []string{"w1", "w2"}) {
			t.Fatalf("members after w3 closed: %v, want its record removed", got)
		}
		// w3 sent a notice to the members with the fewest leases: they list the leases at their
		// next heartbeat, not at their next lease sync.
		left := w.runUntil("spread over w1 and w2 after w3 closed", 2*grpSyncInterval, func() bool { return w.spread("w1", "w2") })
		t.Logf("w3 closed: its shards read by w1 and w2 %s after Close returned (%s)", left, w.counts("w1", "w2"))
		if left > grpSyncInterval/2 {
			t.Errorf("w3's shards were read again %s after it closed, want within a heartbeat interval (%s)", left, grpSyncInterval/2)
		}

		// w1 crashes: its record stays until the first live member (w2) finds it stale.
		crashedAt := w.now()
		w1.dead.Store(true)
		w1.client.dead.Store(true)
		w1.store.setMode(grpFail)
		w.runUntil("w2 removes w1's stale member record", 6*grpLeaseDuration+2*grpSyncInterval, func() bool {
			return slices.Equal(memberNames(t, w), []string{"w2"})
		})
		if gone := w.since(crashedAt); gone < 6*grpLeaseDuration {
			t.Errorf("w1's member record removed %s after its crash, before it was stale (6 lease durations)", gone)
		}
		w.close(w2)
		if got := memberNames(t, w); len(got) != 0 {
			t.Errorf("members after every live instance closed: %v, want none", got)
		}
		w.close(w1)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// In a quiet group a worker lists the leases only every 30 lease syncs (leaseListMaxAge), not
// at every sync: a listing reads every lease of the stream, the cost that grew with the shards.
// Each sync still reads the members; a member that misses a heartbeat makes the others list at
// once, so that a crashed worker's leases expire LeaseDuration after their last counters were
// seen (TestGroupCrashFailover times that).
func TestGroupQuietListsRarely(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 8)
		w.publishing = true
		w1 := w.start("w1")
		w2 := w.start("w2")
		w.runUntil("spread over w1 and w2", 4*grpSyncInterval, func() bool { return w.spread("w1", "w2") })
		w.steps(4 * grpSyncInterval) // the last requests and handoffs settle

		count := func(ww *grpWorker, op string, from time.Time) int {
			n := 0
			for _, o := range ww.store.opsOf(op, "") {
				if o.err == nil && !o.at.Before(from) {
					n++
				}
			}
			return n
		}
		from := w.now()
		const quiet = 2 * time.Minute
		w.steps(quiet)
		syncs := int(quiet / grpSyncInterval)
		for _, ww := range []*grpWorker{w1, w2} {
			lists, reads := count(ww, lease.OpList, from), count(ww, lease.OpMembers, from)
			t.Logf("%s over %s of a quiet group: %d lease listings, %d member reads (%d lease syncs)", ww.id, quiet, lists, reads, syncs)
			if lists > 4 {
				t.Errorf("%s listed the leases %d times in %s of a quiet group, want at most 4 (one per minute, and shard syncs)", ww.id, lists, quiet)
			}
			if reads < syncs-1 {
				t.Errorf("%s read the members %d times in %d lease syncs", ww.id, reads, syncs)
			}
		}

		// w1 crashes: w2 lists the leases within two lease syncs, when w1's heartbeat stops moving.
		crashedAt := w.now()
		w1.dead.Store(true)
		w1.client.dead.Store(true)
		w1.store.setMode(grpFail)
		w.runUntil("w2 lists the leases", 3*grpSyncInterval, func() bool { return count(w2, lease.OpList, crashedAt) > 0 })
		t.Logf("w1 crashed; w2 listed the leases %s later", w.since(crashedAt))
		if d := w.since(crashedAt); d > 2*grpSyncInterval+grpStep {
			t.Errorf("w2 listed the leases %s after w1 crashed, want within two lease syncs", d)
		}
		w.runUntil("w2 reads every shard", grpLeaseDuration+3*grpSyncInterval, func() bool { return w.spread("w2") })
		w.close(w2)
		w.close(w1)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// After a split, the children's leases are created by the worker that read the parent to its
// end, which may be at its share already: the others take them within a few lease syncs,
// although a quiet group lists the leases only once a minute, because the creator sends a
// notice to the members with the fewest leases. Without that, the second child waited for the
// others' next shard sync (20 s here).
func TestGroupSplitChildrenTakenByOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 6)
		w1 := w.start("w1")
		w2 := w.start("w2")
		w3 := w.start("w3")
		w.runUntil("spread over w1, w2 and w3", 6*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2", "w3") })
		w.steps(10*grpSyncInterval + 12*time.Second) // quiet: nobody lists at every sync
		own := w.owned("w3")
		lo, hi := w.e.subSplit(own[0])
		d := w.runUntil("both children taken", time.Minute, func() bool {
			var owners int
			for _, l := range w.leases() {
				if (l.ShardID == lo || l.ShardID == hi) && l.Owner != "" {
					owners++
				}
			}
			return owners == 2
		})
		t.Logf("split of %s: both children taken %s later (%s)", own[0], d, w.counts("w1", "w2", "w3"))
		if limit := 3*grpSyncInterval + grpStep; d > limit {
			t.Errorf("both children of a split taken %s after it, want within %s", d, limit)
		}
		w.close(w3)
		w.close(w2)
		w.close(w1)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// A member whose heartbeats fail while its lease writes succeed (its member partition
// throttled, say) keeps its shards: membership never makes a lease takeable. It keeps every
// shard without a pause, and the other worker tries no take on it; it lists the leases about
// once per LeaseDuration (when their last counters would expire) to see them move, rather than
// at every lease sync.
func TestGroupQuietMemberKeepsItsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 4)
		w.publishing = true
		w1 := w.start("w1")
		w.steps(grpSyncInterval / 2)
		w2 := w.start("w2")
		w.runUntil("spread over w1 and w2", 4*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
		held := w.owned("w1")
		from := w.now()
		w1.store.setBeatsDown(true)
		w.steps(6 * grpLeaseDuration)
		w1.store.setBeatsDown(false)
		to := w.now()

		if got := w.owned("w1"); fmt.Sprint(got) != fmt.Sprint(held) {
			t.Errorf("w1 held %v before its heartbeats failed and %v after %s of it", held, got, to.Sub(from))
		}
		if lost := w1.eventsOf("lost", ""); len(lost) != 0 {
			t.Errorf("w1 paused or lost shards while its renewals succeeded: %+v", lost)
		}
		var takes, lists int
		for _, o := range w2.store.opsOf("", "") {
			if o.at.Before(from) || !o.at.Before(to) {
				continue
			}
			switch o.op {
			case lease.OpTake:
				if o.in.Owner != "w2" { // not the start of a reader of a lease handed to w2 before
					takes++
				}
			case lease.OpList:
				lists++
			}
		}
		syncs := int(to.Sub(from) / grpSyncInterval)
		t.Logf("over %s of w1's heartbeats failing (%d lease syncs): w2 tried %d takes, and listed %d times", to.Sub(from), syncs, takes, lists)
		if takes != 0 {
			t.Errorf("w2 tried %d takes on a member that renews", takes)
		}
		if max := int(to.Sub(from)/grpLeaseDuration) + 3; lists > max {
			t.Errorf("w2 listed the leases %d times in %s, want at most %d (about once per LeaseDuration)", lists, to.Sub(from), max)
		}
		w.close(w2)
		w.close(w1)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// At a short LeaseSyncInterval the heartbeats are bounded: every 250 ms at most, so at most 4
// member writes a second per member, whatever the syncs and the lease changes.
func TestMembershipHeartbeatsBoundedAtShortSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 16)
		w.publishing = true
		short := func(c *kinesis.SubscriberConfig) { c.Group.LeaseSyncInterval = 100 * time.Millisecond }
		w1 := w.startWith("w1", short)
		w2 := w.startWith("w2", short)
		from := w.now()
		w.steps(20 * time.Second)
		to := w.now()
		for _, wk := range []*grpWorker{w1, w2} {
			beats := 0
			for _, o := range wk.store.opsOf("", "") {
				if o.op == lease.OpHeartbeat && !o.at.Before(from) && o.at.Before(to) {
					beats++
				}
			}
			perSec := float64(beats) / to.Sub(from).Seconds()
			t.Logf("%s: %d heartbeats in %s at a 100 ms LeaseSyncInterval: %.1f a second", wk.id, beats, to.Sub(from), perSec)
			if perSec > 4 {
				t.Errorf("%s heartbeated %.1f times a second, want at most 4 (every 250 ms)", wk.id, perSec)
			}
		}
		w.close(w2)
		w.close(w1)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// A fresh group with a backlog: a lone instance delivers its first record as soon as it holds a
// lease, with no wait for instances that might be starting with it (it waited 1.5 s before);
// a second instance started at the same instant gets its share by handoff, within three lease
// syncs.
func TestGroupFirstDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 4)
		for i := range 4 {
			w.publishTo(i, 25)
		}
		startedAt := w.now()
		w.start("w1")
		w.runUntil("w1 delivers", time.Second, func() bool { return len(w.deliveriesOf(func(grpDelivery) bool { return true })) > 0 })
		first := w.deliveriesOf(func(grpDelivery) bool { return true })[0].at.Sub(startedAt)
		w.start("w2")
		even := w.runUntil("spread over w1 and w2", 3*grpSyncInterval, func() bool { return w.spread("w1", "w2") })
		t.Logf("fresh group: first delivery %s after Subscribe was called; a second instance started then has its share %s later (%s)",
			first, even, w.counts("w1", "w2"))
		if first > 500*time.Millisecond {
			t.Errorf("first delivery %s after Subscribe, want at most 500ms", first)
		}
		w.allDelivered(2 * grpSyncInterval)
		for _, wk := range w.workerList() {
			w.close(wk)
		}
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// A store without member records (lease.Membership not implemented) still runs a group: the
// workers are the owners of live leases, every lease sync lists, a newcomer asks for its share
// (its owner learns of it from its renewals), and a crashed worker's leases expire by their
// counters.
func TestGroupWithoutMembership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 4)
		w.publishing = true
		leasesOnly := func(c *kinesis.SubscriberConfig) { c.Group.LeaseStore = struct{ lease.Store }{c.Group.LeaseStore} }
		w1 := w.startWith("w1", leasesOnly)
		w.runUntil("w1 reads every shard", grpSyncInterval, func() bool { return w.spread("w1") })
		w.steps(grpSyncInterval / 2)
		w2 := w.startWith("w2", leasesOnly)
		joined := w.runUntil("spread over w1 and w2", 2*grpSyncInterval+grpRenewInterval, func() bool { return w.spread("w1", "w2") })
		crashedAt := w.now()
		w2.dead.Store(true)
		w2.client.dead.Store(true)
		w2.store.setMode(grpFail)
		w.runUntil("w1 reads every shard again", grpLeaseDuration+2*grpSyncInterval, func() bool { return w.spread("w1") })
		t.Logf("without membership: w2 had its share %s after it started; w1 read w2's shards again %s after w2 crashed", joined, w.since(crashedAt))
		for _, wk := range []*grpWorker{w1, w2} {
			for _, op := range []string{lease.OpHeartbeat, lease.OpMembers, lease.OpNotifyMember, lease.OpRemoveMember} {
				if n := len(wk.store.opsOf(op, "")); n != 0 {
					t.Errorf("%s made %d %s calls on a store without member records", wk.id, n, op)
				}
			}
		}
		w.allDelivered(2 * grpSyncInterval)
		w.close(w1)
		w.close(w2)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// A group Subscribe to a stream that does not exist fails with ErrStreamNotFound and writes no
// member record (it wrote one and removed it again): the first heartbeat is written only once a
// shard listing found the stream.
func TestGroupSubscribeMissingStreamWritesNoMember(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	store := &heartbeatCounter{MemoryStore: lease.NewMemoryStore()}
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: memlog.New(memlog.Config{}),
		Group:  kinesis.GroupConfig{Name: "billing", LeaseStore: store, WorkerID: "w1"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := sub.Subscribe(t.Context(), "missing"); !errors.Is(err, kinesis.ErrStreamNotFound) {
		t.Fatalf("Subscribe to a missing stream: %v, want ErrStreamNotFound", err)
	}
	if n := store.beats.Load(); n != 0 {
		t.Fatalf("%d member heartbeats for a stream that does not exist, want none", n)
	}
}

// heartbeatCounter is a MemoryStore that counts member heartbeats.
type heartbeatCounter struct {
	*lease.MemoryStore
	beats atomic.Int64
}

func (s *heartbeatCounter) Heartbeat(ctx context.Context, m lease.Member) (lease.Member, error) {
	s.beats.Add(1)
	return s.MemoryStore.Heartbeat(ctx, m)
}
