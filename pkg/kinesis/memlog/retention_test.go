package memlog_test

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

func expire(t testing.TB, l *memlog.Log, stream string, before time.Time, want int) {
	t.Helper()
	n, err := l.ExpireRecords(stream, before)
	if err != nil || n != want {
		t.Fatalf("ExpireRecords(%s, %v) = %d, %v; want %d", stream, before, n, err, want)
	}
}

func TestExpireRecords(t *testing.T) {
	l, c := newStream(t, "s", 1)
	t0 := c.Now()
	var seqs []string
	for i := range 6 {
		c.Advance(time.Second) // record i arrives at t0 + (i+1) s
		seqs = append(seqs, *put(t, l, "s", "k", fmt.Sprint(i)).SequenceNumber)
	}
	start := aws.ToString(listShards(t, l, "s", nil)[0].SequenceNumberRange.StartingSequenceNumber)
	fromStart := iter(t, l, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardName(0)),
		ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: &start})
	before := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)

	expire(t, l, "s", t0.Add(4*time.Second), 3) // records 0, 1, 2
	expire(t, l, "s", t0.Add(4*time.Second), 0)
	if got := strings.Join(readAll(t, l, "s", shardName(0)), " "); got != "3 4 5" {
		t.Errorf("TRIM_HORIZON reads %q, want 3 4 5", got)
	}
	for name, it := range map[string]string{"TRIM_HORIZON": before, "AT the StartingSequenceNumber": fromStart} {
		if got := strings.Join(payloads(get(t, l, it, 0).Records), " "); got != "3 4 5" {
			t.Errorf("an iterator from %s taken before the expiry reads %q, want 3 4 5", name, got)
		}
	}

	at := func(typ types.ShardIteratorType, seq string) (*awskinesis.GetShardIteratorOutput, error) {
		return l.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"),
			ShardId: aws.String(shardName(0)), ShardIteratorType: typ, StartingSequenceNumber: aws.String(seq)})
	}
	tests := []struct {
		name    string
		typ     types.ShardIteratorType
		seq     string
		want    string // what the iterator reads; "" for the trim-horizon error
		wantErr bool
	}{
		{"AT an expired record", types.ShardIteratorTypeAtSequenceNumber, seqs[2], "", true},
		{"AT the StartingSequenceNumber", types.ShardIteratorTypeAtSequenceNumber, start, "", true},
		{"AFTER a record before the last expired", types.ShardIteratorTypeAfterSequenceNumber, seqs[1], "", true},
		{"AFTER the last expired record", types.ShardIteratorTypeAfterSequenceNumber, seqs[2], "3 4 5", false},
		{"AT the oldest record left", types.ShardIteratorTypeAtSequenceNumber, seqs[3], "3 4 5", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := at(tt.typ, tt.seq)
			if tt.wantErr {
				wantErr[*types.InvalidArgumentException](t, err, "StartingSequenceNumber "+tt.seq+" used in GetShardIterator on shard "+
					shardName(0)+" in stream s under account 000000000000 is invalid because it is older than the trim horizon")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(payloads(get(t, l, *out.ShardIterator, 0).Records), " "); got != tt.want {
				t.Errorf("read %q, want %q", got, tt.want)
			}
		})
	}
	ts := iter(t, l, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardName(0)),
		ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(t0)})
	if got := strings.Join(payloads(get(t, l, ts, 0).Records), " "); got != "3 4 5" {
		t.Errorf("AT_TIMESTAMP before the horizon reads %q, want 3 4 5", got)
	}

	// A record is expired if it arrived before `before`, to the nanosecond.
	expire(t, l, "s", t0.Add(4*time.Second+time.Nanosecond), 1) // record 3
	expire(t, l, "s", t0.Add(5*time.Second), 0)                 // record 4 arrived at t0+5s, not before

	_, err := l.ExpireRecords("nope", c.Now())
	wantErr[*types.ResourceNotFoundException](t, err, "Stream nope under account 000000000000 not found.")
}

// Expiry drops whole chunks of records, and a shard trimmed to nothing takes new records and
// keeps numbering them on.
func TestExpireManyRecords(t *testing.T) {
	l, c := newStream(t, "s", 1)
	const old = 3*4096 + 100
	putMany(t, l, "s", old)
	c.Advance(time.Minute)
	t1 := c.Now()
	last := ""
	for i := range 10 {
		last = *put(t, l, "s", "k", strconv.Itoa(old+i)).SequenceNumber
	}
	expire(t, l, "s", t1, old)
	got := readAll(t, l, "s", shardName(0))
	if len(got) != 10 || got[0] != strconv.Itoa(old) {
		t.Fatalf("after expiry read %d records from %v", len(got), got[:min(len(got), 1)])
	}
	c.Advance(time.Minute)
	expire(t, l, "s", c.Now(), 10)
	if got := readAll(t, l, "s", shardName(0)); len(got) != 0 {
		t.Errorf("read %d records after expiring all", len(got))
	}
	putMany(t, l, "s", 5000)
	next := *put(t, l, "s", "k", "after").SequenceNumber
	if got := readAll(t, l, "s", shardName(0)); len(got) != 5001 || got[5000] != "after" {
		t.Errorf("after refilling read %d records", len(got))
	}
	if c, err := memlog.CompareSequenceNumbers(last, next); err != nil || c >= 0 {
		t.Errorf("sequence numbers went from %s to %s", last, next)
	}
}

// A closed shard leaves the listing once retention has passed all of it; open shards never do.
func TestExpiredClosedShards(t *testing.T) {
	l, c := newStream(t, "s", 1)
	t0 := c.Now()
	mid := new(big.Int).Lsh(big.NewInt(1), 127)
	putAt := func(hash *big.Int, data string) {
		if _, err := l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"),
			ExplicitHashKey: aws.String(hash.String()), Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(time.Second)
	for i := range 3 {
		putAt(big.NewInt(int64(i)), "old") // t0+1s, in shard 0
	}
	c.Advance(time.Second)
	split(t, l, "s", shardName(0), mid) // t0+2s: 1 owns the low keys, 2 the high ones
	oldIter := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	c.Advance(time.Second)
	putAt(mid, "new") // t0+3s, in shard 2
	c.Advance(time.Second)
	split(t, l, "s", shardName(1), big.NewInt(1000)) // t0+4s: shard 1 closes empty
	if got := shape(listShards(t, l, "s", nil)); got != "0- 1(0)- 2(0) 3(1) 4(1)" {
		t.Fatalf("shards %q", got)
	}

	expire(t, l, "s", t0.Add(1500*time.Millisecond), 3)
	shards := listShards(t, l, "s", nil)
	if got := shape(shards); got != "1(0)- 2(0) 3(1) 4(1)" {
		t.Errorf("after shard 0's records expired: %q", got)
	}
	checkLineage(t, shards)
	if got := shape(listShards(t, l, "s", &types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon})); got != "1(0)- 2(0)" {
		t.Errorf("AT_TRIM_HORIZON lists %q, want the children of the aged-out shard", got)
	}
	_, err := l.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardName(0)),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	wantErr[*types.ResourceNotFoundException](t, err, "Shard shardId-000000000000 in stream s under account 000000000000 does not exist")
	_, err = l.SplitShard(ctx, &awskinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: aws.String(shardName(0)),
		NewStartingHashKey: aws.String("1000")})
	wantErr[*types.ResourceNotFoundException](t, err, "Could not find shard shardId-000000000000")
	if out := get(t, l, oldIter, 0); len(out.Records) != 0 || out.NextShardIterator != nil || len(out.ChildShards) != 2 {
		t.Errorf("an iterator issued before shard 0 aged out reads %d records, next %v, children %d",
			len(out.Records), out.NextShardIterator, len(out.ChildShards))
	}

	// Shard 1 closed empty at t0+4s, so retention passes it only after that.
	expire(t, l, "s", t0.Add(4*time.Second), 1) // shard 2's record
	if got := shape(listShards(t, l, "s", nil)); got != "1(0)- 2(0) 3(1) 4(1)" {
		t.Errorf("empty shard 1 aged out before retention passed its close: %q", got)
	}
	expire(t, l, "s", t0.Add(4*time.Second+time.Millisecond), 0)
	if got := shape(listShards(t, l, "s", nil)); got != "2(0) 3(1) 4(1)" {
		t.Errorf("after retention passed shard 1's close: %q", got)
	}
	sum, err := l.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	if err != nil || aws.ToInt32(sum.StreamDescriptionSummary.OpenShardCount) != 3 {
		t.Errorf("OpenShardCount %v (%v)", sum, err)
	}
}
