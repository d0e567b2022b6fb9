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
