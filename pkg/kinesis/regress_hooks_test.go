package kinesis_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// rgBlockingHook makes an instance's OnAcquired block, the first time it is called for
// shard, until release; the harness's own hook runs after it.
type rgBlockingHook struct {
	shard    string
	release  chan struct{}
	once     sync.Once
	entered  atomic.Bool
	returned atomic.Bool
	first    sync.Once
}

func newRgBlockingHook(t *testing.T, shard string) *rgBlockingHook {
	h := &rgBlockingHook{shard: shard, release: make(chan struct{})}
	t.Cleanup(h.open) // before the world's cleanup closes the instances
	return h
}

func (h *rgBlockingHook) open() { h.once.Do(func() { close(h.release) }) }

func (h *rgBlockingHook) wrap(c *kinesis.SubscriberConfig) {
	next := c.Group.Hooks.OnAcquired
	c.Group.Hooks.OnAcquired = func(ev kinesis.ShardEvent) {
		if ev.ShardID == h.shard {
			h.first.Do(func() {
				h.entered.Store(true)
				<-h.release
				h.returned.Store(true)
			})
		}
		next(ev)
	}
}

// rgHookSetup: two shards, w1 reads both, then w2 joins and is handed the second shard (X),
// whose OnAcquired in w2 blocks; it returns once the hook is blocked.
func rgHookSetup(t *testing.T) (w *fltWorld, w1, w2 *grpWorker, h *rgBlockingHook) {
	w = newFltWorld(t, 2)
	x := subShard(1) // PlanShare asks for the last lease, in shard order, of the most loaded worker
	h = newRgBlockingHook(t, x)
	w.publishing = true
	w1 = w.start("w1", nil)
	w.runUntil("w1 reads both shards", 2*grpSyncInterval, func() bool { return w.spread("w1") })
	w.steps(time.Second)
	w2 = w.start("w2", h.wrap)
	w.runUntil("w2 takes "+x+" and its OnAcquired blocks", 3*grpSyncInterval+grpHandoffTimeout, func() bool {
		return w.lease(x).Owner == "w2" && h.entered.Load()
	})
	return w, w1, w2, h
}

// Item 5: OnAcquired runs before the shard's first message is delivered. While w2's
// OnAcquired for the shard handed to it blocks, w2 delivers nothing of that shard; once
// the hook returns, the shard is read. Today the hook runs on the coordinator after the
// reader started delivering.
func TestRegress_AcquiredHookBeforeFirstMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w, w1, w2, h := rgHookSetup(t)
		x := h.shard
		w.steps(time.Second)
		before := len(w.deliveriesOf(func(d grpDelivery) bool { return d.worker == "w2" && d.shard == x }))
		from := w.now()
		h.open()
		w.runUntil("the hook returns and w2 delivers "+x, 2*time.Second, func() bool {
			return h.returned.Load() && len(w.deliveriesOf(func(d grpDelivery) bool {
				return d.worker == "w2" && d.shard == x && !d.at.Before(from)
			})) > 0
		})
		w.drain(10 * time.Second)
		w.closeAll(w2, w1)

		t.Logf("messages of %s w2 delivered while its OnAcquired(%s) had not returned (1s of fake time): %d", x, x, before)
		if before != 0 {
			t.Errorf("w2 delivered %d messages of %s before OnAcquired(%s) returned, want 0", before, x, x)
		}
		w.checkAll(w.stats(time.Time{}, time.Time{}), false)
		rgOrderKept(w.grpWorld, w.mayRepeat(time.Time{}))
		w.finish(ignore)
	})
}

// Item 5: a slow OnAcquired holds up only its own shard. While w2's hook for X blocks,
// w1 crashes; w2 still takes w1's other shard once its lease expired and delivers it, within
// LeaseDuration + 2 lease syncs of the crash. Today the hook blocks w2's coordinator, so no
// lease sync runs and the failover never happens while the hook blocks.
func TestRegress_BlockedAcquiredHookDoesNotStopFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w, w1, w2, h := rgHookSetup(t)
		y := subShard(0)
		crashAt := w.now()
		w1.dead.Store(true)
		w1.client.dead.Store(true)
		w1.store.setMode(grpFail)
		limit := grpLeaseDuration + 2*grpSyncInterval
		var took time.Duration
		for {
			delivered := len(w.deliveriesOf(func(d grpDelivery) bool { return d.worker == "w2" && d.shard == y && d.at.After(crashAt) }))
			if w.lease(y).Owner == "w2" && delivered > 0 {
				took = w.since(crashAt)
				break
			}
			if w.since(crashAt) >= limit {
				break
			}
			w.step()
		}
		stillBlocked := !h.returned.Load()
		h.open()
		t.Logf("w1 crashed with w2's OnAcquired(%s) blocked; w2 took over and delivered %s after %s (0: not within %s); lease %s",
			h.shard, y, took, limit, w.leaseSummary())
		if took == 0 {
			t.Errorf("w2 did not take over %s within %s of w1's crash while its OnAcquired(%s) blocked", y, limit, h.shard)
		}
		if !stillBlocked {
			t.Errorf("the hook returned before the failover: the test did not test a blocked hook")
		}
		w.publishing = false
		w.steps(2 * time.Second)
		w.closeAll(w2, w1)
		w.finish(ignore)
	})
}
