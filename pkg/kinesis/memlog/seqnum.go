package memlog

import (
	"errors"
	"strings"
)

// A sequence number is 56 decimal digits, like AWS's, made of fixed-width fields:
//
//	"49" | stream incarnation (14) | shard index (10) | record ordinal (20) | check (10)
//
// Fixed width and a leading "49" make the string order the numeric order, and within a shard
// only the ordinal changes, so numbers increase strictly with the ordinal. The incarnation (a
// per-Log counter of created streams) tells a number of a deleted-and-recreated stream from one
// of the live stream; the shard index tells which shard issued it; the check digits, a mix of the
// other fields, reject garbage and hand-edited numbers. Ordinal 0 is never a record: it is the
// shard's StartingSequenceNumber, just below the first record's (ordinal 1).
const (
	seqLen       = 56
	seqPrefix    = "49"
	seqIncDigits = 14
	seqShardDigs = 10
	seqOrdDigits = 20
	seqChkDigits = 10
	maxIncarnate = 99999999999999 // 14 digits
)

// seqNum is a parsed sequence number.
type seqNum struct {
	incarnation uint64
	shard       uint64
	ordinal     uint64
}

// appendSeq appends the sequence number of ordinal ord of shard shard of the stream incarnation
// inc.
func appendSeq(dst []byte, inc, shard, ord uint64) []byte {
	dst = append(dst, seqPrefix...)
	dst = appendPadded(dst, inc, seqIncDigits)
	dst = appendPadded(dst, shard, seqShardDigs)
	dst = appendPadded(dst, ord, seqOrdDigits)
	return appendPadded(dst, seqCheck(inc, shard, ord), seqChkDigits)
}

func formatSeq(inc, shard, ord uint64) string {
	var b [seqLen]byte
	return string(appendSeq(b[:0], inc, shard, ord))
}

// appendPadded appends v in exactly width decimal digits, zero-padded on the left.
func appendPadded(dst []byte, v uint64, width int) []byte {
	n := len(dst)
	for range width {
		dst = append(dst, '0')
	}
	for i := n + width - 1; i >= n && v > 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
	return dst
}

// seqCheck mixes the fields into check digits (splitmix64 finaliser), so a changed digit almost
// surely breaks the number.
func seqCheck(inc, shard, ord uint64) uint64 {
	x := inc*0x9e3779b97f4a7c15 ^ shard*0xbf58476d1ce4e5b9 ^ ord
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x % 10000000000
}

// parseSeq reads a sequence number this package issued; ok is false for anything else.
func parseSeq(s string) (seqNum, bool) {
	if len(s) != seqLen || !strings.HasPrefix(s, seqPrefix) {
		return seqNum{}, false
	}
	p := len(seqPrefix)
	var n seqNum
	var chk uint64
	var ok1, ok2, ok3, ok4 bool
	n.incarnation, ok1 = parseDigits(s[p : p+seqIncDigits])
	p += seqIncDigits
	n.shard, ok2 = parseDigits(s[p : p+seqShardDigs])
	p += seqShardDigs
	n.ordinal, ok3 = parseDigits(s[p : p+seqOrdDigits])
	p += seqOrdDigits
	chk, ok4 = parseDigits(s[p:])
	if !ok1 || !ok2 || !ok3 || !ok4 || chk != seqCheck(n.incarnation, n.shard, n.ordinal) {
		return seqNum{}, false
	}
	return n, true
}

// parseDigits reads an all-digit string into a uint64, failing on anything else or overflow.
func parseDigits(s string) (uint64, bool) {
	var v uint64
	for i := 0; i < len(s); i++ {
		d := uint64(s[i]) - '0'
		if d > 9 || v > (^uint64(0)-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// ErrNotSequenceNumber is returned by CompareSequenceNumbers for a string that is not a
// non-negative decimal integer.
var ErrNotSequenceNumber = errors.New("memlog: not a sequence number")

// CompareSequenceNumbers orders two Kinesis sequence numbers (this package's or AWS's) as the
// big integers they are, returning -1, 0 or +1. Checkpoint and watermark code needs this because
// sequence numbers vary in length and do not fit in 64 bits, so neither string nor integer
// comparison is right.
func CompareSequenceNumbers(a, b string) (int, error) {
	if !allDigits(a) || !allDigits(b) {
		return 0, ErrNotSequenceNumber
	}
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	switch {
	case len(a) < len(b):
		return -1, nil
	case len(a) > len(b):
		return 1, nil
	}
	return strings.Compare(a, b), nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
