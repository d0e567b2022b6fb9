package lease

import "sort"

// ShareInput is what a worker knows when it decides which leases to take: the group's leases on
// one stream, as just listed, and two judgements made from its own observations.
type ShareInput struct {
	// Self is the deciding worker.
	Self string
	// Leases are all of the group's leases on the stream.
	Leases []Lease
	// Live reports whether an owned lease's owner is alive (its counter moved within the lease
	// duration, on the decider's clock). Nil counts every owned lease as live.
	Live func(Lease) bool
	// Eligible reports whether a lease may be read now: its shard is still listed and its
	// parents are finished. Nil counts every lease as eligible.
	Eligible func(Lease) bool
	// Members are the live members of the group (MemberTracker.Live), owners of leases or
	// not. They count for the shares, so that a worker that has just joined is given its
	// share, and an owner that is a member gives its surplus away itself (SharePlan.Give)
	// instead of being asked lease by lease. Nil: only the owners of live leases and Self
	// count, and nobody gives.
	Members []string
}

// SharePlan is what a worker should do at one lease sync.
type SharePlan struct {
	// Workers is how many workers share the stream: live owners plus the decider.
	Workers int
	// Target is the decider's fair share: ceil(open leases / Workers).
	Target int
	// Held is how many open leases the decider owns.
	Held int
	// Take are free or expired leases to take now, in shard order; never more than bring
	// Held up to Target.
	Take []Lease
	// Steal, when set, is one lease of the most loaded live worker that the decider should
	// ask for (RequestHandoff): the decider stays below its target with nothing free, and the
	// victim holds at least two more than the decider will. A victim that is a member gives
	// instead, so it is never stolen from.
	Steal *Lease
	// Give are leases of the decider's that go to workers below their share, all at once: the
	// decider names the taker as the lease's pending owner (RequestHandoff with the taker) and
	// then hands the lease over, as for any request. Empty unless the decider is a member above
	// its quota and nothing is free or expired to take.
	Give []Grant
}

// Grant is a lease the decider gives to a worker below its share.
type Grant struct {
	Lease Lease
	To    string
}

// PlanShare decides which leases a worker takes and whether it asks another worker for one.
// It is pure: the same input gives the same plan.
//
// The rules: leases at ShardEnd do not count. Workers are the distinct live owners plus the
// decider, and each should hold ceil(open/workers). The decider takes free or expired
// eligible leases up to that target in one pass, never beyond it, so it never takes more
// than its share while another live worker is below it. When it is still below target and
// nothing is free, it asks the most loaded live worker for one lease, but only when that
// worker holds at least two more than the decider will: counts that differ by one are as even
// as they can be, and stealing there would only move the imbalance around. At most one request
// of the decider is pending at a time.
func PlanShare(in ShareInput) SharePlan {
	live := in.Live
	if live == nil {
		live = func(Lease) bool { return true }
	}
	eligible := in.Eligible
	if eligible == nil {
		eligible = func(Lease) bool { return true }
	}
	open := make([]Lease, 0, len(in.Leases))
	for _, l := range in.Leases {
		if l.Checkpoint != ShardEnd {
			open = append(open, l)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i].ShardID < open[j].ShardID })

	workers := workerSet(open, in.Self, live, in.Members)
	plan := SharePlan{Workers: len(workers)}
	plan.Target = Target(len(open), plan.Workers)
	pending := false
	for _, l := range open {
		if l.Owner == in.Self {
			plan.Held++
		}
		if l.PendingOwner == in.Self {
			pending = true
		}
	}
	for _, l := range open {
		if plan.Held+len(plan.Take) >= plan.Target {
			break
		}
		if l.Owner != in.Self && (l.Free() || !live(l)) && eligible(l) {
			plan.Take = append(plan.Take, l)
		}
	}
	will := plan.Held + len(plan.Take)
	members := make(map[string]bool, len(in.Members))
	for _, m := range in.Members {
		members[m] = true
	}
	if will < plan.Target && len(plan.Take) == 0 && !pending {
		plan.Steal = stealFrom(open, in.Self, will, func(l Lease) bool { return live(l) && !members[l.Owner] }, eligible)
	}
	if members[in.Self] {
		plan.Give = give(open, in.Self, workers, members, live, eligible)
	}
	return plan
}

// workerSet is every worker that counts for the shares: self, the owners of live leases and
// the live members.
func workerSet(open []Lease, self string, live func(Lease) bool, members []string) map[string]bool {
	set := map[string]bool{self: true}
	for _, l := range open {
		if !l.Free() && live(l) {
			set[l.Owner] = true
		}
	}
	for _, m := range members {
		set[m] = true
	}
	return set
}

// Quotas splits n leases among workers as evenly as counts allow: each gets n/len(workers),
// and the n%len(workers) workers holding the most now (ties to the smaller name) get one more,
// so that reaching the split moves as few leases as possible. held counts each worker's leases.
// It is pure, and every worker computes the same quotas from the same listing.
func Quotas(n int, workers []string, held map[string]int) map[string]int {
	quotas := make(map[string]int, len(workers))
	if len(workers) == 0 {
		return quotas
	}
	ranked := append([]string(nil), workers...)
	sort.Slice(ranked, func(i, j int) bool {
		if held[ranked[i]] != held[ranked[j]] {
			return held[ranked[i]] > held[ranked[j]]
		}
		return ranked[i] < ranked[j]
	})
	q, r := n/len(ranked), n%len(ranked)
	for i, w := range ranked {
		quotas[w] = q
		if i < r {
			quotas[w]++
		}
	}
	return quotas
}

// give decides which of self's leases go to which worker below its quota. It matches, in name
// order, every member above its quota with every worker below it, as every member computes it
// from the same listing, and returns self's part, so that two owners do not both fill the same
// gap. A lease already asked for counts for the worker that asked. Nothing is given while a
// free or expired lease is there to take: the workers below their quota take those first.
func give(open []Lease, self string, workers, members map[string]bool, live, eligible func(Lease) bool) []Grant {
	held := map[string]int{}
	giveable := map[string][]Lease{} // by owner, in shard order
	total := 0                       // the leases being read: free ones waiting for their parents do not count
	for _, l := range open {
		switch {
		case (l.Free() || !live(l)) && eligible(l):
			return nil
		case l.Free() || !live(l):
			continue
		case l.PendingOwner != "" && workers[l.PendingOwner]:
			held[l.PendingOwner]++
			total++
		default:
			held[l.Owner]++
			total++
			if eligible(l) && l.PendingOwner == "" {
				giveable[l.Owner] = append(giveable[l.Owner], l)
			}
		}
	}
	names := make([]string, 0, len(workers))
	for w := range workers {
		names = append(names, w)
	}
	sort.Strings(names)
	quotas := Quotas(total, names, held)
	var grants []Grant
	taker := 0
	for _, owner := range names {
		if !members[owner] {
			continue // not cooperating (an older version): a taker asks it instead
		}
		own := giveable[owner]
		for surplus := held[owner] - quotas[owner]; surplus > 0 && len(own) > 0; surplus-- {
			for taker < len(names) && held[names[taker]] >= quotas[names[taker]] {
				taker++
			}
			if taker == len(names) {
				return grants
			}
			l := own[len(own)-1]
			own = own[:len(own)-1]
			held[names[taker]]++
			if owner == self {
				grants = append(grants, Grant{Lease: l, To: names[taker]})
			}
		}
	}
	return grants
}

// stealFrom picks the lease to ask for: one of the most loaded live worker's (ties go to the
// smallest owner id), the last in shard order that is eligible and not already asked for.
func stealFrom(open []Lease, self string, will int, live, eligible func(Lease) bool) *Lease {
	counts := map[string]int{}
	for _, l := range open {
		if !l.Free() && l.Owner != self && live(l) {
			counts[l.Owner]++
		}
	}
	victim, most := "", 0
	for owner, n := range counts {
		if n > most || (n == most && owner < victim) {
			victim, most = owner, n
		}
	}
	if victim == "" || most-will < 2 {
		return nil
	}
	for i := len(open) - 1; i >= 0; i-- {
		l := open[i]
		if l.Owner == victim && l.PendingOwner == "" && eligible(l) {
			return &l
		}
	}
	return nil
}
