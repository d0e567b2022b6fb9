package leasetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func handoffCases() []testCase {
	return []testCase{
		{"RequestHandoffSetsPendingOwner", testRequestHandoff},
		{"RequestHandoffOnFreeLeaseFails", testRequestFree},
		{"RequestHandoffByOwnerFails", testRequestByOwner},
		{"RequestHandoffMissing", testRequestMissing},
		{"RequestHandoffStale", testRequestStale},
		{"ConcurrentThievesOneWins", testConcurrentRequests},
		{"RequestThenRenewKeepsPendingOwner", testRequestThenRenew},
		{"HandoffMovesOwnership", testHandoff},
		{"HandoffWithCopyFromBeforeRequest", testHandoffOlderCopy},
		{"HandoffWithoutPendingOwner", testHandoffNoPending},
		{"HandoffAfterTakerTook", testHandoffAfterTakerTook},
		{"HandoffAfterOtherTook", testHandoffAfterOtherTook},
		{"ReleaseClearsPendingOwner", testReleaseClearsPending},
		{"HandoffRacesTakerTimeout", testHandoffRacesTake},
	}
}

// owned is a fresh lease taken by worker-a and checkpointed, as an owner's reader leaves it.
func (e *env) owned(shard string) lease.Lease {
	e.t.Helper()
	held := e.take(e.create(e.lease(shard)), "worker-a")
	return e.checkpoint(held, "100")
}

func testRequestHandoff(e *env) {
	held := e.owned("shardId-000000000000")
	got := e.request(e.get(held.ShardID), "worker-b")
	want := after(held)
	want.PendingOwner = "worker-b"
	sameLease(e.t, "RequestHandoff result", got, want)
	e.stored(want)

	// Asking again (a retry after a timeout that did apply) is the same request.
	again := e.request(got, "worker-b")
	sameLease(e.t, "repeated RequestHandoff result", again, after(want))
	e.stored(again)
}

// testRequestFree: a free lease has nobody to ask; the caller should take it.
func testRequestFree(e *env) {
	free := e.create(e.lease("shardId-000000000000"))
	_, err := e.s.RequestHandoff(e.ctx, free, "worker-b")
	wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpRequestHandoff, free.Key())
	e.stored(free)

	// Released, and so free, in a later generation.
	released := e.release(e.take(free, "worker-a"))
	_, err = e.s.RequestHandoff(e.ctx, released, "worker-b")
	wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpRequestHandoff, free.Key())
	e.stored(released)
}

// testRequestByOwner: a worker cannot ask itself for a lease; that is a caller's bug, reported
// as such (no condition could make it right).
func testRequestByOwner(e *env) {
	held := e.owned("shardId-000000000000")
	_, err := e.s.RequestHandoff(e.ctx, held, "worker-a")
	if err == nil {
		e.t.Fatal("RequestHandoff by the owner itself succeeded")
	}
	var ce *lease.ConditionError
	if errors.As(err, &ce) {
		e.t.Fatalf("RequestHandoff by the owner itself: got condition error %q, want an input error", err)
	}
	if !strings.Contains(err.Error(), "worker-a") {
		e.t.Fatalf("error %q does not name the taker", err)
	}
	e.stored(held)
}

func testRequestMissing(e *env) {
	observed := e.lease("shardId-000000000000")
	observed.Owner, observed.Generation, observed.Counter = "worker-a", 1, 2
	_, err := e.s.RequestHandoff(e.ctx, observed, "worker-b")
	wantCondition(e.t, err, lease.ErrLeaseNotFound, lease.OpRequestHandoff, observed.Key())
	if got := e.list(); len(got) != 0 {
		e.t.Fatalf("RequestHandoff of a missing lease created %+v", got)
	}
}

// testRequestStale: a request is conditioned on the observed owner and generation, not on the
// counter, so the owner's renewals do not void it but any change of owner does.
func testRequestStale(e *env) {
	for _, tc := range []struct {
		name  string
		stale func(lease.Lease) lease.Lease
	}{
		{"generation behind", func(l lease.Lease) lease.Lease { l.Generation--; return l }},
		{"generation ahead", func(l lease.Lease) lease.Lease { l.Generation++; return l }},
		{"other owner", func(l lease.Lease) lease.Lease { l.Owner = "worker-x"; return l }},
	} {
		e.t.Logf("case %s", tc.name)
		shard := fmt.Sprintf("shardId-%012d", len(e.list()))
		held := e.owned(shard)
		_, err := e.s.RequestHandoff(e.ctx, tc.stale(held), "worker-b")
		wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpRequestHandoff, held.Key())
		e.stored(held)
	}

	// Observed with worker-a; worker-c took it since (a new generation).
	a := e.owned("shardId-000000000100")
	c := e.take(a, "worker-c")
	_, err := e.s.RequestHandoff(e.ctx, a, "worker-b")
	wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpRequestHandoff, a.Key())
	e.stored(c)

	// Observed with worker-a; the taker itself took it since: it cannot ask itself.
	a = e.owned("shardId-000000000101")
	b := e.take(a, "worker-b")
	_, err = e.s.RequestHandoff(e.ctx, a, "worker-b")
	wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpRequestHandoff, a.Key())
	e.stored(b)

	// Observed before the owner's renew and checkpoint landed: the request still applies.
	observed := e.owned("shardId-000000000102")
	latest := e.checkpoint(e.renew(observed), "200")
	got := e.request(observed, "worker-b")
	want := after(latest)
	want.PendingOwner = "worker-b"
	sameLease(e.t, "RequestHandoff with an older copy", got, want)
	e.stored(want)
}

// testConcurrentRequests: thieves asking for the same lease at once; exactly one becomes the
// pending owner and the others learn so from ErrLeaseChanged, also when they ask again.
func testConcurrentRequests(e *env) {
	const thieves = 8
	held := e.owned("shardId-000000000000")
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, thieves)
		got   = make([]lease.Lease, thieves)
	)
	for i := range thieves {
		wg.Go(func() {
			<-start
			got[i], errs[i] = e.s.RequestHandoff(e.ctx, held, fmt.Sprintf("worker-%d", i))
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			e.t.Fatalf("worker-%d and worker-%d both became the pending owner", winner, i)
		case err == nil:
			winner = i
		default:
			wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpRequestHandoff, held.Key())
		}
	}
	if winner < 0 {
		e.t.Fatal("no thief's request applied")
	}
	want := after(held)
	want.PendingOwner = fmt.Sprintf("worker-%d", winner)
	sameLease(e.t, "winner's lease", got[winner], want)
	e.stored(want)

	// A loser that lists again and sees the request still cannot replace it.
	loser := (winner + 1) % thieves
	_, err := e.s.RequestHandoff(e.ctx, e.get(held.ShardID), fmt.Sprintf("worker-%d", loser))
	wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpRequestHandoff, held.Key())
	e.stored(want)
}

// testRequestThenRenew: the owner learns of the request from what Renew returns, also when it
// renews with a copy from before the request.
func testRequestThenRenew(e *env) {
	held := e.owned("shardId-000000000000")
	e.request(e.get(held.ShardID), "worker-b")
	renewed := e.renew(held)
	if renewed.PendingOwner != "worker-b" || renewed.Owner != "worker-a" {
		e.t.Fatalf("Renew after a request = %+v, want owner worker-a, pending owner worker-b", renewed)
	}
	cp := e.checkpoint(held, "200")
	if cp.PendingOwner != "worker-b" {
		e.t.Fatalf("PendingOwner after Checkpoint = %q, want worker-b", cp.PendingOwner)
	}
	e.stored(cp)
}

// testHandoff is the whole steal: request, owner checkpoints and hands over, the taker owns the
// lease in a new generation with the owner's last checkpoint, and the old owner is fenced.
func testHandoff(e *env) {
	in := e.lease("shardId-000000000002")
	in.Parents = []string{"shardId-000000000000", "shardId-000000000001"}
	a := e.checkpoint(e.take(e.create(in), "worker-a"), "100")
	e.request(e.get(a.ShardID), "worker-b")
	a = e.renew(a)
	a = e.checkpoint(a, "200") // the owner's last checkpoint before it hands over

	b := e.handoff(a)
	want := after(a)
	want.Owner, want.Generation, want.PendingOwner = "worker-b", a.Generation+1, ""
	sameLease(e.t, "Handoff result", b, want)
	e.stored(want)

	_, err := e.s.Renew(e.ctx, a)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRenew, a.Key())
	_, err = e.s.Checkpoint(e.ctx, a, "300")
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpCheckpoint, a.Key())
	_, err = e.s.Release(e.ctx, a)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRelease, a.Key())
	_, err = e.s.Handoff(e.ctx, a)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpHandoff, a.Key())
	e.stored(want)

	// The taker holds it like a lease it took, and can be asked for it in turn.
	b = e.checkpoint(e.renew(b), "300")
	c := e.request(b, "worker-c")
	if c.PendingOwner != "worker-c" || c.Owner != "worker-b" || c.Checkpoint != "300" {
		e.t.Fatalf("request from the new owner = %+v", c)
	}
	c = e.handoff(b)
	if c.Owner != "worker-c" || c.Generation != want.Generation+1 || c.PendingOwner != "" {
		e.t.Fatalf("second handoff = %+v", c)
	}
	e.stored(c)
}

// testHandoffOlderCopy: the owner may hand over with a copy that does not show the request yet;
// the lease goes to the worker that asked.
func testHandoffOlderCopy(e *env) {
	held := e.owned("shardId-000000000000")
	pending := e.request(e.get(held.ShardID), "worker-b")
	got := e.handoff(held)
	want := after(pending)
	want.Owner, want.Generation, want.PendingOwner = "worker-b", held.Generation+1, ""
	sameLease(e.t, "Handoff with a copy from before the request", got, want)
	e.stored(want)
}

// testHandoffNoPending: with nobody to hand to, the owner keeps the lease.
func testHandoffNoPending(e *env) {
	held := e.owned("shardId-000000000000")
	_, err := e.s.Handoff(e.ctx, held)
	wantCondition(e.t, err, lease.ErrNoPendingOwner, lease.OpHandoff, held.Key())
	if errors.Is(err, lease.ErrLeaseLost) {
		e.t.Fatalf("Handoff with nobody pending: %v matches ErrLeaseLost, but the caller still holds the lease", err)
	}
	e.stored(held)

	// A copy that shows a request the lease does not carry changes nothing either.
	stale := held
	stale.PendingOwner = "worker-b"
	_, err = e.s.Handoff(e.ctx, stale)
	wantCondition(e.t, err, lease.ErrNoPendingOwner, lease.OpHandoff, held.Key())
	e.stored(held)
	e.renew(held)
}

// testHandoffAfterTakerTook: the owner was too slow; the taker took the lease after its
// timeout, which settled the request. The owner's handoff finds the lease lost.
func testHandoffAfterTakerTook(e *env) {
	held := e.owned("shardId-000000000000")
	pending := e.request(e.get(held.ShardID), "worker-b")
	taken := e.take(pending, "worker-b")
	want := after(pending)
	want.Owner, want.Generation, want.PendingOwner = "worker-b", held.Generation+1, ""
	sameLease(e.t, "Take by the pending owner", taken, want)

	_, err := e.s.Handoff(e.ctx, pending)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpHandoff, held.Key())
	if errors.Is(err, lease.ErrNoPendingOwner) {
		e.t.Fatalf("Handoff of a lease taken since: %v matches ErrNoPendingOwner, but the caller lost the lease", err)
	}
	e.stored(taken)
}

// testHandoffAfterOtherTook: a third worker took the lease (judged expired); that clears the
// request, the owner's handoff finds the lease lost, and the thief may ask the new owner.
func testHandoffAfterOtherTook(e *env) {
	held := e.owned("shardId-000000000000")
	pending := e.request(e.get(held.ShardID), "worker-b")
	taken := e.take(pending, "worker-c")
	if taken.PendingOwner != "" || taken.Owner != "worker-c" {
		e.t.Fatalf("Take of a lease with a pending owner = %+v, want worker-c and no pending owner", taken)
	}
	_, err := e.s.Handoff(e.ctx, held)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpHandoff, held.Key())
	e.stored(taken)

	// The old request does not carry over to the new owner; worker-b may ask again.
	again := e.request(taken, "worker-b")
	if again.PendingOwner != "worker-b" || again.Owner != "worker-c" {
		e.t.Fatalf("request of the new owner's lease = %+v", again)
	}
}

func testReleaseClearsPending(e *env) {
	held := e.owned("shardId-000000000000")
	pending := e.request(e.get(held.ShardID), "worker-b")
	released := e.release(held)
	want := after(pending)
	want.Owner, want.Generation, want.PendingOwner = "", held.Generation+1, ""
	sameLease(e.t, "Release of a requested lease", released, want)
	e.stored(want)

	_, err := e.s.Handoff(e.ctx, pending)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpHandoff, held.Key())
	_, err = e.s.RequestHandoff(e.ctx, released, "worker-b")
	wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpRequestHandoff, held.Key())
	e.stored(want)
	e.take(released, "worker-b")
}

// testHandoffRacesTake: the owner hands over just as the pending taker's patience runs out and
// it takes the lease itself. Exactly one of the two applies, and either way the taker owns the
// lease one generation on.
func testHandoffRacesTake(e *env) {
	const rounds = 16
	for r := range rounds {
		held := e.owned(fmt.Sprintf("shardId-%012d", r))
		pending := e.request(e.get(held.ShardID), "worker-b")
		var (
			wg                  sync.WaitGroup
			start               = make(chan struct{})
			handoffErr, takeErr error
			handed, taken       lease.Lease
		)
		wg.Go(func() { <-start; handed, handoffErr = e.s.Handoff(e.ctx, held) })
		wg.Go(func() { <-start; taken, takeErr = e.s.Take(e.ctx, pending, "worker-b") })
		close(start)
		wg.Wait()

		var won lease.Lease
		switch {
		case handoffErr == nil && takeErr == nil:
			e.t.Fatalf("round %d: both the handoff and the take succeeded", r)
		case handoffErr == nil:
			wantCondition(e.t, takeErr, lease.ErrLeaseChanged, lease.OpTake, held.Key())
			won = handed
		case takeErr == nil:
			wantCondition(e.t, handoffErr, lease.ErrLeaseLost, lease.OpHandoff, held.Key())
			won = taken
		default:
			e.t.Fatalf("round %d: both failed: handoff %v, take %v", r, handoffErr, takeErr)
		}
		want := after(pending)
		want.Owner, want.Generation, want.PendingOwner = "worker-b", held.Generation+1, ""
		sameLease(e.t, "lease after the race", won, want)
		e.stored(want)
	}
}
