package memlog

import (
	"sort"
	"time"
)

// ExpireRecords does to the stream called name what Kinesis's retention period does as time
// passes: every record that arrived before `before` (by ApproximateArrivalTimestamp) is dropped
// from every shard, so TRIM_HORIZON moves past it and its memory is freed a chunk at a time. It
// returns how many records it dropped. A Log never expires records on its own; a test calls this
// with its clock's time minus the retention it models, e.g. ExpireRecords("s", now.Add(-24*time.Hour)).
//
// What follows is what AWS does once retention passes:
//   - GetShardIterator of type AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER for a dropped record
//     (an expired checkpoint) fails with InvalidArgumentException.
//   - GetRecords with an iterator into the dropped records reads on from the oldest one left.
//   - A closed shard whose records have all been dropped (or that closed empty before `before`)
//     has aged out: ListShards no longer lists it, and GetShardIterator, SplitShard and
//     MergeShards answer ResourceNotFoundException. Its shard id is not reused, children still
//     name it as their parent, and an iterator already issued for it keeps working until it
//     expires (GetRecords returns no records and its ChildShards), so nothing in flight breaks.
//
// It fails only with ResourceNotFoundException for a stream that does not exist.
func (l *Log) ExpireRecords(name string, before time.Time) (int, error) {
	l.mu.Lock() // a reshard must not publish a shard set built from the one replaced here
	defer l.mu.Unlock()
	st := l.lookup(name)
	if st == nil {
		return 0, l.errStreamNotFound(name)
	}
	cut := ceilMilli(before)
	set := st.shards.Load()
	dropped := 0
	var aged []int
	for i, sh := range set.all {
		s := set.state[i]
		if s.expired {
			continue
		}
		n, drained, empty := sh.expire(cut)
		dropped += n
		if !set.isOpen(i) && drained && (!empty || s.closed < cut) {
			aged = append(aged, i)
		}
	}
	if len(aged) > 0 {
		state := append([]shardState(nil), set.state...)
		for _, i := range aged {
			state[i].expired = true
		}
		st.shards.Store(&shardSet{all: set.all, open: set.open, state: state})
	}
	return dropped, nil
}

// expire drops the records that arrived before cut (Unix ms), reporting how many it dropped,
// whether none is left, and whether the shard never had any.
func (s *shard) expire(cut int64) (dropped int, drained, empty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int(s.last + 1 - s.trimHorizon)
	dropped = sort.Search(n, func(i int) bool { return s.atLocked(s.trimHorizon+uint64(i)).arrival >= cut })
	s.trimHorizon += uint64(dropped)
	// Whole chunks before the horizon go; a chunk is full before the next one starts, so the
	// first one spans exactly chunkSize ordinals from base.
	for len(s.chunks) > 0 && s.base+chunkSize <= s.trimHorizon {
		s.chunks[0] = nil // let the records go even while the slice's array lives on
		s.chunks = s.chunks[1:]
		s.base += chunkSize
	}
	return dropped, s.trimHorizon > s.last, s.last == 0
}

// ceilMilli is t in Unix milliseconds, rounded up, so "arrived (in whole ms) before t" is
// "arrival < ceilMilli(t)".
func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms
}
