package leasetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func createCases() []testCase {
	return []testCase{
		{"CreateIfAbsent", testCreateIfAbsent},
		{"CreateKeepsOwnerCheckpointParentsPending", testCreateKeepsFields},
		{"CreateDuplicate", testCreateDuplicate},
		{"ListEmpty", testListEmpty},
		{"ListIsolatesGroupAndStream", testListIsolation},
		{"ListOrderedByShardID", testListOrder},
		{"ParentsRoundTrip", testParentsRoundTrip},
		{"ReturnedLeasesAreCopies", testCopies},
		{"InvalidKeys", testInvalidKeys},
		{"CancelledContextWritesNothing", testCancelled},
	}
}

func testCreateIfAbsent(e *env) {
	in := e.lease("shardId-000000000000")
	in.Counter, in.Generation = 7, 3 // the store decides these, not the caller
	got := e.create(in)
	want := e.lease("shardId-000000000000")
	want.Counter = 1
	sameLease(e.t, "Create result", got, want)
	e.stored(want)
}

func testCreateKeepsFields(e *env) {
	in := e.lease("shardId-000000000001")
	in.Owner = "worker-a"
	in.Checkpoint = "49590338271490256608559692538361571095921575989136588898"
	in.Parents = []string{"shardId-000000000000"}
	in.PendingOwner = "worker-b"
	in.Foreign = true // the store's to decide, from what it reads: worker-a wrote this one
	got := e.create(in)
	want := in.Clone()
	want.Counter, want.Generation, want.Foreign = 1, 0, false
	sameLease(e.t, "Create result", got, want)
	e.stored(want)
}

func testCreateDuplicate(e *env) {
	first := e.create(e.lease("shardId-000000000000"))
	again := e.lease("shardId-000000000000")
	again.Owner = "intruder"
	_, err := e.s.Create(e.ctx, again)
	wantCondition(e.t, err, lease.ErrLeaseExists, lease.OpCreate, again.Key())
	e.stored(first)
}

func testListEmpty(e *env) {
	if got := e.list(); len(got) != 0 {
		e.t.Fatalf("List of a group with no leases = %+v, want none", got)
	}
}

func testListIsolation(e *env) {
	mine := e.create(e.lease("shardId-000000000000"))
	otherStream := e.lease("shardId-000000000000")
	otherStream.Stream = "stream-b"
	otherGroup := e.lease("shardId-000000000001")
	otherGroup.Group = uniqueName(e.t, "other")
	if e.scope != nil {
		refused(e, otherGroup)
		if !e.scope.MultiStream {
			refused(e, otherStream)
			if got := e.list(); len(got) != 1 {
				e.t.Fatalf("List(%q, %q) = %+v, want only %s", e.group, e.stream, got, mine.Key())
			}
			return
		}
	} else {
		e.create(otherGroup)
	}
	e.create(otherStream)

	got := e.list()
	if len(got) != 1 {
		e.t.Fatalf("List(%q, %q) = %+v, want only %s", e.group, e.stream, got, mine.Key())
	}
	sameLease(e.t, "listed lease", got[0], mine)
	if got := e.listOf(e.group, "stream-b"); len(got) != 1 || got[0].Stream != "stream-b" {
		e.t.Fatalf("List of the other stream = %+v", got)
	}
	if e.scope != nil {
		return
	}
	if got := e.listOf(otherGroup.Group, e.stream); len(got) != 1 || got[0].Group != otherGroup.Group {
		e.t.Fatalf("List of the other group = %+v", got)
	}
}

// refused checks that a store bound to one group (and stream) refuses a lease outside them, with
// a plain error that names what is wrong rather than a condition that failed.
func refused(e *env, l lease.Lease) {
	e.t.Helper()
	_, err := e.s.Create(e.ctx, l)
	var cond *lease.ConditionError
	if err == nil || errors.As(err, &cond) {
		e.t.Fatalf("Create(%s) on a store bound to group %q, stream %q: err %v, want a plain error", l.Key(), e.group, e.stream, err)
	}
	if _, err := e.s.List(e.ctx, l.Group, l.Stream); err == nil {
		e.t.Fatalf("List(%q, %q) on a store bound to group %q, stream %q succeeded", l.Group, l.Stream, e.group, e.stream)
	}
}

func testListOrder(e *env) {
	ids := []string{
		"shardId-000000000010", "shardId-000000000002", "shardId-000000000000",
		"shardId-000000000011", "shardId-000000000001",
	}
	for _, id := range ids {
		e.create(e.lease(id))
	}
	want := []string{
		"shardId-000000000000", "shardId-000000000001", "shardId-000000000002",
		"shardId-000000000010", "shardId-000000000011",
	}
	got := e.list()
	if len(got) != len(want) {
		e.t.Fatalf("listed %d leases, want %d", len(got), len(want))
	}
	for i, l := range got {
		if l.ShardID != want[i] {
			e.t.Fatalf("lease %d is shard %q, want %q (order by shard id)", i, l.ShardID, want[i])
		}
	}
}

func testParentsRoundTrip(e *env) {
	merged := e.lease("shardId-000000000003")
	merged.Parents = []string{"shardId-000000000001", "shardId-000000000002"}
	split := e.lease("shardId-000000000004")
	split.Parents = []string{"shardId-000000000000"}
	e.create(merged)
	e.create(split)
	e.create(e.lease("shardId-000000000000"))

	if got := e.get(merged.ShardID).Parents; len(got) != 2 || got[0] != merged.Parents[0] || got[1] != merged.Parents[1] {
		e.t.Fatalf("merged shard's parents = %q, want %q", got, merged.Parents)
	}
	if got := e.get(split.ShardID).Parents; len(got) != 1 || got[0] != split.Parents[0] {
		e.t.Fatalf("split shard's parents = %q, want %q", got, split.Parents)
	}
	if got := e.get("shardId-000000000000").Parents; len(got) != 0 {
		e.t.Fatalf("parentless shard's parents = %q, want none", got)
	}

	// Every write keeps the parents: children are started by reading them.
	l := e.take(e.get(merged.ShardID), "worker-a")
	l = e.renew(l)
	l = e.checkpoint(l, lease.ShardEnd)
	l = e.release(l)
	if len(l.Parents) != 2 || len(e.get(merged.ShardID).Parents) != 2 {
		e.t.Fatalf("parents lost after take/renew/checkpoint/release: %q", e.get(merged.ShardID).Parents)
	}
}

func testCopies(e *env) {
	in := e.lease("shardId-000000000005")
	in.Parents = []string{"shardId-000000000001", "shardId-000000000002"}
	created := e.create(in)
	want := created.Clone()

	in.Parents[0] = "mutated-input" // the store must not keep the caller's slice
	created.Parents[0] = "mutated-create-result"
	e.stored(want)

	listed := e.list()
	listed[0].Parents[1] = "mutated-list-result"
	e.stored(want)

	taken := e.take(e.get(in.ShardID), "worker-a")
	taken.Parents[0] = "mutated-take-result"
	renewed := e.renew(taken)
	renewed.Parents[0] = "mutated-renew-result"
	if got := e.get(in.ShardID).Parents; got[0] != want.Parents[0] || got[1] != want.Parents[1] {
		e.t.Fatalf("parents changed through a returned lease: %q, want %q", got, want.Parents)
	}
}

func testInvalidKeys(e *env) {
	for _, tc := range []struct {
		missing string
		mutate  func(*lease.Lease)
	}{
		{"consumer group", func(l *lease.Lease) { l.Group = "" }},
		{"stream name", func(l *lease.Lease) { l.Stream = "" }},
		{"shard id", func(l *lease.Lease) { l.ShardID = "" }},
	} {
		e.t.Run(strings.ReplaceAll(tc.missing, " ", "_"), func(t *testing.T) {
			l := e.lease("shardId-000000000000")
			tc.mutate(&l)
			_, err := e.s.Create(e.ctx, l)
			wantInvalid(t, err, "Create", tc.missing)
			_, err = e.s.Take(e.ctx, l, "worker-a")
			wantInvalid(t, err, "Take", tc.missing)
			l.Owner = "worker-a"
			_, err = e.s.Renew(e.ctx, l)
			wantInvalid(t, err, "Renew", tc.missing)
			_, err = e.s.Checkpoint(e.ctx, l, "1")
			wantInvalid(t, err, "Checkpoint", tc.missing)
			_, err = e.s.Release(e.ctx, l)
			wantInvalid(t, err, "Release", tc.missing)
			_, err = e.s.RequestHandoff(e.ctx, l, "worker-b")
			wantInvalid(t, err, "RequestHandoff", tc.missing)
			_, err = e.s.Handoff(e.ctx, l)
			wantInvalid(t, err, "Handoff", tc.missing)
			if tc.missing != "shard id" {
				_, err = e.s.List(e.ctx, l.Group, l.Stream)
				wantInvalid(t, err, "List", tc.missing)
			}
		})
	}
	l := e.create(e.lease("shardId-000000000000"))
	_, err := e.s.Take(e.ctx, l, "")
	wantInvalid(e.t, err, "Take with no owner", "owner")
	e.stored(l)
	held := e.take(l, "worker-a")
	_, err = e.s.Checkpoint(e.ctx, held, "")
	wantInvalid(e.t, err, "Checkpoint with no checkpoint", "checkpoint")
	e.stored(held)
	_, err = e.s.RequestHandoff(e.ctx, held, "")
	wantInvalid(e.t, err, "RequestHandoff with no taker", "taker")
	e.stored(held)
}

func testCancelled(e *env) {
	l := e.create(e.lease("shardId-000000000000"))
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.s.Take(ctx, l, "worker-a"); err == nil {
		e.t.Fatal("Take with a cancelled context succeeded")
	}
	if _, err := e.s.Create(ctx, e.lease("shardId-000000000001")); err == nil {
		e.t.Fatal("Create with a cancelled context succeeded")
	}
	if got := e.list(); len(got) != 1 {
		e.t.Fatalf("leases after cancelled calls = %+v, want only the first", got)
	}
	e.stored(l)

	held := e.take(l, "worker-a")
	if _, err := e.s.RequestHandoff(ctx, held, "worker-b"); err == nil {
		e.t.Fatal("RequestHandoff with a cancelled context succeeded")
	}
	e.stored(held)
	pending := e.request(held, "worker-b")
	if _, err := e.s.Handoff(ctx, pending); err == nil {
		e.t.Fatal("Handoff with a cancelled context succeeded")
	}
	e.stored(pending)
}
