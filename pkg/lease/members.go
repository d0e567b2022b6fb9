package lease

import (
	"context"
	"fmt"
)

// Member is one worker's heartbeat record in a consumer group on a stream.
//
// Membership only counts: the workers of a group read each other's records so that a worker
// that has just started is counted for the fair shares before it owns a lease, and so that a
// worker that stopped heartbeating is noticed within a lease sync or two (the others then list
// the leases, to time the expiry of its leases by their counters). It never makes a lease
// takeable and never stops a reader: that is the lease's own counter, owner and generation.
type Member struct {
	Group  string
	Stream string
	// Worker is the member's name, the Owner of the leases it holds.
	Worker string
	// Counter moves with every Heartbeat. Others judge a member alive while they see it move,
	// timed on their own clock, as they judge leases.
	Counter int64
	// Notices moves when another worker calls NotifyMember: it asked for one of this
	// worker's leases, or it left and released its own. The worker sees the move in what its
	// next Heartbeat returns and looks at the leases at once.
	Notices int64
}

// Key is the member's record key: Key.ShardID carries the worker name.
func (m Member) Key() Key { return Key{Group: m.Group, Stream: m.Stream, ShardID: m.Worker} }

// Membership is the optional part of a Store that keeps the group's member records. A Store
// without it still runs a group: the workers are then the distinct owners of live leases, as
// the KCL counts them, and every lease sync lists the leases (a worker that owns nothing is
// seen by nobody until it asks for a lease).
//
// Every call names its member by Group, Stream and Worker; a record of one group and stream is
// never seen from another. The conformance suite in package leasetest checks a Store that
// implements it.
type Membership interface {
	// Heartbeat adds one to the Counter of m's record, creating the record (Counter 1,
	// Notices 0) when there is none, and returns it as stored. m's Counter and Notices are
	// ignored.
	Heartbeat(ctx context.Context, m Member) (Member, error)

	// Members returns every member record of the group on the stream, ordered by worker.
	Members(ctx context.Context, group, stream string) ([]Member, error)

	// RemoveMember deletes the member's record, provided its Counter is still observed's: a
	// worker leaving removes its own, and any worker may remove the record of one long gone.
	// Returns ErrMemberChanged if the counter moved (the member is alive); a record already
	// gone is not an error.
	RemoveMember(ctx context.Context, observed Member) error

	// NotifyMember adds one to the Notices of m's record; a record that is not there is left
	// so (not created), and that is not an error.
	NotifyMember(ctx context.Context, m Member) error
}

// Operation names of the member calls, as passed to a fault hook and carried by
// ConditionError.Op (Key.ShardID then names the worker).
const (
	OpHeartbeat    = "heartbeat"
	OpMembers      = "members"
	OpRemoveMember = "remove-member"
	OpNotifyMember = "notify-member"
)

// validateMember rejects a member key with an empty part, as validateKey does for leases.
func validateMember(op string, m Member) error {
	k := m.Key()
	switch {
	case k.Group == "":
		return fmt.Errorf("lease %s of worker %q: %w: the consumer group is empty", op, m.Worker, errInvalidKey)
	case k.Stream == "":
		return fmt.Errorf("lease %s of worker %q: %w: the stream name is empty", op, m.Worker, errInvalidKey)
	case k.ShardID == "":
		return fmt.Errorf("lease %s of group %q stream %q: %w: the worker is empty", op, m.Group, m.Stream, errInvalidKey)
	}
	return nil
}
