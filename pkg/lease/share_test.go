package lease_test

import (
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		name            string
		leases, workers int
		want            int
	}{
		{"zero leases", 0, 3, 0},
		{"negative leases", -1, 3, 0},
		{"zero leases, zero workers", 0, 0, 0},
		{"one worker takes all", 4, 1, 4},
		{"even split", 4, 2, 2},
		{"uneven rounds up", 5, 2, 3},
		{"one more than a multiple", 7, 3, 3},
		{"more workers than leases", 2, 5, 1},
		{"as many workers as leases", 3, 3, 1},
		{"zero workers treated as one", 4, 0, 4},
		{"negative workers treated as one", 4, -2, 4},
		{"many shards", 1000, 7, 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lease.Target(tc.leases, tc.workers); got != tc.want {
				t.Fatalf("Target(%d, %d) = %d, want %d", tc.leases, tc.workers, got, tc.want)
			}
		})
	}
}

// TestWorkers: who PlanShare counts for the shares, without membership.
func TestWorkers(t *testing.T) {
	all := func(lease.Lease) bool { return true }
	none := func(lease.Lease) bool { return false }
	notB := func(l lease.Lease) bool { return l.Owner != "b" }
	ls := []lease.Lease{
		owned("s0", "a", 1, 1),
		owned("s1", "b", 1, 1),
		owned("s2", "a", 1, 1),
		owned("s3", "", 2, 3),
		owned("s4", "c", 1, 1),
	}
	for _, tc := range []struct {
		name   string
		leases []lease.Lease
		self   string
		live   func(lease.Lease) bool
		want   int
	}{
		{"no leases: just self", nil, "me", all, 1},
		{"only free leases: just self", []lease.Lease{owned("s0", "", 0, 1)}, "me", all, 1},
		{"distinct owners plus self", ls, "me", all, 4},
		{"self already owns some: counted once", ls, "a", all, 3},
		{"dead owner not counted", ls, "me", notB, 3},
		{"nobody live: just self", ls, "me", none, 1},
		{"self's own expired leases still count self", ls, "a", none, 1},
		{"nil live counts every owner", ls, "me", nil, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lease.PlanShare(lease.ShareInput{Self: tc.self, Leases: tc.leases, Live: tc.live}).Workers; got != tc.want {
				t.Fatalf("Workers = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestFairShare: the target PlanShare sets from the workers it counts.
func TestFairShare(t *testing.T) {
	ls := []lease.Lease{
		owned("s0", "a", 1, 1), owned("s1", "a", 1, 1), owned("s2", "a", 1, 1),
		owned("s3", "a", 1, 1), owned("s4", "", 1, 1),
	}
	live := func(lease.Lease) bool { return true }
	// A newcomer next to one worker holding four of five leases should aim for three.
	if got := lease.PlanShare(lease.ShareInput{Self: "newcomer", Leases: ls, Live: live}).Target; got != 3 {
		t.Fatalf("newcomer's target = %d, want 3", got)
	}
	// The holder itself, alone, aims for all five.
	if got := lease.PlanShare(lease.ShareInput{Self: "a", Leases: ls, Live: live}).Target; got != 5 {
		t.Fatalf("sole worker's target = %d, want 5", got)
	}
}
