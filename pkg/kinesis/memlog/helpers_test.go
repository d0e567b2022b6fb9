package memlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// The Log must stand in for the SDK client everywhere the driver uses one.
var _ kinesis.KinesisAPI = (*memlog.Log)(nil)

// clock is a settable clock, safe for concurrent use, so tests move time instead of sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var ctx = context.Background()

// newLog returns a Log on a test clock.
func newLog(t testing.TB) (*memlog.Log, *clock) {
	t.Helper()
	c := newClock()
	return memlog.New(memlog.Config{Now: c.Now}), c
}

// newStream returns a Log with one stream called name of n shards.
func newStream(t testing.TB, name string, n int32) (*memlog.Log, *clock) {
	t.Helper()
	l, c := newLog(t)
	createStream(t, l, name, n)
	return l, c
}

func createStream(t testing.TB, l *memlog.Log, name string, n int32) {
	t.Helper()
	if _, err := l.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(n)}); err != nil {
		t.Fatalf("CreateStream(%s, %d): %v", name, n, err)
	}
}

func put(t testing.TB, l *memlog.Log, stream, key, data string) *awskinesis.PutRecordOutput {
	t.Helper()
	out, err := l.PutRecord(ctx, &awskinesis.PutRecordInput{
		StreamName: aws.String(stream), PartitionKey: aws.String(key), Data: []byte(data),
	})
	if err != nil {
		t.Fatalf("PutRecord(%s, %s): %v", stream, key, err)
	}
	return out
}

func iter(t testing.TB, l *memlog.Log, in *awskinesis.GetShardIteratorInput) string {
	t.Helper()
	out, err := l.GetShardIterator(ctx, in)
	if err != nil {
		t.Fatalf("GetShardIterator(%s %s): %v", aws.ToString(in.ShardId), in.ShardIteratorType, err)
	}
	return aws.ToString(out.ShardIterator)
}

func iterOf(t testing.TB, l *memlog.Log, stream, shard string, typ types.ShardIteratorType) string {
	t.Helper()
	return iter(t, l, &awskinesis.GetShardIteratorInput{
		StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: typ,
	})
}

func get(t testing.TB, l *memlog.Log, it string, limit int32) *awskinesis.GetRecordsOutput {
	t.Helper()
	in := &awskinesis.GetRecordsInput{ShardIterator: aws.String(it)}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	out, err := l.GetRecords(ctx, in)
	if err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	return out
}

// readAll drains a shard from TRIM_HORIZON and returns the payloads.
func readAll(t testing.TB, l *memlog.Log, stream, shard string) []string {
	t.Helper()
	it := iterOf(t, l, stream, shard, types.ShardIteratorTypeTrimHorizon)
	var got []string
	for {
		out := get(t, l, it, 0)
		for _, r := range out.Records {
			got = append(got, string(r.Data))
		}
		if len(out.Records) == 0 {
			return got
		}
		it = aws.ToString(out.NextShardIterator)
	}
}

// wantErr fails unless err is a T whose message contains every one of parts.
func wantErr[T error](t testing.TB, err error, parts ...string) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("error = %v (%T), want %T", err, err, target)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err.Error(), p)
		}
	}
	return target
}

// errCode is the AWS error code of err, for table tests.
func errCode(err error) string {
	var coder interface{ ErrorCode() string }
	if errors.As(err, &coder) {
		return coder.ErrorCode()
	}
	if err == nil {
		return ""
	}
	return fmt.Sprintf("%T", err)
}

func shardName(i int) string { return fmt.Sprintf("shardId-%012d", i) }
