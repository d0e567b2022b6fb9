package lease

import "time"

// Observation is what one worker saw of a lease, and since when on its own clock.
//
// Liveness is judged from observations rather than from timestamps in the lease because the
// lease table is written by many machines whose clocks disagree: a worker only ever compares two
// readings of its own clock, taken when it first saw a value and now (as KCL does).
type Observation struct {
	// Owner, Generation and Counter are the lease's values when they were first seen.
	Owner      string
	Generation int64
	Counter    int64
	// Since is when the observer first saw these values, on its own clock. Keep the reading
	// of time.Now (with its monotonic part) so that a wall-clock step does not expire leases.
	Since time.Time
}

// Observe folds a fresh read of a lease into the previous observation of it. While Owner,
// Generation and Counter are unchanged the lease has shown no sign of life, so prev is kept
// with its Since; any change (a renew, a take, a release) restarts the clock at now. known says
// whether prev is a real observation; when it is not, the clock starts now.
func Observe(prev Observation, known bool, l Lease, now time.Time) Observation {
	if known && prev.Owner == l.Owner && prev.Generation == l.Generation && prev.Counter == l.Counter {
		return prev
	}
	return Observation{Owner: l.Owner, Generation: l.Generation, Counter: l.Counter, Since: now}
}

// Expired reports whether the owner of an observed lease has shown no sign of life for at
// least leaseDuration, so that another worker may take the lease. A free lease is never
// expired: it needs no taking over, it is simply free.
//
// The elapsed time is now.Sub(obs.Since), which uses monotonic readings when both carry one.
// A leaseDuration <= 0 makes every owned lease expired; the caller's configuration rules that
// out.
func Expired(obs Observation, now time.Time, leaseDuration time.Duration) bool {
	return obs.Owner != "" && now.Sub(obs.Since) >= leaseDuration
}

// MustStop reports whether an owner that last renewed at lastRenewed must stop delivering the
// shard now. Other workers may take the lease leaseDuration after they last saw it change, so
// the owner stops margin earlier to cover clock-rate drift and the time its last write spent in
// flight; only then can no two workers deliver the same shard at once.
//
// lastRenewed must be read before the successful Renew (or Take) call was sent, not when its
// answer came back: the write may have landed, and others started timing, at any point during
// the call. A negative margin is treated as zero, since an owner that keeps going past the
// lease duration overlaps with the next owner.
func MustStop(lastRenewed, now time.Time, leaseDuration, margin time.Duration) bool {
	margin = max(margin, 0)
	return now.Sub(lastRenewed) >= leaseDuration-margin
}

// Tracker keeps one worker's observations of the leases of one group on one stream, so the
// coordinator can tell live owners from dead ones across its periodic lease reads.
//
// A Tracker is not safe for concurrent use: the coordinator goroutine that reads the leases
// owns it.
type Tracker struct {
	obs map[Key]Observation
}

// NewTracker returns a Tracker that has observed nothing.
func NewTracker() *Tracker {
	return &Tracker{obs: make(map[Key]Observation)}
}

// Observe records a full read of the leases (a List result) made at now. Leases missing from
// the list are forgotten, so a lease deleted and later created again starts a fresh clock
// instead of inheriting an old one, and the Tracker does not grow with shards that are gone.
func (t *Tracker) Observe(leases []Lease, now time.Time) {
	seen := make(map[Key]struct{}, len(leases))
	for _, l := range leases {
		k := l.Key()
		seen[k] = struct{}{}
		prev, known := t.obs[k]
		t.obs[k] = Observe(prev, known, l, now)
	}
	for k := range t.obs {
		if _, ok := seen[k]; !ok {
			delete(t.obs, k)
		}
	}
}

// Expired reports whether l's owner has shown no sign of life for leaseDuration. l is recorded
// as Observe would record it, so a lease never observed before is not expired (its clock starts
// now), and a lease whose values moved on since the last Observe is judged on what l shows.
func (t *Tracker) Expired(l Lease, now time.Time, leaseDuration time.Duration) bool {
	k := l.Key()
	prev, known := t.obs[k]
	o := Observe(prev, known, l, now)
	t.obs[k] = o
	return Expired(o, now, leaseDuration)
}

// Since is when this tracker first saw l with its current owner, generation and counter; false
// if its last observation of l's key shows other values, or none.
func (t *Tracker) Since(l Lease) (time.Time, bool) {
	o, ok := t.obs[l.Key()]
	if !ok || o.Owner != l.Owner || o.Generation != l.Generation || o.Counter != l.Counter {
		return time.Time{}, false
	}
	return o.Since, true
}

// Available reports whether this worker may take l: it is free or its owner has expired, and
// its shard is not finished (a lease at ShardEnd has nothing left to read; taking it would only
// churn the table).
func (t *Tracker) Available(l Lease, now time.Time, leaseDuration time.Duration) bool {
	expired := t.Expired(l, now, leaseDuration) // records l even when the answer is settled
	return l.Checkpoint != ShardEnd && (l.Free() || expired)
}

// NextExpiry returns the earliest time after now at which a lease owned by a worker other than
// self, observed unchanged since, becomes expired (Since + leaseDuration); false if none will.
// A coordinator syncs at that moment too, so that failover does not wait for its next periodic
// sync on top of the lease duration.
func (t *Tracker) NextExpiry(self string, now time.Time, leaseDuration time.Duration) (time.Time, bool) {
	return t.NextExpiryOf(func(owner string) bool { return owner != self }, now, leaseDuration)
}

// NextExpiryOf is NextExpiry over the leases of the owners watch selects (never free ones).
func (t *Tracker) NextExpiryOf(watch func(owner string) bool, now time.Time, leaseDuration time.Duration) (time.Time, bool) {
	var next time.Time
	found := false
	for _, o := range t.obs {
		if o.Owner == "" || !watch(o.Owner) {
			continue
		}
		if at := o.Since.Add(leaseDuration); at.After(now) && (!found || at.Before(next)) {
			next, found = at, true
		}
	}
	return next, found
}

// BeatsBehind is how many heartbeats behind its last one an owner's heartbeats stop vouching
// for its leases: the owner counts from the heartbeat BeatsBehind before its last that
// succeeded (HeartbeatStop), and the others from when they first saw that counter
// (HeartbeatSince). It is part of the lease table's protocol: every worker of a group must
// use the same value.
//
// Why not 0: the others read the members once per lease sync, so they first see a heartbeat
// up to a lease sync after it landed. Counting from a heartbeat BeatsBehind earlier, which
// they saw that much sooner, takes the read's delay out of a crash's failover when a lease
// sync is at most BeatsBehind heartbeat intervals (it is two at the defaults: LeaseSyncInterval
// is two heartbeat intervals). It costs the owner BeatsBehind heartbeat intervals of its own
// margin: it stops that much sooner when its heartbeats fail, unless it renews first (which
// then leaves its heartbeats out, Lease.Incarnation 0).
const BeatsBehind = 2

// BeatSince is the counter from which the heartbeats of a member whose last counter is last
// count: BeatsBehind below it, but at least 1, the counter of the Join.
func BeatSince(last int64) int64 { return max(last-BeatsBehind, 1) }

// Beat is a heartbeat (or the Join) of the current incarnation that succeeded: the counter it
// left and when it was sent, on the owner's clock.
type Beat struct {
	Counter int64
	Sent    time.Time
}

// HeartbeatStop is when an owner whose heartbeats succeeded as beats says (oldest first, of one
// incarnation, the last BeatsBehind+1 at least) must stop delivering the shards whose leases
// rely on them (Lease.Incarnation), unless another heartbeat succeeds first: stopAfter after
// sending the last heartbeat whose counter is at most BeatSince of the last counter. The
// others wait LeaseDuration (more than stopAfter) from when they first saw a counter at least
// that high, which came later than the sending of that heartbeat, so the owner has stopped
// by the time they may take over. The zero time when beats do not reach back to that
// heartbeat (or are empty): then the heartbeats vouch for nothing.
func HeartbeatStop(beats []Beat, stopAfter time.Duration) time.Time {
	if len(beats) == 0 {
		return time.Time{}
	}
	from := BeatSince(beats[len(beats)-1].Counter)
	var ref time.Time
	for _, b := range beats {
		if b.Counter <= from {
			ref = b.Sent
		}
	}
	if ref.IsZero() {
		return time.Time{}
	}
	return ref.Add(stopAfter)
}
