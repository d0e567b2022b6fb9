package lease_test

import (
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// t0 is a fixed reading of "our" clock; tests move it forward with Add.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

const leaseDur = 10 * time.Second

func owned(shard, owner string, gen, counter int64) lease.Lease {
	return lease.Lease{Group: "g", Stream: "s", ShardID: shard, Owner: owner, Generation: gen, Counter: counter}
}

func TestObserve(t *testing.T) {
	prev := lease.Observation{Owner: "a", Generation: 1, Counter: 5, Since: t0}
	now := t0.Add(3 * time.Second)
	fresh := func(l lease.Lease) lease.Observation {
		return lease.Observation{Owner: l.Owner, Generation: l.Generation, Counter: l.Counter, Since: now}
	}
	for _, tc := range []struct {
		name  string
		known bool
		l     lease.Lease
		keeps bool
	}{
		{"unchanged keeps the old since", true, owned("x", "a", 1, 5), true},
		{"counter changed by one write", true, owned("x", "a", 1, 6), false},
		{"counter went back (lease recreated)", true, owned("x", "a", 1, 4), false},
		{"owner changed, same counter", true, owned("x", "b", 1, 5), false},
		{"generation changed, same owner and counter", true, owned("x", "a", 2, 5), false},
		{"released: free now", true, owned("x", "", 2, 6), false},
		{"not known: clock starts now", false, owned("x", "a", 1, 5), false},
		{"not known, zero values", false, lease.Lease{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lease.Observe(prev, tc.known, tc.l, now)
			want := fresh(tc.l)
			if tc.keeps {
				want = prev
			}
			if got != want {
				t.Fatalf("Observe = %+v, want %+v", got, want)
			}
		})
	}
}

func TestExpired(t *testing.T) {
	obs := lease.Observation{Owner: "a", Generation: 1, Counter: 5, Since: t0}
	free := lease.Observation{Generation: 2, Counter: 6, Since: t0}
	for _, tc := range []struct {
		name string
		obs  lease.Observation
		now  time.Time
		d    time.Duration
		want bool
	}{
		{"just seen", obs, t0, leaseDur, false},
		{"one nanosecond short", obs, t0.Add(leaseDur - 1), leaseDur, false},
		{"exactly the duration", obs, t0.Add(leaseDur), leaseDur, true},
		{"long past", obs, t0.Add(time.Hour), leaseDur, true},
		{"free is never expired", free, t0.Add(time.Hour), leaseDur, false},
		{"now before since (clock read out of order)", obs, t0.Add(-time.Second), leaseDur, false},
		{"zero duration expires at once", obs, t0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lease.Expired(tc.obs, tc.now, tc.d); got != tc.want {
				t.Fatalf("Expired = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestExpiredUsesMonotonicClock: two readings of one process's clock are compared on the
// monotonic clock, so stripping the wall part of one reading (as a wall-clock step would make
// it disagree) does not change the answer as long as both carry monotonic readings.
func TestExpiredUsesMonotonicClock(t *testing.T) {
	since := time.Now()
	obs := lease.Observation{Owner: "a", Counter: 1, Since: since}
	if lease.Expired(obs, since.Add(leaseDur-time.Millisecond), leaseDur) {
		t.Fatal("expired before the duration")
	}
	if !lease.Expired(obs, since.Add(leaseDur), leaseDur) {
		t.Fatal("not expired at the duration")
	}
}

func TestMustStop(t *testing.T) {
	const margin = 2 * time.Second
	for _, tc := range []struct {
		name   string
		now    time.Time
		d, mgn time.Duration
		want   bool
	}{
		{"just renewed", t0, leaseDur, margin, false},
		{"short of duration minus margin", t0.Add(leaseDur - margin - 1), leaseDur, margin, false},
		{"exactly duration minus margin", t0.Add(leaseDur - margin), leaseDur, margin, true},
		{"past the duration", t0.Add(leaseDur), leaseDur, margin, true},
		{"no margin stops at the duration", t0.Add(leaseDur), leaseDur, 0, true},
		{"no margin, just before", t0.Add(leaseDur - 1), leaseDur, 0, false},
		{"negative margin treated as zero", t0.Add(leaseDur), leaseDur, -time.Second, true},
		{"margin as large as the duration stops at once", t0, leaseDur, leaseDur, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lease.MustStop(t0, tc.now, tc.d, tc.mgn); got != tc.want {
				t.Fatalf("MustStop = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMustStopBeforeOthersMayTake: with any positive margin, the owner stops strictly before
// another worker, who can have started its clock no earlier than the owner's last renew, may
// judge the lease expired.
func TestMustStopBeforeOthersMayTake(t *testing.T) {
	tr := lease.NewTracker()
	l := owned("x", "a", 1, 7)
	renewed := t0                    // the owner read its clock before sending the renew
	tr.Observe([]lease.Lease{l}, t0) // the earliest another worker can see that renew
	for now := t0; now.Before(t0.Add(2 * leaseDur)); now = now.Add(100 * time.Millisecond) {
		if tr.Expired(l, now, leaseDur) && !lease.MustStop(renewed, now, leaseDur, time.Second) {
			t.Fatalf("at +%v another worker may take the lease but the owner has not stopped", now.Sub(t0))
		}
	}
}

func TestTrackerExpired(t *testing.T) {
	l := owned("x", "a", 1, 5)
	for _, tc := range []struct {
		name  string
		steps func(tr *lease.Tracker) bool // returns Expired at the end
		want  bool
	}{
		{"never observed: clock starts now", func(tr *lease.Tracker) bool {
			return tr.Expired(l, t0.Add(time.Hour), leaseDur)
		}, false},
		{"first asked, then unchanged for the duration", func(tr *lease.Tracker) bool {
			tr.Expired(l, t0, leaseDur)
			return tr.Expired(l, t0.Add(leaseDur), leaseDur)
		}, true},
		{"unchanged across lists for the duration", func(tr *lease.Tracker) bool {
			tr.Observe([]lease.Lease{l}, t0)
			tr.Observe([]lease.Lease{l}, t0.Add(5*time.Second))
			return tr.Expired(l, t0.Add(leaseDur), leaseDur)
		}, true},
		{"one short of the duration", func(tr *lease.Tracker) bool {
			tr.Observe([]lease.Lease{l}, t0)
			return tr.Expired(l, t0.Add(leaseDur-1), leaseDur)
		}, false},
		{"renewed midway restarts the clock", func(tr *lease.Tracker) bool {
			tr.Observe([]lease.Lease{l}, t0)
			tr.Observe([]lease.Lease{owned("x", "a", 1, 6)}, t0.Add(5*time.Second))
			return tr.Expired(owned("x", "a", 1, 6), t0.Add(leaseDur), leaseDur)
		}, false},
		{"asked with a newer lease than last listed", func(tr *lease.Tracker) bool {
			tr.Observe([]lease.Lease{l}, t0)
			return tr.Expired(owned("x", "a", 1, 6), t0.Add(leaseDur), leaseDur)
		}, false},
		{"taken by another with the same counter", func(tr *lease.Tracker) bool {
			tr.Observe([]lease.Lease{l}, t0)
			return tr.Expired(owned("x", "b", 2, 5), t0.Add(leaseDur), leaseDur)
		}, false},
		{"forgotten when missing from a list, then back", func(tr *lease.Tracker) bool {
			tr.Observe([]lease.Lease{l}, t0)
			tr.Observe(nil, t0.Add(5*time.Second))
			tr.Observe([]lease.Lease{l}, t0.Add(6*time.Second))
			return tr.Expired(l, t0.Add(leaseDur), leaseDur)
		}, false},
		{"other leases do not disturb this one", func(tr *lease.Tracker) bool {
			tr.Observe([]lease.Lease{l, owned("y", "b", 1, 1)}, t0)
			tr.Observe([]lease.Lease{l, owned("y", "b", 1, 2)}, t0.Add(5*time.Second))
			return tr.Expired(l, t0.Add(leaseDur), leaseDur)
		}, true},
		{"free lease is not expired", func(tr *lease.Tracker) bool {
			free := owned("x", "", 2, 6)
			tr.Observe([]lease.Lease{free}, t0)
			return tr.Expired(free, t0.Add(time.Hour), leaseDur)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.steps(lease.NewTracker()); got != tc.want {
				t.Fatalf("Expired = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTrackerAvailable(t *testing.T) {
	ownedL := owned("x", "a", 1, 5)
	free := owned("x", "", 2, 6)
	endedFree := free
	endedFree.Checkpoint = lease.ShardEnd
	endedOwned := ownedL
	endedOwned.Checkpoint = lease.ShardEnd
	later := t0.Add(leaseDur)
	for _, tc := range []struct {
		name string
		l    lease.Lease
		now  time.Time
		want bool
	}{
		{"free", free, t0, true},
		{"owned and live", ownedL, t0.Add(leaseDur - 1), false},
		{"owned and expired", ownedL, later, true},
		{"free at SHARD_END", endedFree, later, false},
		{"expired at SHARD_END", endedOwned, later, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := lease.NewTracker()
			tr.Observe([]lease.Lease{tc.l}, t0)
			if got := tr.Available(tc.l, tc.now, leaseDur); got != tc.want {
				t.Fatalf("Available = %v, want %v", got, tc.want)
			}
		})
	}
	// A lease first seen owned is not available however late: nobody has timed it yet.
	if lease.NewTracker().Available(ownedL, t0.Add(time.Hour), leaseDur) {
		t.Fatal("a never-observed owned lease is available")
	}
}

func TestTrackerNextExpiry(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := lease.NewTracker()
	tr.Observe([]lease.Lease{
		{Group: "g", Stream: "s", ShardID: "a", Owner: "other", Counter: 1},
		{Group: "g", Stream: "s", ShardID: "b", Owner: "me", Counter: 1},
		{Group: "g", Stream: "s", ShardID: "c"},
	}, t0)
	tr.Observe([]lease.Lease{
		{Group: "g", Stream: "s", ShardID: "a", Owner: "other", Counter: 1},
		{Group: "g", Stream: "s", ShardID: "b", Owner: "me", Counter: 1},
		{Group: "g", Stream: "s", ShardID: "c"},
		{Group: "g", Stream: "s", ShardID: "d", Owner: "third", Counter: 7},
	}, t0.Add(3*time.Second))
	at, ok := tr.NextExpiry("me", t0.Add(4*time.Second), 10*time.Second)
	if !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("NextExpiry = %v %v; want the other worker's lease at t0+10s (own and free leases do not count)", at, ok)
	}
	if _, ok := tr.NextExpiry("me", t0.Add(20*time.Second), 10*time.Second); ok {
		t.Fatal("every lease already expired: nothing is next")
	}
}
