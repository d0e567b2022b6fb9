package group

import (
	"hash/fnv"
	"slices"
	"sort"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// shareInput is what a worker knows when it decides which leases to take and ask for: the
// group's leases on one stream, as listed, and the judgements it made from its own
// observations.
type shareInput struct {
	self   string
	leases []lease.Lease
	// live reports whether another worker's lease is alive: its counter has not been seen
	// standing still for LeaseDuration. Nil counts every owned lease as live; self's own
	// always are.
	live func(lease.Lease) bool
	// eligible reports whether a lease may be read now (its shard is listed, its parents are
	// finished). Nil counts every lease as eligible.
	eligible func(lease.Lease) bool
	// members are the live members of the group, owners of leases or not, so that a worker
	// that has just started is counted by everyone before it owns anything. Nil: only the
	// owners of live leases and self count.
	members []string
	// foreign reports whether an owner works outside the group's protocol (a KCL worker on a
	// KCL lease table, lease.Lease.Foreign): its live leases count, but are never asked for.
	foreign func(owner string) bool
}

// sharePlan is what a worker should do about its share at one lease sync.
type sharePlan struct {
	workers int // live owners, live members and self
	held    int // open leases self owns
	quota   int // self's share of the open leases (quotas)
	// take are free or expired leases to take now, in shard order: never more than bring held
	// up to quota.
	take []lease.Lease
	// ask are leases of workers above their quota to ask for (RequestHandoff) when nothing is
	// free or expired: as many as bring self to its quota, all in one sync.
	ask []lease.Lease
}

// planShare decides which leases a worker takes and which it asks other workers for. It is
// pure: every worker computes the same quotas from the same listing.
//
// Leases at ShardEnd do not count, nor do free ones that may not be read yet (a child whose
// parents are still being read): counted, they left every worker below its quota, listing the
// leases at every sync, for as long as the parents took. The workers are self, the owners of live leases and the
// live members; the open leases are split among them by quotas. A worker takes free or expired
// eligible leases up to its quota, the ones matched with it first (every worker matches the
// candidates with the workers below their quota in name order, from the same listing), then in
// an order of its own (takeOrder): workers taking at the same moment (started together, the
// survivors of a crash) take different leases where their listings agree, and mostly
// different ones where they do not. With nothing free or expired, it asks the workers above
// their quota for what it lacks (asks). The taker asks, rather than the owner giving: a worker
// that asks is alive when it does, while an owner judging others alive from their heartbeats
// may be a lease duration behind and give shards to a worker that has crashed.
func planShare(in shareInput) sharePlan {
	live := func(l lease.Lease) bool { return l.Owner == in.self || in.live == nil || in.live(l) }
	eligible := in.eligible
	if eligible == nil {
		eligible = func(lease.Lease) bool { return true }
	}
	var open, candidates []lease.Lease
	workers := map[string]bool{in.self: true}
	for _, m := range in.members {
		workers[m] = true
	}
	held := map[string]int{}
	for _, l := range in.leases {
		switch {
		case l.Checkpoint == lease.ShardEnd, l.Free() && !eligible(l):
			continue // not read, and not to be read now: a free lease waiting for its parents
		case !l.Free() && live(l):
			workers[l.Owner] = true
			held[l.Owner]++
		case l.Owner != in.self && eligible(l):
			candidates = append(candidates, l) // free, or expired
		}
		open = append(open, l)
	}
	sortByShard(open)
	sortByShard(candidates)
	names := sortedKeys(workers)
	quotas := quotas(len(open), names, held)
	plan := sharePlan{workers: len(names), held: held[in.self], quota: quotas[in.self]}
	matched := matchTakes(candidates, names, quotas, held, in.self)
	sort.SliceStable(candidates, func(i, j int) bool {
		mi, mj := matched[candidates[i].ShardID], matched[candidates[j].ShardID]
		if mi != mj {
			return mi
		}
		return takeOrder(in.self, candidates[i].ShardID) < takeOrder(in.self, candidates[j].ShardID)
	})
	plan.take = candidates[:min(max(plan.quota-plan.held, 0), len(candidates))]
	sortByShard(plan.take)
	if len(candidates) == 0 {
		plan.ask = asks(open, in.self, names, live, eligible, in.foreign)
	}
	return plan
}

// matchTakes matches the candidates (in shard order) with the workers below their quota (in name
// order), each getting as many as it lacks, and returns the shards matched with self.
func matchTakes(candidates []lease.Lease, names []string, quotas, held map[string]int, self string) map[string]bool {
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

// quotas splits n leases among workers as evenly as counts allow: each gets n/len(workers), and
// the n%len(workers) workers holding the most now (ties to the smaller name) get one more, so
// that reaching the split moves as few leases as possible. The quotas add up to n.
func quotas(n int, workers []string, held map[string]int) map[string]int {
	q := make(map[string]int, len(workers))
	if len(workers) == 0 {
		return q
	}
	ranked := slices.Clone(workers)
	sort.SliceStable(ranked, func(i, j int) bool {
		if held[ranked[i]] != held[ranked[j]] {
			return held[ranked[i]] > held[ranked[j]]
		}
		return ranked[i] < ranked[j]
	})
	each, extra := n/len(ranked), n%len(ranked)
	for i, w := range ranked {
		q[w] = each
		if i < extra {
			q[w]++
		}
	}
	return q
}

// asks matches, in name order, every worker above its quota with every worker below it, and
// returns the leases self should ask for. The leases being read are the owned, live ones; one
// already asked for counts for the worker that asked. An owner's leases go from the last in
// shard order, skipping ineligible ones, those already asked for, and all of a foreign owner's.
func asks(open []lease.Lease, self string, names []string, live, eligible func(lease.Lease) bool, foreign func(string) bool) []lease.Lease {
	held := map[string]int{}
	askable := map[string][]lease.Lease{} // by owner, in shard order
	total := 0
	for _, l := range open {
		switch {
		case l.Free() || !live(l):
			continue
		case l.PendingOwner != "" && l.PendingOwner != l.Owner && slices.Contains(names, l.PendingOwner):
			held[l.PendingOwner]++
		default:
			held[l.Owner]++
			if eligible(l) && l.PendingOwner == "" && (foreign == nil || !foreign(l.Owner)) {
				askable[l.Owner] = append(askable[l.Owner], l)
			}
		}
		total++
	}
	q := quotas(total, names, held)
	var mine []lease.Lease
	taker := 0
	for _, owner := range names {
		own := askable[owner]
		for surplus := held[owner] - q[owner]; surplus > 0 && len(own) > 0; surplus-- {
			for taker < len(names) && held[names[taker]] >= q[names[taker]] {
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

// takeOrder ranks a shard among those worker may take or create: a hash of the worker and the
// shard, the same at every sync and different for every worker, so that workers acting on one
// listing at once mostly act on different leases.
func takeOrder(self, shardID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(self))
	h.Write([]byte{0})
	h.Write([]byte(shardID))
	return h.Sum64()
}

func sortByShard(ls []lease.Lease) {
	sort.Slice(ls, func(i, j int) bool { return ls[i].ShardID < ls[j].ShardID })
}
