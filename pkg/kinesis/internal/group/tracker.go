package group

import (
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// seen is a record another worker keeps moving (a lease, or a member record), as this worker
// observed it: its values, and when this worker first saw them, on its own clock.
//
// Whether another worker is alive is judged only from such observations, never from a time
// another machine wrote: a worker compares two readings of its own clock, taken when it first
// saw a value and now, as the KCL does. A record whose values stood still for a while on that
// clock has shown no sign of life for that while.
type seen struct {
	owner      string
	generation int64
	counter    int64
	since      time.Time // keep time.Now's monotonic reading: a wall-clock step expires nothing
}

// tracker is one worker's observations of a set of records across its reads of them, by key
// (a shard id, or a worker). The coordinator goroutine owns it.
type tracker map[string]seen

// observe folds a full read made at now into t: a record whose values are unchanged keeps its
// since, a new or changed one starts at now, and one missing from the read is forgotten (a
// lease deleted and created again starts a fresh clock, and t does not grow with shards gone).
func (t tracker) observe(read map[string]seen, now time.Time) {
	for k, v := range read {
		if prev, ok := t[k]; ok && prev.owner == v.owner && prev.generation == v.generation && prev.counter == v.counter {
			v.since = prev.since
		} else {
			v.since = now
		}
		t[k] = v
	}
	for k := range t {
		if _, ok := read[k]; !ok {
			delete(t, k)
		}
	}
}

// observeLeases is observe of a lease listing.
func (t tracker) observeLeases(list []lease.Lease, now time.Time) {
	read := make(map[string]seen, len(list))
	for _, l := range list {
		read[l.ShardID] = seen{owner: l.Owner, generation: l.Generation, counter: l.Counter}
	}
	t.observe(read, now)
}

// observeMembers is observe of a read of the member records.
func (t tracker) observeMembers(members []lease.Member, now time.Time) {
	read := make(map[string]seen, len(members))
	for _, m := range members {
		read[m.Worker] = seen{owner: m.Worker, counter: m.Counter}
	}
	t.observe(read, now)
}

// leaseSince is when this worker first saw l with its current owner, generation and counter;
// false if its last listing showed other values (l is newer: a write of its own), or none.
func (t tracker) leaseSince(l lease.Lease) (time.Time, bool) {
	o, ok := t[l.ShardID]
	if !ok || o.owner != l.Owner || o.generation != l.Generation || o.counter != l.Counter {
		return time.Time{}, false
	}
	return o.since, true
}

// still reports whether key's record, as last read, has not moved for at least d: false for a
// record the last read did not show.
func (t tracker) still(key string, now time.Time, d time.Duration) bool {
	o, ok := t[key]
	return ok && now.Sub(o.since) >= d
}
