package lease_test

import (
	"slices"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// TestMemberTracker: a member is live from its first read until its heartbeat has not moved
// for the lease duration on the observer's clock; one missing from a read is forgotten; Stale
// names those quiet for longer, with the counter last read.
func TestMemberTracker(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	const d = 10 * time.Second
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
		{at: 0, read: []lease.Member{member("a", 1), member("b", 7)}, wantLive: []string{"a", "b"}},
		// a beats, b does not: b expires 10 s after it was first seen.
		{at: 9 * time.Second, read: []lease.Member{member("a", 2), member("b", 7)}, wantLive: []string{"a", "b"}},
		{at: 10 * time.Second, read: []lease.Member{member("a", 3), member("b", 7)}, wantLive: []string{"a"},
			staleFor: 10 * time.Second, wantStale: []string{"b"}},
		// c joins: live at once; b comes back with a new counter: live again.
		{at: 15 * time.Second, read: []lease.Member{member("a", 4), member("b", 8), member("c", 1)}, wantLive: []string{"a", "b", "c"},
			staleFor: time.Second, wantStale: nil},
		// a left (its record removed): forgotten.
		{at: 16 * time.Second, read: []lease.Member{member("b", 8), member("c", 1)}, wantLive: []string{"b", "c"},
			staleFor: time.Second, wantStale: []string{"b", "c"}},
	}
	for _, st := range steps {
		now := t0.Add(st.at)
		tr.Observe(st.read, now)
		if got := tr.Live(now, d); !slices.Equal(got, st.wantLive) {
			t.Errorf("at %s: Live = %v, want %v", st.at, got, st.wantLive)
		}
		if st.staleFor == 0 {
			continue
		}
		var stale []string
		for _, m := range tr.Stale("g", "s", now, st.staleFor) {
			stale = append(stale, m.Worker)
			if want := member(m.Worker, 0); m.Group != want.Group || m.Stream != want.Stream {
				t.Errorf("at %s: Stale member %+v lacks the group and stream", st.at, m)
			}
		}
		if !slices.Equal(stale, st.wantStale) {
			t.Errorf("at %s: Stale(%s) = %v, want %v", st.at, st.staleFor, stale, st.wantStale)
		}
	}
}
