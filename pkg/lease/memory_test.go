package lease_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/leasetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	leasetest.Run(t, func(*testing.T) lease.Store { return lease.NewMemoryStore() })
}

// TestLeasesOnlyStoreConformance: a store without Membership passes the suite too (its member
// cases skip).
func TestLeasesOnlyStoreConformance(t *testing.T) {
	leasetest.Run(t, func(*testing.T) lease.Store { return struct{ lease.Store }{lease.NewMemoryStore()} })
}

// seeded is a store with one lease owned by worker-a, and that lease.
func seeded(t *testing.T) (*lease.MemoryStore, lease.Lease) {
	t.Helper()
	s := lease.NewMemoryStore()
	l, err := s.Create(t.Context(), lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0", Owner: "worker-a"})
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

// storedLease reads the one lease of seeded back.
func storedLease(t *testing.T, s lease.Store) lease.Lease {
	t.Helper()
	ls, err := s.List(t.Context(), "g", "s")
	if err != nil || len(ls) != 1 {
		t.Fatalf("List = %+v, %v", ls, err)
	}
	return ls[0]
}

// calls runs every operation once, each as the owner of held would, and returns their errors
// by op name.
func calls(ctx context.Context, s lease.Store, held lease.Lease) map[string]error {
	errs := map[string]error{}
	_, errs[lease.OpCreate] = s.Create(ctx, lease.Lease{Group: "g", Stream: "s", ShardID: "shard-1"})
	_, errs[lease.OpList] = s.List(ctx, "g", "s")
	_, errs[lease.OpTake] = s.Take(ctx, held, "worker-b")
	_, errs[lease.OpRenew] = s.Renew(ctx, held)
	_, errs[lease.OpCheckpoint] = s.Checkpoint(ctx, held, "7")
	_, errs[lease.OpRelease] = s.Release(ctx, held)
	_, errs[lease.OpRequestHandoff] = s.RequestHandoff(ctx, held, "worker-c")
	_, errs[lease.OpHandoff] = s.Handoff(ctx, held)
	return errs
}

// memberCalls runs every member call once, for m, and returns their errors by op name.
func memberCalls(ctx context.Context, s lease.Membership, m lease.Member) map[string]error {
	errs := map[string]error{}
	_, errs[lease.OpHeartbeat] = s.Heartbeat(ctx, m)
	_, errs[lease.OpMembers] = s.Members(ctx, m.Group, m.Stream)
	errs[lease.OpRemoveMember] = s.RemoveMember(ctx, m)
	errs[lease.OpNotifyMember] = s.NotifyMember(ctx, m)
	return errs
}

func TestMemoryStoreFaultFailsEveryOpAndWritesNothing(t *testing.T) {
	s, held := seeded(t)
	injected := errors.New("injected: ProvisionedThroughputExceeded")
	s.SetFault(func(context.Context, string, lease.Key) error { return injected })
	errs := calls(t.Context(), s, held)
	maps.Copy(errs, memberCalls(t.Context(), s, lease.Member{Group: "g", Stream: "s", Worker: "worker-a", Counter: 1}))
	for op, err := range errs {
		if !errors.Is(err, injected) {
			t.Errorf("%s: error %v, want the injected one", op, err)
		}
	}
	s.SetFault(nil)
	got := storedLease(t, s)
	if got.Counter != held.Counter || got.Owner != "worker-a" || got.Checkpoint != "" {
		t.Fatalf("a failed call wrote: %+v, want %+v", got, held)
	}
	if ms, err := s.Members(t.Context(), "g", "s"); err != nil || len(ms) != 0 {
		t.Fatalf("failed member calls wrote: Members = %+v, %v", ms, err)
	}
}

func TestMemoryStoreFaultSeesOpAndKey(t *testing.T) {
	s, held := seeded(t)
	type call struct {
		op  string
		key lease.Key
	}
	var seen []call
	s.SetFault(func(_ context.Context, op string, key lease.Key) error {
		seen = append(seen, call{op, key})
		return nil
	})
	errs := calls(t.Context(), s, held)
	worker := lease.Member{Group: "g", Stream: "s", Worker: "worker-a"}
	memberCalls(t.Context(), s, worker)
	want := []call{
		{lease.OpCreate, lease.Key{Group: "g", Stream: "s", ShardID: "shard-1"}},
		{lease.OpList, lease.Key{Group: "g", Stream: "s"}},
		{lease.OpTake, held.Key()},
		{lease.OpRenew, held.Key()},
		{lease.OpCheckpoint, held.Key()},
		{lease.OpRelease, held.Key()},
		{lease.OpRequestHandoff, held.Key()},
		{lease.OpHandoff, held.Key()},
		{lease.OpHeartbeat, worker.Key()},
		{lease.OpMembers, lease.Key{Group: "g", Stream: "s"}},
		{lease.OpRemoveMember, worker.Key()},
		{lease.OpNotifyMember, worker.Key()},
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("hook saw %v, want %v", seen, want)
	}
	// The hook let everything through, so the calls met the store's own conditions.
	for _, op := range []string{lease.OpCreate, lease.OpList, lease.OpTake} {
		if errs[op] != nil {
			t.Errorf("%s: %v", op, errs[op])
		}
	}
	if !errors.Is(errs[lease.OpRenew], lease.ErrLeaseLost) {
		t.Errorf("renew after worker-b took the lease: %v, want ErrLeaseLost", errs[lease.OpRenew])
	}
	if !errors.Is(errs[lease.OpRequestHandoff], lease.ErrLeaseChanged) {
		t.Errorf("request of worker-a after worker-b took the lease: %v, want ErrLeaseChanged", errs[lease.OpRequestHandoff])
	}
	if !errors.Is(errs[lease.OpHandoff], lease.ErrLeaseLost) {
		t.Errorf("handoff after worker-b took the lease: %v, want ErrLeaseLost", errs[lease.OpHandoff])
	}
}

func TestMemoryStoreFaultOnlyForOneOp(t *testing.T) {
	s, held := seeded(t)
	injected := errors.New("injected")
	s.SetFault(func(_ context.Context, op string, _ lease.Key) error {
		if op == lease.OpRenew {
			return injected
		}
		return nil
	})
	if _, err := s.Renew(t.Context(), held); !errors.Is(err, injected) {
		t.Fatalf("Renew: %v, want injected", err)
	}
	if _, err := s.Checkpoint(t.Context(), held, "5"); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
}

func TestMemoryStoreSetFaultNilRemoves(t *testing.T) {
	s, held := seeded(t)
	s.SetFault(func(context.Context, string, lease.Key) error { return errors.New("down") })
	s.SetFault(nil)
	if _, err := s.Renew(t.Context(), held); err != nil {
		t.Fatalf("Renew after removing the hook: %v", err)
	}
}

func TestMemoryStoreFaultBlocksUntilContextDone(t *testing.T) {
	s, held := seeded(t)
	s.SetFault(func(ctx context.Context, _ string, _ lease.Key) error {
		<-ctx.Done()
		return ctx.Err()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Renew(ctx, held); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Renew through a hung table: %v, want DeadlineExceeded", err)
	}
	s.SetFault(nil)
	if got := storedLease(t, s); got.Counter != held.Counter {
		t.Fatalf("a timed-out Renew wrote: %+v", got)
	}
}

// A slow call whose caller gave up while it was in flight must not write: the caller will
// treat it as failed.
func TestMemoryStoreContextCancelledDuringFault(t *testing.T) {
	s, held := seeded(t)
	ctx, cancel := context.WithCancel(t.Context())
	s.SetFault(func(context.Context, string, lease.Key) error {
		cancel()
		return nil
	})
	if _, err := s.Checkpoint(ctx, held, "9"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Checkpoint: %v, want Canceled", err)
	}
	s.SetFault(nil)
	if got := storedLease(t, s); got.Checkpoint != "" || got.Counter != held.Counter {
		t.Fatalf("a cancelled Checkpoint wrote: %+v", got)
	}
}

func TestMemoryStoreFaultDelay(t *testing.T) {
	s, held := seeded(t)
	const delay = 30 * time.Millisecond
	s.SetFault(func(ctx context.Context, _ string, _ lease.Key) error {
		select {
		case <-time.After(delay):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	start := time.Now()
	if _, err := s.Renew(t.Context(), held); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if el := time.Since(start); el < delay {
		t.Fatalf("Renew took %v, want at least the injected %v", el, delay)
	}
}

// TestMemoryStoreConcurrentUse runs operations on many leases while the fault hook changes
// under them; the race detector is the judge, plus the counters adding up.
func TestMemoryStoreConcurrentUse(t *testing.T) {
	ctx := t.Context()
	s := lease.NewMemoryStore()
	const workers, renews = 8, 50
	var failed atomic.Int64
	stop := make(chan struct{})
	var flipper sync.WaitGroup
	flipper.Go(func() {
		fail := func(context.Context, string, lease.Key) error { failed.Add(1); return errors.New("flaky") }
		for i := 0; ; i++ {
			select {
			case <-stop:
				s.SetFault(nil)
				return
			default:
			}
			if i%2 == 0 {
				s.SetFault(fail)
			} else {
				s.SetFault(nil)
			}
			time.Sleep(50 * time.Microsecond)
		}
	})

	var wg sync.WaitGroup
	ok := make([]int64, workers)
	for w := range workers {
		wg.Go(func() {
			l := lease.Lease{Group: "g", Stream: "s", ShardID: fmt.Sprintf("shard-%d", w), Owner: fmt.Sprint(w)}
			for {
				if _, err := s.Create(ctx, l); err == nil || errors.Is(err, lease.ErrLeaseExists) {
					break
				}
			}
			for range renews {
				if _, err := s.Renew(ctx, l); err == nil {
					ok[w]++
				}
				_, _ = s.List(ctx, "g", "s")
			}
		})
	}
	wg.Wait()
	close(stop)
	flipper.Wait()

	ls, err := s.List(ctx, "g", "s")
	if err != nil || len(ls) != workers {
		t.Fatalf("List = %d leases, %v", len(ls), err)
	}
	for _, l := range ls {
		var w int
		fmt.Sscanf(l.ShardID, "shard-%d", &w)
		if l.Counter != 1+ok[w] {
			t.Errorf("%s: counter %d, want 1 + %d successful renews", l.ShardID, l.Counter, ok[w])
		}
	}
	t.Logf("%d calls failed by the hook", failed.Load())
}
