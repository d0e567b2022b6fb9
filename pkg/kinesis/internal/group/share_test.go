package group

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
		name                 string
		owners               []string
		ineligible           string // a shard id that is not eligible
		workers, quota, held int
		take, ask            string
	}{
		{name: "no leases", owners: nil, workers: 1, quota: 0},
		{name: "alone takes every free lease in one pass", owners: []string{"-", "-", "-", "-"}, workers: 1, quota: 4, take: "s00,s01,s02,s03"},
		{name: "second worker with nothing free asks for its whole share at once", owners: []string{"a", "a", "a", "a"}, workers: 2, quota: 2, ask: "s03,s02"},
		{name: "a pending request counts: asks for the rest only", owners: []string{"a", "a", "a", "a!"}, workers: 2, quota: 2, ask: "s02"},
		{name: "exactly at target: nothing to do", owners: []string{"me", "me", "a", "a"}, workers: 2, quota: 2, held: 2},
		{name: "alone with some held: takes the rest", owners: []string{"me", "me", "me", "-"}, workers: 1, quota: 4, held: 3, take: "s03"},
		{name: "above target: keeps what it has, takes nothing", owners: []string{"me", "me", "me", "a", "-"}, workers: 2, quota: 3, held: 3},
		// Which of the free ones: the worker's own order (takeOrder), reported in shard order.
		{name: "takes only up to target, asks for nothing while leases are free", owners: []string{"a", "-", "-", "-"}, workers: 2, quota: 2, take: "s02,s03"},
		{name: "more workers than shards", owners: []string{"a", "b"}, workers: 3, quota: 0},
		{name: "one more than me is even enough", owners: []string{"a", "a", "b", "b", "me"}, workers: 3, quota: 1, held: 1},
		{name: "a's surplus fills b's gap first (name order): me asks for nothing", owners: []string{"a", "a", "a", "b", "me"}, workers: 3, quota: 1, held: 1},
		{name: "3 workers, 4 shards, 2-2-0 becomes 2-1-1", owners: []string{"a", "a", "b", "b"}, workers: 3, quota: 1, ask: "s03"},
		{name: "an expired worker's leases are taken, it is not counted", owners: []string{"dead", "dead", "a", "a"}, workers: 2, quota: 2, take: "s00,s01"},
		{name: "closed shards do not count", owners: []string{"*", "*", "-", "a"}, workers: 2, quota: 1, take: "s02"},
		{name: "ineligible lease is skipped, and does not count", owners: []string{"-", "-"}, ineligible: "s00", workers: 1, quota: 1, take: "s01"},
		{name: "asks skip ineligible leases", owners: []string{"a", "a", "a"}, ineligible: "s02", workers: 2, quota: 1, ask: "s01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := planShare(shareInput{
				self: "me", leases: leases(tt.owners...), live: live,
				eligible: func(l lease.Lease) bool { return l.ShardID != tt.ineligible },
			})
			if plan.workers != tt.workers || plan.quota != tt.quota || plan.held != tt.held ||
				shardIDs(plan.take) != tt.take || shardIDs(plan.ask) != tt.ask {
				t.Errorf("got workers %d quota %d held %d take %q ask %q; want %d %d %d %q %q",
					plan.workers, plan.quota, plan.held, shardIDs(plan.take), shardIDs(plan.ask),
					tt.workers, tt.quota, tt.held, tt.take, tt.ask)
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
				plan := planShare(shareInput{self: self, leases: ls})
				changed := false
				for _, moved := range append(plan.take, plan.ask...) { // an ask is handed over at once
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
		got := quotas(tt.n, tt.workers, tt.held)
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
			plan := planShare(shareInput{
				self: tt.self, leases: ownedBy(tt.leases...), live: live, members: tt.members,
				eligible: func(l lease.Lease) bool { return l.ShardID != tt.ineligible },
				foreign:  func(owner string) bool { return owner == "kcl" },
			})
			if plan.workers != tt.workers || shardIDs(plan.ask) != tt.ask || shardIDs(plan.take) != tt.take || tt.quota != 0 && plan.quota != tt.quota {
				t.Errorf("got workers %d take %q ask %q quota %d; want %d %q %q %d",
					plan.workers, shardIDs(plan.take), shardIDs(plan.ask), plan.quota, tt.workers, tt.take, tt.ask, tt.quota)
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
				plan := planShare(shareInput{self: self, leases: ls, members: ids})
				if len(plan.take) > 0 {
					t.Fatalf("%d shards, %d workers, round %d: %s takes %q with nothing free", shards, workers, round, self, shardIDs(plan.take))
				}
				for _, a := range plan.ask {
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
		plan := planShare(shareInput{self: w, leases: ownedBy(free...), members: workers})
		if len(plan.take) != 10 {
			t.Fatalf("%s takes %d leases, want its target of 10", w, len(plan.take))
		}
		for _, l := range plan.take {
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
		plan := planShare(shareInput{self: w, leases: ownedBy(owners...), live: live,
			members: []string{"w0", "w1", "w2", "w3", "w4"}})
		for _, l := range plan.take {
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

// TestWorkers: who planShare counts for the shares, without membership.
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
			if got := planShare(shareInput{self: tc.self, leases: tc.leases, live: tc.live}).workers; got != tc.want {
				t.Fatalf("Workers = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestFairShare: the quota planShare sets from the workers it counts.
func TestFairShare(t *testing.T) {
	ls := []lease.Lease{
		owned("s0", "a", 1, 1), owned("s1", "a", 1, 1), owned("s2", "a", 1, 1),
		owned("s3", "a", 1, 1), owned("s4", "", 1, 1),
	}
	live := func(lease.Lease) bool { return true }
	// A newcomer next to one worker holding four of five leases aims for two: the holder,
	// which holds the most, keeps the one left over, so that as few leases as possible move.
	if got := planShare(shareInput{self: "newcomer", leases: ls, live: live}).quota; got != 2 {
		t.Fatalf("newcomer's quota = %d, want 2", got)
	}
	// The holder itself, alone, aims for all five.
	if got := planShare(shareInput{self: "a", leases: ls, live: live}).quota; got != 5 {
		t.Fatalf("sole worker's quota = %d, want 5", got)
	}
}

func owned(shard, owner string, gen, counter int64) lease.Lease {
	return lease.Lease{Group: "g", Stream: "s", ShardID: shard, Owner: owner, Generation: gen, Counter: counter}
}
