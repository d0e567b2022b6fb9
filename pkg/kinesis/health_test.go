package kinesis_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

// TestSubscriberHealth: Health lists the shards an instance reads with their last reads, is
// healthy while it reads, names the lease store when that stops answering and the shards that
// pause for it, is healthy again once the store is back, and is unhealthy once closed.
func TestSubscriberHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 4)
		w.publishing = true
		w1 := w.start("w1")
		w.steps(grpSyncInterval)

		h := w1.sub.Health()
		if !h.Healthy || h.Err() != nil {
			t.Fatalf("reading all 4 shards: unhealthy: %v", h.Err())
		}
		if len(h.Subscriptions) != 1 || h.Subscriptions[0].Stream != w.e.stream || h.Subscriptions[0].ConsumerGroup != subGroup || h.Subscriptions[0].WorkerID != "w1" {
			t.Fatalf("subscriptions %+v, want one of stream %s, group %s, worker w1", h.Subscriptions, w.e.stream, subGroup)
		}
		sub := h.Subscriptions[0]
		if len(sub.Shards) != 4 {
			t.Fatalf("shards %+v, want 4", sub.Shards)
		}
		for _, s := range sub.Shards {
			if s.LastRead.IsZero() || h.At.Sub(s.LastRead) > h.ReadWithin || s.LastProgress.IsZero() || s.Generation == 0 || s.Paused {
				t.Errorf("shard %+v at %s: want a recent read, a delivery, a generation, not paused", s, h.At)
			}
		}
		if sub.LastLeaseSync.IsZero() || h.At.Sub(sub.LastLeaseSync) > h.LeaseSyncWithin {
			t.Errorf("last lease sync %s at %s, want within %s", sub.LastLeaseSync, h.At, h.LeaseSyncWithin)
		}

		// The lease store stops answering: first the lease syncs go stale, then every reader
		// pauses; nobody else can take the shards.
		w1.store.setMode(grpFail)
		w.runUntil("Health names the lease store and the paused shards", 2*grpLeaseDuration, func() bool {
			h = w1.sub.Health()
			return !h.Healthy && strings.Count(h.Err().Error(), "paused") == 4 &&
				strings.Contains(h.Err().Error(), "the lease store has not answered a lease sync")
		})

		w1.store.setMode(grpPass)
		w.runUntil("healthy again once the store answers", 2*grpSyncInterval, func() bool { return w1.sub.Health().Healthy })

		w.publishing = false
		w.close(w1)
		if h := w1.sub.Health(); h.Healthy || !strings.Contains(h.Err().Error(), "closed") || len(h.Subscriptions) != 0 {
			t.Errorf("after Close: %+v, want unhealthy (closed) with no subscription", h)
		}
		_ = w.pub.Close()
		_ = w.e.pub.Close()
		goleak.VerifyNone(t, ignore)
	})
}
