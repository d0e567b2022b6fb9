package memlog_test

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// keySpace is 2^128, one past the largest hash key.
var keySpace = new(big.Int).Lsh(big.NewInt(1), 128)

// bigOf reads a decimal hash key; -1 if it is not one, which every range check then fails.
func bigOf(s *string) *big.Int {
	b, ok := new(big.Int).SetString(aws.ToString(s), 10)
	if !ok {
		return big.NewInt(-1)
	}
	return b
}

func split(t testing.TB, l *memlog.Log, stream, shard string, at *big.Int) {
	t.Helper()
	if _, err := l.SplitShard(ctx, &awskinesis.SplitShardInput{StreamName: aws.String(stream),
		ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(at.String())}); err != nil {
		t.Fatalf("SplitShard(%s at %s): %v", shard, at, err)
	}
}

func merge(t testing.TB, l *memlog.Log, stream, shard, adjacent string) {
	t.Helper()
	if _, err := l.MergeShards(ctx, &awskinesis.MergeShardsInput{StreamName: aws.String(stream),
		ShardToMerge: aws.String(shard), AdjacentShardToMerge: aws.String(adjacent)}); err != nil {
		t.Fatalf("MergeShards(%s, %s): %v", shard, adjacent, err)
	}
}

func rescale(t testing.TB, l *memlog.Log, stream string, n int32) *awskinesis.UpdateShardCountOutput {
	t.Helper()
	out, err := l.UpdateShardCount(ctx, &awskinesis.UpdateShardCountInput{StreamName: aws.String(stream),
		TargetShardCount: aws.Int32(n), ScalingType: types.ScalingTypeUniformScaling})
	if err != nil {
		t.Fatalf("UpdateShardCount(%s, %d): %v", stream, n, err)
	}
	return out
}

// listShards pages through ListShards with filter (nil for none).
func listShards(t testing.TB, l *memlog.Log, stream string, filter *types.ShardFilter) []types.Shard {
	t.Helper()
	in := &awskinesis.ListShardsInput{StreamName: aws.String(stream), ShardFilter: filter, MaxResults: aws.Int32(3)}
	var all []types.Shard
	for {
		out, err := l.ListShards(ctx, in)
		if err != nil {
			t.Fatalf("ListShards: %v", err)
		}
		all = append(all, out.Shards...)
		if out.NextToken == nil {
			return all
		}
		in = &awskinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(3)}
	}
}

// shape writes shards as "index(parent+adjacent)", with "-" after a closed one: "0- 1(0) 2(0)".
func shape(shards []types.Shard) string {
	num := func(id *string) string {
		n := strings.TrimLeft(strings.TrimPrefix(aws.ToString(id), "shardId-"), "0")
		if n == "" {
			return "0"
		}
		return n
	}
	parts := make([]string, len(shards))
	for i, s := range shards {
		p := num(s.ShardId)
		if s.ParentShardId != nil {
			p += "(" + num(s.ParentShardId)
			if s.AdjacentParentShardId != nil {
				p += "+" + num(s.AdjacentParentShardId)
			}
			p += ")"
		}
		if s.SequenceNumberRange.EndingSequenceNumber != nil {
			p += "-"
		}
		parts[i] = p
	}
	return strings.Join(parts, " ")
}

// openRanges is the hash key ranges of the open shards, sorted, as "start-end" strings.
func openRanges(shards []types.Shard) []string {
	var open []types.Shard
	for _, s := range shards {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, s)
		}
	}
	sort.Slice(open, func(i, j int) bool {
		return bigOf(open[i].HashKeyRange.StartingHashKey).Cmp(bigOf(open[j].HashKeyRange.StartingHashKey)) < 0
	})
	out := make([]string, len(open))
	for i, s := range open {
		out[i] = aws.ToString(s.HashKeyRange.StartingHashKey) + "-" + aws.ToString(s.HashKeyRange.EndingHashKey)
	}
	return out
}

// uniformRanges is the n equal ranges CreateStream gives n shards.
func uniformRanges(n int) []string {
	step := new(big.Int).Div(keySpace, big.NewInt(int64(n)))
	out := make([]string, n)
	for i := range n {
		start := new(big.Int).Mul(step, big.NewInt(int64(i)))
		end := new(big.Int).Add(start, step)
		if i == n-1 {
			end.Set(keySpace)
		}
		out[i] = start.String() + "-" + end.Sub(end, big.NewInt(1)).String()
	}
	return out
}

// checkLineage checks what must hold of any listing after any reshards: the open shards cover
// the key space without gap or overlap; closed shards have an EndingSequenceNumber; a split child
// lies within its parent; a merge child owns exactly its two adjacent, closed parents' ranges.
func checkLineage(t testing.TB, shards []types.Shard) {
	t.Helper()
	byID := map[string]types.Shard{}
	for _, s := range shards {
		byID[aws.ToString(s.ShardId)] = s
	}
	next := new(big.Int)
	for _, r := range openRanges(shards) {
		lo, hi, _ := strings.Cut(r, "-")
		if lo != next.String() {
			t.Errorf("open ranges %v: gap or overlap before %s", openRanges(shards), r)
			return
		}
		next, _ = new(big.Int).SetString(hi, 10)
		next.Add(next, big.NewInt(1))
	}
	if next.Cmp(keySpace) != 0 {
		t.Errorf("open ranges %v do not reach 2^128-1", openRanges(shards))
	}
	lo := func(s types.Shard) *big.Int { return bigOf(s.HashKeyRange.StartingHashKey) }
	hi := func(s types.Shard) *big.Int { return bigOf(s.HashKeyRange.EndingHashKey) }
	for _, s := range shards {
		if s.ParentShardId == nil {
			continue
		}
		p, ok := byID[*s.ParentShardId]
		if !ok {
			continue // aged out
		}
		if p.SequenceNumberRange.EndingSequenceNumber == nil {
			t.Errorf("%s has parent %s, which is open", *s.ShardId, *p.ShardId)
		}
		if s.AdjacentParentShardId == nil {
			if lo(s).Cmp(lo(p)) < 0 || hi(s).Cmp(hi(p)) > 0 {
				t.Errorf("split child %s lies outside its parent %s", *s.ShardId, *p.ShardId)
			}
			continue
		}
		a, ok := byID[*s.AdjacentParentShardId]
		if !ok {
			continue
		}
		if a.SequenceNumberRange.EndingSequenceNumber == nil {
			t.Errorf("%s has adjacent parent %s, which is open", *s.ShardId, *a.ShardId)
		}
		first, second := p, a
		if lo(a).Cmp(lo(p)) < 0 {
			first, second = a, p
		}
		if lo(s).Cmp(lo(first)) != 0 || hi(s).Cmp(hi(second)) != 0 ||
			new(big.Int).Add(hi(first), big.NewInt(1)).Cmp(lo(second)) != 0 {
			t.Errorf("merge child %s does not own exactly its parents %s and %s", *s.ShardId, *p.ShardId, *a.ShardId)
		}
	}
}

// readShard reads a shard from TRIM_HORIZON to its end: for a closed shard until GetRecords
// returns no NextShardIterator (then also its ChildShards), for an open one until a read returns
// nothing.
func readShard(t testing.TB, l *memlog.Log, stream, shard string) ([]types.Record, []types.ChildShard) {
	t.Helper()
	it := iterOf(t, l, stream, shard, types.ShardIteratorTypeTrimHorizon)
	var recs []types.Record
	for {
		out := get(t, l, it, 0)
		recs = append(recs, out.Records...)
		if out.NextShardIterator == nil {
			return recs, out.ChildShards
		}
		if len(out.Records) == 0 {
			return recs, nil
		}
		it = *out.NextShardIterator
	}
}

// readStream reads every listed shard in shard id order (parents before children), returning
// the records of each, in order, in one list, and checks that each closed shard ends with its
// EndingSequenceNumber and names its children.
func readStream(t testing.TB, l *memlog.Log, stream string) []types.Record {
	t.Helper()
	var all []types.Record
	for _, s := range listShards(t, l, stream, nil) {
		recs, children := readShard(t, l, stream, *s.ShardId)
		if end := s.SequenceNumberRange.EndingSequenceNumber; end != nil {
			if len(children) == 0 {
				t.Errorf("closed %s ended without ChildShards", *s.ShardId)
			}
			for _, r := range recs {
				if c, err := memlog.CompareSequenceNumbers(*r.SequenceNumber, *end); err != nil || c > 0 {
					t.Errorf("%s holds %s after its EndingSequenceNumber %s", *s.ShardId, *r.SequenceNumber, *end)
				}
			}
			if n := len(recs); n > 0 && *recs[n-1].SequenceNumber != *end {
				t.Errorf("%s ends at %s, its newest record is %s", *s.ShardId, *end, *recs[n-1].SequenceNumber)
			}
		}
		for _, r := range recs {
			h := hashOf(*r.PartitionKey)
			if h.Cmp(bigOf(s.HashKeyRange.StartingHashKey)) < 0 || h.Cmp(bigOf(s.HashKeyRange.EndingHashKey)) > 0 {
				t.Errorf("record of key %s is in %s, outside its hash key range", *r.PartitionKey, *s.ShardId)
			}
		}
		all = append(all, recs...)
	}
	return all
}

// checkOrderPerKey checks that the records, whose payloads are "key:n", hold each key's n in
// increasing order, and returns how many each key has.
func checkOrderPerKey(t testing.TB, recs []types.Record) map[string]int {
	t.Helper()
	last := map[string]int{}
	count := map[string]int{}
	for _, r := range recs {
		key, n := "", 0
		if _, err := fmt.Sscanf(strings.Replace(string(r.Data), ":", " ", 1), "%s %d", &key, &n); err != nil {
			t.Fatalf("payload %q: %v", r.Data, err)
		}
		if prev, ok := last[key]; ok && n <= prev {
			t.Errorf("key %s: %d after %d", key, n, prev)
		}
		last[key] = n
		count[key]++
	}
	return count
}
