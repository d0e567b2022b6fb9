package memlog_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// The quotas of Config.Quotas, each through the SDK's own types: the error, its message, the
// partial failure of PutRecords, and the way back once the Log's clock has moved.

// quotaStream returns a Log enforcing q on a settable clock, with a stream "s" of n shards.
func quotaStream(t *testing.T, n int32, q memlog.Quotas) (*memlog.Log, *clock) {
	t.Helper()
	c := newClock()
	l := memlog.New(memlog.Config{Now: c.Now, Quotas: &q})
	createStream(t, l, "s", n)
	return l, c
}

// routed makes n PutRecords entries of size bytes of data, each with a one-character key,
// routed to the shard whose range starts at hashKey ("" for shard 0's start, 0).
func routed(n, size int, hashKey string) []types.PutRecordsRequestEntry {
	if hashKey == "" {
		hashKey = "0"
	}
	out := make([]types.PutRecordsRequestEntry, n)
	for i := range out {
		out[i] = types.PutRecordsRequestEntry{Data: bytes.Repeat([]byte{'x'}, size), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(hashKey)}
	}
	return out
}

func putRecords(t *testing.T, l *memlog.Log, es []types.PutRecordsRequestEntry) *awskinesis.PutRecordsOutput {
	t.Helper()
	out, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: es})
	if err != nil {
		t.Fatalf("PutRecords: %v", err)
	}
	return out
}

// failedAt lists the indexes of the failed entries, checking each one's code and message.
func failedAt(t *testing.T, out *awskinesis.PutRecordsOutput, shard string) []int {
	t.Helper()
	var idx []int
	want := "Rate exceeded for shard " + shard + " in stream s under account 000000000000."
	for i, r := range out.Records {
		if r.ErrorCode == nil {
			if r.SequenceNumber == nil || r.ShardId == nil {
				t.Errorf("entry %d succeeded with no sequence number or shard", i)
			}
			continue
		}
		idx = append(idx, i)
		if *r.ErrorCode != "ProvisionedThroughputExceededException" || aws.ToString(r.ErrorMessage) != want {
			t.Errorf("entry %d: %s %q, want ProvisionedThroughputExceededException %q", i, *r.ErrorCode, aws.ToString(r.ErrorMessage), want)
		}
	}
	if int(aws.ToInt32(out.FailedRecordCount)) != len(idx) {
		t.Errorf("FailedRecordCount %d, %d entries failed", aws.ToInt32(out.FailedRecordCount), len(idx))
	}
	return idx
}

func TestQuotaWriteRecords(t *testing.T) {
	l, c := quotaStream(t, 2, memlog.Quotas{})
	shard1 := "170141183460469231731687303715884105728" // the second shard's first hash key
	for range 2 {
		if f := failedAt(t, putRecords(t, l, routed(500, 10, "")), shardName(0)); len(f) != 0 {
			t.Fatalf("1,000 records in a second failed at %v", f)
		}
	}
	// Shard 0 is full for this second, shard 1 is not: the batch fails shard 0's entries
	// alone, wherever they are in it.
	mixed := append(routed(3, 10, ""), routed(4, 10, shard1)...)
	mixed = append(mixed, routed(2, 10, "")...)
	if f := failedAt(t, putRecords(t, l, mixed), shardName(0)); fmt.Sprint(f) != "[0 1 2 7 8]" {
		t.Errorf("failed entries %v, want shard 0's: [0 1 2 7 8]", f)
	}
	_, err := l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String("0"), Data: []byte("x")})
	wantErr[*types.ProvisionedThroughputExceededException](t, err, "Rate exceeded for shard shardId-000000000000 in stream s under account 000000000000.")

	// 100 ms gives 100 records back: of 150, the first 100 go in, in request order.
	c.Advance(100 * time.Millisecond)
	f := failedAt(t, putRecords(t, l, routed(150, 10, "")), shardName(0))
	if len(f) != 50 || f[0] != 100 {
		t.Errorf("after 100 ms, failed entries %v, want 100..149", f)
	}
	u := l.Usage("s")
	if u.PutCalls != 5 || u.Records != 1000+4+100 || u.ThrottledRecords != 5+1+50 || u.Bytes != 1104*11 || u.PayloadUnits != 1104 {
		t.Errorf("usage %+v", u)
	}
}

func TestQuotaWriteBytes(t *testing.T) {
	l, c := quotaStream(t, 1, memlog.Quotas{})
	// Ten records of 100 KiB and a key are 1,024,010 bytes: under 1 MiB; an eleventh is over.
	if f := failedAt(t, putRecords(t, l, routed(11, 100<<10, "")), shardName(0)); fmt.Sprint(f) != "[10]" {
		t.Fatalf("failed entries %v, want [10]", f)
	}
	// A small record still fits in what is left, 24,566 bytes: the record count is not used up
	// by the entry refused for its bytes.
	putRecords(t, l, routed(1, 20000, ""))
	in := &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: make([]byte, 100<<10)}
	_, err := l.PutRecord(ctx, in)
	wantErr[*types.ProvisionedThroughputExceededException](t, err, "Rate exceeded for shard shardId-000000000000 in stream s under account 000000000000.")
	c.Advance(time.Second)
	if _, err := l.PutRecord(ctx, in); err != nil {
		t.Fatalf("a second later: %v", err)
	}
	if u := l.Usage("s"); u.Records != 12 || u.ThrottledRecords != 2 || u.PayloadUnits != 10*5+1+5 {
		t.Errorf("usage %+v", u)
	}
}

// A record over a second's bytes (a stream whose MaxRecordSizeInKiB allows it) is taken once
// the shard's budget is full, and the shard's writes wait for the seconds it borrowed.
func TestQuotaWriteBytesLargeRecord(t *testing.T) {
	c := newClock()
	l := memlog.New(memlog.Config{Now: c.Now, Quotas: &memlog.Quotas{}})
	if _, err := l.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(1), MaxRecordSizeInKiB: aws.Int32(4096)}); err != nil {
		t.Fatal(err)
	}
	large := &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: make([]byte, 3<<20)}
	small := &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")}
	if _, err := l.PutRecord(ctx, large); err != nil {
		t.Fatalf("3 MiB record on an idle shard: %v", err)
	}
	// It borrowed 2 MiB and a key's byte: at 1 MiB/s, the shard takes nothing for 2 s.
	c.Advance(1999 * time.Millisecond)
	_, err := l.PutRecord(ctx, small)
	wantErr[*types.ProvisionedThroughputExceededException](t, err, "Rate exceeded for shard shardId-000000000000 in stream s under account 000000000000.")
	c.Advance(10 * time.Millisecond)
	if _, err := l.PutRecord(ctx, small); err != nil {
		t.Fatalf("2 s later, a small record: %v", err)
	}
	// Another large one waits for a full budget: a second with nothing written.
	_, err = l.PutRecord(ctx, large)
	wantErr[*types.ProvisionedThroughputExceededException](t, err, "Rate exceeded for shard shardId-000000000000 in stream s under account 000000000000.")
	c.Advance(time.Second)
	if _, err := l.PutRecord(ctx, large); err != nil {
		t.Fatalf("after a second with nothing written, another 3 MiB record: %v", err)
	}
}

func TestQuotaReadCalls(t *testing.T) {
	l, c := quotaStream(t, 2, memlog.Quotas{})
	// Two consumers of shard 0 share its five reads a second.
	its := []string{iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon), iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeLatest)}
	for i := range 5 {
		get(t, l, its[i%2], 0)
	}
	_, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(its[1])})
	wantErr[*types.ProvisionedThroughputExceededException](t, err, "Rate exceeded for shard shardId-000000000000 in stream s under account 000000000000.")
	get(t, l, iterOf(t, l, "s", shardName(1), types.ShardIteratorTypeTrimHorizon), 0) // shard 1 has its own
	c.Advance(200 * time.Millisecond)
	get(t, l, its[0], 0)
	_, err = l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(its[0])})
	wantErr[*types.ProvisionedThroughputExceededException](t, err)
	if u := l.Usage("s"); u.GetRecordsCalls != 9 || u.GetRecordsThrottled != 2 {
		t.Errorf("usage %+v", u)
	}
}

func TestQuotaReadBytes(t *testing.T) {
	// Writes are let through here so that 10 MB can be written at once.
	l, c := quotaStream(t, 1, memlog.Quotas{ShardWriteBytes: -1, ShardWriteRecords: -1})
	for range 2 { // 5 MiB at most per PutRecords
		putRecords(t, l, routed(5, 1_000_000, ""))
	}
	it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	out := get(t, l, it, 0)
	if len(out.Records) != 10 {
		t.Fatalf("read %d records, want all 10 (under 10 MiB)", len(out.Records))
	}
	// 10,000,010 bytes against a full 2 MiB: the shard owes the rest, repaid at 2 MiB/s.
	const read = 10 * 1_000_001
	owed := time.Duration((read - 2*mib) * int64(time.Second) / (2 * mib))
	next := aws.ToString(out.NextShardIterator)
	for _, wait := range []time.Duration{0, owed - 10*time.Millisecond} {
		c.Advance(wait)
		_, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(next)})
		wantErr[*types.ProvisionedThroughputExceededException](t, err, "Rate exceeded for shard shardId-000000000000")
	}
	c.Advance(20 * time.Millisecond)
	if out := get(t, l, next, 0); len(out.Records) != 0 {
		t.Errorf("read %d records, want none left", len(out.Records))
	}
	if u := l.Usage("s"); u.BytesRead != read || u.GetRecordsThrottled != 2 {
		t.Errorf("usage %+v", u)
	}
	t.Logf("10 MB read: reads refused for %v", owed)
}

func TestQuotaShardIterator(t *testing.T) {
	l, c := quotaStream(t, 2, memlog.Quotas{})
	in := func(shard int) *awskinesis.GetShardIteratorInput {
		return &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardName(shard)), ShardIteratorType: types.ShardIteratorTypeLatest}
	}
	for range 5 {
		iter(t, l, in(0))
	}
	_, err := l.GetShardIterator(ctx, in(0))
	wantErr[*types.ProvisionedThroughputExceededException](t, err, "Rate exceeded for shard shardId-000000000000 in stream s under account 000000000000.")
	iter(t, l, in(1))
	c.Advance(200 * time.Millisecond)
	iter(t, l, in(0))
	if u := l.Usage("s"); u.Calls["GetShardIterator"] != 8 || u.Throttled["GetShardIterator"] != 1 {
		t.Errorf("usage %+v", u)
	}
}

// TestQuotaOff: without Config.Quotas nothing is refused, and Usage counts all the same.
func TestQuotaOff(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	for range 3 { // 9 MiB at once
		if f := failedAt(t, putRecords(t, l, routed(100, 30<<10, "")), shardName(0)); len(f) != 0 {
			t.Fatalf("failed entries %v with no quotas", f)
		}
	}
	it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	for range 20 {
		get(t, l, it, 1)
	}
	u := l.Usage("s")
	if u.Records != 300 || u.Bytes != 300*(30<<10+1) || u.PayloadUnits != 300*2 || u.GetRecordsCalls != 20 || u.GetRecordsThrottled != 0 ||
		u.BytesRead != 20*(30<<10+1) || u.Calls["GetShardIterator"] != 1 {
		t.Errorf("usage %+v", u)
	}
	if u := l.Usage("nope"); u.Records != 0 || u.Calls == nil {
		t.Errorf("usage of no stream: %+v", u)
	}
}
