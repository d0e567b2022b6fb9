package memlog

import (
	"sort"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Records live in chunks of chunkSize so a shard grows without copying what it holds, and
// retention can drop old records a chunk at a time. The first chunk starts small and doubles, so
// a shard with few records costs little; later chunks are allocated whole.
const (
	chunkShift = 12
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
	firstChunk = 16
)

// record is one stored record. Its data and seq are never written after the record is appended,
// so readers may use them without the shard's lock.
type record struct {
	data    []byte // owned by the Log: a copy of what was put
	key     string // the partition key
	seq     string // the sequence number, formatted once at put time
	arrival int64  // ApproximateArrivalTimestamp, Unix milliseconds, never decreasing in a shard
}

// shard is one shard: an append-only run of records numbered by ordinal from 1.
//
// Resharding (reshard.go, plan.go) closes a shard: under its lock it sets closed and children, so a put
// that routed here before the close either lands before it or sees closed and routes again, and
// GetRecords ends the shard with ChildShards and no NextShardIterator. What ListShards shows of a
// shard (its EndingSequenceNumber, whether it has aged out) belongs to the stream's shardSet, so
// a listing is always one consistent moment. Retention (retention.go) raises trimHorizon and
// drops whole chunks from the front, advancing base; readers already start at trimHorizon.
type shard struct {
	index          int    // position in the stream; shard ids are never reused
	id             string // shardId-000000000000
	hashes         hashRange
	parent         string // ParentShardId; "" for a shard of a new stream
	adjacentParent string // AdjacentParentShardId; "" unless the shard came from a merge
	startSeq       string // StartingSequenceNumber (ordinal 0)
	created        int64  // Unix milliseconds, for the timestamp ShardFilters

	mu          sync.RWMutex
	chunks      [][]record // chunks[i][j] is ordinal base + i*chunkSize + j
	base        uint64     // ordinal of chunks[0][0]
	trimHorizon uint64     // oldest readable ordinal (>= base)
	last        uint64     // newest ordinal; 0 while empty
	lastArrival int64      // arrival of the newest record
	closed      bool
	children    []types.ChildShard // the shards that replaced this one once closed
	wake        chan struct{}      // closed by the next append or close; nil while no subscriber waits

	quota shardQuota // the shard's read and write buckets, used only with Config.Quotas
}

func newShard(index int, inc uint64, hashes hashRange, created int64) *shard {
	return &shard{
		index:       index,
		id:          shardID(index),
		hashes:      hashes,
		startSeq:    formatSeq(inc, uint64(index), 0),
		created:     created,
		base:        1,
		trimHorizon: 1,
	}
}

// shardID is the id of the shard at index i: "shardId-" and 12 digits.
func shardID(i int) string {
	s := strconv.Itoa(i)
	const pad = "000000000000"
	if len(s) < len(pad) {
		s = pad[len(s):] + s
	}
	return "shardId-" + s
}

// wakeLocked tells the SubscribeToShard subscriptions waiting on the shard that it has changed
// (records appended, or closed). It is a nil check unless one waits, so appends without
// subscribers pay nothing for them. The caller holds mu for writing.
func (s *shard) wakeLocked() {
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

// waitFrom returns nil if the shard holds a record at or after ordinal pos, or is closed, so a
// subscription there has something to send; otherwise a channel that the next append or close
// closes. Subscriptions share the channel, so any number of them cost an append one close.
func (s *shard) waitFrom(pos uint64) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || pos <= s.last {
		return nil
	}
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

// appendLocked stores r as the next ordinal. The caller holds mu for writing.
func (s *shard) appendLocked(r record) {
	off := s.last + 1 - s.base
	ci := int(off >> chunkShift)
	if ci == len(s.chunks) {
		size := chunkSize // a shard that filled a chunk will likely fill the next
		if ci == 0 {
			size = firstChunk
		}
		s.chunks = append(s.chunks, make([]record, 0, size))
	}
	c := s.chunks[ci]
	if len(c) == cap(c) {
		grown := make([]record, len(c), min(2*cap(c), chunkSize))
		copy(grown, c)
		c = grown
	}
	s.chunks[ci] = append(c, r)
	s.last++
}

// atLocked returns the record with ordinal ord, which must be in [base, last]. The caller holds
// mu.
func (s *shard) atLocked(ord uint64) *record {
	off := ord - s.base
	return &s.chunks[off>>chunkShift][off&chunkMask]
}

// arrivalLocked stamps a put: the clock's time, but never earlier than the shard's newest
// record, so arrival times are ordered like ordinals and AT_TIMESTAMP can binary-search them.
func (s *shard) arrivalLocked(nowMs int64) int64 {
	if nowMs < s.lastArrival {
		nowMs = s.lastArrival
	}
	s.lastArrival = nowMs
	return nowMs
}

// latest is where a LATEST iterator starts: just after the newest record.
func (s *shard) latest() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last + 1
}

// horizon is where a TRIM_HORIZON iterator starts: the oldest record not trimmed.
func (s *shard) horizon() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.trimHorizon
}

// newest is the shard's newest ordinal.
func (s *shard) newest() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last
}

// atTime is the first readable ordinal that arrived at or after unixNano (or last+1 if none).
func (s *shard) atTime(unixNano int64) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := int(s.last + 1 - s.trimHorizon)
	i := sort.Search(n, func(i int) bool {
		return s.atLocked(s.trimHorizon+uint64(i)).arrival*1e6 >= unixNano
	})
	return s.trimHorizon + uint64(i)
}

// view is what one GetRecords reads from a shard, taken under the read lock so the copying
// happens without it.
type view struct {
	from        uint64     // ordinal of the first record in segs
	count       int        // records in segs
	segs        [][]record // runs of consecutive records, from ordinal from on
	last        uint64     // the shard's newest ordinal
	nextArrival int64      // arrival of the record after segs, if there is one
	closed      bool
	children    []types.ChildShard
}

// read takes a view of up to limit records from ordinal pos on (or from the trim horizon, if pos
// has been trimmed away).
func (s *shard) read(pos uint64, limit int) view {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := view{from: max(pos, s.trimHorizon), last: s.last, closed: s.closed, children: s.children}
	if v.from > s.last {
		return v
	}
	n := min(s.last-v.from+1, uint64(limit))
	v.count = int(n)
	off := v.from - s.base
	for n > 0 {
		c := s.chunks[off>>chunkShift][off&chunkMask:]
		if uint64(len(c)) > n {
			c = c[:n]
		}
		v.segs = append(v.segs, c)
		off += uint64(len(c))
		n -= uint64(len(c))
	}
	if next := v.from + uint64(v.count); next <= s.last {
		v.nextArrival = s.atLocked(next).arrival
	}
	return v
}
