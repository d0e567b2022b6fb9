package kinesis_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// kclRenewEvery is how often the KCL worker of these tests renews: failoverTimeMillis / 3, as
// the KCL does at its defaults (10 s, our LeaseDuration).
const kclRenewEvery = grpLeaseDuration / 3

// kclHold creates the leases of the first n shards held by a KCL worker, as a KCL application
// left them, before any instance starts.
func (w *grpWorld) kclHold(worker string, n int) {
	w.t.Helper()
	for i := range n {
		l := lease.Lease{Group: subGroup, Stream: w.e.stream, ShardID: subShard(i), Owner: worker}
		if _, err := w.e.store.Create(context.Background(), l); err != nil {
			w.t.Fatalf("Create %s held by %s: %v", l.ShardID, worker, err)
		}
	}
}

// kclRenew renews every lease the KCL worker holds, as its lease renewer does.
func (w *grpWorld) kclRenew(worker string) {
	w.t.Helper()
	for _, l := range w.leases() {
		if l.Owner != worker {
			continue
		}
		if _, err := w.e.store.Renew(context.Background(), l); err != nil {
			w.t.Fatalf("the KCL worker renewing %s: %v", l.ShardID, err)
		}
	}
}

// A KCL application that was stopped: its leases stand still and are taken once they expire,
// LeaseDuration after the instance first saw them, and never before; nothing is logged at ERROR.
func TestGroupTakesStoppedKCLWorkersLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 4)
		w.foreign = "KCL workers"
		w.kclHold("kcl-1", 4)
		start := w.now()
		w1 := w.start("w1")
		took := w.runUntil("w1 holds every lease", grpLeaseDuration+3*grpSyncInterval, func() bool { return len(w.owned("w1")) == 4 })
		if took < grpLeaseDuration-grpSyncInterval {
			t.Errorf("w1 took the stopped KCL worker's leases %s after it started, before they could expire (LeaseDuration %s)", took, grpLeaseDuration)
		}
		for _, o := range w1.store.opsOf(lease.OpTake, "") {
			if o.at.Sub(start) < grpLeaseDuration && o.err == nil {
				t.Errorf("w1 took %s at %s, before the KCL worker's lease expired", o.shard, o.at.Sub(start))
			}
		}
		if errs := w1.logs.of("ERROR", time.Time{}, time.Time{}); len(errs) != 0 {
			t.Errorf("ERROR logged for a stopped KCL application: %v", errs)
		}
		t.Logf("leases of the stopped KCL worker taken %s after start", took)
		w.close(w1)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// A KCL worker still running (its counters move) shares no shard with the group: the
// instance, which took the free leases once it had watched the KCL worker's for LeaseDuration
// (the worker renewed nothing meanwhile), sees the renewals, says so at ERROR naming the worker,
// stops its readers (releasing their leases) and takes nothing while the KCL worker renews;
// once it stops, the instance takes every lease.
func TestGroupYieldsToLiveKCLWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 4)
		w.foreign = "KCL workers"
		w.publishing = true
		w.kclHold("kcl-1", 2)
		start := w.now()
		w1 := w.start("w1")
		// The KCL worker has not renewed yet: until w1 has watched its leases for LeaseDuration it
		// cannot tell it from a stopped one, and takes nothing, not even the free leases.
		took := w.runUntil("w1 reads the two free shards", grpLeaseDuration+2*grpSyncInterval, func() bool { return len(w.owned("w1")) == 2 })
		if took < grpLeaseDuration-grpSyncInterval {
			t.Errorf("w1 took the free leases %s after start, before it had watched the KCL worker's for LeaseDuration", w.since(start))
		}

		renewUntil := w.now().Add(4 * grpLeaseDuration)
		nextRenew := w.now()
		var yielded time.Duration
		from := w.now()
		for w.now().Before(renewUntil) {
			if !w.now().Before(nextRenew) {
				w.kclRenew("kcl-1")
				nextRenew = nextRenew.Add(kclRenewEvery)
			}
			w.step()
			if yielded == 0 && len(w.owned("w1")) == 0 {
				yielded = w.since(from)
			}
			if yielded != 0 && len(w.owned("w1")) != 0 {
				t.Fatalf("w1 holds %v at %s while the KCL worker renews", w.owned("w1"), w.since(from))
			}
		}
		if yielded == 0 || yielded > kclRenewEvery+3*grpSyncInterval {
			t.Errorf("w1 gave up its leases %s after the KCL worker's first renewal; want within a renewal and 3 lease syncs", yielded)
		}
		errs := w1.logs.matching(func(e fltEntry) bool {
			return e.level == "ERROR" && strings.Contains(e.msg, "KCL workers") && strings.Contains(strings.Join(toStrings(e.fields["foreign_workers"]), ","), "kcl-1")
		})
		if len(errs) != 1 {
			t.Errorf("want one ERROR line naming kcl-1, got %v", w1.logs.of("ERROR", time.Time{}, time.Time{}))
		}
		stopped := w.now()
		took = w.runUntil("w1 holds every lease once the KCL worker stopped", grpLeaseDuration+4*grpSyncInterval, func() bool { return len(w.owned("w1")) == 4 })
		t.Logf("w1 yielded %s after the KCL worker's renewals were first seen, and took all 4 leases %s after they stopped", yielded, took)
		if took < grpLeaseDuration-kclRenewEvery {
			t.Errorf("w1 took the KCL worker's leases %s after its last renewal, before they expired", w.since(stopped))
		}
		w.close(w1)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// toStrings is a log field of worker names as strings.
func toStrings(v any) []string {
	if s, ok := v.([]string); ok {
		return s
	}
	return nil
}

// On a KCL table with no KCL worker left, the group works as on any table: three members
// joining one after another spread the shards evenly, with nothing logged at ERROR (their own
// leases carry this package's owner, so none of them is taken for a KCL worker).
func TestGroupOnKCLTableCountsItsOwnMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 4)
		w.foreign = "KCL workers"
		w.publishing = true
		w1 := w.start("w1")
		w.steps(grpSyncInterval / 2)
		w2 := w.start("w2")
		w.runUntil("spread over w1 and w2", 4*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
		w3 := w.start("w3")
		w.steps(3 * grpLeaseDuration)
		for _, wk := range []*grpWorker{w1, w2, w3} {
			if errs := wk.logs.of("ERROR", time.Time{}, time.Time{}); len(errs) != 0 {
				t.Errorf("%s logged at ERROR with no KCL worker about: %v", wk.id, errs)
			}
		}
		if !w.spread("w1", "w2", "w3") {
			t.Errorf("not spread over the three members: %s", w.leaseSummary())
		}
		w.close(w3)
		w.close(w2)
		w.close(w1)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}

// A KCL worker under an instance's own id: the two would pass each other's owner conditions.
// The instance says so at ERROR and takes no lease while the KCL worker holds one, not even a
// free one, and never takes the KCL worker's lease as its own.
func TestGroupRefusesKCLWorkerWithItsID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 2)
		w.foreign, w.foreignAs = "KCL workers", "w1"
		w.kclHold("w1", 1)
		w1 := w.start("w1")
		w.steps(3 * grpLeaseDuration)
		if owned := w.owned("w1"); len(owned) != 1 || owned[0] != subShard(0) {
			t.Errorf("leases under w1's id: %v, want the KCL worker's alone", owned)
		}
		for _, o := range w1.store.opsOf(lease.OpTake, "") {
			t.Errorf("w1 took %s at %s beside a KCL worker under its id", o.shard, o.at.Sub(grpEpochTime))
		}
		errs := w1.logs.matching(func(e fltEntry) bool {
			return e.level == "ERROR" && strings.Contains(e.msg, "uses this worker's id")
		})
		if len(errs) != 1 {
			t.Errorf("want one ERROR line about the id, got %v", w1.logs.of("ERROR", time.Time{}, time.Time{}))
		}
		w.close(w1)
		goleak.VerifyNone(t, ignore)
	})
}
