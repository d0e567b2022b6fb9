package kclref

import (
	"fmt"
	"math/big"
)

// Sentinel checkpoint names, as the KCL's SentinelCheckpoint enum declares
// them (in this declaration order). They are stored verbatim in the
// checkpoint attribute, with a sub-sequence number of 0.
const (
	SentinelTrimHorizon = "TRIM_HORIZON"
	SentinelLatest      = "LATEST"
	SentinelShardEnd    = "SHARD_END"
	SentinelAtTimestamp = "AT_TIMESTAMP"
)

// ExtendedSequenceNumber is the KCL's two-part position: a Kinesis record's
// sequence number (or a sentinel name) plus the index of a user record inside
// a KPL aggregate (0 for a plain record and for sentinels).
type ExtendedSequenceNumber struct {
	SequenceNumber    string
	SubSequenceNumber int64
}

// The sentinel positions, each with sub-sequence 0 as the KCL's constants
// ExtendedSequenceNumber.TRIM_HORIZON etc. carry.
var (
	TrimHorizon = ExtendedSequenceNumber{SequenceNumber: SentinelTrimHorizon}
	Latest      = ExtendedSequenceNumber{SequenceNumber: SentinelLatest}
	ShardEnd    = ExtendedSequenceNumber{SequenceNumber: SentinelShardEnd}
	AtTimestamp = ExtendedSequenceNumber{SequenceNumber: SentinelAtTimestamp}
)

// ESN is shorthand for an ExtendedSequenceNumber literal.
func ESN(seq string, sub int64) ExtendedSequenceNumber {
	return ExtendedSequenceNumber{SequenceNumber: seq, SubSequenceNumber: sub}
}

// IsSentinel reports whether the sequence number is one of the four sentinel
// names (the sub-sequence number is not looked at, as in the KCL).
func (e ExtendedSequenceNumber) IsSentinel() bool {
	switch e.SequenceNumber {
	case SentinelTrimHorizon, SentinelLatest, SentinelShardEnd, SentinelAtTimestamp:
		return true
	}
	return false
}

// IsShardEnd reports whether this is the SHARD_END sentinel.
func (e ExtendedSequenceNumber) IsShardEnd() bool { return e.SequenceNumber == SentinelShardEnd }

// IsNumeric reports whether the sequence number is a non-empty string of
// digits, which is what the KCL's comparison accepts besides sentinels. (The
// KCL's check is Character.isDigit, which also admits non-ASCII digits;
// Kinesis never produces those, so ASCII is modelled.)
func (e ExtendedSequenceNumber) IsNumeric() bool { return isDigits(e.SequenceNumber) }

func isDigits(s string) bool {
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

// Valid reports whether the KCL could compare this position at all: digits
// or a sentinel name. Anything else makes its compareTo throw.
func (e ExtendedSequenceNumber) Valid() bool { return e.IsNumeric() || e.IsSentinel() }

// rank maps the sentinels below every sequence number, as the KCL's
// bigIntegerValue does: AT_TIMESTAMP -3 < TRIM_HORIZON -2 < LATEST -1 < any
// sequence number (which are >= 0). SHARD_END is handled before ranking.
func (e ExtendedSequenceNumber) rank() *big.Int {
	switch e.SequenceNumber {
	case SentinelAtTimestamp:
		return big.NewInt(-3)
	case SentinelTrimHorizon:
		return big.NewInt(-2)
	case SentinelLatest:
		return big.NewInt(-1)
	}
	n, _ := new(big.Int).SetString(e.SequenceNumber, 10)
	return n
}

// Compare orders two positions exactly as the KCL's
// ExtendedSequenceNumber.compareTo does, returning -1, 0 or +1:
//
//   - either side neither digits nor a sentinel: error (the KCL throws);
//   - SHARD_END is greater than everything else, and two SHARD_ENDs are equal
//     whatever their sub-sequence numbers;
//   - otherwise AT_TIMESTAMP < TRIM_HORIZON < LATEST < every sequence number,
//     sequence numbers compare as big integers (so "007" equals "7"), and on a
//     tie the sub-sequence numbers decide (so a sentinel with sub-sequence 1
//     is after the same sentinel with 0).
func (e ExtendedSequenceNumber) Compare(o ExtendedSequenceNumber) (int, error) {
	if !e.Valid() || !o.Valid() {
		return 0, fmt.Errorf("cannot compare %q and %q: a sequence number must be digits or a sentinel",
			e.SequenceNumber, o.SequenceNumber)
	}
	switch {
	case e.IsShardEnd() && o.IsShardEnd():
		return 0, nil
	case o.IsShardEnd():
		return -1, nil
	case e.IsShardEnd():
		return 1, nil
	}
	if c := e.rank().Cmp(o.rank()); c != 0 {
		return c, nil
	}
	switch {
	case e.SubSequenceNumber < o.SubSequenceNumber:
		return -1, nil
	case e.SubSequenceNumber > o.SubSequenceNumber:
		return 1, nil
	}
	return 0, nil
}

// String formats the position as "seq/sub" for test messages.
func (e ExtendedSequenceNumber) String() string {
	return fmt.Sprintf("%s/%d", e.SequenceNumber, e.SubSequenceNumber)
}
