package group

import (
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// t0 is a fixed reading of "our" clock; tests move it forward with Add.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// A listing keeps the clock of a lease whose owner, generation and counter did not move, and
// starts it again for any move; a lease missing from a listing is forgotten.
func TestTrackerObserveLeases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		next  lease.Lease
		since time.Time // the zero time: not known with these values
	}{
		{"unchanged keeps its first sighting", owned("x", "a", 1, 5), t0},
		{"counter moved by a renewal", owned("x", "a", 1, 6), at(3 * time.Second)},
		{"counter went back (lease created again)", owned("x", "a", 1, 4), at(3 * time.Second)},
		{"owner changed, same counter", owned("x", "b", 1, 5), at(3 * time.Second)},
		{"generation changed, same owner and counter", owned("x", "a", 2, 5), at(3 * time.Second)},
		{"released", owned("x", "", 2, 6), at(3 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := tracker{}
			tr.observeLeases([]lease.Lease{owned("x", "a", 1, 5), owned("gone", "b", 1, 1)}, t0)
			tr.observeLeases([]lease.Lease{tc.next}, at(3*time.Second))
			if got, ok := tr.leaseSince(tc.next); !ok || !got.Equal(tc.since) {
				t.Errorf("leaseSince = %v %v, want %v", got, ok, tc.since)
			}
			if _, ok := tr["gone"]; ok {
				t.Error("a lease missing from the listing is still tracked")
			}
		})
	}
	tr := tracker{}
	tr.observeLeases([]lease.Lease{owned("x", "a", 1, 5)}, t0)
	if _, ok := tr.leaseSince(owned("x", "a", 1, 6)); ok {
		t.Error("leaseSince of values the listing did not show (a write of this worker's own) is known")
	}
	if !tr.still("x", at(10*time.Second), 10*time.Second) || tr.still("x", at(9*time.Second), 10*time.Second) || tr.still("y", at(time.Hour), 0) {
		t.Error("still: want true from since+d on, false before, and false for a record not read")
	}
}

// A member record's clock runs from the first read that showed its counter; a record that
// appears counts from that read, like one that moved.
func TestTrackerObserveMembers(t *testing.T) {
	tr := tracker{}
	tr.observeMembers([]lease.Member{{Worker: "a", Counter: 3}, {Worker: "b", Counter: 7}}, t0)
	tr.observeMembers([]lease.Member{{Worker: "a", Counter: 4}, {Worker: "b", Counter: 7}, {Worker: "c", Counter: 1}}, at(2*time.Second))
	for w, since := range map[string]time.Time{"a": at(2 * time.Second), "b": t0, "c": at(2 * time.Second)} {
		if got := tr[w].since; !got.Equal(since) {
			t.Errorf("%s since %v, want %v", w, got, since)
		}
	}
}
