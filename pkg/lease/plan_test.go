package lease_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// leases builds a lease per owner letter: "" or "-" is free, "E" marks a lease whose owner is
// not live, "*" a lease at SHARD_END. Shards are named s00, s01, ...
func leases(owners ...string) []lease.Lease {
	out := make([]lease.Lease, len(owners))
	for i, o := range owners {
		l := lease.Lease{Group: "g", Stream: "s", ShardID: fmt.Sprintf("s%02d", i)}
		switch {
		case o == "-" || o == "":
		case o == "*":
			l.Checkpoint = lease.ShardEnd
		default:
			l.Owner = strings.TrimSuffix(o, "!")
			if strings.HasSuffix(o, "!") {
				l.PendingOwner = "me"
			}
		}
		out[i] = l
	}
	return out
}

func shardIDs(ls []lease.Lease) string {
	var ids []string
	for _, l := range ls {
		ids = append(ids, l.ShardID)
	}
	return strings.Join(ids, ",")
}

func TestPlanShare(t *testing.T) {
	dead := map[string]bool{"dead": true}
	live := func(l lease.Lease) bool { return !dead[l.Owner] }
	tests := []struct {
		name                  string
		owners                []string
		ineligible            string // a shard id that is not eligible
		workers, target, held int
		take, steal           string
	}{
		{name: "no leases", owners: nil, workers: 1, target: 0},
		{name: "alone takes every free lease in one pass", owners: []string{"-", "-", "-", "-"}, workers: 1, target: 4, take: "s00,s01,s02,s03"},
		{name: "second worker with nothing free asks the loaded one", owners: []string{"a", "a", "a", "a"}, workers: 2, target: 2, steal: "s03"},
		{name: "pending request: no second one", owners: []string{"a", "a", "a", "a!"}, workers: 2, target: 2},
		{name: "exactly at target: nothing to do", owners: []string{"me", "me", "a", "a"}, workers: 2, target: 2, held: 2},
		{name: "alone with some held: takes the rest", owners: []string{"me", "me", "me", "-"}, workers: 1, target: 4, held: 3, take: "s03"},
		{name: "above target: keeps what it has, takes nothing", owners: []string{"me", "me", "me", "a", "-"}, workers: 2, target: 3, held: 3},
		{name: "takes only up to target", owners: []string{"a", "-", "-", "-"}, workers: 2, target: 2, take: "s01,s02"},
		{name: "more workers than shards", owners: []string{"a", "b"}, workers: 3, target: 1},
		{name: "one more than me is even enough", owners: []string{"a", "a", "b", "b", "me"}, workers: 3, target: 2, held: 1},
		{name: "two more than me: steal", owners: []string{"a", "a", "a", "b", "me"}, workers: 3, target: 2, held: 1, steal: "s02"},
		{name: "3 workers, 4 shards, 2-2-0 becomes 2-1-1", owners: []string{"a", "a", "b", "b"}, workers: 3, target: 2, steal: "s01"},
		{name: "an expired worker's leases are taken, it is not counted", owners: []string{"dead", "dead", "a", "a"}, workers: 2, target: 2, take: "s00,s01"},
		{name: "closed shards do not count", owners: []string{"*", "*", "-", "a"}, workers: 2, target: 1, take: "s02"},
		{name: "ineligible lease is skipped", owners: []string{"-", "-"}, ineligible: "s00", workers: 1, target: 2, take: "s01"},
		{name: "steal skips ineligible leases", owners: []string{"a", "a", "a"}, ineligible: "s02", workers: 2, target: 2, steal: "s01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := lease.PlanShare(lease.ShareInput{
				Self: "me", Leases: leases(tt.owners...), Live: live,
				Eligible: func(l lease.Lease) bool { return l.ShardID != tt.ineligible },
			})
			steal := ""
			if plan.Steal != nil {
				steal = plan.Steal.ShardID
			}
			if plan.Workers != tt.workers || plan.Target != tt.target || plan.Held != tt.held ||
				shardIDs(plan.Take) != tt.take || steal != tt.steal {
				t.Errorf("got workers %d target %d held %d take %q steal %q; want %d %d %d %q %q",
					plan.Workers, plan.Target, plan.Held, shardIDs(plan.Take), steal,
					tt.workers, tt.target, tt.held, tt.take, tt.steal)
			}
		})
	}
}

// Simulate workers planning in turn with instant handoff: from any start they converge to an
// even spread (counts differ by at most one) and then stay put.
func TestPlanShareConverges(t *testing.T) {
	for _, shards := range []int{1, 4, 16} {
		for _, workers := range []int{1, 2, 3, 5} {
			owners := make([]string, shards)
			for i := range owners {
				owners[i] = "w0" // the first worker starts with everything
			}
			ls := leases(owners...)
			ids := make([]string, workers)
			for i := range ids {
				ids[i] = fmt.Sprintf("w%d", i)
			}
			stable := 0
			for round := 0; round < 100 && stable < workers; round++ {
				self := ids[round%workers]
				plan := lease.PlanShare(lease.ShareInput{Self: self, Leases: ls})
				changed := false
				for _, tk := range plan.Take {
					for i := range ls {
						if ls[i].ShardID == tk.ShardID {
							ls[i].Owner, changed = self, true
						}
					}
				}
				if plan.Steal != nil {
					for i := range ls {
						if ls[i].ShardID == plan.Steal.ShardID {
							ls[i].Owner, changed = self, true // handed over at once
						}
					}
				}
				if changed {
					stable = 0
				} else {
					stable++
				}
			}
			counts := map[string]int{}
			for _, l := range ls {
				counts[l.Owner]++
			}
			lo, hi := shards, 0
			for _, id := range ids {
				lo, hi = min(lo, counts[id]), max(hi, counts[id])
			}
			if hi-lo > 1 || stable < workers {
				t.Errorf("%d shards, %d workers: counts %v (stable rounds %d)", shards, workers, counts, stable)
			}
		}
	}
}
