package kinesis_test

import (
	"context"
	"math/big"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Resharding: a child shard is read only once its parents are finished, so each key's records
// stay in order across splits and merges; the children start as soon as the parent's reader
// reaches the end, from the ChildShards of that read; closed shards a LATEST group never read
// are skipped; a checkpoint that aged out of the stream resumes at the trim horizon.

// subSplit splits a shard in the middle of its hash key range and returns the children's ids,
// low half first (memlog numbers new shards in order).
func (e *subEnv) subSplit(shardID string) (low, high string) {
	e.t.Helper()
	ctx := context.Background()
	out, err := e.log.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(e.stream)})
	if err != nil {
		e.t.Fatalf("ListShards: %v", err)
	}
	for _, s := range out.Shards {
		if aws.ToString(s.ShardId) != shardID {
			continue
		}
		lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
		hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
		mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
		mid.Add(mid, big.NewInt(1))
		if _, err := e.log.SplitShard(ctx, &awskinesis.SplitShardInput{
			StreamName: aws.String(e.stream), ShardToSplit: aws.String(shardID), NewStartingHashKey: aws.String(mid.String()),
		}); err != nil {
			e.t.Fatalf("SplitShard %s: %v", shardID, err)
		}
		n := len(out.Shards)
		return subShard(n), subShard(n + 1)
	}
	e.t.Fatalf("no shard %s", shardID)
	return "", ""
}

// subListCalls counts the ListShards calls memlog answers, through its fault hook.
func subListCalls(e *subEnv) *atomic.Int64 {
	var n atomic.Int64
	e.log.SetFault(func(_ context.Context, c memlog.Call) error {
		if c.Op == "ListShards" {
			n.Add(1)
		}
		return nil
	})
	return &n
}

func TestReshardSplitChildWaitsForParentThenStartsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 1, nil)
		lists := subListCalls(e)
		e.putRaw("k", []byte("parent-1"))
		e.putRaw("k", []byte("parent-2"))
		cfg := e.config(subGroup)
		// Neither periodic sync may start the children: only the parent's end can.
		cfg.ShardSyncInterval = time.Hour
		cfg.Group.LeaseSyncInterval = time.Hour
		ch := e.subscribe(e.subscriber(cfg), context.Background())

		first := subRecv(t, ch)
		low, high := e.subSplit(subShard(0))
		e.putRaw("k", []byte("child-1"))
		e.putRaw("k", []byte("child-2"))
		listsAfterSplit := lists.Load()
		first.Ack()
		second := subRecv(t, ch)
		subWantPayloads(t, []*message.Message{first, second}, "parent-1", "parent-2")
		// The children hold records, but the parent still has one in flight.
		subNone(t, ch, subQuiet)
		second.Ack()

		children := subRecvAck(t, ch, 2)
		subWantPayloads(t, children, "child-1", "child-2")
		child := subInfo(t, children[0]).ShardID
		if child != low && child != high {
			t.Fatalf("child records came from %s, want %s or %s", child, low, high)
		}
		if got := e.lease(subGroup, subShard(0)).Checkpoint; got != lease.ShardEnd {
			t.Errorf("parent checkpoint = %q, want SHARD_END", got)
		}
		for _, id := range []string{low, high} {
			if l := e.lease(subGroup, id); len(l.Parents) != 1 || l.Parents[0] != subShard(0) {
				t.Errorf("lease of child %s has parents %v, want [%s]", id, l.Parents, subShard(0))
			}
		}
		if n := lists.Load(); n != listsAfterSplit {
			t.Errorf("%d ListShards calls after the split: the children must come from the read's ChildShards", n-listsAfterSplit)
		}
	})
}

// subMerge merges two adjacent shards and returns the child's id.
func (e *subEnv) subMerge(a, b string) string {
	e.t.Helper()
	ctx := context.Background()
	out, err := e.log.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(e.stream)})
	if err != nil {
		e.t.Fatalf("ListShards: %v", err)
	}
	if _, err := e.log.MergeShards(ctx, &awskinesis.MergeShardsInput{
		StreamName: aws.String(e.stream), ShardToMerge: aws.String(a), AdjacentShardToMerge: aws.String(b),
	}); err != nil {
		e.t.Fatalf("MergeShards %s %s: %v", a, b, err)
	}
	return subShard(len(out.Shards))
}

func TestReshardMergeChildWaitsForBothParents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 2, nil)
		keys := grpKeys(t, e, 2)
		e.putRaw(keys[0], []byte("left"))
		e.putRaw(keys[1], []byte("right"))
		ch := e.subscribe(e.subscriber(e.config(subGroup)), context.Background())
		got := subRecvN(t, ch, 2)
		child := e.subMerge(subShard(0), subShard(1))
		e.putRaw(keys[0], []byte("merged-0"))
		e.putRaw(keys[1], []byte("merged-1"))

		// One parent finished; the other still has its record in flight.
		var held *message.Message
		for _, m := range got {
			if string(m.Payload) == "left" {
				m.Ack()
			} else {
				held = m
			}
		}
		e.waitLease(subGroup, subShard(0), "SHARD_END", func(l lease.Lease) bool { return l.Checkpoint == lease.ShardEnd })
		subNone(t, ch, subQuiet)
		if l := e.lease(subGroup, child); l.Owner != "" {
			t.Fatalf("child %s taken while parent %s has a record in flight: %+v", child, subShard(1), l)
		}
		held.Ack()
		merged := subRecvAck(t, ch, 2)
		subWantPayloads(t, merged, "merged-0", "merged-1")
		if l := e.lease(subGroup, child); len(l.Parents) != 2 || l.Parents[0] != subShard(0) || l.Parents[1] != subShard(1) {
			t.Errorf("merged lease parents = %v, want [%s %s]", l.Parents, subShard(0), subShard(1))
		}
	})
}

func TestReshardNoGroupReadsParentBeforeChildren(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	e.putRaw("k", []byte("parent"))
	e.subSplit(subShard(0))
	e.putRaw("k", []byte("child"))
	ch := e.subscribe(e.subscriber(e.config("")), context.Background())
	subWantPayloads(t, subRecvAck(t, ch, 2), "parent", "child")
}

// A group that starts at LATEST skips closed shards it never read, in a group and without one:
// their records are older than the start. Their children are read at once.
func TestReshardLatestSkipsClosedParents(t *testing.T) {
	for _, group := range []string{subGroup, ""} {
		t.Run("group="+group, func(t *testing.T) {
			e := newSubEnv(t, 1, nil)
			e.putRaw("k", []byte("old-parent"))
			low, high := e.subSplit(subShard(0))
			e.putRaw("k", []byte("old-child"))
			cfg := e.config(group)
			cfg.InitialPosition = kinesis.Position{Type: kinesis.Latest}
			ch := e.subscribe(e.subscriber(cfg), context.Background())
			e.putRaw("k", []byte("new"))
			subWantPayloads(t, subRecvAck(t, ch, 1), "new")
			if group == "" {
				return
			}
			if l := e.lease(group, subShard(0)); l.Generation != 0 || l.Checkpoint != "" {
				t.Errorf("the closed parent was taken: %+v", l)
			}
			for _, id := range []string{low, high} {
				e.waitLease(group, id, "an owner", func(l lease.Lease) bool { return l.Owner != "" })
			}
		})
	}
}

// subExpire drops records that arrived before 'before', as the stream's retention would.
func (e *subEnv) subExpire(before time.Time) {
	e.t.Helper()
	if _, err := e.log.ExpireRecords(e.stream, before); err != nil {
		e.t.Fatalf("ExpireRecords: %v", err)
	}
}

// A checkpoint older than the trim horizon resumes at TRIM_HORIZON instead of failing the
// shard: what is left of the stream is still read.
func TestReshardTrimmedCheckpointResumesAtTrimHorizon(t *testing.T) {
	clk := subFixedClock()
	e := newSubEnv(t, 1, clk)
	e.putRaw("k", []byte("a"))
	cfg := e.config(subGroup)
	sub := e.subscriber(cfg)
	ch := e.subscribe(sub, context.Background())
	subRecvAck(t, ch, 1)
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	checkpoint := e.lease(subGroup, subShard(0)).Checkpoint
	if checkpoint == "" {
		t.Fatal("no checkpoint after Close")
	}
	clk.Advance(time.Hour)
	e.putRaw("k", []byte("b")) // ages out with a
	clk.Advance(time.Hour)
	cut := clk.Now()
	e.putRaw("k", []byte("c"))
	e.putRaw("k", []byte("d"))
	e.subExpire(cut)

	ch = e.subscribe(e.subscriber(cfg), context.Background())
	subWantPayloads(t, subRecvAck(t, ch, 2), "c", "d")
}

// A closed parent that aged out of the stream entirely (no longer listed) does not hold its
// children back.
func TestReshardParentAgedOutDoesNotBlockChildren(t *testing.T) {
	clk := subFixedClock()
	e := newSubEnv(t, 1, clk)
	e.putRaw("k", []byte("expired"))
	e.subSplit(subShard(0))
	clk.Advance(time.Hour)
	cut := clk.Now()
	e.putRaw("k", []byte("kept"))
	e.subExpire(cut)
	ch := e.subscribe(e.subscriber(e.config(subGroup)), context.Background())
	subWantPayloads(t, subRecvAck(t, ch, 1), "kept")
}

// subNoChildShards is a Kinesis that, like kinesalite, never names the children at a shard's
// end.
type subNoChildShards struct{ *memlog.Log }

func (k subNoChildShards) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, opts ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	out, err := k.Log.GetRecords(ctx, in, opts...)
	if out != nil {
		out.ChildShards = nil
	}
	return out, err
}

// Without ChildShards, the end of a parent makes the coordinator list the shards at once.
func TestReshardWithoutChildShardsListsAtOnce(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	e.putRaw("k", []byte("parent"))
	cfg := e.config(subGroup)
	cfg.Client = subNoChildShards{e.log}
	// Neither periodic sync may find the children: only the listing at the parent's end can.
	cfg.ShardSyncInterval = time.Hour
	cfg.Group.LeaseSyncInterval = time.Hour
	ch := e.subscribe(e.subscriber(cfg), context.Background())
	parent := subRecv(t, ch)
	e.subSplit(subShard(0))
	e.putRaw("k", []byte("child"))
	parent.Ack()
	subWantPayloads(t, []*message.Message{parent}, "parent")
	subWantPayloads(t, subRecvAck(t, ch, 1), "child")
}

// The lease of a finished parent is deleted once its children are being read, and is not
// created again while the parent is still listed: the children keep their order, and a
// restarted group reads on from the children's checkpoints, not the parent again.
func TestReshardFinishedLeaseDeletedOnceChildrenRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 1, nil)
		e.putRaw("k", []byte("parent"))
		cfg := e.config(subGroup)
		cfg.ShardSyncInterval = 20 * time.Millisecond
		cfg.RequestTimeout = 50 * time.Millisecond // deletions wait 2 × (50 ms + 2 × 50 ms)
		sub := e.subscriber(cfg)
		ch := e.subscribe(sub, context.Background())
		subWantPayloads(t, subRecvAck(t, ch, 1), "parent")
		parent := subShard(0)
		low, high := e.subSplit(parent)
		e.putRaw("k", []byte("child-1"))
		subWantPayloads(t, subRecvAck(t, ch, 1), "child-1")

		leases := func() map[string]lease.Lease {
			list, err := e.store.List(context.Background(), subGroup, e.stream)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			m := map[string]lease.Lease{}
			for _, l := range list {
				m[l.ShardID] = l
			}
			return m
		}
		deadline := time.Now().Add(subWait)
		for _, ok := leases()[parent]; ok; _, ok = leases()[parent] {
			if time.Now().After(deadline) {
				t.Fatalf("the parent's lease is still there with both children read: %+v", leases())
			}
			time.Sleep(5 * time.Millisecond) // polling the store: the coordinator sends no signal
		}
		// Ten shard syncs later, with the parent still listed, nothing has created it again.
		ticks := 10 * cfg.ShardSyncInterval
		time.Sleep(ticks) // fake time for the shard syncs to pass; nothing may happen in it
		synctest.Wait()
		got := leases()
		if l, ok := got[parent]; ok {
			t.Fatalf("the parent's lease came back %s after it was deleted (the parent would be read twice): %+v", ticks, l)
		}
		for _, id := range []string{low, high} {
			if got[id].Generation == 0 {
				t.Errorf("child %s lease %+v, want taken", id, got[id])
			}
		}
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}

		// A restarted instance: the parent has no lease, its children started, so it is finished.
		e.putRaw("k", []byte("child-2"))
		ch = e.subscribe(e.subscriber(cfg), context.Background())
		subWantPayloads(t, subRecvAck(t, ch, 1), "child-2")
		subNone(t, ch, subQuiet)
		if _, ok := leases()[parent]; ok {
			t.Errorf("the restarted instance created the parent's lease again")
		}
	})
}

// A group that starts at LATEST loses nothing of the shards that follow one it read: a child
// of a parent the group read starts at TRIM_HORIZON, not at LATEST when its reader comes (the
// records written to it meanwhile would be skipped), and a child that closed while its parent
// was still being read is read too, not skipped as a closed shard the group never read.
func TestReshardLatestGroupReadsChildrenOfWhatItRead(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	cfg := e.config(subGroup)
	cfg.InitialPosition = kinesis.Position{Type: kinesis.Latest}
	cfg.ShardSyncInterval = 20 * time.Millisecond // the listing shows the children closed
	lists := subListCalls(e)
	ch := e.subscribe(e.subscriber(cfg), context.Background())
	e.putRaw("k", []byte("parent"))
	held := subRecv(t, ch) // the parent's record, in flight: its children cannot start yet
	subWantPayloads(t, []*message.Message{held}, "parent")
	low, high := e.subSplit(subShard(0))
	e.putRaw("k", []byte("child")) // into a child, before its reader exists
	// Both children close too, while the parent is still being read.
	e.subSplit(low)
	e.subSplit(high)
	e.putRaw("k", []byte("grandchild"))
	// Two shard listings after the splits: the coordinator has seen the children closed.
	since := lists.Load()
	deadline := time.Now().Add(subWait)
	for lists.Load() < since+2 {
		if time.Now().After(deadline) {
			t.Fatalf("no shard listing within %s", subWait)
		}
		time.Sleep(5 * time.Millisecond) // polling memlog's call count: the coordinator sends no signal
	}
	held.Ack()
	subWantPayloads(t, subRecvAck(t, ch, 2), "child", "grandchild")
}
