package memlog_test

import (
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// putMany puts n records with payloads "0".."n-1" into a one-shard stream, in batches.
func putMany(t testing.TB, l *memlog.Log, stream string, n int) {
	t.Helper()
	for start := 0; start < n; start += 500 {
		batch := make([]types.PutRecordsRequestEntry, 0, 500)
		for i := start; i < n && i < start+500; i++ {
			batch = append(batch, types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: []byte(strconv.Itoa(i))})
		}
		if _, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String(stream), Records: batch}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGetRecordsLimit(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	putMany(t, l, "s", 12000)
	tests := []struct {
		limit    *int32
		want     int
		wantCode string
	}{
		{limit: nil, want: 10000},
		{limit: aws.Int32(1), want: 1},
		{limit: aws.Int32(7), want: 7},
		{limit: aws.Int32(10000), want: 10000},
		{limit: aws.Int32(0), wantCode: "InvalidArgumentException"},
		{limit: aws.Int32(-5), wantCode: "InvalidArgumentException"},
		{limit: aws.Int32(10001), wantCode: "InvalidArgumentException"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(aws.ToInt32(tt.limit)), func(t *testing.T) {
			it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
			out, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: tt.limit})
			if got := errCode(err); got != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", got, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if len(out.Records) != tt.want {
				t.Errorf("%d records, want %d", len(out.Records), tt.want)
			}
		})
	}
}

// Reading page by page returns every record once, in order, and then empty pages that keep
// their place.
func TestGetRecordsPaging(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	putMany(t, l, "s", 1000)
	it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	next := 0
	for next < 1000 {
		out := get(t, l, it, 77)
		for _, r := range out.Records {
			if string(r.Data) != strconv.Itoa(next) {
				t.Fatalf("record %q, want %d", r.Data, next)
			}
			next++
		}
		it = aws.ToString(out.NextShardIterator)
	}
	empty := get(t, l, it, 0)
	if len(empty.Records) != 0 || empty.NextShardIterator == nil || aws.ToInt64(empty.MillisBehindLatest) != 0 {
		t.Fatalf("read at the tip: %d records, next %v, behind %d", len(empty.Records), empty.NextShardIterator, aws.ToInt64(empty.MillisBehindLatest))
	}
	put(t, l, "s", "k", "later")
	if got := payloads(get(t, l, *empty.NextShardIterator, 0).Records); len(got) != 1 || got[0] != "later" {
		t.Errorf("after an empty read, got %q, want [later]", got)
	}
}

// One response carries at most 10 MiB.
func TestGetRecordsByteCap(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	big := make([]byte, mib-10)
	for range 12 {
		if _, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"),
			Records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: big}}}); err != nil {
			t.Fatal(err)
		}
	}
	it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	first := get(t, l, it, 0)
	if n := len(first.Records); n != 10 {
		t.Errorf("first read returned %d records of ~1 MiB, want 10", n)
	}
	if aws.ToInt64(first.MillisBehindLatest) == 0 {
		t.Errorf("MillisBehindLatest 0 with records left")
	}
	if n := len(get(t, l, *first.NextShardIterator, 0).Records); n != 2 {
		t.Errorf("second read returned %d records, want 2", n)
	}
}

func TestGetRecordsFields(t *testing.T) {
	l, c := newStream(t, "s", 1)
	c.Advance(time.Second)
	t0 := c.Now()
	out0 := put(t, l, "s", "alpha", "one")
	c.Advance(time.Second)
	out1 := put(t, l, "s", "beta", "two")
	c.Advance(3 * time.Second)

	got := get(t, l, iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon), 1)
	r := got.Records[0]
	if string(r.Data) != "one" || aws.ToString(r.PartitionKey) != "alpha" || aws.ToString(r.SequenceNumber) != *out0.SequenceNumber ||
		!aws.ToTime(r.ApproximateArrivalTimestamp).Equal(t0) {
		t.Errorf("record = %q %s %s %v", r.Data, aws.ToString(r.PartitionKey), aws.ToString(r.SequenceNumber), aws.ToTime(r.ApproximateArrivalTimestamp))
	}
	// The oldest record not returned arrived 3 s ago.
	if behind := aws.ToInt64(got.MillisBehindLatest); behind != 3000 {
		t.Errorf("MillisBehindLatest = %d, want 3000", behind)
	}
	rest := get(t, l, *got.NextShardIterator, 0)
	if len(rest.Records) != 1 || aws.ToString(rest.Records[0].SequenceNumber) != *out1.SequenceNumber || aws.ToInt64(rest.MillisBehindLatest) != 0 {
		t.Errorf("second read = %d records, behind %d", len(rest.Records), aws.ToInt64(rest.MillisBehindLatest))
	}
}

// Every call returns its own Data, and one record's Data cannot grow into the next one's.
func TestGetRecordsDataIsFresh(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	put(t, l, "s", "k", "aaa")
	put(t, l, "s", "k", "bbb")
	it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	first := get(t, l, it, 0)
	r0, r1 := first.Records[0], first.Records[1]
	if cap(r0.Data) != len(r0.Data) {
		t.Errorf("Data has capacity %d beyond its length %d", cap(r0.Data), len(r0.Data))
	}
	_ = append(r0.Data, 'X')
	copy(r1.Data, "ZZZ")
	*r0.SequenceNumber = "mine"
	*r0.PartitionKey = "mine"
	second := get(t, l, it, 0)
	if got := payloads(second.Records); got[0] != "aaa" || got[1] != "bbb" {
		t.Errorf("second read %q after the first's Data was changed", got)
	}
	if string(r1.Data) != "ZZZ" || string(r0.Data) != "aaa" {
		t.Errorf("first read's Data = %q %q", r0.Data, r1.Data)
	}
	if *second.Records[0].SequenceNumber == "mine" || *second.Records[0].PartitionKey == "mine" {
		t.Error("changing a returned SequenceNumber or PartitionKey changed the Log")
	}
}

func TestGetRecordsStreamARN(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	createStream(t, l, "t", 1)
	it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	if _, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(it),
		StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/s")}); err != nil {
		t.Fatal(err)
	}
	_, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(it),
		StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/t")})
	wantErr[*types.InvalidArgumentException](t, err)
}

// Four shards written and read at once: every record arrives once, in order per shard.
func TestConcurrentShards(t *testing.T) {
	const shards, perShard = 4, 5000
	l, _ := newStream(t, "s", shards)
	var wg sync.WaitGroup
	errs := make(chan error, 2*shards)
	for s := range shards {
		hash := aws.String(new(big.Int).Lsh(big.NewInt(int64(s)), 126).String()) // in shard s
		wg.Go(func() {
			for start := 0; start < perShard; start += 100 {
				batch := make([]types.PutRecordsRequestEntry, 100)
				for i := range batch {
					batch[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), ExplicitHashKey: hash, Data: []byte(strconv.Itoa(start + i))}
				}
				if _, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: batch}); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			it := iterOf(t, l, "s", shardName(s), types.ShardIteratorTypeTrimHorizon)
			for next := 0; next < perShard; {
				out, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(300)})
				if err != nil {
					errs <- err
					return
				}
				for _, r := range out.Records {
					if string(r.Data) != strconv.Itoa(next) {
						errs <- fmt.Errorf("%s: record %q, want %d", shardName(s), r.Data, next)
						return
					}
					next++
				}
				it = *out.NextShardIterator
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
