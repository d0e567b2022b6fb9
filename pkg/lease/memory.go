package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Operation names, as passed to a fault hook and carried by ConditionError.Op. They are the
// names of the Store methods in lower case (words joined by '-') so that a test can script a
// fault for exactly one kind of call.
const (
	OpCreate         = "create"
	OpList           = "list"
	OpTake           = "take"
	OpRenew          = "renew"
	OpCheckpoint     = "checkpoint"
	OpRelease        = "release"
	OpRequestHandoff = "request-handoff"
	OpHandoff        = "handoff"
	OpDeleteFinished = "delete-finished"
)

// faultFunc is the hook SetFault installs; see there.
type faultFunc func(ctx context.Context, op string, key Key) error

// MemoryStore is a Store and Membership held in process memory. It is the lease table of every
// test and of the quickstart: it applies the same conditions as the DynamoDB store and passes
// the same conformance suite (package leasetest), so the coordinator behaves the same on both.
//
// The zero value is not usable; call NewMemoryStore.
type MemoryStore struct {
	mu      sync.Mutex
	leases  map[streamKey]map[string]Lease  // by (group, stream), then shard id
	members map[streamKey]map[string]Member // by (group, stream), then worker
	fault   atomic.Pointer[faultFunc]
}

// streamKey is the partition of a lease table: the leases of one group on one stream, which is
// also what List reads.
type streamKey struct{ group, stream string }

var (
	_ Store      = (*MemoryStore)(nil)
	_ Membership = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{leases: make(map[streamKey]map[string]Lease), members: make(map[streamKey]map[string]Member)}
}

// SetFault installs a hook that runs before every operation, so tests can script a lease table
// that is slow, throttled or unreachable. A non-nil error from f becomes the operation's error
// and no lease or member record is touched; f may block (it should honour ctx) to model a slow
// call. op is one of the Op constants; for List and Members, key carries only Group and Stream,
// and for the other member calls its ShardID is the worker. nil removes the hook.
//
// SetFault may be called at any time, also while operations run: each operation uses the hook
// installed when it starts.
func (s *MemoryStore) SetFault(f func(ctx context.Context, op string, key Key) error) {
	if f == nil {
		s.fault.Store(nil)
		return
	}
	ff := faultFunc(f)
	s.fault.Store(&ff)
}

// before runs the checks every operation shares, in the order a remote store would meet them:
// the caller's input, then the (possibly slow or failing) trip to the table, then whether the
// caller still wants the answer. A cancelled call never writes, as with a request never sent.
func (s *MemoryStore) before(ctx context.Context, op string, key Key, checkShard bool) error {
	if err := validateKey(op, key, checkShard); err != nil {
		return err
	}
	if f := s.fault.Load(); f != nil {
		if err := (*f)(ctx, op, key); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lease %s of %s: %w", op, key, err)
	}
	return nil
}

// Create implements Store.
func (s *MemoryStore) Create(ctx context.Context, l Lease) (Lease, error) {
	key := l.Key()
	if err := s.before(ctx, OpCreate, key, true); err != nil {
		return Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sk := streamKey{key.Group, key.Stream}
	shards := s.leases[sk]
	if _, ok := shards[key.ShardID]; ok {
		return Lease{}, &ConditionError{Op: OpCreate, Key: key, Err: ErrLeaseExists}
	}
	if shards == nil {
		shards = make(map[string]Lease)
		s.leases[sk] = shards
	}
	stored := l.Clone()
	stored.Generation = 0
	stored.Counter = 1
	stored.Foreign = false // a MemoryStore holds no foreign worker's lease
	shards[key.ShardID] = stored
	return stored.Clone(), nil
}

// List implements Store.
func (s *MemoryStore) List(ctx context.Context, group, stream string) ([]Lease, error) {
	key := Key{Group: group, Stream: stream}
	if err := s.before(ctx, OpList, key, false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	shards := s.leases[streamKey{group, stream}]
	out := make([]Lease, 0, len(shards))
	for _, l := range shards {
		out = append(out, l.Clone())
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ShardID < out[j].ShardID })
	return out, nil
}

// Take implements Store.
func (s *MemoryStore) Take(ctx context.Context, observed Lease, owner string) (Lease, error) {
	key := observed.Key()
	if err := s.before(ctx, OpTake, key, true); err != nil {
		return Lease{}, err
	}
	if owner == "" {
		// An empty owner would make the lease look free while it carries a new generation,
		// which is a release by another name; Release is the conditioned way to free a lease.
		return Lease{}, fmt.Errorf("lease %s of %s: the new owner is empty", OpTake, key)
	}
	return s.update(OpTake, key, ErrLeaseNotFound, func(cur Lease) (Lease, error) {
		if cur.Owner != observed.Owner || cur.Generation != observed.Generation ||
			cur.Counter != observed.Counter {
			return Lease{}, ErrLeaseChanged
		}
		cur.Owner = owner
		cur.Generation++
		cur.PendingOwner = ""
		return cur, nil
	})
}

// Renew implements Store.
func (s *MemoryStore) Renew(ctx context.Context, held Lease) (Lease, error) {
	key := held.Key()
	if err := s.before(ctx, OpRenew, key, true); err != nil {
		return Lease{}, err
	}
	return s.update(OpRenew, key, ErrLeaseLost, func(cur Lease) (Lease, error) {
		if !holds(cur, held) {
			return Lease{}, ErrLeaseLost
		}
		return cur, nil
	})
}

// Checkpoint implements Store.
func (s *MemoryStore) Checkpoint(ctx context.Context, held Lease, checkpoint string) (Lease, error) {
	key := held.Key()
	if err := s.before(ctx, OpCheckpoint, key, true); err != nil {
		return Lease{}, err
	}
	if checkpoint == "" {
		// "" means "nothing finished yet"; writing it would throw the group's progress away and
		// make the next reader start the shard over.
		return Lease{}, fmt.Errorf("lease %s of %s: the checkpoint is empty", OpCheckpoint, key)
	}
	return s.update(OpCheckpoint, key, ErrLeaseLost, func(cur Lease) (Lease, error) {
		if !holds(cur, held) {
			return Lease{}, ErrLeaseLost
		}
		cur.Checkpoint = checkpoint
		return cur, nil
	})
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, held Lease) (Lease, error) {
	key := held.Key()
	if err := s.before(ctx, OpRelease, key, true); err != nil {
		return Lease{}, err
	}
	return s.update(OpRelease, key, ErrLeaseLost, func(cur Lease) (Lease, error) {
		if !holds(cur, held) {
			return Lease{}, ErrLeaseLost
		}
		cur.Owner = ""
		cur.Generation++
		cur.PendingOwner = ""
		return cur, nil
	})
}

// RequestHandoff implements Store.
func (s *MemoryStore) RequestHandoff(ctx context.Context, observed Lease, taker string) (Lease, error) {
	key := observed.Key()
	if err := s.before(ctx, OpRequestHandoff, key, true); err != nil {
		return Lease{}, err
	}
	if err := checkHandoffRequest(observed, taker); err != nil {
		return Lease{}, err
	}
	return s.update(OpRequestHandoff, key, ErrLeaseNotFound, func(cur Lease) (Lease, error) {
		// cur.Owner != taker follows from cur.Owner == observed.Owner, which
		// checkHandoffRequest made sure is neither "" nor taker.
		if cur.Owner != observed.Owner || cur.Generation != observed.Generation {
			return Lease{}, ErrLeaseChanged
		}
		if cur.PendingOwner != "" && cur.PendingOwner != taker {
			return Lease{}, ErrLeaseChanged // another worker asked first
		}
		cur.PendingOwner = taker
		return cur, nil
	})
}

// Handoff implements Store.
func (s *MemoryStore) Handoff(ctx context.Context, held Lease) (Lease, error) {
	key := held.Key()
	if err := s.before(ctx, OpHandoff, key, true); err != nil {
		return Lease{}, err
	}
	return s.update(OpHandoff, key, ErrLeaseLost, func(cur Lease) (Lease, error) {
		if !holds(cur, held) {
			return Lease{}, ErrLeaseLost
		}
		if cur.PendingOwner == "" {
			return Lease{}, ErrNoPendingOwner
		}
		cur.Owner = cur.PendingOwner
		cur.Generation++
		cur.PendingOwner = ""
		return cur, nil
	})
}

// DeleteFinished implements Store.
func (s *MemoryStore) DeleteFinished(ctx context.Context, observed Lease) error {
	key := observed.Key()
	if err := s.before(ctx, OpDeleteFinished, key, true); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	shards := s.leases[streamKey{key.Group, key.Stream}]
	cur, ok := shards[key.ShardID]
	switch {
	case !ok:
		return nil
	case cur.Checkpoint != ShardEnd || cur.Counter != observed.Counter:
		return &ConditionError{Op: OpDeleteFinished, Key: key, Err: ErrLeaseChanged}
	}
	delete(shards, key.ShardID)
	return nil
}

// Heartbeat implements Membership.
func (s *MemoryStore) Heartbeat(ctx context.Context, m Member) (Member, error) {
	if err := s.beforeMember(ctx, OpHeartbeat, m); err != nil {
		return Member{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sk := streamKey{m.Group, m.Stream}
	if s.members[sk] == nil {
		s.members[sk] = make(map[string]Member)
	}
	cur := s.members[sk][m.Worker] // the zero record if there is none: Counter 0, Notices 0
	cur.Group, cur.Stream, cur.Worker = m.Group, m.Stream, m.Worker
	cur.Counter++
	s.members[sk][m.Worker] = cur
	return cur, nil
}

// Members implements Membership.
func (s *MemoryStore) Members(ctx context.Context, group, stream string) ([]Member, error) {
	if err := s.before(ctx, OpMembers, Key{Group: group, Stream: stream}, false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	members := s.members[streamKey{group, stream}]
	out := make([]Member, 0, len(members))
	for _, m := range members {
		out = append(out, m)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
	return out, nil
}

// RemoveMember implements Membership.
func (s *MemoryStore) RemoveMember(ctx context.Context, observed Member) error {
	if err := s.beforeMember(ctx, OpRemoveMember, observed); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	members := s.members[streamKey{observed.Group, observed.Stream}]
	switch cur, ok := members[observed.Worker]; {
	case !ok:
		return nil
	case cur.Counter != observed.Counter:
		return &ConditionError{Op: OpRemoveMember, Key: observed.Key(), Err: ErrMemberChanged}
	}
	delete(members, observed.Worker)
	return nil
}

// NotifyMember implements Membership.
func (s *MemoryStore) NotifyMember(ctx context.Context, m Member) error {
	if err := s.beforeMember(ctx, OpNotifyMember, m); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	members := s.members[streamKey{m.Group, m.Stream}]
	if cur, ok := members[m.Worker]; ok {
		cur.Notices++
		members[m.Worker] = cur
	}
	return nil
}

// beforeMember is before for the member calls.
func (s *MemoryStore) beforeMember(ctx context.Context, op string, m Member) error {
	if err := validateMember(op, m); err != nil {
		return err
	}
	return s.before(ctx, op, m.Key(), true)
}

// checkHandoffRequest is what every store checks of a RequestHandoff before asking the table:
// input no condition could make right is a plain error, and a lease observed free is
// ErrLeaseChanged without a trip to the table (there is no owner to ask; a free lease is taken,
// not requested).
func checkHandoffRequest(observed Lease, taker string) error {
	key := observed.Key()
	switch {
	case taker == "":
		return fmt.Errorf("lease %s of %s: the taker is empty", OpRequestHandoff, key)
	case observed.Owner == taker:
		return fmt.Errorf("lease %s of %s: the taker %q is the lease's owner; a worker cannot ask itself for a lease",
			OpRequestHandoff, key, taker)
	case observed.Owner == "":
		return &ConditionError{Op: OpRequestHandoff, Key: key, Err: ErrLeaseChanged}
	}
	return nil
}

// update applies change to the stored lease under the lock and bumps its Counter, which every
// successful write does. missing is the error when the lease does not exist: for Take and
// RequestHandoff it is ErrLeaseNotFound, for the owner's own writes ErrLeaseLost, because a
// lease that is gone is one its owner no longer holds and the owner's reaction (stop the shard)
// is the same.
func (s *MemoryStore) update(op string, key Key, missing error, change func(Lease) (Lease, error)) (Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	shards := s.leases[streamKey{key.Group, key.Stream}]
	cur, ok := shards[key.ShardID]
	if !ok {
		return Lease{}, &ConditionError{Op: op, Key: key, Err: missing}
	}
	next, err := change(cur)
	if err != nil {
		return Lease{}, &ConditionError{Op: op, Key: key, Err: err}
	}
	next.Counter++
	shards[key.ShardID] = next
	return next.Clone(), nil
}

// holds reports whether the caller that holds held still owns cur. A free lease is held by
// nobody: without the Owner check a caller holding a stale free copy could renew or release a
// lease it never took.
func holds(cur, held Lease) bool {
	return held.Owner != "" && cur.Owner == held.Owner && cur.Generation == held.Generation
}

// errInvalidKey is wrapped by the error of an operation given an incomplete key. It is not a
// condition failure: no lease was looked at, and retrying will not help.
var errInvalidKey = errors.New("incomplete lease key")

// validateKey rejects a key with an empty part before any store is asked about it. An empty
// group, stream or shard id is always a caller's bug, and a remote store would either reject it
// with an obscure message or, worse, store a lease nobody can find again.
func validateKey(op string, key Key, checkShard bool) error {
	var missing string
	switch {
	case key.Group == "":
		missing = "consumer group"
	case key.Stream == "":
		missing = "stream name"
	case checkShard && key.ShardID == "":
		missing = "shard id"
	default:
		return nil
	}
	return fmt.Errorf("lease %s of %s: %w: the %s is empty", op, key, errInvalidKey, missing)
}
