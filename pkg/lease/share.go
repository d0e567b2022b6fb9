package lease

// Target is how many leases one worker should hold so that workers share leases evenly:
// ceil(leases/workers). Rounding up means that every lease has a worker even when the division
// is not exact; one worker too many is better than a shard nobody reads.
//
// It is 0 when there are no leases. workers < 1 is treated as 1, because the worker asking is
// always one of them. The caller decides which leases count (normally those not at ShardEnd).
func Target(leases, workers int) int {
	if leases <= 0 {
		return 0
	}
	workers = max(workers, 1)
	return (leases + workers - 1) / workers
}

// Workers counts the workers sharing the leases: the distinct owners of owned leases that live
// reports as alive, plus self. A worker whose leases have all expired is counted out, so its
// share goes to the rest; self is counted even before it owns anything, so that a new worker
// claims its share instead of waiting to be noticed, and only once when it already owns leases.
// A nil live counts every owned lease as alive.
func Workers(leases []Lease, self string, live func(Lease) bool) int {
	owners := map[string]struct{}{self: {}}
	for _, l := range leases {
		if l.Free() || (live != nil && !live(l)) {
			continue
		}
		owners[l.Owner] = struct{}{}
	}
	return len(owners)
}
