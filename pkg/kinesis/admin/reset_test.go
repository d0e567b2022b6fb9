package admin_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// loseTakeAnswer applies the first Take a reset sends and answers it as a lost race: what a
// DynamoDB call does when its first attempt lands but its answer is lost, and the SDK's retry
// of it fails the condition the first attempt moved.
type loseTakeAnswer struct {
	*lease.MemoryStore
	lost atomic.Bool
}

func (s *loseTakeAnswer) Take(ctx context.Context, observed lease.Lease, owner string) (lease.Lease, error) {
	l, err := s.MemoryStore.Take(ctx, observed, owner)
	if err == nil && strings.HasPrefix(owner, "kinesis-reset/") && s.lost.CompareAndSwap(false, true) {
		return lease.Lease{}, &lease.ConditionError{Op: lease.OpTake, Key: observed.Key(), Err: lease.ErrLeaseChanged}
	}
	return l, err
}

// A take of the reset that landed with its answer lost is found under the reset's id at the
// next listing: the lease goes back to the worker it fenced, whose reader may still be
// delivering until its next lease write, and is not released, which would let another worker
// read the shard beside it.
func TestResetTakeAnswerLost(t *testing.T) {
	f := newInspectFixture(t)
	store := &loseTakeAnswer{MemoryStore: f.store}
	report, err := admin.ResetGroup(context.Background(), admin.ResetConfig{
		Stream: "orders", ConsumerGroup: "billing", Client: f.log, LeaseStore: store,
		ShardID: shardID(0), To: admin.ResetPosition{Type: admin.ResetToTrimHorizon},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !store.lost.Load() {
		t.Fatal("the reset sent no take")
	}
	l := f.get(t, shardID(0))
	if l.Owner != "worker-a" || l.Checkpoint != lease.TrimHorizon {
		t.Errorf("shard 0 after the reset: owner %q, checkpoint %q; want worker-a's, at %s", l.Owner, l.Checkpoint, lease.TrimHorizon)
	}
	for _, s := range report.Shards {
		if s.ShardID == shardID(0) && (s.GivenTo != "worker-a" || s.Settled) {
			t.Errorf("report of shard 0: given to %q, settled %v; want given back to worker-a, not settled", s.GivenTo, s.Settled)
		}
	}
}
