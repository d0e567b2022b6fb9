package shardmap_test

import (
	"crypto/md5"
	"math/big"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/shardmap"
)

func shard(id, start, end string, closed bool) types.Shard {
	s := types.Shard{ShardId: aws.String(id), HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(start), EndingHashKey: aws.String(end)},
		SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}}
	if closed {
		s.SequenceNumberRange.EndingSequenceNumber = aws.String("2")
	}
	return s
}

// hashOf is key's hash key, as Kinesis computes it.
func hashOf(key string) *big.Int {
	sum := md5.Sum([]byte(key))
	return new(big.Int).SetBytes(sum[:])
}

func TestShardOf(t *testing.T) {
	const max = "340282366920938463463374607431768211455" // 2^128 - 1
	const mid = "170141183460469231731687303715884105728" // 2^127
	below := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1)).String()
	// Keys on each side of 2^127.
	var low, high string
	for i := 0; low == "" || high == ""; i++ {
		k := string(rune('a'+i%26)) + string(rune('a'+i/26))
		if hashOf(k).Cmp(new(big.Int).Lsh(big.NewInt(1), 127)) < 0 {
			low = k
		} else {
			high = k
		}
	}
	for _, tc := range []struct {
		name      string
		shards    []types.Shard
		key, want string
		ok        bool
		len       int
		notHas    string // a shard id Has must not report
	}{
		{name: "no map", key: low, len: 0},
		{name: "one shard takes every key", shards: []types.Shard{shard("s0", "0", max, false)}, key: high, want: "s0", ok: true, len: 1},
		{name: "split: low half", shards: []types.Shard{shard("s2", mid, max, false), shard("s1", "0", below, false)}, key: low, want: "s1", ok: true, len: 2},
		{name: "split: high half", shards: []types.Shard{shard("s1", "0", below, false), shard("s2", mid, max, false)}, key: high, want: "s2", ok: true, len: 2},
		{name: "closed parent left out", shards: []types.Shard{shard("s0", "0", max, true), shard("s2", mid, max, false)}, key: low, len: 1, notHas: "s0"},
		{name: "gap before the first range", shards: []types.Shard{shard("s2", mid, max, false)}, key: low, len: 1},
		{name: "gap after the last range", shards: []types.Shard{shard("s1", "0", below, false)}, key: high, len: 1},
		{name: "gap between ranges", shards: []types.Shard{shard("s1", "0", "1", false), shard("s3", max, max, false)}, key: low, len: 2},
		{name: "unparsable range left out", shards: []types.Shard{shard("s0", "0", "x", false)}, key: low, len: 0, notHas: "s0"},
		{name: "negative range left out", shards: []types.Shard{shard("s0", "-1", max, false)}, key: low, len: 0, notHas: "s0"},
		{name: "over 128 bits left out", shards: []types.Shard{shard("s0", "0", max+"0", false)}, key: low, len: 0, notHas: "s0"},
		{name: "no range left out", shards: []types.Shard{{ShardId: aws.String("s0")}}, key: low, len: 0, notHas: "s0"},
		{name: "no id left out", shards: []types.Shard{{HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String("0"), EndingHashKey: aws.String(max)}}}, key: low, len: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := shardmap.New(tc.shards)
			got, ok := m.ShardOf(tc.key)
			if got != tc.want || ok != tc.ok || m.Len() != tc.len {
				t.Errorf("ShardOf(%q) = %q, %v with %d shards; want %q, %v with %d", tc.key, got, ok, m.Len(), tc.want, tc.ok, tc.len)
			}
			if tc.ok && !m.Has(tc.want) || m.Has("nope") || tc.notHas != "" && m.Has(tc.notHas) {
				t.Errorf("Has: %q mapped %v, \"nope\" %v, %q %v", tc.want, m.Has(tc.want), m.Has("nope"), tc.notHas, m.Has(tc.notHas))
			}
		})
	}
}
