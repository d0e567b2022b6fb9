package memlog_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

func TestCompareSequenceNumbers(t *testing.T) {
	tests := []struct {
		a, b    string
		want    int
		wantErr bool
	}{
		{a: "1", b: "2", want: -1},
		{a: "10", b: "9", want: 1},
		{a: "0009", b: "9", want: 0},
		{a: "49590338271490256608559692538361571095921575989136588898", b: "49590338271490256608559692540925702759324208523137515618", want: -1},
		{a: "49590338271490256608559692540925702759324208523137515618", b: "4959033827149025660855969253836157109592157598913658889", want: 1},
		{a: "", b: "1", wantErr: true},
		{a: "1", b: "-1", wantErr: true},
		{a: "1e5", b: "1", wantErr: true},
	}
	for _, tt := range tests {
		got, err := memlog.CompareSequenceNumbers(tt.a, tt.b)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("CompareSequenceNumbers(%q, %q) = %d, %v; want %d, error %v", tt.a, tt.b, got, err, tt.want, tt.wantErr)
		}
	}
}

// A stream created with a larger MaxRecordSizeInKiB takes larger records, still within the
// 5 MiB of a PutRecords call.
func TestMaxRecordSize(t *testing.T) {
	l, _ := newLog(t)
	if _, err := l.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String("big"), ShardCount: aws.Int32(1),
		MaxRecordSizeInKiB: aws.Int32(4096)}); err != nil {
		t.Fatal(err)
	}
	in := &awskinesis.PutRecordInput{StreamName: aws.String("big"), PartitionKey: aws.String("k"), Data: make([]byte, 3*mib)}
	if _, err := l.PutRecord(ctx, in); err != nil {
		t.Fatalf("3 MiB record on a 4 MiB stream: %v", err)
	}
	in.Data = make([]byte, 4*mib)
	_, err := l.PutRecord(ctx, in)
	wantErr[*types.InvalidArgumentException](t, err, "maximum record size of 4194304 bytes")
	out, err := l.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String("big")})
	if err != nil || aws.ToInt32(out.StreamDescriptionSummary.MaxRecordSizeInKiB) != 4096 {
		t.Errorf("MaxRecordSizeInKiB %v, %v", out, err)
	}
}

// Whatever a caller sends as an iterator, sequence number, shard id or hash key, the Log answers
// with an error or a result, never a panic.
func FuzzInputs(f *testing.F) {
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==", "4900000000000000100000000000000000000000000000000000000000")
	f.Add("", "")
	f.Add("////", "340282366920938463463374607431768211455")
	f.Fuzz(func(t *testing.T, token, number string) {
		l, _ := newStream(t, "s", 2)
		_, _ = l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: &token})
		_, _ = l.ListShards(ctx, &awskinesis.ListShardsInput{NextToken: &token})
		for _, typ := range []types.ShardIteratorType{types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber} {
			_, _ = l.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"),
				ShardId: aws.String(shardName(0)), ShardIteratorType: typ, StartingSequenceNumber: &number})
		}
		_, _ = l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: &token,
			Data: []byte(number), ExplicitHashKey: &number, SequenceNumberForOrdering: &number})
		_, _ = l.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: &token, ShardId: &number,
			ShardIteratorType: types.ShardIteratorType(token)})
		_, _ = l.SplitShard(ctx, &awskinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: &token, NewStartingHashKey: &number})
		_, _ = l.SplitShard(ctx, &awskinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: aws.String(shardName(1)),
			NewStartingHashKey: &number})
		_, _ = l.MergeShards(ctx, &awskinesis.MergeShardsInput{StreamName: aws.String("s"), ShardToMerge: &token, AdjacentShardToMerge: &number})
	})
}
