package shardmap

import (
	"bytes"
	"crypto/md5"
	"math/big"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Map is the open shards of a stream by hash key range. The zero Map knows no shard.
type Map struct {
	ranges []shardRange        // by start of range
	ids    map[string]struct{} // the ids of ranges, for Has
}

// shardRange is an open shard and the hash keys it takes, as 16-byte big-endian numbers.
type shardRange struct {
	id         string
	start, end [16]byte
}

// New maps the open shards among shards (those with no ending sequence number), leaving out
// any whose id or hash key range is missing or not a number of at most 128 bits.
func New(shards []types.Shard) Map {
	var m Map
	for _, s := range shards {
		if s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil {
			continue
		}
		if r, ok := parse(s); ok {
			m.ranges = append(m.ranges, r)
			if m.ids == nil {
				m.ids = map[string]struct{}{}
			}
			m.ids[r.id] = struct{}{}
		}
	}
	sort.Slice(m.ranges, func(i, j int) bool { return bytes.Compare(m.ranges[i].start[:], m.ranges[j].start[:]) < 0 })
	return m
}

func parse(s types.Shard) (shardRange, bool) {
	if s.ShardId == nil || s.HashKeyRange == nil || s.HashKeyRange.StartingHashKey == nil || s.HashKeyRange.EndingHashKey == nil {
		return shardRange{}, false
	}
	r := shardRange{id: *s.ShardId}
	for _, x := range []struct {
		dst *[16]byte
		src string
	}{{&r.start, *s.HashKeyRange.StartingHashKey}, {&r.end, *s.HashKeyRange.EndingHashKey}} {
		n, ok := new(big.Int).SetString(x.src, 10)
		if !ok || n.Sign() < 0 || n.BitLen() > 128 {
			return shardRange{}, false
		}
		n.FillBytes(x.dst[:])
	}
	return r, true
}

// Len is the number of shards mapped.
func (m Map) Len() int { return len(m.ranges) }

// Has reports whether shard id is mapped.
func (m Map) Has(id string) bool {
	_, ok := m.ids[id]
	return ok
}

// ShardOf is the mapped shard whose range holds key's hash key; false if none does (no map,
// or a gap in it).
func (m Map) ShardOf(key string) (string, bool) {
	if len(m.ranges) == 0 {
		return "", false
	}
	h := md5.Sum([]byte(key))
	i := sort.Search(len(m.ranges), func(i int) bool { return bytes.Compare(m.ranges[i].end[:], h[:]) >= 0 })
	if i == len(m.ranges) || bytes.Compare(m.ranges[i].start[:], h[:]) > 0 {
		return "", false
	}
	return m.ranges[i].id, true
}
