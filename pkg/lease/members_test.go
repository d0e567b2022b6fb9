package lease_test

import (
	"slices"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// TestMemberTracker: a member counts once its heartbeat has been seen to move (or its record
// appeared after the first read), until it has not moved for the freshness window on the
// observer's clock; one missing from a read is forgotten;
// Stale names those quiet for longer, with the counter last read.
func TestMemberTracker(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	const fresh = 6 * time.Second
	member := func(w string, c int64) lease.Member {
		return lease.Member{Group: "g", Stream: "s", Worker: w, Counter: c}
	}
	tr := lease.NewMemberTracker()
	steps := []struct {
		at        time.Duration
		read      []lease.Member
		wantLive  []string
		staleFor  time.Duration
		wantStale []string
	}{
		// Read once: not counted yet (a record left by a crashed worker looks the same).
		{at: 0, read: []lease.Member{member("a", 1), member("b", 7)}, wantLive: nil},
		{at: 2 * time.Second, read: []lease.Member{member("a", 2), member("b", 7)}, wantLive: []string{"a"}},
		{at: 4 * time.Second, read: []lease.Member{member("a", 3), member("b", 8)}, wantLive: []string{"a", "b"}},
		// b stops: counted out 6 s after its last move was seen.
		{at: 9 * time.Second, read: []lease.Member{member("a", 4), member("b", 8)}, wantLive: []string{"a", "b"}},
		{at: 10 * time.Second, read: []lease.Member{member("a", 5), member("b", 8)}, wantLive: []string{"a"},
			staleFor: 6 * time.Second, wantStale: []string{"b"}},
		// c joins: its record appeared since the last read, so it counts at once; b comes
		// back: counted again.
		{at: 12 * time.Second, read: []lease.Member{member("a", 6), member("b", 9), member("c", 1)}, wantLive: []string{"a", "b", "c"},
			staleFor: time.Second, wantStale: nil},
		{at: 14 * time.Second, read: []lease.Member{member("a", 7), member("b", 10), member("c", 2)}, wantLive: []string{"a", "b", "c"}},
		// a left (its record removed): forgotten.
		{at: 16 * time.Second, read: []lease.Member{member("b", 11), member("c", 3)}, wantLive: []string{"b", "c"}},
	}
	for _, st := range steps {
		now := t0.Add(st.at)
		tr.Observe(st.read, now)
		if got := tr.Live(now, fresh); !slices.Equal(got, st.wantLive) {
			t.Errorf("at %s: Live = %v, want %v", st.at, got, st.wantLive)
		}
		if st.staleFor == 0 {
			continue
		}
		var stale []string
		for _, m := range tr.Stale("g", "s", now, st.staleFor) {
			stale = append(stale, m.Worker)
			if m.Group != "g" || m.Stream != "s" {
				t.Errorf("at %s: Stale member %+v lacks the group and stream", st.at, m)
			}
		}
		if !slices.Equal(stale, st.wantStale) {
			t.Errorf("at %s: Stale(%s) = %v, want %v", st.at, st.staleFor, stale, st.wantStale)
		}
	}
}

// TestMemberTrackerQuiet: a member is quiet once the counter last read was first seen d ago,
// also when it was read only once; a heartbeat restarts the clock; a member missing from the
// last read is never quiet.
func TestMemberTrackerQuiet(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	const d = 1500 * time.Millisecond
	member := func(w string, c int64) lease.Member {
		return lease.Member{Group: "g", Stream: "s", Worker: w, Counter: c}
	}
	tr := lease.NewMemberTracker()
	tr.Observe([]lease.Member{member("a", 1), member("b", 1)}, t0)
	tr.Observe([]lease.Member{member("a", 1), member("b", 2)}, t0.Add(time.Second))
	steps := []struct {
		at        time.Duration
		worker    string
		wantQuiet bool
	}{
		{time.Second, "a", false},
		{1500 * time.Millisecond, "a", true}, // read once, never moved: quiet d after
		{2 * time.Second, "b", false},
		{2500 * time.Millisecond, "b", true},
		{time.Hour, "nobody", false},
	}
	for _, st := range steps {
		if got := tr.Quiet(st.worker, t0.Add(st.at), d); got != st.wantQuiet {
			t.Errorf("at %s: Quiet(%s) = %v, want %v", st.at, st.worker, got, st.wantQuiet)
		}
	}
	tr.Observe([]lease.Member{member("a", 2), member("b", 2)}, t0.Add(3*time.Second))
	if tr.Quiet("a", t0.Add(4*time.Second), d) {
		t.Error("a quiet 1 s after a heartbeat seen at 3 s")
	}
	tr.Observe([]lease.Member{member("b", 2)}, t0.Add(5*time.Second))
	if tr.Quiet("a", t0.Add(time.Hour), d) {
		t.Error("a quiet after its record was removed")
	}
}
