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
	ranges []shardRange // by start of range
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
	for dst, src := range map[*[16]byte]string{&r.start: *s.HashKeyRange.StartingHashKey, &r.end: *s.HashKeyRange.EndingHashKey} {
		n, ok := new(big.Int).SetString(src, 10)
		if !ok || n.Sign() < 0 || n.BitLen() > 128 {
			return shardRange{}, false
		}
		n.FillBytes(dst[:])
	}
	return r, true
}

// Len is the number of shards mapped.
func (m Map) Len() int { return len(m.ranges) }

// Has reports whether shard id is mapped.
func (m Map) Has(id string) bool {
	for _, r := range m.ranges {
		if r.id == id {
			return true
		}
	}
	return false
}

// ShardOf is the mapped shard whose range holds key's hash key; false if none does (no map,
// or a gap in it).
func (m Map) ShardOf(key string) (string, bool) {
	h := md5.Sum([]byte(key))
	i := sort.Search(len(m.ranges), func(i int) bool { return bytes.Compare(m.ranges[i].end[:], h[:]) >= 0 })
	if i == len(m.ranges) || bytes.Compare(m.ranges[i].start[:], h[:]) > 0 {
		return "", false
	}
	return m.ranges[i].id, true
}
