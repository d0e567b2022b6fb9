package kinesis_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// A slow Kinesis is not a lost lease. Every GetRecords of shard X takes 9 s of fake time:
// longer than the stop point (0.8 × LeaseDuration = 8 s after the last renewal) and shorter than
// RequestTimeout (10 s). The reader keeps renewing while its call is out, so the reads complete,
// the records arrive, and the lease stays with the same owner and generation, with no pause
// (no OnLost). Renewing only between calls, each such read paused the shard; with calls
// cut at the stop point instead, no read ever completed and nothing was delivered.
func TestRegress_SlowReadsKeepTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFltWorld(t, 1)
		x := subShard(0)
		wks := w.warm("w1")
		const readTakes = 9 * time.Second
		w.e.log.SetFault(func(ctx context.Context, c memlog.Call) error {
			if c.Op == "GetRecords" && c.ShardID == x {
				t := time.NewTimer(readTakes)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return w.kin.hook(ctx, c)
		})
		before := w.lease(x)
		from := w.now()
		w.publishTo(0, 5)
		w.steps(3 * readTakes)
		after := w.lease(x)
		got := w.deliveriesOf(func(d grpDelivery) bool { return d.shard == x && d.at.After(from) })
		lost := len(wks[0].eventsOf("lost", x))
		t.Logf("reads of %s take %s: %d delivered in %s; lease %s gen %d -> %s gen %d; OnLost %d",
			x, readTakes, len(got), 3*readTakes, before.Owner, before.Generation, after.Owner, after.Generation, lost)
		if len(got) < 5 {
			t.Errorf("%d of 5 records delivered in %s of slow reads", len(got), 3*readTakes)
		}
		if after.Owner != before.Owner || after.Generation != before.Generation {
			t.Errorf("the lease moved under slow reads: %+v, then %+v", before, after)
		}
		if lost != 0 {
			t.Errorf("OnLost called %d times: the reader paused while its read was out", lost)
		}
		w.e.log.SetFault(w.kin.hook)
		w.drain(10 * time.Second)
		w.closeAll(wks...)
		w.finish(ignore)
	})
}
