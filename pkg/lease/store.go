// Package lease holds the shard leases that let many instances of one consumer group share a
// Kinesis stream: who owns which shard (fenced by owner and generation), whether the owner is
// still alive (a counter it bumps), and how far the group has read (the checkpoint).
//
// A Store is the persistence seam. Every write is conditional, so two instances racing for the
// same lease never both win, and an instance that lost a lease learns so from ErrLeaseLost
// instead of overwriting the new owner's progress.
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
	// Generation changes whenever ownership changes (take, release). Owner-side writes are
	// conditioned on it, which fences an owner that lost the lease and did not notice.
	Generation int64
	// Counter changes on every write. Other workers judge a lease expired when its counter has
	// not changed for the lease duration, timed on their own clock.
	Counter int64

	// Checkpoint is the sequence number of the last record the group finished, ShardEnd, or ""
	// when the group has not finished any record of the shard yet.
	Checkpoint string
	// Parents are the shard ids this shard was split or merged from (at most two).
	Parents []string
	// PendingOwner is a worker that asked for this lease to be handed over to it ("" if none).
	PendingOwner string
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
	// ErrLeaseChanged is returned by Take when the lease changed since the caller observed it
	// (renewed, taken or released by someone else); the caller should list again.
	ErrLeaseChanged = errors.New("lease changed since it was observed")
	// ErrLeaseNotFound is returned when the lease does not exist.
	ErrLeaseNotFound = errors.New("lease not found")
)

// ConditionError is the error of a conditional write that did not apply. It names the lease
// and the operation; errors.Is matches its Err (ErrLeaseLost, ErrLeaseExists, ErrLeaseChanged or
// ErrLeaseNotFound).
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
// conditional as documented, and return copies (never shared slices).
//
// Every write that succeeds increments Counter by one; a write that fails changes nothing.
//
// Input that no condition could make right is rejected before the store is asked, with a plain
// error (not a *ConditionError) that says what is empty: a key with an empty group, stream or
// shard id, Take to an empty owner, Checkpoint of "". Owner-side writes (Renew, Checkpoint,
// Release) with a held lease that is free or gone fail with ErrLeaseLost: nobody holds it.
// The conformance suite in package leasetest checks all of this.
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
}
