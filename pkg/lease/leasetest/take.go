package leasetest

import (
	"fmt"
	"sync"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func takeCases() []testCase {
	return []testCase{
		{"TakeFree", testTakeFree},
		{"TakeStale", testTakeStale},
		{"TakeMissing", testTakeMissing},
		{"TakeFromExpiredOwner", testTakeFromOwner},
		{"TakeAfterRelease", testTakeAfterRelease},
		{"ConcurrentTakersOneWins", testConcurrentTake},
		{"TakeRacesRenew", testTakeRacesRenew},
	}
}

func testTakeFree(e *env) {
	in := e.lease("shardId-000000000000")
	in.Checkpoint = "12345"
	in.Parents = []string{"shardId-000000000009"}
	in.PendingOwner = "worker-b"
	created := e.create(in)

	got := e.take(created, "worker-a")
	want := after(created)
	want.Owner = "worker-a"
	want.Generation = 1
	want.PendingOwner = "" // a handoff request is settled by any change of owner
	sameLease(e.t, "Take result", got, want)
	e.stored(want)
}

func testTakeStale(e *env) {
	for _, tc := range []struct {
		name  string
		stale func(lease.Lease) lease.Lease
	}{
		{"counter behind by one write", func(l lease.Lease) lease.Lease { l.Counter--; return l }},
		{"counter ahead", func(l lease.Lease) lease.Lease { l.Counter++; return l }},
		{"generation changed", func(l lease.Lease) lease.Lease { l.Generation++; return l }},
		{"owner changed, same counter", func(l lease.Lease) lease.Lease { l.Owner = "worker-x"; return l }},
		{"seen free, now owned", func(l lease.Lease) lease.Lease { l.Owner = ""; return l }},
	} {
		e.t.Logf("case %s", tc.name)
		shard := fmt.Sprintf("shardId-%012d", len(e.list()))
		held := e.take(e.create(e.lease(shard)), "worker-a")
		held = e.renew(held)
		_, err := e.s.Take(e.ctx, tc.stale(held), "worker-b")
		wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpTake, held.Key())
		e.stored(held)
	}

	// The common real case: observed before the owner's renew landed.
	held := e.take(e.create(e.lease("shardId-000000000100")), "worker-a")
	observed := held
	e.renew(held)
	_, err := e.s.Take(e.ctx, observed, "worker-b")
	wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpTake, held.Key())
}

func testTakeMissing(e *env) {
	l := e.lease("shardId-000000000000")
	_, err := e.s.Take(e.ctx, l, "worker-a")
	wantCondition(e.t, err, lease.ErrLeaseNotFound, lease.OpTake, l.Key())
	if got := e.list(); len(got) != 0 {
		e.t.Fatalf("Take of a missing lease created %+v", got)
	}
}

// testTakeFromOwner is a steal: another worker takes an owned lease it judged expired, and the
// old owner is fenced from then on.
func testTakeFromOwner(e *env) {
	a := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	a = e.checkpoint(a, "100")
	b := e.take(e.get(a.ShardID), "worker-b")
	want := after(a)
	want.Owner, want.Generation = "worker-b", 2
	sameLease(e.t, "Take result", b, want)

	_, err := e.s.Renew(e.ctx, a)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRenew, a.Key())
	_, err = e.s.Checkpoint(e.ctx, a, "200")
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpCheckpoint, a.Key())
	_, err = e.s.Release(e.ctx, a)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRelease, a.Key())
	e.stored(b)

	// Taking back the same lease under the same name is still a new generation, so a stale
	// copy from worker-a's first tenure stays fenced.
	a2 := e.take(b, "worker-a")
	if a2.Generation != 3 {
		e.t.Fatalf("generation after a third take = %d, want 3", a2.Generation)
	}
	_, err = e.s.Renew(e.ctx, a)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRenew, a.Key())
	e.renew(a2)
}

func testTakeAfterRelease(e *env) {
	a := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	a = e.checkpoint(a, "100")
	released := e.release(a)
	b := e.take(released, "worker-b")
	want := after(released)
	want.Owner, want.Generation = "worker-b", 3
	sameLease(e.t, "Take after release", b, want)
	if b.Checkpoint != "100" {
		e.t.Fatalf("checkpoint after release and take = %q, want %q", b.Checkpoint, "100")
	}
}

func testConcurrentTake(e *env) {
	const takers = 8
	free := e.create(e.lease("shardId-000000000000"))
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, takers)
		got   = make([]lease.Lease, takers)
	)
	for i := range takers {
		wg.Go(func() {
			<-start
			got[i], errs[i] = e.s.Take(e.ctx, free, fmt.Sprintf("worker-%d", i))
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			e.t.Fatalf("worker-%d and worker-%d both took the lease", winner, i)
		case err == nil:
			winner = i
		default:
			wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpTake, free.Key())
		}
	}
	if winner < 0 {
		e.t.Fatal("no taker won")
	}
	want := after(free)
	want.Owner, want.Generation = fmt.Sprintf("worker-%d", winner), 1
	sameLease(e.t, "winner's lease", got[winner], want)
	e.stored(want)
}

// testTakeRacesRenew checks that a take conditioned on an observed counter and a renew by the
// owner never both succeed, and never both fail: exactly one of them decides who owns the lease.
func testTakeRacesRenew(e *env) {
	const rounds = 16
	for r := range rounds {
		held := e.take(e.create(e.lease(fmt.Sprintf("shardId-%012d", r))), "worker-a")
		var (
			wg                sync.WaitGroup
			start             = make(chan struct{})
			renewErr, takeErr error
			renewed, taken    lease.Lease
		)
		wg.Go(func() { <-start; renewed, renewErr = e.s.Renew(e.ctx, held) })
		wg.Go(func() { <-start; taken, takeErr = e.s.Take(e.ctx, held, "worker-b") })
		close(start)
		wg.Wait()

		switch {
		case renewErr == nil && takeErr == nil:
			e.t.Fatalf("round %d: both the renew and the take succeeded", r)
		case renewErr == nil:
			wantCondition(e.t, takeErr, lease.ErrLeaseChanged, lease.OpTake, held.Key())
			e.stored(renewed)
		case takeErr == nil:
			wantCondition(e.t, renewErr, lease.ErrLeaseLost, lease.OpRenew, held.Key())
			e.stored(taken)
		default:
			e.t.Fatalf("round %d: both failed: renew %v, take %v", r, renewErr, takeErr)
		}
	}
}
