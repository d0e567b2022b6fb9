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
	// victim holds at least two more than the decider will.
	Steal *Lease
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

	plan := SharePlan{Workers: Workers(open, in.Self, live)}
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
	if will < plan.Target && len(plan.Take) == 0 && !pending {
		plan.Steal = stealFrom(open, in.Self, will, live, eligible)
	}
	return plan
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
