package lease

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Member is one worker of a consumer group on a stream, as its heartbeat record shows it.
//
// Membership lets the workers of a group count each other before they own anything, so that
// nobody takes the share of a worker that has just started, and that worker can ask for all of
// its share at once. It never decides who may read a shard: that is the lease's owner and
// generation, as always. A member that is wrongly counted in or out only makes the shares
// uneven for a while.
type Member struct {
	Group  string
	Stream string
	// Worker is the member's name, the Owner of the leases it holds.
	Worker string
	// Counter increments with every heartbeat. Others judge a member gone when its counter has
	// not moved for the lease duration, timed on their own clock, as they judge leases.
	Counter int64
	// Changes is a count the worker moves whenever it changed the leases in a way the others
	// cannot see without listing them (it created leases, released one, asked for one, a
	// reader of it paused),
	// written with each heartbeat as given: a worker that sees it move lists the leases.
	Changes int64
}

// Key is the member's record key: Key.ShardID carries the worker name.
func (m Member) Key() Key { return Key{Group: m.Group, Stream: m.Stream, ShardID: m.Worker} }

// Operation names of the member calls, as passed to a fault hook and carried by
// ConditionError.Op (Key.ShardID then names the worker).
const (
	OpHeartbeat    = "heartbeat"
	OpMembers      = "members"
	OpRemoveMember = "remove-member"
)

// ErrMemberChanged is returned by RemoveMember when the member's counter moved since the
// caller observed it: the member is alive after all (or came back), so its record stays.
var ErrMemberChanged = errors.New("member heartbeat moved since it was observed")

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

// MemberTracker keeps one worker's observations of the members of one group on one stream, as
// Tracker does for leases: it tells live members from gone ones across the periodic reads.
//
// It is not safe for concurrent use: the coordinator goroutine that reads the members owns it.
type MemberTracker struct {
	obs     map[string]Observation // by worker; Owner is the worker, Counter the heartbeat counter
	changes map[string]int64       // by worker: Changes as last read
	moved   map[string]bool        // workers whose counter this tracker has seen change, or that appeared
	reads   int                    // reads observed
}

// NewMemberTracker returns a MemberTracker that has observed nothing.
func NewMemberTracker() *MemberTracker {
	return &MemberTracker{obs: make(map[string]Observation), moved: make(map[string]bool), changes: make(map[string]int64)}
}

// Observe records a full read of the members (a Members result) made at now. Members missing
// from it are forgotten: they left, or their record was removed. A record that was not there at
// the previous read counts as moved: it was written since, by a worker that was alive then
// (only a record present at the first read may be one left by a worker long gone).
func (t *MemberTracker) Observe(members []Member, now time.Time) {
	seen := make(map[string]struct{}, len(members))
	for _, m := range members {
		seen[m.Worker] = struct{}{}
		t.changes[m.Worker] = m.Changes
		prev, known := t.obs[m.Worker]
		t.obs[m.Worker] = Observe(prev, known, Lease{Owner: m.Worker, Counter: m.Counter}, now)
		if known && prev.Counter != m.Counter || !known && t.reads > 0 {
			t.moved[m.Worker] = true
		}
	}
	t.reads++
	for w := range t.obs {
		if _, ok := seen[w]; !ok {
			delete(t.obs, w)
			delete(t.moved, w)
			delete(t.changes, w)
		}
	}
}

// Live returns the members whose heartbeat this tracker has seen move (or whose record appeared
// after its first read), the last time within fresh, sorted. A record present at the first
// read and not seen to move since does not count: it may be that of a worker that has crashed
// or closed without removing it, whose heartbeat will never move again, and counting
// it would hold the others below their share for a lease duration. A member heartbeats at every
// lease sync, so fresh is a few lease syncs: a worker that stops is counted out well before its
// leases expire, and those leases are taken as soon as they do.
func (t *MemberTracker) Live(now time.Time, fresh time.Duration) []string {
	var live []string
	for w, o := range t.obs {
		if t.moved[w] && !Expired(o, now, fresh) {
			live = append(live, w)
		}
	}
	sort.Strings(live)
	return live
}

// Stale returns the members whose heartbeat has not moved for at least after, as last read
// (the Counter observed), for RemoveMember: a crashed worker's record would otherwise stay in
// the table for good.
func (t *MemberTracker) Stale(group, stream string, now time.Time, after time.Duration) []Member {
	var stale []Member
	for w, o := range t.obs {
		if Expired(o, now, after) {
			stale = append(stale, Member{Group: group, Stream: stream, Worker: w, Counter: o.Counter})
		}
	}
	sort.Slice(stale, func(i, j int) bool { return stale[i].Worker < stale[j].Worker })
	return stale
}

// Quiet reports whether worker's member record, as last read, has not moved for at least d on
// this tracker's clock: its counter is the one first seen that long ago. A worker missing from
// the last read is not quiet: it left, or its record was removed. A worker that heartbeats at
// intervals shorter than d, read at intervals of about d, is quiet only when it missed a
// heartbeat: the cue to look at its leases (the lease counters alone say when they expire).
func (t *MemberTracker) Quiet(worker string, now time.Time, d time.Duration) bool {
	o, ok := t.obs[worker]
	return ok && Expired(o, now, d)
}

// Observed returns the members of the last read, each with the counter and changes last read,
// sorted by worker (Group and Stream are not set).
func (t *MemberTracker) Observed() []Member {
	out := make([]Member, 0, len(t.obs))
	for w, o := range t.obs {
		out = append(out, Member{Worker: w, Counter: o.Counter, Changes: t.changes[w]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
	return out
}
