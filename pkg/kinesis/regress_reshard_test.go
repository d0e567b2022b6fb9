package kinesis_test

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// Item 1(c): at a shard's end during a reshard, one instance must not have two readers of the
// closed parent. As in item 1(a), one refused read of the parent falls inside a lease listing,
// so the sync finds the parent's lease released and starts a reader while the old one's exit is
// on its way; then the parent is split while it has a backlog. Fixed: one reader reads the
// parent to its end, and no record of the parent is delivered once a child's lease is taken
// (the children start only after the parent's SHARD_END). Before the fix the late exit erased
// the new reader from the table, further syncs started more, and one of them delivered parent
// records after the child had started, which broke per-key order across the reshard.
func TestRegress_ClosedParentHasOneReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFltWorld(t, 1)
		x := subShard(0)
		w1, gate := rgStartGated(w, x)

		from := w.now()
		rgRefuseReadDuringListing(w, gate, x)
		// A backlog on the parent, then the split: the parent's readers read to its end.
		w.steps(2 * grpSyncInterval)
		w.publishing = false
		w.publishTo(0, 40)
		low, high := w.e.subSplit(x)
		w.steps(15 * time.Second)

		firstChildTake := time.Time{}
		for _, child := range []string{low, high} {
			if takes := rgTakes(w1, child, from); len(takes) > 0 && (firstChildTake.IsZero() || takes[0].at.Before(firstChildTake)) {
				firstChildTake = takes[0].at
			}
		}
		if firstChildTake.IsZero() {
			t.Fatalf("no child of %s was taken after its end; leases: %s", x, w.leaseSummary())
		}
		late := w.deliveriesOf(func(d grpDelivery) bool { return d.shard == x && d.at.After(firstChildTake) })
		t.Logf("parent %s: %d takes since the refused read; first child taken at fake %s; parent deliveries after that: %d",
			x, len(rgTakes(w1, x, from)), grpRel(firstChildTake), len(late))
		if takes := rgTakes(w1, x, from); len(takes) != 1 {
			t.Errorf("the parent was taken %d times after one refused read, want once (one new reader)", len(takes))
		}
		for i, d := range late {
			if i == 5 {
				t.Errorf("... %d in all", len(late))
				break
			}
			t.Errorf("parent %s delivered %s (rank %d) at fake %s, after child was taken at fake %s", x, d.uuid, d.n, grpRel(d.at), grpRel(firstChildTake))
		}
		w.closeAll(w1)
		rgOrderKept(w.grpWorld, w.mayRepeat(from))
		w.finish(ignore)
	})
}
