package leasetest

import (
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func ownerCases() []testCase {
	return []testCase{
		{"RenewBumpsCounter", testRenew},
		{"RenewWithOlderCopy", testRenewOlderCopy},
		{"RenewKeepsPendingOwner", testRenewKeepsPending},
		{"RenewFencedAfterTake", testRenewFenced},
		{"OwnerWritesOnFreeLeaseFail", testOwnerWritesOnFree},
		{"OwnerWritesOnMissingLeaseFail", testOwnerWritesOnMissing},
		{"CheckpointStored", testCheckpoint},
		{"CheckpointFenced", testCheckpointFenced},
		{"CheckpointShardEnd", testCheckpointShardEnd},
		{"ReleaseFrees", testRelease},
		{"ReleasedOwnerFenced", testReleasedOwnerFenced},
	}
}

func testRenew(e *env) {
	held := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	held = e.checkpoint(held, "100")
	for range 3 {
		got := e.renew(held)
		sameLease(e.t, "Renew result", got, after(held))
		held = got
	}
	e.stored(held)
}

// testRenewOlderCopy checks that Renew is conditioned on Owner and Generation only: a copy of
// the lease from before the owner's own last write still renews it, as the reader and the
// renewer of one worker hold copies of different ages.
func testRenewOlderCopy(e *env) {
	first := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	latest := e.renew(first)
	latest = e.checkpoint(latest, "100")
	got := e.renew(first)
	sameLease(e.t, "Renew with an older copy", got, after(latest))
	got = e.checkpoint(first, "200")
	if got.Checkpoint != "200" || got.Counter != latest.Counter+2 {
		e.t.Fatalf("Checkpoint with an older copy = %+v", got)
	}
}

// testRenewKeepsPendingOwner: the owner learns of a handoff request from what Renew returns, so
// owner-side writes must keep PendingOwner.
func testRenewKeepsPending(e *env) {
	in := e.lease("shardId-000000000000")
	in.Owner, in.PendingOwner = "worker-a", "worker-b"
	held := e.create(in)
	got := e.renew(held)
	if got.PendingOwner != "worker-b" {
		e.t.Fatalf("PendingOwner after Renew = %q, want worker-b", got.PendingOwner)
	}
	got = e.checkpoint(got, "100")
	if got.PendingOwner != "worker-b" {
		e.t.Fatalf("PendingOwner after Checkpoint = %q, want worker-b", got.PendingOwner)
	}
	e.stored(got)
}

func testRenewFenced(e *env) {
	a := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	b := e.take(a, "worker-b")
	_, err := e.s.Renew(e.ctx, a)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRenew, a.Key())
	e.stored(b)
	e.renew(b)
}

func testOwnerWritesOnFree(e *env) {
	free := e.create(e.lease("shardId-000000000000"))
	_, err := e.s.Renew(e.ctx, free)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRenew, free.Key())
	_, err = e.s.Checkpoint(e.ctx, free, "100")
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpCheckpoint, free.Key())
	_, err = e.s.Release(e.ctx, free)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRelease, free.Key())
	_, err = e.s.Handoff(e.ctx, free)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpHandoff, free.Key())
	e.stored(free)
}

// testOwnerWritesOnMissing: a lease that is gone is one its owner no longer holds.
func testOwnerWritesOnMissing(e *env) {
	held := e.lease("shardId-000000000000")
	held.Owner, held.Generation, held.Counter = "worker-a", 1, 2
	_, err := e.s.Renew(e.ctx, held)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRenew, held.Key())
	_, err = e.s.Checkpoint(e.ctx, held, "100")
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpCheckpoint, held.Key())
	_, err = e.s.Release(e.ctx, held)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRelease, held.Key())
	held.PendingOwner = "worker-b"
	_, err = e.s.Handoff(e.ctx, held)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpHandoff, held.Key())
	if got := e.list(); len(got) != 0 {
		e.t.Fatalf("owner writes on a missing lease created %+v", got)
	}
}

func testCheckpoint(e *env) {
	held := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	got := e.checkpoint(held, "49590338271490256608559692538361571095921575989136588898")
	want := after(held)
	want.Checkpoint = "49590338271490256608559692538361571095921575989136588898"
	sameLease(e.t, "Checkpoint result", got, want)
	e.stored(want)
	got = e.checkpoint(got, "49590338271490256608559692538361571095921575989136588899")
	e.stored(got)
}

func testCheckpointFenced(e *env) {
	a := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	a = e.checkpoint(a, "100")
	b := e.take(a, "worker-b")
	_, err := e.s.Checkpoint(e.ctx, a, "200")
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpCheckpoint, a.Key())
	e.stored(b)
	if b.Checkpoint != "100" {
		e.t.Fatalf("new owner's checkpoint = %q, want the old owner's last one, 100", b.Checkpoint)
	}
}

func testCheckpointShardEnd(e *env) {
	held := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	held = e.checkpoint(held, "100")
	got := e.checkpoint(held, lease.ShardEnd)
	if got.Checkpoint != lease.ShardEnd || got.Owner != "worker-a" {
		e.t.Fatalf("after SHARD_END checkpoint: %+v", got)
	}
	released := e.release(got)
	if released.Checkpoint != lease.ShardEnd {
		e.t.Fatalf("release lost the SHARD_END checkpoint: %+v", released)
	}
	e.stored(released)
}

func testRelease(e *env) {
	in := e.lease("shardId-000000000000")
	in.Owner, in.PendingOwner = "worker-a", "worker-b"
	held := e.create(in)
	held = e.checkpoint(held, "100")
	got := e.release(held)
	want := after(held)
	want.Owner, want.Generation, want.PendingOwner = "", held.Generation+1, ""
	sameLease(e.t, "Release result", got, want)
	e.stored(want)
	if !got.Free() {
		e.t.Fatalf("released lease is not free: %+v", got)
	}
}

func testReleasedOwnerFenced(e *env) {
	held := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	released := e.release(held)
	_, err := e.s.Renew(e.ctx, held)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRenew, held.Key())
	_, err = e.s.Checkpoint(e.ctx, held, "100")
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpCheckpoint, held.Key())
	_, err = e.s.Release(e.ctx, held)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRelease, held.Key())
	// The released copy itself is free, so it holds nothing either.
	_, err = e.s.Renew(e.ctx, released)
	wantCondition(e.t, err, lease.ErrLeaseLost, lease.OpRenew, held.Key())
	e.stored(released)
}
