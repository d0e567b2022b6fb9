package kinesis_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Item 7: the final SHARD_END checkpoint is retried while the lease is held. A shard is split
// while the lease store refuses checkpoints for 3 s (less than LeaseDuration/2; renewals still
// pass), so that the parent is read to its end during the outage. Fixed: once the store is back,
// the original owner writes SHARD_END on the parent (no other take of it), nothing is delivered
// twice, and the children are taken and read after that checkpoint. Today the reader tries the
// SHARD_END checkpoint once ("Final checkpoint failed; the next owner will redeliver"),
// releases the lease, and the parent is taken again and read again from its last checkpoint.
func TestRegress_ShardEndCheckpointRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFltWorld(t, 1)
		parent := subShard(0)
		w.publishing = true
		w1 := w.start("w1", nil)
		w.runUntil("w1 reads the shard", 2*grpSyncInterval, func() bool { return w.spread("w1") })
		w.steps(6 * time.Second) // past a periodic checkpoint
		w.publishing = false
		w.publishTo(0, 5) // acked after the last checkpoint: what a second reading would repeat
		w.step()
		if miss := w.missing(); len(miss) != 0 {
			t.Fatalf("not delivered before the split: %v", miss)
		}
		gen := w.lease(parent).Generation

		from := w.now()
		w.e.store.SetFault(func(ctx context.Context, op string, _ lease.Key) error {
			if op == lease.OpCheckpoint && ctx != context.Background() {
				return errors.New("lease table refuses checkpoints (injected)")
			}
			return nil
		})
		low, high := w.e.subSplit(parent)
		w.steps(3 * time.Second)
		w.e.store.SetFault(nil)
		back := w.now()
		w.steps(10 * time.Second)

		var shardEndAt time.Time
		for _, o := range w1.store.opsOf(lease.OpCheckpoint, parent) {
			if o.err == nil && o.out.Checkpoint == lease.ShardEnd && o.in.Generation == gen {
				shardEndAt = o.at
			}
		}
		retakes := rgTakes(w1, parent, from)
		l := w.lease(parent)
		finalFailed := w.logs.countMsg("ERROR", "Final checkpoint failed", from, w.now())
		dups := w.duplicates()
		t.Logf("store refused checkpoints at fake %s..%s; parent lease %+v; SHARD_END by the original owner at %s; retakes of the parent=%d; 'Final checkpoint failed' ERRORs=%d; duplicates=%d",
			grpRel(from), grpRel(back), l, grpRel(shardEndAt), len(retakes), finalFailed, len(dups))
		if l.Checkpoint != lease.ShardEnd {
			t.Errorf("the parent's lease ends at %q, want %s", l.Checkpoint, lease.ShardEnd)
		}
		if shardEndAt.IsZero() {
			t.Errorf("SHARD_END was not written by w1 under the generation it read the parent with (%d)", gen)
		}
		if len(retakes) != 0 {
			t.Errorf("the parent was taken again %d times after its end: %+v", len(retakes), retakes)
		}
		if len(dups) != 0 {
			t.Errorf("%d records delivered twice: %v", len(dups), dups)
		}
		for _, child := range []string{low, high} {
			takes := rgTakes(w1, child, from)
			if len(takes) == 0 {
				t.Errorf("child %s was never taken", child)
				continue
			}
			if shardEndAt.IsZero() || takes[0].at.Before(shardEndAt) {
				t.Errorf("child %s taken at fake %s, before the parent's SHARD_END checkpoint (fake %s)", child, grpRel(takes[0].at), grpRel(shardEndAt))
			}
			if len(w1.eventsOf("acquired", child)) == 0 {
				t.Errorf("child %s was taken but never acquired (not read)", child)
			}
		}
		w.closeAll(w1)
		w.checkAll(w.stats(time.Time{}, time.Time{}), false)
		w.finish(ignore)
	})
}
