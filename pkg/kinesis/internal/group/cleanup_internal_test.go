package group

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// cleanupWorld is a grouped subscription's coordinator state, set by hand: the shards listed
// and the group's leases, kept in a memory store. A test that moves time (syncAfter) makes it
// in a synctest bubble (bubbleRun), where time.Sleep moves the fake time the coordinator reads
// at once.
type cleanupWorld struct {
	t     *testing.T
	c     *Subscription
	store *lease.MemoryStore
}

func newCleanupWorld(t *testing.T) *cleanupWorld {
	store := lease.NewMemoryStore()
	return &cleanupWorld{t: t, c: New(context.Background(), testConfig(store)), store: store}
}

// bubbleRun is t.Run with f in a synctest bubble of its own.
func bubbleRun(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) { synctest.Test(t, f) })
}

// shard lists a shard; closed ones have an ending sequence number.
func (w *cleanupWorld) shard(id string, closed bool, parents ...string) {
	s := types.Shard{ShardId: aws.String(id), SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}}
	if closed {
		s.SequenceNumberRange.EndingSequenceNumber = aws.String("9")
	}
	if len(parents) > 0 {
		s.ParentShardId = aws.String(parents[0])
	}
	if len(parents) > 1 {
		s.AdjacentParentShardId = aws.String(parents[1])
	}
	w.c.shards[id] = s
}

// lease stores a lease: taken by w2 unless taken is false, at checkpoint, released if free.
func (w *cleanupWorld) lease(id string, taken bool, checkpoint string, free bool, parents ...string) {
	ctx := context.Background()
	l, err := w.store.Create(ctx, lease.Lease{Group: "g", Stream: "s", ShardID: id, Parents: parents})
	if err == nil && taken {
		l, err = w.store.Take(ctx, l, "w2")
		if err == nil && checkpoint != "" {
			l, err = w.store.Checkpoint(ctx, l, checkpoint)
		}
		if err == nil && free {
			l, err = w.store.Release(ctx, l)
		}
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *cleanupWorld) refresh() {
	if err := w.c.refreshLeases(); err != nil {
		w.t.Fatal(err)
	}
}

func (w *cleanupWorld) stored(id string) bool {
	list, err := w.store.List(context.Background(), "g", "s")
	if err != nil {
		w.t.Fatal(err)
	}
	for _, l := range list {
		if l.ShardID == id {
			return true
		}
	}
	return false
}

// A listed shard without a lease is finished only when a child of it was taken (or is itself
// finished without a lease): then its children do not wait on it and its lease is not created
// again. Otherwise it may simply have no lease yet, and its children wait.
func TestFinishedWithoutLease(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(w *cleanupWorld)
		shard    string
		finished bool
	}{
		{name: "children with leases not taken yet: not finished (not created vs deleted)", shard: "p", setup: func(w *cleanupWorld) {
			w.shard("p", true)
			w.shard("c1", false, "p")
			w.shard("c2", false, "p")
			w.lease("c1", false, "", false, "p")
			w.lease("c2", false, "", false, "p")
		}},
		{name: "no lease and no child: not finished", shard: "p", setup: func(w *cleanupWorld) {
			w.shard("p", true)
		}},
		{name: "one child taken: finished", shard: "p", finished: true, setup: func(w *cleanupWorld) {
			w.shard("p", true)
			w.shard("c1", false, "p")
			w.shard("c2", false, "p")
			w.lease("c1", true, "", false, "p")
		}},
		{name: "a child known only from its lease's parents: finished", shard: "p", finished: true, setup: func(w *cleanupWorld) {
			w.shard("p", true)
			w.lease("c1", true, "", false, "p")
		}},
		{name: "a grandchild taken, the child's lease deleted too: finished", shard: "p", finished: true, setup: func(w *cleanupWorld) {
			w.shard("p", true)
			w.shard("c", true, "p")
			w.shard("g", false, "c")
			w.lease("g", true, "", false, "c")
		}},
		{name: "merge: the child taken finishes both parents", shard: "q", finished: true, setup: func(w *cleanupWorld) {
			w.shard("p", true)
			w.shard("q", true)
			w.shard("m", false, "p", "q")
			w.lease("m", true, "", false, "p", "q")
		}},
		{name: "a shard with a lease is never finished without one", shard: "p", setup: func(w *cleanupWorld) {
			w.shard("p", true)
			w.shard("c1", false, "p")
			w.lease("p", true, lease.ShardEnd, true)
			w.lease("c1", true, "", false, "p")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newCleanupWorld(t)
			tc.setup(w)
			w.refresh()
			if got := w.c.finishedWithoutLease(tc.shard); got != tc.finished {
				t.Errorf("finishedWithoutLease(%s) = %v, want %v", tc.shard, got, tc.finished)
			}
			if _, leased := w.c.leases.byShard[tc.shard]; !leased {
				if got := w.c.parentsDone([]string{tc.shard}); got != tc.finished {
					t.Errorf("parentsDone([%s]) = %v, want %v: a child must wait on a parent whose lease is not there yet", tc.shard, got, tc.finished)
				}
			}
		})
	}
}

// split lists a finished parent p (its lease at SHARD_END and released) split into c1, taken,
// and c2, taken when c2Taken.
func (w *cleanupWorld) split(c2Taken bool) {
	w.shard("p", true)
	w.shard("c1", false, "p")
	w.shard("c2", false, "p")
	w.lease("p", true, lease.ShardEnd, true)
	w.lease("c1", true, "", false, "p")
	w.lease("c2", c2Taken, "", false, "p")
}

// syncAfter lets d of the bubble's time pass and runs the lease listing and cleanFinished of
// a shard sync.
func (w *cleanupWorld) syncAfter(d time.Duration) {
	time.Sleep(d)
	w.refresh()
	w.c.cleanFinished()
}

// cleanFinished deletes a released SHARD_END lease only once every listed child has been seen
// taken, or the shard gone from the listing, for deleteFinishedAfter; an owned one only once
// its owner has not written it for LeaseDuration (it crashed before it could release it).
func TestCleanFinished(t *testing.T) {
	bubbleRun(t, "children exist but one is not taken: kept", func(t *testing.T) {
		w := newCleanupWorld(t)
		w.split(false)
		w.syncAfter(0)
		w.syncAfter(deleteFinishedAfter(w.c.cfg))
		if !w.stored("p") {
			t.Fatal("deleted the parent's lease with a child not taken yet; the next listing would create it again")
		}
	})
	bubbleRun(t, "every child taken: deleted after the delay, and not created again", func(t *testing.T) {
		w := newCleanupWorld(t)
		w.split(true)
		w.syncAfter(0)
		w.syncAfter(deleteFinishedAfter(w.c.cfg) - time.Second)
		if !w.stored("p") {
			t.Fatalf("deleted before the children were seen read for %s: a worker acting on an older listing could create it again", deleteFinishedAfter(w.c.cfg))
		}
		w.syncAfter(time.Second)
		if err := w.c.createLeases(sortedKeys(w.c.shards)); err != nil {
			t.Fatal(err)
		}
		if w.stored("p") {
			t.Fatal("the parent's lease is there after cleanFinished and createLeases")
		}
	})
	owned := func(w *cleanupWorld) {
		w.shard("p", true)
		w.shard("c1", false, "p")
		w.lease("p", true, lease.ShardEnd, false)
		w.lease("c1", true, "", false, "p")
	}
	bubbleRun(t, "still owned, its owner renewing: kept", func(t *testing.T) {
		w := newCleanupWorld(t)
		owned(w)
		for range 4 {
			w.syncAfter(deleteFinishedAfter(w.c.cfg) / 2)
			if _, err := w.store.Renew(context.Background(), w.c.leases.byShard["p"]); err != nil {
				t.Fatal(err)
			}
		}
		if !w.stored("p") {
			t.Fatal("deleted a SHARD_END lease its owner keeps renewing")
		}
	})
	bubbleRun(t, "owned by a worker gone: deleted once its counter stood still for LeaseDuration", func(t *testing.T) {
		w := newCleanupWorld(t)
		owned(w)
		w.syncAfter(0)
		w.syncAfter(w.c.cfg.LeaseDuration) // stood still: deletable from here
		w.syncAfter(deleteFinishedAfter(w.c.cfg) - time.Second)
		if !w.stored("p") {
			t.Fatal("deleted before it was deletable for deleteFinishedAfter")
		}
		w.syncAfter(time.Second)
		if w.stored("p") {
			t.Fatal("the finished lease of a worker gone is still there")
		}
	})
	bubbleRun(t, "gone from the listing: deleted after the delay", func(t *testing.T) {
		w := newCleanupWorld(t)
		w.shard("c1", false) // p aged out: listed no more, its children not taken
		w.lease("p", true, lease.ShardEnd, true)
		w.syncAfter(0)
		w.syncAfter(deleteFinishedAfter(w.c.cfg) - time.Second)
		if !w.stored("p") {
			t.Fatal("deleted before the shard was gone for deleteFinishedAfter")
		}
		w.syncAfter(time.Second)
		if w.stored("p") {
			t.Fatal("the lease of a finished shard gone from the stream for deleteFinishedAfter is still there")
		}
		if len(w.c.deletable) != 0 {
			t.Errorf("deletable still holds %v", w.c.deletable)
		}
	})
}

// createLeases acts on a listing of the leases no older than leaseViewMaxAge: a worker whose
// listing predates a shard's lease (created, read to its end and deleted since) lists again
// before it would create that lease.
func TestCreateLeasesListsAgainWhenItsViewIsOld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newCleanupWorld(t)
		w.shard("p", true)
		w.shard("c1", false, "p")
		w.refresh() // sees no lease at all
		// Meanwhile another worker creates both, reads p to its end, takes c1 and deletes p.
		w.lease("c1", true, "", false, "p")
		time.Sleep(leaseViewMaxAge(w.c.cfg) + time.Millisecond)
		if err := w.c.createLeases([]string{"p"}); err != nil {
			t.Fatal(err)
		}
		if w.stored("p") {
			t.Fatal("created the lease of a finished shard from a listing older than leaseViewMaxAge")
		}
	})
}
