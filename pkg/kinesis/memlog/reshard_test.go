package memlog_test

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

func TestSplitShard(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	var last string
	for i := range 3 {
		last = *put(t, l, "s", fmt.Sprint("k", i), "before").SequenceNumber
	}
	mid := new(big.Int).Lsh(big.NewInt(1), 127)
	split(t, l, "s", shardName(0), mid)

	shards := listShards(t, l, "s", nil)
	if got := shape(shards); got != "0- 1(0) 2(0)" {
		t.Fatalf("shards %q, want %q", got, "0- 1(0) 2(0)")
	}
	checkLineage(t, shards)
	if end := aws.ToString(shards[0].SequenceNumberRange.EndingSequenceNumber); end != last {
		t.Errorf("EndingSequenceNumber %s, want the newest record's %s", end, last)
	}
	below := new(big.Int).Sub(mid, big.NewInt(1)).String()
	want := []string{"0-" + below, mid.String() + "-" + new(big.Int).Sub(keySpace, big.NewInt(1)).String()}
	if got := openRanges(shards); !slices.Equal(got, want) {
		t.Errorf("children own %v, want %v", got, want)
	}

	recs, children := readShard(t, l, "s", shardName(0))
	if len(recs) != 3 {
		t.Errorf("parent holds %d records, want 3", len(recs))
	}
	if len(children) != 2 {
		t.Fatalf("ChildShards %+v, want two", children)
	}
	for i, c := range children {
		if aws.ToString(c.ShardId) != shardName(i+1) || !slices.Equal(c.ParentShards, []string{shardName(0)}) ||
			aws.ToString(c.HashKeyRange.StartingHashKey)+"-"+aws.ToString(c.HashKeyRange.EndingHashKey) != want[i] {
			t.Errorf("child %d = %s %v %s-%s", i, aws.ToString(c.ShardId), c.ParentShards,
				aws.ToString(c.HashKeyRange.StartingHashKey), aws.ToString(c.HashKeyRange.EndingHashKey))
		}
	}
	if id := *put(t, l, "s", "k0", "after").ShardId; id != shardName(1) && id != shardName(2) {
		t.Errorf("a put after the split went to %s", id)
	}
	sum, err := l.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	if err != nil || aws.ToInt32(sum.StreamDescriptionSummary.OpenShardCount) != 2 {
		t.Errorf("OpenShardCount after a split: %v, %v", sum, err)
	}
}

// The smallest and largest keys AWS accepts leave each child at least two hash keys.
func TestSplitShardAtTheEdges(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	top := new(big.Int).Sub(keySpace, big.NewInt(1))
	split(t, l, "s", shardName(0), big.NewInt(2))
	split(t, l, "s", shardName(2), new(big.Int).Sub(top, big.NewInt(1)))
	shards := listShards(t, l, "s", nil)
	want := []string{"0-1", "2-" + new(big.Int).Sub(top, big.NewInt(2)).String(), new(big.Int).Sub(top, big.NewInt(1)).String() + "-" + top.String()}
	if got := openRanges(shards); !slices.Equal(got, want) {
		t.Errorf("open ranges %v, want %v", got, want)
	}
	checkLineage(t, shards)
	for key, shard := range map[string]string{"0": shardName(1), "1": shardName(1), "2": shardName(3), top.String(): shardName(4)} {
		out, err := l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"),
			ExplicitHashKey: aws.String(key), Data: []byte("x")})
		if err != nil || *out.ShardId != shard {
			t.Errorf("hash key %s went to %v (%v), want %s", key, out, err, shard)
		}
	}
}

func TestMergeShards(t *testing.T) {
	l, _ := newStream(t, "s", 3)
	for i := range 30 {
		put(t, l, "s", fmt.Sprint("k", i), "x")
	}
	before := listShards(t, l, "s", nil)
	// ShardToMerge may be the upper of the two: it is still the ParentShardId.
	merge(t, l, "s", shardName(2), shardName(1))
	shards := listShards(t, l, "s", nil)
	if got := shape(shards); got != "0 1- 2- 3(2+1)" {
		t.Fatalf("shards %q, want %q", got, "0 1- 2- 3(2+1)")
	}
	checkLineage(t, shards)
	if got, want := openRanges(shards)[1], *before[1].HashKeyRange.StartingHashKey+"-"+*before[2].HashKeyRange.EndingHashKey; got != want {
		t.Errorf("child owns %s, want %s", got, want)
	}
	for _, parent := range []int{1, 2} {
		_, children := readShard(t, l, "s", shardName(parent))
		if len(children) != 1 || aws.ToString(children[0].ShardId) != shardName(3) ||
			!slices.Equal(children[0].ParentShards, []string{shardName(2), shardName(1)}) {
			t.Errorf("%s ends with ChildShards %+v", shardName(parent), children)
		}
	}
	readStream(t, l, "s")
}

// Each UpdateShardCount is a sequence of single splits and merges ending in uniform ranges.
func TestUpdateShardCountShapes(t *testing.T) {
	tests := []struct {
		name   string
		start  int32
		steps  []int32
		shapes []string
	}{
		{"2-4-2-1", 2, []int32{4, 2, 1}, []string{
			"0- 1- 2(0) 3(0) 4(1) 5(1)",
			"0- 1- 2(0)- 3(0)- 4(1)- 5(1)- 6(2+3) 7(4+5)",
			"0- 1- 2(0)- 3(0)- 4(1)- 5(1)- 6(2+3)- 7(4+5)- 8(6+7)",
		}},
		{"1-2-4-3", 1, []int32{2, 4, 3}, []string{
			"0- 1(0) 2(0)",
			"0- 1(0)- 2(0)- 3(1) 4(1) 5(2) 6(2)",
			"0- 1(0)- 2(0)- 3(1)- 4(1)- 5(2)- 6(2)- 7(4)- 8(4)- 9(5)- 10(5)- 11(3+7) 12(8+9) 13(10+6)",
		}},
		{"4-5", 4, []int32{5}, []string{
			"0- 1- 2- 3- 4(0) 5(0)- 6(1)- 7(1)- 8(2)- 9(2)- 10(3)- 11(3) 12(5+6) 13(7+8) 14(9+10)",
		}},
		{"5-3", 5, []int32{3}, []string{
			"0- 1- 2- 3- 4- 5(1)- 6(1)- 7(3)- 8(3)- 9(0+5) 10(6+2)- 11(10+7) 12(8+4)",
		}},
		{"3-3 changes nothing", 3, []int32{3}, []string{"0 1 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newStream(t, "s", tt.start)
			cur := tt.start
			for i, n := range tt.steps {
				out := rescale(t, l, "s", n)
				if aws.ToInt32(out.CurrentShardCount) != cur || aws.ToInt32(out.TargetShardCount) != n ||
					aws.ToString(out.StreamName) != "s" || aws.ToString(out.StreamARN) != "arn:aws:kinesis:us-east-1:000000000000:stream/s" {
					t.Errorf("output %d: current %d target %d %s %s", n, aws.ToInt32(out.CurrentShardCount),
						aws.ToInt32(out.TargetShardCount), aws.ToString(out.StreamName), aws.ToString(out.StreamARN))
				}
				shards := listShards(t, l, "s", nil)
				if got := shape(shards); got != tt.shapes[i] {
					t.Errorf("after %d:\n got %s\nwant %s", n, got, tt.shapes[i])
				}
				checkLineage(t, shards)
				if got := openRanges(shards); !slices.Equal(got, uniformRanges(int(n))) {
					t.Errorf("after %d: open ranges %v, want uniform %v", n, got, uniformRanges(int(n)))
				}
				sum, err := l.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
				if err != nil || aws.ToInt32(sum.StreamDescriptionSummary.OpenShardCount) != n {
					t.Errorf("after %d: OpenShardCount %v (%v)", n, sum, err)
				}
				cur = n
			}
		})
	}
}

// UpdateShardCount also evens out ranges that manual splits made uneven.
func TestUpdateShardCountAfterSplits(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	split(t, l, "s", shardName(0), big.NewInt(1000))
	rescale(t, l, "s", 3)
	shards := listShards(t, l, "s", nil)
	checkLineage(t, shards)
	if got := openRanges(shards); !slices.Equal(got, uniformRanges(3)) {
		t.Errorf("open ranges %v, want %v", got, uniformRanges(3))
	}
}

// Records of a key put before, between and after reshards are read in the order they were put,
// reading each parent to its end before its children.
func TestReshardKeepsOrderPerKey(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	const keys = 16
	steps := []func(){
		func() { split(t, l, "s", shardName(0), new(big.Int).Lsh(big.NewInt(1), 126)) },
		func() { rescale(t, l, "s", 4) },
		func() { rescale(t, l, "s", 3) },
		func() { merge(t, l, "s", shardName(10), shardName(11)) },
		func() { rescale(t, l, "s", 1) },
		func() { rescale(t, l, "s", 2) },
	}
	for round := 0; round <= len(steps); round++ {
		batch := make([]types.PutRecordsRequestEntry, 0, keys)
		for k := range keys {
			key := fmt.Sprint("key", k)
			put(t, l, "s", key, fmt.Sprintf("%s:%d", key, 2*round))
			batch = append(batch, types.PutRecordsRequestEntry{PartitionKey: aws.String(key), Data: fmt.Appendf(nil, "%s:%d", key, 2*round+1)})
		}
		if _, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: batch}); err != nil {
			t.Fatal(err)
		}
		if round < len(steps) {
			steps[round]()
		}
	}
	checkLineage(t, listShards(t, l, "s", nil))
	counts := checkOrderPerKey(t, readStream(t, l, "s"))
	for k := range keys {
		if n := counts[fmt.Sprint("key", k)]; n != 2*(len(steps)+1) {
			t.Errorf("key%d: %d records, want %d", k, n, 2*(len(steps)+1))
		}
	}
}

// A closed shard is read to its end, then GetRecords returns its ChildShards and no
// NextShardIterator, from whatever iterator type got there.
func TestGetRecordsAtClosedShardEnd(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	var seqs []string
	for i := range 5 {
		seqs = append(seqs, *put(t, l, "s", "k", fmt.Sprint(i)).SequenceNumber)
	}
	split(t, l, "s", shardName(0), new(big.Int).Lsh(big.NewInt(1), 127))

	it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	var got []string
	for range 2 {
		out := get(t, l, it, 2)
		if out.NextShardIterator == nil || len(out.ChildShards) != 0 || len(out.Records) != 2 {
			t.Fatalf("mid-shard read: %d records, next %v, children %v", len(out.Records), out.NextShardIterator, out.ChildShards)
		}
		got = append(got, payloads(out.Records)...)
		it = *out.NextShardIterator
	}
	out := get(t, l, it, 2)
	got = append(got, payloads(out.Records)...)
	if strings.Join(got, " ") != "0 1 2 3 4" || out.NextShardIterator != nil || len(out.ChildShards) != 2 ||
		aws.ToInt64(out.MillisBehindLatest) != 0 {
		t.Errorf("read %q, last read next %v, children %d, behind %d", got, out.NextShardIterator, len(out.ChildShards),
			aws.ToInt64(out.MillisBehindLatest))
	}

	atEnd := map[string]*awskinesis.GetShardIteratorInput{
		"LATEST": {ShardIteratorType: types.ShardIteratorTypeLatest},
		"AFTER_SEQUENCE_NUMBER of the newest": {ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber,
			StartingSequenceNumber: &seqs[4]},
	}
	for name, in := range atEnd {
		in.StreamName, in.ShardId = aws.String("s"), aws.String(shardName(0))
		out := get(t, l, iter(t, l, in), 0)
		if len(out.Records) != 0 || out.NextShardIterator != nil || len(out.ChildShards) != 2 {
			t.Errorf("%s: %d records, next %v, children %d", name, len(out.Records), out.NextShardIterator, len(out.ChildShards))
		}
	}
}

// A shard that closes with no records ends at once, and its EndingSequenceNumber is just above
// its StartingSequenceNumber.
func TestEmptyClosedShard(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	split(t, l, "s", shardName(0), new(big.Int).Lsh(big.NewInt(1), 127))
	recs, children := readShard(t, l, "s", shardName(0))
	if len(recs) != 0 || len(children) != 2 {
		t.Errorf("empty closed shard: %d records, %d children", len(recs), len(children))
	}
	r := listShards(t, l, "s", nil)[0].SequenceNumberRange
	if c, err := memlog.CompareSequenceNumbers(*r.StartingSequenceNumber, *r.EndingSequenceNumber); err != nil || c >= 0 {
		t.Errorf("empty shard starts at %s and ends at %s", *r.StartingSequenceNumber, *r.EndingSequenceNumber)
	}
}

func TestShardFiltersAfterReshard(t *testing.T) {
	l, c := newStream(t, "s", 2)
	t0 := c.Now()
	c.Advance(time.Second)
	t1 := c.Now()
	split(t, l, "s", shardName(0), new(big.Int).Lsh(big.NewInt(1), 126))
	c.Advance(time.Second)
	t2 := c.Now()
	merge(t, l, "s", shardName(3), shardName(1))
	c.Advance(time.Second)
	if got := shape(listShards(t, l, "s", nil)); got != "0- 1- 2(0) 3(0)- 4(3+1)" {
		t.Fatalf("shards %q", got)
	}
	filter := func(typ types.ShardFilterType, ts time.Time) *types.ShardFilter {
		f := &types.ShardFilter{Type: typ}
		if !ts.IsZero() {
			f.Timestamp = aws.Time(ts)
		}
		return f
	}
	half := 500 * time.Millisecond
	tests := []struct {
		name   string
		filter *types.ShardFilter
		want   string
	}{
		{"FROM_TRIM_HORIZON", filter(types.ShardFilterTypeFromTrimHorizon, time.Time{}), "0- 1- 2(0) 3(0)- 4(3+1)"},
		{"AT_TRIM_HORIZON", filter(types.ShardFilterTypeAtTrimHorizon, time.Time{}), "0- 1-"},
		{"AT_LATEST", filter(types.ShardFilterTypeAtLatest, time.Time{}), "2(0) 4(3+1)"},
		{"AFTER_SHARD_ID", &types.ShardFilter{Type: types.ShardFilterTypeAfterShardId, ShardId: aws.String(shardName(2))}, "3(0)- 4(3+1)"},
		{"AT_TIMESTAMP creation", filter(types.ShardFilterTypeAtTimestamp, t0), "0- 1-"},
		{"AT_TIMESTAMP before creation", filter(types.ShardFilterTypeAtTimestamp, t0.Add(-time.Hour)), "0- 1-"},
		{"AT_TIMESTAMP between reshards", filter(types.ShardFilterTypeAtTimestamp, t1.Add(half)), "1- 2(0) 3(0)-"},
		{"AT_TIMESTAMP now", filter(types.ShardFilterTypeAtTimestamp, c.Now()), "2(0) 4(3+1)"},
		{"FROM_TIMESTAMP between reshards", filter(types.ShardFilterTypeFromTimestamp, t1.Add(half)), "1- 2(0) 3(0)- 4(3+1)"},
		{"FROM_TIMESTAMP after the merge", filter(types.ShardFilterTypeFromTimestamp, t2.Add(half)), "2(0) 4(3+1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shape(listShards(t, l, "s", tt.filter)); got != tt.want {
				t.Errorf("shards %q, want %q", got, tt.want)
			}
		})
	}
}

// The fault hook sees reshards, and a fault stops one before it changes anything.
func TestReshardFaults(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	var mu sync.Mutex
	var calls []memlog.Call
	l.SetFault(func(_ context.Context, c memlog.Call) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
		if c.Op == "MergeShards" {
			return &types.LimitExceededException{Message: aws.String("Rate exceeded")}
		}
		return nil
	})
	split(t, l, "s", shardName(0), big.NewInt(1000))
	_, err := l.MergeShards(ctx, &awskinesis.MergeShardsInput{StreamName: aws.String("s"),
		ShardToMerge: aws.String(shardName(2)), AdjacentShardToMerge: aws.String(shardName(3))})
	wantErr[*types.LimitExceededException](t, err, "Rate exceeded")
	rescale(t, l, "s", 2)
	want := []memlog.Call{
		{Op: "SplitShard", Stream: "s", ShardID: shardName(0)},
		{Op: "MergeShards", Stream: "s", ShardID: shardName(2)},
		{Op: "UpdateShardCount", Stream: "s"},
	}
	mu.Lock()
	got := fmt.Sprint(calls)
	mu.Unlock()
	if got != fmt.Sprint(want) {
		t.Errorf("calls\n%v\nwant\n%v", got, want)
	}
	// Had the merge happened, UpdateShardCount would have found nothing to do.
	if got := shape(listShards(t, l, "s", nil)); got != "0- 1 2(0)- 3(0)- 4(2+3)" {
		t.Errorf("shards %q after a failed merge and an UpdateShardCount", got)
	}
}
