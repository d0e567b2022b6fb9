package kinesis_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// rgDefaultRequestTimeout is the default of SubscriberConfig.RequestTimeout (left unset here).
const rgDefaultRequestTimeout = 10 * time.Second

// Item 4: every Kinesis call has a deadline (SubscriberConfig.RequestTimeout, default 10 s).
// One GetRecords of shard X hangs until its context is done; once the bubble's fake time
// passes RequestTimeout the call fails as a timeout, which is transient: the reader reads
// again and delivers every record. The other shard is read all along. Today the call never
// ends (nothing bounds it) and X delivers nothing more until Close.
func TestRegress_HungGetRecordsTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFltWorld(t, 2)
		x, other := subShard(0), subShard(1)
		wks := w.warm("w1")
		var armed, hung atomic.Bool
		w.e.log.SetFault(func(ctx context.Context, c memlog.Call) error {
			if c.Op == "GetRecords" && c.ShardID == x && armed.CompareAndSwap(true, false) {
				hung.Store(true)
				<-ctx.Done()
				hung.Store(false)
				return ctx.Err()
			}
			return w.kin.hook(ctx, c)
		})
		armed.Store(true)
		w.runUntil("a read of "+x+" hangs", time.Second, func() bool { return hung.Load() })
		hangAt := w.now()
		delivered := func(shard string) int {
			return len(w.deliveriesOf(func(d grpDelivery) bool { return d.shard == shard && d.at.After(hangAt.Add(grpStep)) }))
		}
		limit := rgDefaultRequestTimeout + 10*time.Second
		var resumed time.Duration
		for resumed == 0 && w.since(hangAt) < limit {
			w.step()
			if delivered(x) > 0 {
				resumed = w.since(hangAt)
			}
		}
		t.Logf("GetRecords of %s hung at fake %s; %s delivers again after %s (0: not within %s); %s delivered %d meanwhile; read still hung: %v",
			x, grpRel(hangAt), x, resumed, limit, other, delivered(other), hung.Load())
		if resumed == 0 {
			t.Errorf("%s delivered nothing within %s of a hung GetRecords; want the call cut at RequestTimeout (%s) and the shard read again",
				x, limit, rgDefaultRequestTimeout)
		}
		if delivered(other) == 0 {
			t.Errorf("%s delivered nothing while %s's read hung", other, x)
		}
		w.drain(10 * time.Second)
		w.closeAll(wks...)
		w.checkAll(w.stats(time.Time{}, time.Time{}), false)
		w.finish(ignore)
	})
}

// rgHangListShards is an instance's Kinesis client whose next ListShards, once armed, hangs
// until its context is done.
type rgHangListShards struct {
	kinesis.KinesisAPI
	armed, hung atomic.Bool
}

func (c *rgHangListShards) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, opts ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	if c.armed.CompareAndSwap(true, false) {
		c.hung.Store(true)
		<-ctx.Done()
		c.hung.Store(false)
		return nil, ctx.Err()
	}
	return c.KinesisAPI.ListShards(ctx, in, opts...)
}

// Item 4 (shard sync): a ListShards that hangs during the periodic shard sync is cut at
// RequestTimeout, so the coordinator's lease syncs go on: the instance lists the group's
// leases again within RequestTimeout + 2 lease syncs of the hang, and its shards are still
// read. Today the coordinator waits on the hung call for good and never syncs leases again.
func TestRegress_HungListShardsDoesNotStopLeaseSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFltWorld(t, 2)
		var client *rgHangListShards
		w.publishing = true
		w1 := w.start("w1", func(c *kinesis.SubscriberConfig) {
			client = &rgHangListShards{KinesisAPI: c.Client}
			c.Client = client
		})
		w.runUntil("w1 reads both shards", 2*grpSyncInterval, func() bool { return w.spread("w1") })
		client.armed.Store(true)
		// The next shard sync (every ShardSyncInterval, 30 s by default) hangs.
		w.runUntil("a shard listing hangs", 35*time.Second, func() bool { return client.hung.Load() })
		hangAt := w.now()
		limit := rgDefaultRequestTimeout + 2*grpSyncInterval
		listed := func() bool { // a lease sync: each reads the members
			for _, o := range w1.store.opsOf(lease.OpMembers, "") {
				if o.err == nil && o.at.After(hangAt) {
					return true
				}
			}
			return false
		}
		var again time.Duration
		for again == 0 && w.since(hangAt) < limit+grpStep {
			w.step()
			if listed() {
				again = w.since(hangAt)
			}
		}
		t.Logf("ListShards hung at fake %s; w1 listed the leases again after %s (0: not within %s); listing still hung: %v",
			grpRel(hangAt), again, limit, client.hung.Load())
		if again == 0 {
			t.Errorf("w1 did not sync its leases within %s of a hung ListShards", limit)
		}
		w.drain(10 * time.Second)
		w.closeAll(w1)
		w.checkAll(w.stats(time.Time{}, time.Time{}), false)
		w.finish(ignore)
	})
}
