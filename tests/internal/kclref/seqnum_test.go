package kclref_test

import (
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/kclref"
)

// A real Kinesis sequence number is a 56-digit decimal: far beyond int64,
// which is why the KCL compares them as big integers.
const (
	seqA = "49590338271490256608559692538361571095921575989136588898"
	seqB = "49590338271490256608559692540925702759324208523137515618"
)

func TestCompareOrder(t *testing.T) {
	// Ascending, as the KCL orders them.
	order := []kclref.ExtendedSequenceNumber{
		kclref.AtTimestamp,
		kclref.ESN(kclref.SentinelAtTimestamp, 1),
		kclref.TrimHorizon,
		kclref.Latest,
		kclref.ESN("0", 0),
		kclref.ESN("9", 0),
		kclref.ESN("10", 0),
		kclref.ESN(seqA, 0),
		kclref.ESN(seqA, 1),
		kclref.ESN(seqA, 2),
		kclref.ESN(seqB, 0),
		kclref.ShardEnd,
	}
	for i := range order {
		for j := range order {
			got, err := order[i].Compare(order[j])
			if err != nil {
				t.Fatalf("%v vs %v: %v", order[i], order[j], err)
			}
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func TestCompareEqualities(t *testing.T) {
	tests := []struct {
		name string
		a, b kclref.ExtendedSequenceNumber
	}{
		{"leading zeros are the same number", kclref.ESN("007", 3), kclref.ESN("7", 3)},
		{"two SHARD_ENDs ignore sub-sequence", kclref.ESN(kclref.SentinelShardEnd, 5), kclref.ShardEnd},
		{"same sentinel same sub", kclref.TrimHorizon, kclref.ESN(kclref.SentinelTrimHorizon, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := tt.a.Compare(tt.b); err != nil || c != 0 {
				t.Fatalf("Compare = %d, %v; want 0", c, err)
			}
		})
	}
}

func TestCompareRejectsInvalid(t *testing.T) {
	for _, bad := range []string{"", "12a", "-1", "latest", " 1", "1.0"} {
		if _, err := kclref.ESN(bad, 0).Compare(kclref.TrimHorizon); err == nil {
			t.Errorf("Compare(%q) accepted", bad)
		}
		if _, err := kclref.ShardEnd.Compare(kclref.ESN(bad, 0)); err == nil {
			t.Errorf("SHARD_END.Compare(%q) accepted: the KCL validates before its SHARD_END shortcut", bad)
		}
	}
}

func TestSentinelPredicates(t *testing.T) {
	for _, s := range []kclref.ExtendedSequenceNumber{kclref.TrimHorizon, kclref.Latest, kclref.ShardEnd, kclref.AtTimestamp} {
		if !s.IsSentinel() || s.IsNumeric() || !s.Valid() || s.SubSequenceNumber != 0 {
			t.Errorf("%v: sentinel predicates wrong", s)
		}
	}
	if kclref.ESN(seqA, 0).IsSentinel() || !kclref.ESN(seqA, 0).IsNumeric() {
		t.Error("a sequence number is numeric, not a sentinel")
	}
}
