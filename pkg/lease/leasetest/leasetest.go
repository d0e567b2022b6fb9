// Package leasetest is the conformance suite of lease.Store, and of lease.Membership for a store
// that implements it. Every Store implementation runs it, so that the coordinator, tested
// against the in-memory store, can rely on the same conditions holding against DynamoDB.
//
// Each subtest gets a fresh store from newStore and its own randomly named consumer group, so a
// shared backend (one DynamoDB table for the whole run, or for several runs) works too.
package leasetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Run runs the conformance suite against the stores newStore returns. newStore is called once
// per subtest; it may register cleanups on the t it is given.
func Run(t *testing.T, newStore func(t *testing.T) lease.Store) {
	t.Helper()
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(newEnv(t, newStore(t)))
		})
	}
}

// Scope describes a store bound to one consumer group and, unless it is MultiStream, one
// stream, as a KCL application's lease table is.
type Scope struct {
	// MultiStream: the store holds the leases of many streams of its group.
	MultiStream bool
}

// RunScoped runs the conformance suite against stores bound to one group (and stream): newStore
// gets the subtest's group and stream. Leases of another group (or stream) must be refused with a
// plain error, not kept apart.
func RunScoped(t *testing.T, scope Scope, newStore func(t *testing.T, group, stream string) lease.Store) {
	t.Helper()
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.scope = &scope
			e.s = newStore(t, e.group, e.stream)
			tc.run(e)
		})
	}
}

type testCase struct {
	name string
	run  func(e *env)
}

func cases() []testCase {
	var all []testCase
	all = append(all, createCases()...)
	all = append(all, takeCases()...)
	all = append(all, ownerCases()...)
	all = append(all, handoffCases()...)
	all = append(all, memberCases()...)
	all = append(all, finishedCases()...)
	return all
}

// env is one subtest's store and the lease names it uses.
type env struct {
	t      *testing.T
	s      lease.Store
	ctx    context.Context
	group  string
	stream string
	ms     lease.Membership // s, in the member cases (which skip a store without it)
	scope  *Scope           // nil: the store holds any group and stream (Run)
}

func newEnv(t *testing.T, s lease.Store) *env {
	return &env{t: t, s: s, ctx: t.Context(), group: uniqueName(t, "group"), stream: "stream-a"}
}

// uniqueName is a name no other subtest or run uses, with the subtest's name in it so that a
// lease left behind in a shared table can be traced to the test that wrote it.
func uniqueName(t *testing.T, what string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random name: %v", err)
	}
	name := t.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return "leasetest-" + what + "-" + name + "-" + hex.EncodeToString(b[:])
}

// lease is a fresh lease of this env's group and stream.
func (e *env) lease(shard string) lease.Lease {
	return lease.Lease{Group: e.group, Stream: e.stream, ShardID: shard}
}

func (e *env) create(l lease.Lease) lease.Lease {
	e.t.Helper()
	got, err := e.s.Create(e.ctx, l)
	if err != nil {
		e.t.Fatalf("Create(%s): %v", l.Key(), err)
	}
	return got
}

func (e *env) take(observed lease.Lease, owner string) lease.Lease {
	e.t.Helper()
	got, err := e.s.Take(e.ctx, observed, owner)
	if err != nil {
		e.t.Fatalf("Take(%s, %q): %v", observed.Key(), owner, err)
	}
	return got
}

func (e *env) renew(held lease.Lease) lease.Lease {
	e.t.Helper()
	got, err := e.s.Renew(e.ctx, held)
	if err != nil {
		e.t.Fatalf("Renew(%s): %v", held.Key(), err)
	}
	return got
}

func (e *env) checkpoint(held lease.Lease, cp string) lease.Lease {
	e.t.Helper()
	got, err := e.s.Checkpoint(e.ctx, held, cp)
	if err != nil {
		e.t.Fatalf("Checkpoint(%s, %q): %v", held.Key(), cp, err)
	}
	return got
}

func (e *env) release(held lease.Lease) lease.Lease {
	e.t.Helper()
	got, err := e.s.Release(e.ctx, held)
	if err != nil {
		e.t.Fatalf("Release(%s): %v", held.Key(), err)
	}
	return got
}

func (e *env) request(observed lease.Lease, taker string) lease.Lease {
	e.t.Helper()
	got, err := e.s.RequestHandoff(e.ctx, observed, taker)
	if err != nil {
		e.t.Fatalf("RequestHandoff(%s, %q): %v", observed.Key(), taker, err)
	}
	return got
}

func (e *env) handoff(held lease.Lease) lease.Lease {
	e.t.Helper()
	got, err := e.s.Handoff(e.ctx, held)
	if err != nil {
		e.t.Fatalf("Handoff(%s): %v", held.Key(), err)
	}
	return got
}

// listOf lists a group's leases on a stream.
func (e *env) listOf(group, stream string) []lease.Lease {
	e.t.Helper()
	got, err := e.s.List(e.ctx, group, stream)
	if err != nil {
		e.t.Fatalf("List(%q, %q): %v", group, stream, err)
	}
	return got
}

func (e *env) list() []lease.Lease {
	e.t.Helper()
	return e.listOf(e.group, e.stream)
}

// get is the stored lease of shard, read back through List.
func (e *env) get(shard string) lease.Lease {
	e.t.Helper()
	for _, l := range e.list() {
		if l.ShardID == shard {
			return l
		}
	}
	e.t.Fatalf("lease of shard %q not listed", shard)
	return lease.Lease{}
}

// stored checks that the stored lease equals want, which is how the suite checks both what a
// write left behind and that a failed write left nothing behind.
func (e *env) stored(want lease.Lease) {
	e.t.Helper()
	sameLease(e.t, "stored lease", e.get(want.ShardID), want)
}

// sameLease fails unless got and want are equal. Nil and empty Parents are equal: a store may
// not tell them apart (DynamoDB has no empty list attribute in most encodings).
func sameLease(t *testing.T, what string, got, want lease.Lease) {
	t.Helper()
	if !equalLeases(got, want) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// wantCondition fails unless err is a *lease.ConditionError for op on key matching target.
func wantCondition(t *testing.T, err error, target error, op string, key lease.Key) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s of %s succeeded, want %v", op, key, target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("%s of %s: error %q does not match %v", op, key, err, target)
	}
	var ce *lease.ConditionError
	if !errors.As(err, &ce) {
		t.Fatalf("%s of %s: error %q (%T) is not a *lease.ConditionError", op, key, err, err)
	}
	if ce.Op != op || ce.Key != key {
		t.Fatalf("ConditionError names op %q key %s, want op %q key %s", ce.Op, ce.Key, op, key)
	}
	if !strings.Contains(err.Error(), key.ShardID) {
		t.Fatalf("error %q does not name shard %q", err, key.ShardID)
	}
}

// wantInvalid fails unless err is a plain error (no condition was evaluated) that says what is
// missing: "<missing> is empty". The phrase is checked, not just the word, because every
// error names the whole key, and so the words group, stream and shard, anyway.
func wantInvalid(t *testing.T, err error, call, missing string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want an error naming the missing %s", call, missing)
	}
	var ce *lease.ConditionError
	if errors.As(err, &ce) {
		t.Fatalf("%s: got condition error %q, want an input error", call, err)
	}
	if !strings.Contains(err.Error(), missing+" is empty") {
		t.Fatalf("%s: error %q does not name the missing %s", call, err, missing)
	}
}

// after returns l as a successful write leaves it: Counter one up.
func after(l lease.Lease) lease.Lease {
	l = l.Clone()
	l.Counter++
	return l
}

// equalLeases compares every field (reflect, so a field added to Lease is compared too), with
// nil Parents equal to empty ones.
func equalLeases(a, b lease.Lease) bool {
	if len(a.Parents) == 0 {
		a.Parents = nil
	}
	if len(b.Parents) == 0 {
		b.Parents = nil
	}
	return reflect.DeepEqual(a, b)
}
