package lease

import (
	"hash/fnv"
	"sort"
)

// ShareInput is what a worker knows when it decides which leases to take: the group's leases on
// one stream, as just listed, and the judgements it made from its own observations.
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
	// not. They count for the shares, so that workers that have just joined, and own nothing
	// yet, are counted by everyone: nobody takes, or asks for, the share of another. Nil: only
	// the owners of live leases and Self count.
	Members []string
	// Foreign reports whether an owner is a worker outside the group's protocol, that does not
	// answer RequestHandoff: a KCL worker on a KCL lease table (KCLStore; Lease.Foreign). Its
	// live leases count for the shares but are never asked for; they are taken only once they
	// expire. Nil: nobody is.
	Foreign func(owner string) bool
}

// SharePlan is what a worker should do at one lease sync.
type SharePlan struct {
	// Workers is how many workers share the stream: live owners, live members and the decider.
	Workers int
	// Target is the most the decider takes of free or expired leases: ceil(open leases /
	// Workers).
	Target int
	// Held is how many open leases the decider owns.
	Held int
	// Take are free or expired leases to take now, in shard order; never more than bring
	// Held up to Target.
	Take []Lease
	// Ask are leases of workers above their share that the decider should ask for
	// (RequestHandoff), all in this sync: as many as bring it to its quota (Quotas). Their
	// owners hand them over (checkpoint, then Handoff) when they see the requests.
	Ask []Lease
	// Quota is the decider's share (Quotas of the open leases, at most Target). A worker below
	// it with nothing to take or ask for yet (the leases it lacks are asked for by others,
	// say) should look again at its next lease sync.
	Quota int
}

// PlanShare decides which leases a worker takes and which it asks other workers for. It is
// pure: the same input gives the same plan.
//
// The rules: leases at ShardEnd do not count. Workers are the distinct live owners, the live
// members and the decider, and each takes free or expired eligible leases up to its quota
// (Quotas of the open leases, at most ceil(open/workers)) in one pass, in an order of its own
// (TakeOrder), so it never takes more than its share while another live worker is below it,
// and workers taking at once mostly take different leases. When nothing is free or expired, the leases being read are
// split by Quotas, and every worker below its quota asks the workers above theirs for the
// difference at once: the surpluses are matched with the gaps in name order, as every worker
// computes from the same listing, so two workers do not ask for the same lease, and a request
// already pending counts for the worker that made it. Counts that differ by one are as even as
// they can be: nobody asks then.
//
// The taker asks, rather than the owner giving: a worker that asks is alive when it does,
// while an owner judging others alive from their heartbeats may be a lease duration behind
// (after a store outage, say) and would give leases to a worker that has crashed.
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
	available := false
	for _, l := range open {
		if l.Owner == in.Self {
			plan.Held++
		}
		if l.Owner != in.Self && (l.Free() || !live(l)) && eligible(l) {
			available = true
		}
	}
	var candidates []Lease
	for _, l := range open {
		if l.Owner != in.Self && (l.Free() || !live(l)) && eligible(l) {
			candidates = append(candidates, l)
		}
	}
	// Up to this worker's quota, not Target: with every worker allowed ceil(open/workers),
	// the shares add up to more than there are leases, and the last to take came out short
	// (after a crash at 4,000 shards, one survivor ended with 84 while the others held 89).
	// Every worker computes the quotas from the same counts, so they add up to exactly the
	// open leases.
	held := map[string]int{}
	names := make([]string, 0, len(workers))
	for w := range workers {
		names = append(names, w)
	}
	sort.Strings(names)
	for _, l := range open {
		if !l.Free() && live(l) && workers[l.Owner] {
			held[l.Owner]++
		}
	}
	quotas := Quotas(len(open), names, held)
	plan.Quota = min(quotas[in.Self], plan.Target)
	// The candidates matched with this worker come first (matchTakes), then the rest in an
	// order of its own (TakeOrder): workers taking at the same moment (instances started
	// together, the survivors of a crash) take different leases where their listings agree,
	// and mostly different ones where they do not. With the order of its own alone, 873 of
	// 1,277 takes failed after 5 of 50 instances crashed in the scale run, and each failure
	// cost the lease a lease sync.
	matched := matchTakes(candidates, names, quotas, held, in.Self)
	sort.SliceStable(candidates, func(i, j int) bool {
		mi, mj := matched[candidates[i].ShardID], matched[candidates[j].ShardID]
		if mi != mj {
			return mi
		}
		return TakeOrder(in.Self, candidates[i].ShardID) < TakeOrder(in.Self, candidates[j].ShardID)
	})
	if room := plan.Quota - plan.Held; room < len(candidates) {
		candidates = candidates[:max(room, 0)]
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].ShardID < candidates[j].ShardID })
	plan.Take = candidates
	if !available {
		plan.Ask = asks(open, in.Self, workers, live, eligible, in.Foreign)
	}
	return plan
}

// matchTakes matches the candidates (in shard order) with the workers below their quota (in name
// order), each getting as many as it lacks, and returns the shards matched with self. It is
// what every worker computes from the same listing.
func matchTakes(candidates []Lease, names []string, quotas, held map[string]int, self string) map[string]bool {
	mine := map[string]bool{}
	next := 0
	for _, w := range names {
		for gap := quotas[w] - held[w]; gap > 0 && next < len(candidates); gap-- {
			if w == self {
				mine[candidates[next].ShardID] = true
			}
			next++
		}
	}
	return mine
}

// workerSet is every worker that counts for the shares: self, the owners of live leases and
// the live members. A worker whose leases have all expired is counted out (unless it is a live
// member), so its share goes to the rest; self is counted even before it owns anything, so that
// a new worker claims its share instead of waiting to be noticed.
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

// asks matches, in name order, every worker above its quota with every worker below it, and
// returns the leases self should ask for. The leases being read are the owned, live ones (a
// free lease waiting for its parents does not count); one already asked for counts for the
// worker that asked. An owner's leases go from the last in shard order, skipping ineligible
// ones, those already asked for, and all of a foreign owner's.
func asks(open []Lease, self string, workers map[string]bool, live, eligible func(Lease) bool, foreign func(string) bool) []Lease {
	held := map[string]int{}
	askable := map[string][]Lease{} // by owner, in shard order
	total := 0
	for _, l := range open {
		switch {
		case l.Free() || !live(l):
			continue
		case l.PendingOwner != "" && l.PendingOwner != l.Owner && workers[l.PendingOwner]:
			held[l.PendingOwner]++
		default:
			held[l.Owner]++
			if eligible(l) && l.PendingOwner == "" && (foreign == nil || !foreign(l.Owner)) {
				askable[l.Owner] = append(askable[l.Owner], l)
			}
		}
		total++
	}
	names := make([]string, 0, len(workers))
	for w := range workers {
		names = append(names, w)
	}
	sort.Strings(names)
	quotas := Quotas(total, names, held)
	var mine []Lease
	taker := 0
	for _, owner := range names {
		own := askable[owner]
		for surplus := held[owner] - quotas[owner]; surplus > 0 && len(own) > 0; surplus-- {
			for taker < len(names) && held[names[taker]] >= quotas[names[taker]] {
				taker++
			}
			if taker == len(names) {
				return mine
			}
			l := own[len(own)-1]
			own = own[:len(own)-1]
			held[names[taker]]++
			if names[taker] == self {
				mine = append(mine, l)
			}
		}
	}
	return mine
}

// TakeOrder ranks a shard among those worker may take or create: a hash of the worker and the
// shard, the same at every sync and different for every worker, so that workers acting on one
// listing at once mostly act on different leases.
func TakeOrder(self, shardID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(self))
	h.Write([]byte{0})
	h.Write([]byte(shardID))
	return h.Sum64()
}
