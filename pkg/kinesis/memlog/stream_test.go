package memlog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

func TestCreateStream(t *testing.T) {
	tests := []struct {
		name     string
		in       *awskinesis.CreateStreamInput
		wantCode string
		wantMsg  string
		shards   int
	}{
		{name: "provisioned", in: &awskinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(3)}, shards: 3},
		{name: "on demand gets 4 shards", in: &awskinesis.CreateStreamInput{StreamName: aws.String("s"),
			StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand}}, shards: 4},
		{name: "name with every allowed character", in: &awskinesis.CreateStreamInput{
			StreamName: aws.String("a-Z_0.9"), ShardCount: aws.Int32(1)}, shards: 1},
		{name: "nil input", in: nil, wantCode: "ValidationException", wantMsg: "Value null at 'streamName'"},
		{name: "no shard count", in: &awskinesis.CreateStreamInput{StreamName: aws.String("s")},
			wantCode: "InvalidArgumentException", wantMsg: "ShardCount is required"},
		{name: "zero shards", in: &awskinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(0)},
			wantCode: "InvalidArgumentException", wantMsg: "at least 1"},
		{name: "negative shards", in: &awskinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(-1)},
			wantCode: "InvalidArgumentException"},
		{name: "over the shard limit", in: &awskinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(1 << 30)},
			wantCode: "LimitExceededException", wantMsg: "shard limit"},
		{name: "bad name", in: &awskinesis.CreateStreamInput{StreamName: aws.String("a b"), ShardCount: aws.Int32(1)},
			wantCode: "ValidationException", wantMsg: "regular expression pattern: [a-zA-Z0-9_.-]+"},
		{name: "empty name", in: &awskinesis.CreateStreamInput{StreamName: aws.String(""), ShardCount: aws.Int32(1)},
			wantCode: "ValidationException", wantMsg: "length greater than or equal to 1"},
		{name: "long name", in: &awskinesis.CreateStreamInput{StreamName: aws.String(strings.Repeat("a", 129)), ShardCount: aws.Int32(1)},
			wantCode: "ValidationException", wantMsg: "length less than or equal to 128"},
		{name: "bad mode", in: &awskinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(1),
			StreamModeDetails: &types.StreamModeDetails{StreamMode: "FAST"}}, wantCode: "ValidationException", wantMsg: "enum value set"},
		{name: "record size too small", in: &awskinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(1),
			MaxRecordSizeInKiB: aws.Int32(1000)}, wantCode: "InvalidArgumentException", wantMsg: "MaxRecordSizeInKiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newLog(t)
			_, err := l.CreateStream(ctx, tt.in)
			if got := errCode(err); got != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", got, err, tt.wantCode)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not contain %q", err, tt.wantMsg)
				}
				return
			}
			out, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: tt.in.StreamName})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Shards) != tt.shards {
				t.Errorf("%d shards, want %d", len(out.Shards), tt.shards)
			}
		})
	}
}

func TestCreateStreamTwice(t *testing.T) {
	l, _ := newStream(t, "orders", 1)
	_, err := l.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String("orders"), ShardCount: aws.Int32(2)})
	wantErr[*types.ResourceInUseException](t, err, "Stream orders under account 000000000000 already exists.")
}

func TestDeleteStream(t *testing.T) {
	l, _ := newStream(t, "orders", 2)
	put(t, l, "orders", "k", "before")
	if _, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String("orders")}); err != nil {
		t.Fatal(err)
	}
	_, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String("orders")})
	wantErr[*types.ResourceNotFoundException](t, err, "Stream orders under account 000000000000 not found.")
	_, err = l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("orders"), PartitionKey: aws.String("k"), Data: []byte("x")})
	wantErr[*types.ResourceNotFoundException](t, err, "orders")

	// A stream created again under the same name starts empty.
	createStream(t, l, "orders", 2)
	for i := range 2 {
		if got := readAll(t, l, "orders", shardName(i)); len(got) != 0 {
			t.Errorf("recreated stream has records %q", got)
		}
	}
}

func TestDescribeStreamSummary(t *testing.T) {
	c := newClock()
	l := memlog.New(memlog.Config{Now: c.Now, Region: "eu-west-1", AccountID: "123456789012"})
	createStream(t, l, "orders", 3)
	arn := "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
	for _, in := range []*awskinesis.DescribeStreamSummaryInput{
		{StreamName: aws.String("orders")},
		{StreamARN: aws.String(arn)},
		{StreamName: aws.String("orders"), StreamARN: aws.String(arn)},
	} {
		out, err := l.DescribeStreamSummary(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		s := out.StreamDescriptionSummary
		if aws.ToString(s.StreamName) != "orders" || aws.ToString(s.StreamARN) != arn ||
			s.StreamStatus != types.StreamStatusActive || aws.ToInt32(s.OpenShardCount) != 3 ||
			aws.ToInt32(s.RetentionPeriodHours) != 24 || aws.ToInt32(s.ConsumerCount) != 0 ||
			s.StreamModeDetails == nil || s.StreamModeDetails.StreamMode != types.StreamModeProvisioned ||
			!aws.ToTime(s.StreamCreationTimestamp).Equal(c.Now()) || len(s.EnhancedMonitoring) != 1 ||
			len(s.EnhancedMonitoring[0].ShardLevelMetrics) != 0 {
			t.Errorf("summary = %+v", s)
		}
	}
}

func TestStreamReferences(t *testing.T) {
	l, _ := newStream(t, "orders", 1)
	createStream(t, l, "other", 1)
	tests := []struct {
		name      string
		streamARN *string
		stream    *string
		wantCode  string
	}{
		{name: "arn", streamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/orders")},
		{name: "unknown stream", stream: aws.String("nope"), wantCode: "ResourceNotFoundException"},
		{name: "neither", wantCode: "InvalidArgumentException"},
		{name: "disagree", stream: aws.String("other"), streamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/orders"),
			wantCode: "InvalidArgumentException"},
		{name: "other account", streamARN: aws.String("arn:aws:kinesis:us-east-1:111111111111:stream/orders"),
			wantCode: "ResourceNotFoundException"},
		{name: "other region", streamARN: aws.String("arn:aws:kinesis:eu-west-1:000000000000:stream/orders"),
			wantCode: "ResourceNotFoundException"},
		{name: "malformed arn", streamARN: aws.String("arn:aws:sqs:us-east-1:000000000000:orders"), wantCode: "ValidationException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: tt.stream, StreamARN: tt.streamARN})
			if got := errCode(err); got != tt.wantCode {
				t.Errorf("error code = %q (%v), want %q", got, err, tt.wantCode)
			}
		})
	}
}

// Every operation turns nil and empty input into an error, never a panic.
func TestNilInputs(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	calls := map[string]func() error{
		"PutRecord":  func() error { _, err := l.PutRecord(nil, nil); return err }, //nolint:staticcheck // nil ctx on purpose
		"PutRecords": func() error { _, err := l.PutRecords(ctx, nil); return err },
		"PutRecords nil entry fields": func() error {
			_, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: make([]types.PutRecordsRequestEntry, 2)})
			return err
		},
		"ListShards":            func() error { _, err := l.ListShards(ctx, nil); return err },
		"GetShardIterator":      func() error { _, err := l.GetShardIterator(ctx, nil); return err },
		"GetRecords":            func() error { _, err := l.GetRecords(ctx, nil); return err },
		"DescribeStreamSummary": func() error { _, err := l.DescribeStreamSummary(ctx, nil); return err },
		"CreateStream":          func() error { _, err := l.CreateStream(ctx, nil); return err },
		"DeleteStream":          func() error { _, err := l.DeleteStream(ctx, nil); return err },
		"SplitShard":            func() error { _, err := l.SplitShard(ctx, nil); return err },
		"MergeShards":           func() error { _, err := l.MergeShards(ctx, nil); return err },
		"UpdateShardCount":      func() error { _, err := l.UpdateShardCount(ctx, nil); return err },
		"GetShardIterator no type": func() error {
			_, err := l.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardName(0))})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			switch code := errCode(call()); code {
			case "ValidationException", "InvalidArgumentException":
			default:
				t.Errorf("error code %q, want ValidationException or InvalidArgumentException", code)
			}
		})
	}
}

func TestCancelledContext(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := l.PutRecord(cctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")})
	if err == nil || err.Error() != "context canceled" {
		t.Fatalf("PutRecord with cancelled context: %v", err)
	}
	if got := readAll(t, l, "s", shardName(0)); len(got) != 0 {
		t.Errorf("cancelled put stored %q", got)
	}
}

// StreamCreationTimestamp is the Log's clock at creation.
func TestCreationTimestampUsesClock(t *testing.T) {
	l, c := newLog(t)
	c.Advance(time.Hour)
	createStream(t, l, "s", 1)
	out, err := l.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToTime(out.StreamDescriptionSummary.StreamCreationTimestamp); !got.Equal(c.Now()) {
		t.Errorf("created %v, want %v", got, c.Now())
	}
}
