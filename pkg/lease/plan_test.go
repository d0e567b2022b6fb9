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
		take, ask             string
	}{
		{name: "no leases", owners: nil, workers: 1, target: 0},
		{name: "alone takes every free lease in one pass", owners: []string{"-", "-", "-", "-"}, workers: 1, target: 4, take: "s00,s01,s02,s03"},
		{name: "second worker with nothing free asks for its whole share at once", owners: []string{"a", "a", "a", "a"}, workers: 2, target: 2, ask: "s03,s02"},
		{name: "a pending request counts: asks for the rest only", owners: []string{"a", "a", "a", "a!"}, workers: 2, target: 2, ask: "s02"},
		{name: "exactly at target: nothing to do", owners: []string{"me", "me", "a", "a"}, workers: 2, target: 2, held: 2},
		{name: "alone with some held: takes the rest", owners: []string{"me", "me", "me", "-"}, workers: 1, target: 4, held: 3, take: "s03"},
		{name: "above target: keeps what it has, takes nothing", owners: []string{"me", "me", "me", "a", "-"}, workers: 2, target: 3, held: 3},
		// Which of the free ones: the worker's own order (takeOrder), reported in shard order.
		{name: "takes only up to target, asks for nothing while leases are free", owners: []string{"a", "-", "-", "-"}, workers: 2, target: 2, take: "s02,s03"},
		{name: "more workers than shards", owners: []string{"a", "b"}, workers: 3, target: 1},
		{name: "one more than me is even enough", owners: []string{"a", "a", "b", "b", "me"}, workers: 3, target: 2, held: 1},
		{name: "a's surplus fills b's gap first (name order): me asks for nothing", owners: []string{"a", "a", "a", "b", "me"}, workers: 3, target: 2, held: 1},
		{name: "3 workers, 4 shards, 2-2-0 becomes 2-1-1", owners: []string{"a", "a", "b", "b"}, workers: 3, target: 2, ask: "s03"},
		{name: "an expired worker's leases are taken, it is not counted", owners: []string{"dead", "dead", "a", "a"}, workers: 2, target: 2, take: "s00,s01"},
		{name: "closed shards do not count", owners: []string{"*", "*", "-", "a"}, workers: 2, target: 1, take: "s02"},
		{name: "ineligible lease is skipped", owners: []string{"-", "-"}, ineligible: "s00", workers: 1, target: 2, take: "s01"},
		{name: "asks skip ineligible leases", owners: []string{"a", "a", "a"}, ineligible: "s02", workers: 2, target: 2, ask: "s01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := lease.PlanShare(lease.ShareInput{
				Self: "me", Leases: leases(tt.owners...), Live: live,
				Eligible: func(l lease.Lease) bool { return l.ShardID != tt.ineligible },
			})
			if plan.Workers != tt.workers || plan.Target != tt.target || plan.Held != tt.held ||
				shardIDs(plan.Take) != tt.take || shardIDs(plan.Ask) != tt.ask {
				t.Errorf("got workers %d target %d held %d take %q ask %q; want %d %d %d %q %q",
					plan.Workers, plan.Target, plan.Held, shardIDs(plan.Take), shardIDs(plan.Ask),
					tt.workers, tt.target, tt.held, tt.take, tt.ask)
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
				for _, moved := range append(plan.Take, plan.Ask...) { // an ask is handed over at once
					for i := range ls {
						if ls[i].ShardID == moved.ShardID {
							ls[i].Owner, changed = self, true
						}
					}
				}
				if changed {
					stable = 0
				} else {
					stable++
				}
			}
			if !even(ls, ids) || stable < workers {
				t.Errorf("%d shards, %d workers: counts %v (stable rounds %d)", shards, workers, countOwners(ls), stable)
			}
		}
	}
}

func TestQuotas(t *testing.T) {
	tests := []struct {
		n       int
		workers []string
		held    map[string]int
		want    map[string]int
	}{
		{n: 0, workers: []string{"a"}, want: map[string]int{"a": 0}},
		{n: 4, workers: []string{"a", "b"}, want: map[string]int{"a": 2, "b": 2}},
		// The one left over goes to the worker holding the most, so nothing moves to reach it.
		{n: 5, workers: []string{"a", "b"}, held: map[string]int{"b": 3, "a": 2}, want: map[string]int{"a": 2, "b": 3}},
		// Ties go to the smaller name.
		{n: 5, workers: []string{"b", "a"}, want: map[string]int{"a": 3, "b": 2}},
		{n: 10, workers: []string{"a", "b", "c", "d"}, held: map[string]int{"a": 10}, want: map[string]int{"a": 3, "b": 3, "c": 2, "d": 2}},
		{n: 2, workers: []string{"a", "b", "c"}, held: map[string]int{"c": 1, "b": 1}, want: map[string]int{"a": 0, "b": 1, "c": 1}},
		{n: 3, workers: nil, want: map[string]int{}},
	}
	for _, tt := range tests {
		got := lease.Quotas(tt.n, tt.workers, tt.held)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Quotas(%d, %v, %v) = %v, want %v", tt.n, tt.workers, tt.held, got, tt.want)
		}
	}
}

// ownedBy builds leases from "owner" or "owner>pending" strings ("-" free, "dead" expired).
func ownedBy(specs ...string) []lease.Lease {
	out := make([]lease.Lease, len(specs))
	for i, sp := range specs {
		l := lease.Lease{Group: "g", Stream: "s", ShardID: fmt.Sprintf("s%02d", i)}
		if sp != "-" {
			l.Owner, l.PendingOwner, _ = strings.Cut(sp, ">")
		}
		out[i] = l
	}
	return out
}

func TestPlanShareAsk(t *testing.T) {
	live := func(l lease.Lease) bool { return l.Owner != "dead" }
	tests := []struct {
		name       string
		self       string
		leases     []string
		members    []string
		ineligible string
		workers    int
		take, ask  string
		quota      int // checked when not 0
	}{
		{name: "a newcomer asks for its whole share at once",
			self: "b", leases: []string{"a", "a", "a", "a"}, members: []string{"a", "b"}, workers: 2, ask: "s03,s02"},
		{name: "two newcomers: b's part (gaps are filled in name order)",
			self: "b", leases: []string{"a", "a", "a", "a", "a", "a"}, members: []string{"a", "b", "c"}, workers: 3, ask: "s05,s04"},
		{name: "two newcomers: c's part, other leases than b's",
			self: "c", leases: []string{"a", "a", "a", "a", "a", "a"}, members: []string{"a", "b", "c"}, workers: 3, ask: "s03,s02"},
		{name: "without membership the other newcomer is not counted: c asks for more",
			self: "c", leases: []string{"a", "a", "a", "a", "a", "a"}, members: nil, workers: 2, ask: "s05,s04,s03"},
		{name: "two owners above their share fill one gap: one lease from each",
			self: "c", leases: []string{"a", "a", "a", "b", "b", "b"}, members: []string{"a", "b", "c"}, workers: 3, ask: "s02,s05"},
		{name: "even already: nothing asked",
			self: "c", leases: []string{"a", "a", "b", "b", "c"}, members: []string{"a", "b", "c"}, workers: 3, quota: 1},
		{name: "even once the requests pending land: nothing more asked",
			self: "c", leases: []string{"a", "a>c", "b", "b", "c"}, members: []string{"a", "b", "c"}, workers: 3, quota: 1},
		{name: "uneven between others: nothing for c to do, at its quota",
			self: "c", leases: []string{"a", "a", "a", "b", "c", "c"}, members: []string{"a", "b", "c"}, workers: 3, quota: 2},
		{name: "requests pending for b make it the one above its quota: c asks b",
			self: "c", leases: []string{"a", "a>b", "a>b", "a", "b", "b"}, members: []string{"a", "b", "c"}, workers: 3, quota: 2, ask: "s05,s04"},
		{name: "leases already asked for by another newcomer count for it",
			self: "c", leases: []string{"a", "a", "a", "a>b", "a>b", "a"}, members: []string{"a", "b", "c"}, workers: 3, ask: "s05,s02"},
		{name: "free leases are taken first, not asked for",
			self: "b", leases: []string{"a", "a", "a", "-"}, members: []string{"a", "b"}, workers: 2, take: "s03"},
		{name: "expired leases are taken first, not asked for",
			self: "b", leases: []string{"a", "a", "a", "dead"}, members: []string{"a", "b"}, workers: 2, take: "s03"},
		{name: "a free lease waiting for its parents neither holds asking up nor counts",
			self: "b", leases: []string{"a", "a", "a", "a", "-"}, ineligible: "s04", members: []string{"a", "b"}, workers: 2, ask: "s03,s02"},
		{name: "an ineligible lease is not asked for",
			self: "b", leases: []string{"a", "a", "a", "a"}, ineligible: "s03", members: []string{"a", "b"}, workers: 2, ask: "s02,s01"},
		{name: "an owner that is not a member, foreign unknown, is asked too",
			self: "b", leases: []string{"a", "a", "a", "a"}, members: []string{"b"}, workers: 2, ask: "s03,s02"},
		{name: "a foreign owner (a KCL worker) counts but is never asked",
			self: "b", leases: []string{"kcl", "kcl", "kcl", "kcl"}, members: []string{"b"}, workers: 2},
		{name: "with a foreign owner above its share, members ask only members",
			self: "c", leases: []string{"kcl", "kcl", "kcl", "kcl", "a", "a"}, members: []string{"a", "c"}, workers: 3, quota: 2},
		{name: "a member above its share is asked beside a foreign owner",
			self: "c", leases: []string{"kcl", "kcl", "a", "a", "a", "a"}, members: []string{"a", "c"}, workers: 3, ask: "s05,s04"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := lease.PlanShare(lease.ShareInput{
				Self: tt.self, Leases: ownedBy(tt.leases...), Live: live, Members: tt.members,
				Eligible: func(l lease.Lease) bool { return l.ShardID != tt.ineligible },
				Foreign:  func(owner string) bool { return owner == "kcl" },
			})
			if plan.Workers != tt.workers || shardIDs(plan.Ask) != tt.ask || shardIDs(plan.Take) != tt.take || tt.quota != 0 && plan.Quota != tt.quota {
				t.Errorf("got workers %d take %q ask %q quota %d; want %d %q %q %d",
					plan.Workers, shardIDs(plan.Take), shardIDs(plan.Ask), plan.Quota, tt.workers, tt.take, tt.ask, tt.quota)
			}
		})
	}
}

// Members joining a group that one of them holds entirely: each newcomer asks for its share at
// its first turn (handoffs land at once), so the spread is even once every newcomer has had
// one turn, and stays so.
func TestPlanShareAskConverges(t *testing.T) {
	for _, shards := range []int{1, 7, 16, 100} {
		for _, workers := range []int{2, 3, 5, 50} {
			ids := make([]string, workers)
			for i := range ids {
				ids[i] = fmt.Sprintf("w%02d", i)
			}
			specs := make([]string, shards)
			for i := range specs {
				specs[i] = ids[0]
			}
			ls := ownedBy(specs...)
			for round := 0; round < 2*workers; round++ {
				self := ids[round%workers]
				plan := lease.PlanShare(lease.ShareInput{Self: self, Leases: ls, Members: ids})
				if len(plan.Take) > 0 {
					t.Fatalf("%d shards, %d workers, round %d: %s takes %q with nothing free", shards, workers, round, self, shardIDs(plan.Take))
				}
				for _, a := range plan.Ask {
					for i := range ls {
						if ls[i].ShardID == a.ShardID {
							ls[i].Owner = self
						}
					}
				}
				if round == workers-1 && !even(ls, ids) {
					t.Errorf("%d shards, %d workers: not even after every newcomer's first turn: %v", shards, workers, countOwners(ls))
				}
			}
			if !even(ls, ids) {
				t.Errorf("%d shards, %d workers: counts %v", shards, workers, countOwners(ls))
			}
		}
	}
}

func countOwners(ls []lease.Lease) map[string]int {
	counts := map[string]int{}
	for _, l := range ls {
		counts[l.Owner]++
	}
	return counts
}

func even(ls []lease.Lease, ids []string) bool {
	counts := countOwners(ls)
	lo, hi := len(ls), 0
	for _, id := range ids {
		lo, hi = min(lo, counts[id]), max(hi, counts[id])
	}
	return hi-lo <= 1
}

// Workers that plan from the same listing at once go through the free leases in orders of their
// own, so that most of their takes are of different leases: 10 workers, 100 free leases, 10
// each. In shard order all ten would take the same 10 leases and 90 takes would fail.
func TestPlanShareTakersSpread(t *testing.T) {
	free := make([]string, 100)
	for i := range free {
		free[i] = "-"
	}
	var workers []string
	for i := range 10 {
		workers = append(workers, fmt.Sprintf("w%02d", i))
	}
	picked := map[string]int{}
	for _, w := range workers {
		plan := lease.PlanShare(lease.ShareInput{Self: w, Leases: ownedBy(free...), Members: workers})
		if len(plan.Take) != 10 {
			t.Fatalf("%s takes %d leases, want its target of 10", w, len(plan.Take))
		}
		for _, l := range plan.Take {
			picked[l.ShardID]++
		}
	}
	// From the same listing they are matched with different leases (independent random
	// picks would cover 100 × (1 − 0.9^10) ≈ 65).
	t.Logf("10 workers taking 10 of 100 free leases each picked %d different leases", len(picked))
	if len(picked) != 100 {
		t.Errorf("10 workers taking 10 of 100 free leases each picked only %d different leases, want all 100", len(picked))
	}
}

// The survivors of a crash, from the same listing, take the dead worker's leases without two
// of them taking the same one, each up to its quota.
func TestPlanShareSurvivorsTakeDifferentLeases(t *testing.T) {
	owners := []string{}
	for i := range 5 {
		for range 4 {
			owners = append(owners, fmt.Sprintf("w%d", i))
		}
	}
	for i := range owners {
		if i%5 == 0 {
			owners[i] = "dead"
		}
	}
	live := func(l lease.Lease) bool { return l.Owner != "dead" }
	picked := map[string]string{}
	for i := range 5 {
		w := fmt.Sprintf("w%d", i)
		plan := lease.PlanShare(lease.ShareInput{Self: w, Leases: ownedBy(owners...), Live: live,
			Members: []string{"w0", "w1", "w2", "w3", "w4"}})
		for _, l := range plan.Take {
			if other, dup := picked[l.ShardID]; dup {
				t.Errorf("%s and %s both take %s", other, w, l.ShardID)
			}
			picked[l.ShardID] = w
		}
	}
	if len(picked) != 4 {
		t.Errorf("the survivors took %d of the dead worker's 4 leases: %v", len(picked), picked)
	}
}
