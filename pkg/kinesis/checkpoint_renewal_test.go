package kinesis_test

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// A checkpoint write proves the owner alive as a renewal does (it bumps the lease's counter,
// conditioned on owner and generation), so it counts as one: no renewal is sent within
// LeaseRenewInterval of the last successful owner write, checkpoint or renewal.
func TestGroupCheckpointCountsAsRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 2)
		w.publishing = true
		w1 := w.start("w1")
		w.steps(time.Minute)
		renewals, checkpoints := 0, 0
		for _, shard := range w.owned("w1") {
			var last time.Time
			for _, o := range w1.store.opsOf("", shard) {
				if o.err != nil {
					continue
				}
				switch o.op {
				case lease.OpRenew:
					renewals++
					if gap := o.at.Sub(last); gap < grpRenewInterval-grpStep {
						t.Errorf("%s renewed %s after its last owner write, within LeaseRenewInterval (%s)", shard, gap, grpRenewInterval)
					} else if gap > grpRenewInterval+grpStep {
						t.Errorf("%s renewed %s after its last owner write, later than LeaseRenewInterval (%s): the stop point comes closer", shard, gap, grpRenewInterval)
					}
				case lease.OpCheckpoint:
					checkpoints++
				default:
					if o.op != lease.OpTake {
						continue
					}
				}
				last = o.at
			}
		}
		t.Logf("one busy minute, 2 shards: %d checkpoints, %d renewals (a renewal every %s and no checkpoint would be %d)",
			checkpoints, renewals, grpRenewInterval, 2*int(time.Minute/grpRenewInterval))
		if checkpoints == 0 {
			t.Fatal("no checkpoint in a busy minute: the test proves nothing")
		}
		w.close(w1)
		w.check()
		goleak.VerifyNone(t, ignore)
	})
}
