// Package lease holds the shard leases that let many instances of one consumer group share a
// Kinesis stream: who owns which shard (fenced by owner and generation), whether the owner is
// still alive (a counter it bumps), and how far the group has read (the checkpoint).
//
// A Store is the persistence seam. Every write is conditional, so two instances racing for the
// same lease never both win, and an instance that lost a lease learns so from ErrLeaseLost
// instead of overwriting the new owner's progress. A Store may also keep the group's member
// records (Membership), which only count the workers for the fair shares.
//
// Two stores come with the package: MemoryStore (one process, and every test) and
// DynamoDBStore (a table of this package's layout). A third, kcl.Store in package
// pkg/lease/kcl, keeps leases in a KCL application's lease table; of this package it uses the
// exported API alone, as a store of your own would (besides DynamoDB helpers it shares with
// DynamoDBStore in an internal package). To keep leases in another database, implement Store
// (and, optionally, Membership) and run the conformance suite of package leasetest against
// it: docs/consumer-groups.md, "Writing a lease store", says what each call must guarantee and
// why.
package lease

import (
	"context"
	"errors"
	"fmt"
)

// ShardEnd is the checkpoint of a shard that has been read to its end (a closed parent after a
// split or merge). A lease at ShardEnd is never read again; its children may start.
const ShardEnd = "SHARD_END"

// Lease is one shard's lease in one consumer group.
//
// Leases are values: a Store returns a fresh copy from every call and never keeps a reference
// to what it was given.
type Lease struct {
	// Group is the consumer group.
	Group string
	// Stream is the Kinesis stream name.
	Stream string
	// ShardID is the shard this lease covers.
	ShardID string

	// Owner is the worker holding the lease; "" means free.
	Owner string
	// Generation changes whenever ownership changes (take, release, handoff). Owner-side
	// writes are conditioned on it, which fences an owner that lost the lease and did not
	// notice.
	Generation int64
	// Counter changes on every write. Other workers judge a lease expired when its counter has
	// not changed for the lease duration, timed on their own clock.
	Counter int64

	// Checkpoint is the sequence number of the last record the group finished, ShardEnd, ""
	// when the group has not finished any record of the shard yet, or a Start that a reset
	// of the group's position wrote (see start.go): where the next reader starts. A Store
	// keeps it as an opaque string.
	Checkpoint string
	// Parents are the shard ids this shard was split or merged from (at most two).
	Parents []string
	// PendingOwner is a worker that asked for this lease to be handed over to it ("" if none);
	// see RequestHandoff.
	PendingOwner string
	// Foreign reports that Owner holds the lease outside this package's protocol: a KCL
	// worker on a KCL application's lease table (kcl.Store), which took or created the lease
	// itself. Such an owner answers no handoff request and heartbeats no member record, and a
	// group never reads beside a live one (docs/kcl.md). A store sets it from what it reads;
	// it is false for every lease of MemoryStore and DynamoDBStore, and a store ignores it in
	// what a caller passes in.
	Foreign bool
}

// Key identifies a lease.
func (l Lease) Key() Key { return Key{Group: l.Group, Stream: l.Stream, ShardID: l.ShardID} }

// Free reports whether nobody owns the lease.
func (l Lease) Free() bool { return l.Owner == "" }

// Clone returns a copy that shares no memory with l.
func (l Lease) Clone() Lease {
	if l.Parents != nil {
		l.Parents = append([]string(nil), l.Parents...)
	}
	return l
}

// Key identifies a lease: one shard of one stream in one consumer group.
type Key struct {
	Group   string
	Stream  string
	ShardID string
}

func (k Key) String() string {
	return fmt.Sprintf("group %q stream %q shard %q", k.Group, k.Stream, k.ShardID)
}

var (
	// ErrLeaseLost means the caller no longer holds the lease: another worker took it, or it
	// was released. The caller must stop reading the shard at once and must not checkpoint.
	ErrLeaseLost = errors.New("lease lost")
	// ErrLeaseExists is returned by Create when the lease is already there.
	ErrLeaseExists = errors.New("lease already exists")
	// ErrLeaseChanged is returned by Take and RequestHandoff when the lease changed since the
	// caller observed it (renewed, taken or released by someone else, or, for RequestHandoff,
	// asked for by another worker first); the caller should list again.
	ErrLeaseChanged = errors.New("lease changed since it was observed")
	// ErrLeaseNotFound is returned when the lease does not exist.
	ErrLeaseNotFound = errors.New("lease not found")
	// ErrNoPendingOwner is returned by Handoff when the caller still holds the lease but nobody
	// asked for it (any more): there is nobody to hand it to, so the caller keeps it and goes on
	// reading.
	ErrNoPendingOwner = errors.New("lease has no pending owner to hand over to")
	// ErrMemberChanged is returned by RemoveMember when the member's counter moved since the
	// caller observed it: the member is alive after all (or came back), so its record stays.
	ErrMemberChanged = errors.New("member heartbeat moved since it was observed")
	// ErrTableNotFound is returned by NewDynamoDBStore (and kcl.NewStore) when a table it needs
	// does not exist and the config does not let it create the table.
	ErrTableNotFound = errors.New("lease table not found")
)

// ConditionError is the error of a conditional write that did not apply. It names the lease
// and the operation; errors.Is matches its Err (ErrLeaseLost, ErrLeaseExists, ErrLeaseChanged,
// ErrLeaseNotFound, ErrNoPendingOwner or ErrMemberChanged).
type ConditionError struct {
	Op  string
	Key Key
	Err error
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("lease %s of %s: %v", e.Op, e.Key, e.Err)
}

func (e *ConditionError) Unwrap() error { return e.Err }

// Store persists leases. Implementations must be safe for concurrent use, make every write
// conditional as documented, and return copies (never shared slices). A Store that also
// implements Membership keeps the group's member records; one that does not still runs a
// group.
//
// Every write that succeeds increments Counter by one; a write that fails changes nothing.
//
// Input that no condition could make right is rejected before the store is asked, with a plain
// error (not a *ConditionError) that says what is wrong: a key with an empty group, stream or
// shard id, Take or RequestHandoff to an empty owner, Checkpoint of "", RequestHandoff by the
// observed owner itself. Owner-side writes (Renew, Checkpoint, Release, Handoff) with a held
// lease that is free or gone fail with ErrLeaseLost: nobody holds it. RequestHandoff of a lease
// observed free fails with ErrLeaseChanged: there is nobody to ask; take it instead.
// The conformance suite in package leasetest checks all of this.
//
// # Handing a lease over
//
// A worker below its fair share with no free lease to take steals one in two steps, so that
// the owner can finish its in-flight records and checkpoint first:
//
//  1. the taker calls RequestHandoff with the lease as it listed it; the lease's PendingOwner
//     becomes the taker. Only one taker can be pending at a time.
//  2. the owner learns of the request from what Renew (or List) returns, stops delivering the
//     shard, checkpoints and calls Handoff, which makes the pending owner the owner in a new
//     generation. If the owner does not hand over in time, the taker may Take the lease
//     (conditioned on what it observed, as any take), which also clears the request.
//
// Within one generation PendingOwner only ever goes from "" to one taker: a second taker's
// request fails, and only a change of owner (Take, Release, Handoff), which is a new generation,
// clears it.
type Store interface {
	// Create stores l if no lease with its key exists; the stored lease has Counter 1,
	// Generation 0 and whatever Owner, Checkpoint, Parents and PendingOwner l carries
	// (normally free and empty). Returns ErrLeaseExists if the key is taken.
	Create(ctx context.Context, l Lease) (Lease, error)

	// List returns every lease of the group on the stream, ordered by shard id.
	List(ctx context.Context, group, stream string) ([]Lease, error)

	// Take makes owner the owner of the lease, provided its Owner, Generation and Counter are
	// still what the caller observed; it increments Generation and clears PendingOwner.
	// Returns ErrLeaseChanged if the lease moved on, ErrLeaseNotFound if it is gone.
	Take(ctx context.Context, observed Lease, owner string) (Lease, error)

	// Renew proves the owner is alive, provided Owner and Generation are still those of held.
	// Returns ErrLeaseLost otherwise.
	Renew(ctx context.Context, held Lease) (Lease, error)

	// Checkpoint records progress, provided Owner and Generation are still those of held.
	// Returns ErrLeaseLost otherwise.
	Checkpoint(ctx context.Context, held Lease, checkpoint string) (Lease, error)

	// Release frees the lease (Owner "", Generation incremented, PendingOwner cleared) so that
	// another worker can take it at once, provided Owner and Generation are still those of
	// held. Returns ErrLeaseLost otherwise.
	Release(ctx context.Context, held Lease) (Lease, error)

	// RequestHandoff asks the owner of the lease to hand it over to taker by setting
	// PendingOwner to taker, provided the lease's Owner and Generation are still what the
	// caller observed (its Counter may have moved: the owner renewing does not void a
	// request), it is owned by someone other than taker, and no other worker's request is
	// pending (a repeated request by taker succeeds again). Ownership does not change.
	// Returns ErrLeaseChanged if the lease moved on or another worker asked first,
	// ErrLeaseNotFound if it is gone.
	RequestHandoff(ctx context.Context, observed Lease, taker string) (Lease, error)

	// DeleteFinished deletes the lease of a finished shard, provided it is still at ShardEnd
	// with observed's Counter: the lease table need not keep a shard that is read to its end
	// once its children are being read. Returns ErrLeaseChanged if the lease moved on or is
	// not at ShardEnd; a lease already gone is not an error.
	DeleteFinished(ctx context.Context, observed Lease) error

	// Handoff gives the lease to its PendingOwner, provided Owner and Generation are still
	// those of held: the pending owner becomes Owner, Generation is incremented, PendingOwner
	// is cleared and the Checkpoint is kept as stored (the owner checkpoints before it hands
	// over). It returns the lease as it now is, owned by the taker, which the caller must no
	// longer use. The lease goes to the PendingOwner stored at the time of the write, which in
	// one generation is the only worker that asked, so a held copy that does not show the
	// request yet hands over the same way. Returns ErrLeaseLost if the caller no longer holds
	// the lease (also when the taker or anyone else took it meanwhile), ErrNoPendingOwner if it
	// does but no request is pending: then the caller keeps the lease.
	Handoff(ctx context.Context, held Lease) (Lease, error)
}

// ForeignTable is implemented by a Store whose table workers outside this package's protocol
// may share: a KCL application's lease table (kcl.Store). Whether a lease is held by one is
// Lease.Foreign, which is all a group needs to stay safe; this interface names those workers
// for log lines and makes a quiet group list the leases at least every LeaseDuration, so that
// one that starts taking free leases is seen soon (docs/kcl.md).
type ForeignTable interface {
	// ForeignWorkers names those workers, for log lines ("KCL workers"); "" if the table has
	// none.
	ForeignWorkers() string
}
