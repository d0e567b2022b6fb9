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
	// Incarnation names one run of the worker: a random non-zero number it chooses when it
	// joins, and again whenever it finds its record fenced or gone. Leases carry it
	// (Lease.Incarnation) when their owner's heartbeats vouch for them.
	Incarnation int64
	// Fenced: another worker found the member's heartbeat still for a lease duration and
	// fenced the record (FenceMember) before taking leases that rely on it. No heartbeat of
	// this incarnation succeeds any more.
	Fenced bool
	// Roster and Seen are what a member that reads every member record publishes for those
	// that read only the first few (LeadingMembers), written with each heartbeat as given:
	// Roster a digest of the records (their workers, incarnations and fences), which moves
	// when one joins, goes or is fenced, and Seen the sum of their Changes. 0 from a member
	// that does not read them all.
	Roster int64
	Seen   int64
	// Legacy: the record was written by a version older than the bucketed lease layout, which
	// cannot read this layout's leases. It never counts as a member; the group removes it once
	// it has not moved for a while (MemberTracker.Stale), as any record long gone.
	Legacy bool
	// Asked is a count other workers move (NotifyMember) when they asked for one of the
	// member's leases (RequestHandoff): the member sees it move in what its next heartbeat
	// returns and lists the leases, so that it hands them over at once, whoever reads the
	// member records. Heartbeat keeps it; Join starts it at 0.
	Asked int64
}

// Key is the member's record key: Key.ShardID carries the worker name.
func (m Member) Key() Key { return Key{Group: m.Group, Stream: m.Stream, ShardID: m.Worker} }

// Operation names of the member calls, as passed to a fault hook and carried by
// ConditionError.Op (Key.ShardID then names the worker).
const (
	OpJoin         = "join"
	OpHeartbeat    = "heartbeat"
	OpMembers      = "members"
	OpLeading      = "leading-members"
	OpRemoveMember = "remove-member"
	OpFenceMember  = "fence-member"
	OpNotifyMember = "notify-member"
)

// ErrMemberChanged is returned by RemoveMember when the member's counter moved since the
// caller observed it: the member is alive after all (or came back), so its record stays.
var ErrMemberChanged = errors.New("member heartbeat moved since it was observed")

// ErrMemberFenced is returned by Heartbeat when the member record is fenced, gone or of
// another incarnation: this incarnation of the worker is over, and it joins again as a new one.
var ErrMemberFenced = errors.New("member record fenced or replaced")

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
	case m.Incarnation == 0 && (op == OpJoin || op == OpHeartbeat || op == OpFenceMember):
		return fmt.Errorf("lease %s of worker %q of group %q stream %q: %w: the incarnation is empty (0; a member chooses a random non-zero one when it joins)",
			op, m.Worker, m.Group, m.Stream, errInvalidKey)
	}
	return nil
}

// MemberTracker keeps one worker's observations of the members of one group on one stream, as
// Tracker does for leases: it tells live members from gone ones across the periodic reads.
//
// It is not safe for concurrent use: the coordinator goroutine that reads the members owns it.
type MemberTracker struct {
	// obs is by worker: Owner is the worker, Generation the incarnation, Counter the heartbeat
	// counter, so that a worker that joins again starts a fresh clock.
	obs   map[string]Observation
	last  map[string]Member     // by worker: the record as last read
	beats map[string][]beatSeen // by worker: the counters of its incarnation, when first seen
	// fencedAt is by worker: when a read first showed its record fenced (at its incarnation).
	fencedAt map[string]time.Time
	moved    map[string]bool // workers whose counter this tracker has seen change, or that appeared
	reads    int             // reads observed
}

// beatSeen is a heartbeat counter of one incarnation and when this tracker first saw it.
type beatSeen struct {
	counter int64
	since   time.Time
}

// NewMemberTracker returns a MemberTracker that has observed nothing.
func NewMemberTracker() *MemberTracker {
	return &MemberTracker{obs: make(map[string]Observation), moved: make(map[string]bool),
		last: make(map[string]Member), beats: make(map[string][]beatSeen), fencedAt: make(map[string]time.Time)}
}

// Observe records a full read of the members (a Members result) made at now. Members missing
// from it are forgotten: they left, or their record was removed. A record that was not there at
// the previous read counts as moved: it was written since, by a worker that was alive then
// (only a record present at the first read may be one left by a worker long gone).
func (t *MemberTracker) Observe(members []Member, now time.Time) {
	seen := make(map[string]struct{}, len(members))
	for _, m := range members {
		seen[m.Worker] = struct{}{}
		t.observeOne(m, now)
	}
	t.reads++
	for w := range t.obs {
		if _, ok := seen[w]; !ok {
			delete(t.obs, w)
			delete(t.moved, w)
			delete(t.last, w)
			delete(t.beats, w)
			delete(t.fencedAt, w)
		}
	}
}

// ObserveSome records a read of some of the members (a LeadingMembers result) made at now: the
// others keep what the last reads showed of them.
func (t *MemberTracker) ObserveSome(members []Member, now time.Time) {
	for _, m := range members {
		t.observeOne(m, now)
	}
}

// observeOne records one member record read at now.
func (t *MemberTracker) observeOne(m Member, now time.Time) {
	t.observeBeat(m, now)
	switch prev, known := t.last[m.Worker]; {
	case !m.Fenced:
		delete(t.fencedAt, m.Worker)
	case !known || !prev.Fenced || prev.Incarnation != m.Incarnation:
		t.fencedAt[m.Worker] = now
	}
	t.last[m.Worker] = m
	prev, known := t.obs[m.Worker]
	t.obs[m.Worker] = Observe(prev, known, Lease{Owner: m.Worker, Generation: m.Incarnation, Counter: m.Counter}, now)
	if known && (prev.Counter != m.Counter || prev.Generation != m.Incarnation) || !known && t.reads > 0 {
		t.moved[m.Worker] = true
	}
}

// FencedSince is when a read first showed worker's record fenced at incarnation; false if the
// last read did not show it so.
func (t *MemberTracker) FencedSince(worker string, incarnation int64) (time.Time, bool) {
	m, ok := t.last[worker]
	if !ok || !m.Fenced || m.Incarnation != incarnation {
		return time.Time{}, false
	}
	return t.fencedAt[worker], true
}

// Record is the member's record as last read, and whether any read showed it.
func (t *MemberTracker) Record(worker string) (Member, bool) {
	m, ok := t.last[worker]
	return m, ok
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
		if t.moved[w] && !Expired(o, now, fresh) && !t.last[w].Legacy {
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
			stale = append(stale, Member{Group: group, Stream: stream, Worker: w, Counter: o.Counter, Incarnation: t.last[w].Incarnation})
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

// Observed returns the members of the last full read (and those a later ObserveSome showed),
// each as last read, sorted by worker.
func (t *MemberTracker) Observed() []Member {
	out := make([]Member, 0, len(t.obs))
	for w, o := range t.obs {
		m := t.last[w]
		m.Counter = o.Counter
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
	return out
}

// observeBeat records m's counter among the counters of its incarnation, with when it was
// first seen; a new incarnation starts afresh. Only the last BeatsBehind+1 counters are kept:
// HeartbeatSince needs no older one, and for a counter it no longer has it answers with a
// later time, which only waits longer.
func (t *MemberTracker) observeBeat(m Member, now time.Time) {
	beats := t.beats[m.Worker]
	if prev, ok := t.last[m.Worker]; !ok || prev.Incarnation != m.Incarnation || m.Incarnation == 0 {
		beats = beats[:0]
	}
	if n := len(beats); n > 0 && beats[n-1].counter >= m.Counter {
		return // seen already (a counter never goes back within one incarnation)
	}
	beats = append(beats, beatSeen{counter: m.Counter, since: now})
	if len(beats) > BeatsBehind+1 {
		beats = append(beats[:0], beats[len(beats)-BeatsBehind-1:]...)
	}
	t.beats[m.Worker] = beats
}

// HeartbeatSince is when the leases that worker's incarnation vouches for (Lease.Incarnation)
// stopped being kept alive by its heartbeats, as this tracker can tell: when it first saw a
// counter of that incarnation at most BeatsBehind below the last one read (lease.BeatSince).
// An owner stops delivering by HeartbeatStop of its heartbeats, which is at most
// stopAfter after that, once no heartbeat of it succeeds after the last one read; FenceMember
// makes sure none does. ok is false when the last read did not show that incarnation of
// worker: the record is gone or of another run, and only the lease's own counter counts.
// member is the record as last read, for FenceMember.
func (t *MemberTracker) HeartbeatSince(worker string, incarnation int64) (since time.Time, member Member, ok bool) {
	m, known := t.last[worker]
	if !known || incarnation == 0 || m.Incarnation != incarnation {
		return time.Time{}, Member{}, false
	}
	for _, b := range t.beats[worker] {
		if b.counter >= BeatSince(m.Counter) {
			return b.since, m, true
		}
	}
	return time.Time{}, Member{}, false // never: the last counter read is among the beats
}
