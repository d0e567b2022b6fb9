package memlog

import (
	"crypto/md5"
	"encoding/binary"
	"math/big"
	"math/bits"
)

// hashKey is a point of Kinesis's 128-bit hash key space, held as two words so routing a record
// costs an MD5 and a few compares, with no big.Int.
type hashKey struct{ hi, lo uint64 }

// maxHashKey is 2^128-1, the top of the key space.
var maxHashKey = hashKey{^uint64(0), ^uint64(0)}

func (a hashKey) cmp(b hashKey) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

// String is the decimal form AWS uses for StartingHashKey and EndingHashKey.
func (a hashKey) String() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return new(big.Int).SetBytes(b[:]).String()
}

// partitionHash is where Kinesis puts a partition key: the MD5 of its UTF-8 bytes read as a
// big-endian 128-bit integer.
func partitionHash(key string) hashKey {
	sum := md5.Sum([]byte(key))
	return hashKey{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])}
}

// parseHashKey reads an ExplicitHashKey: decimal digits, no sign, no leading zero, at most
// 2^128-1.
func parseHashKey(s string) (hashKey, bool) {
	if len(s) == 0 || len(s) > 39 || (len(s) > 1 && s[0] == '0') {
		return hashKey{}, false
	}
	var h hashKey
	for i := 0; i < len(s); i++ {
		d := uint64(s[i]) - '0'
		if d > 9 {
			return hashKey{}, false
		}
		carry, lo := bits.Mul64(h.lo, 10)
		over, hi := bits.Mul64(h.hi, 10)
		if over != 0 {
			return hashKey{}, false
		}
		hi, c := bits.Add64(hi, carry, 0)
		if c != 0 {
			return hashKey{}, false
		}
		lo, c = bits.Add64(lo, d, 0)
		hi, c = bits.Add64(hi, 0, c)
		if c != 0 {
			return hashKey{}, false
		}
		h = hashKey{hi, lo}
	}
	return h, true
}

// hashRange is the part of the hash key space a shard owns, both ends included.
type hashRange struct {
	start, end       hashKey
	startStr, endStr string // decimal, computed once for ListShards
}

func (r hashRange) contains(h hashKey) bool {
	return r.start.cmp(h) <= 0 && h.cmp(r.end) <= 0
}

// splitHashSpace divides the key space among n shards as Kinesis does for a new stream: each
// shard gets floor(2^128/n) keys and the last one also takes the remainder, ending at 2^128-1.
func splitHashSpace(n int) []hashRange {
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	step := new(big.Int).Div(space, big.NewInt(int64(n)))
	out := make([]hashRange, n)
	start := new(big.Int)
	for i := range out {
		end := new(big.Int).Add(start, step)
		if i == n-1 {
			end.Set(space)
		}
		end.Sub(end, big.NewInt(1))
		out[i] = hashRange{start: bigToKey(start), end: bigToKey(end), startStr: start.String(), endStr: end.String()}
		start = end.Add(end, big.NewInt(1))
	}
	return out
}

func bigToKey(b *big.Int) hashKey {
	var buf [16]byte
	b.FillBytes(buf[:])
	return hashKey{binary.BigEndian.Uint64(buf[:8]), binary.BigEndian.Uint64(buf[8:])}
}

// prev is the hash key just below a, which must not be 0.
func (a hashKey) prev() hashKey {
	lo, borrow := bits.Sub64(a.lo, 1, 0)
	return hashKey{a.hi - borrow, lo}
}

// next is the hash key just above a, which must not be 2^128-1.
func (a hashKey) next() hashKey {
	lo, carry := bits.Add64(a.lo, 1, 0)
	return hashKey{a.hi + carry, lo}
}

// newHashRange is the range [start, end], with its decimal forms.
func newHashRange(start, end hashKey) hashRange {
	return hashRange{start: start, end: end, startStr: start.String(), endStr: end.String()}
}
