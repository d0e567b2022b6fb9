package memlog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// arnOf is the ARN of stream name in the default region and account.
func arnOf(name string) *string {
	return aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/" + name)
}

// TestQuotaControlPlane holds every control-plane operation of a Log to its documented rate:
// the call over it is a LimitExceededException with AWS's message, per stream or per account as
// the API reference says, and the next second lets calls through again. Calls count whatever
// they answer (several here are refused for their arguments).
func TestQuotaControlPlane(t *testing.T) {
	n := 0
	fresh := func() string { n++; return fmt.Sprintf("n%d", n) }
	cases := []struct {
		op        string
		rate      int
		perStream bool
		call      func(l *memlog.Log, stream string) error
	}{
		{"ListShards", 1000, true, func(l *memlog.Log, s string) error {
			_, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: &s})
			return err
		}},
		{"DescribeStreamSummary", 20, false, func(l *memlog.Log, s string) error {
			_, err := l.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: &s})
			return err
		}},
		{"CreateStream", 5, false, func(l *memlog.Log, _ string) error {
			_, err := l.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(fresh()), ShardCount: aws.Int32(1)})
			return err
		}},
		{"DeleteStream", 5, false, func(l *memlog.Log, _ string) error {
			_, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String(fresh())})
			return err
		}},
		{"SplitShard", 5, false, func(l *memlog.Log, s string) error {
			_, err := l.SplitShard(ctx, &awskinesis.SplitShardInput{StreamName: &s, ShardToSplit: aws.String(shardName(0)), NewStartingHashKey: aws.String("1")})
			return err
		}},
		{"MergeShards", 5, false, func(l *memlog.Log, s string) error {
			_, err := l.MergeShards(ctx, &awskinesis.MergeShardsInput{StreamName: &s, ShardToMerge: aws.String(shardName(0)), AdjacentShardToMerge: aws.String(shardName(0))})
			return err
		}},
		{"UpdateShardCount", 10, false, func(l *memlog.Log, s string) error {
			_, err := l.UpdateShardCount(ctx, &awskinesis.UpdateShardCountInput{StreamName: &s, TargetShardCount: aws.Int32(1), ScalingType: types.ScalingTypeUniformScaling})
			return err
		}},
		{"RegisterStreamConsumer", 5, false, func(l *memlog.Log, s string) error {
			_, err := l.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{StreamARN: arnOf(s), ConsumerName: aws.String(fresh())})
			return err
		}},
		{"DescribeStreamConsumer", 20, true, func(l *memlog.Log, s string) error {
			_, err := l.DescribeStreamConsumer(ctx, &awskinesis.DescribeStreamConsumerInput{StreamARN: arnOf(s), ConsumerName: aws.String("nobody")})
			return err
		}},
		{"ListStreamConsumers", 5, true, func(l *memlog.Log, s string) error {
			_, err := l.ListStreamConsumers(ctx, &awskinesis.ListStreamConsumersInput{StreamARN: arnOf(s)})
			return err
		}},
		{"DeregisterStreamConsumer", 5, true, func(l *memlog.Log, s string) error {
			_, err := l.DeregisterStreamConsumer(ctx, &awskinesis.DeregisterStreamConsumerInput{StreamARN: arnOf(s), ConsumerName: aws.String("nobody")})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.op, func(t *testing.T) {
			// The streams are made before the quotas count: a Log without them, then one with.
			clk := newClock()
			l := memlog.New(memlog.Config{Now: clk.Now, Quotas: &memlog.Quotas{ControlCalls: map[string]int{"CreateStream": -1}}})
			createStream(t, l, "s", 1)
			createStream(t, l, "t", 1)
			if c.op == "CreateStream" {
				l = memlog.New(memlog.Config{Now: clk.Now, Quotas: &memlog.Quotas{}})
			}
			for i := range c.rate {
				if err := c.call(l, "s"); errCode(err) == "LimitExceededException" {
					t.Fatalf("call %d of %d in a second: %v", i+1, c.rate, err)
				}
			}
			err := c.call(l, "s")
			if c.perStream {
				wantErr[*types.LimitExceededException](t, err, "Rate exceeded for stream s under account 000000000000.")
				if err := c.call(l, "t"); errCode(err) == "LimitExceededException" {
					t.Errorf("another stream has its own quota: %v", err)
				}
			} else {
				wantErr[*types.LimitExceededException](t, err, "Rate exceeded for account 000000000000.")
				if err := c.call(l, "t"); errCode(err) != "LimitExceededException" {
					t.Errorf("the quota is per account, yet another stream's call got %v", err)
				}
			}
			clk.Advance(time.Second)
			if err := c.call(l, "s"); errCode(err) == "LimitExceededException" {
				t.Errorf("a second later: %v", err)
			}
			if c.op != "CreateStream" && c.op != "DeleteStream" {
				if u := l.Usage("s"); u.Calls[c.op] != int64(c.rate)+2 || u.Throttled[c.op] != 1 {
					t.Errorf("usage of s: calls %d, throttled %d; want %d and 1", u.Calls[c.op], u.Throttled[c.op], c.rate+2)
				}
			}
		})
	}
}

// TestQuotaControlOverride: ControlCalls sets one operation's rate and leaves the others'.
func TestQuotaControlOverride(t *testing.T) {
	l, _ := quotaStream(t, 1, memlog.Quotas{ControlCalls: map[string]int{"ListShards": 2}})
	list := func() error {
		_, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s")})
		return err
	}
	if list() != nil || list() != nil {
		t.Fatal("two calls of two a second failed")
	}
	wantErr[*types.LimitExceededException](t, list())
	for i := range 20 {
		if _, err := l.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")}); err != nil {
			t.Fatalf("DescribeStreamSummary %d: %v", i, err)
		}
	}
}

func TestQuotaSubscribeCalls(t *testing.T) {
	noLeaks(t)
	l, clk, arn := fanoutLog(t, 2, memlog.Config{Quotas: &memlog.Quotas{}})
	in := func(shard int) *awskinesis.SubscribeToShardInput {
		return &awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(shardName(shard)), StartingPosition: startAt(types.ShardIteratorTypeLatest)}
	}
	subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	_, err := l.SubscribeToShard(ctx, in(0))
	wantErr[*types.LimitExceededException](t, err, "Rate exceeded for consumer "+arn+" on shard shardId-000000000000 in stream s")
	subscribe(t, l, arn, shardName(1), startAt(types.ShardIteratorTypeLatest)) // per shard
	clk.Advance(time.Second)
	_, err = l.SubscribeToShard(ctx, in(0)) // within the rate now, but not past the 5-second rule
	wantErr[*types.ResourceInUseException](t, err)
	clk.Advance(4 * time.Second)
	subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	if u := l.Usage("s"); u.Calls["SubscribeToShard"] != 5 || u.Throttled["SubscribeToShard"] != 1 {
		t.Errorf("usage %+v", u)
	}
}

// TestQuotaFanOutPacing: a subscription's pushes keep to 2 MiB a second per consumer and shard:
// what is stored beyond that waits on the Log's timer, and comes when the clock gets there.
func TestQuotaFanOutPacing(t *testing.T) {
	noLeaks(t)
	l, clk, arn := fanoutLog(t, 1, memlog.Config{Quotas: &memlog.Quotas{ShardWriteBytes: -1, ShardWriteRecords: -1}})
	for range 2 {
		putRecords(t, l, routed(5, 500_000, "")) // two records (1,000,002 bytes) an event
	}
	ev := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeTrimHorizon))
	// 2 MiB is there at once; the third event takes the budget into debt.
	recs, _ := ev.records(6)
	const pushed = 6 * 500_001
	owed := time.Duration((pushed - 2*mib) * int64(time.Second) / (2 * mib))
	rest := owed + 1 // rounded up to the nanosecond
	if (pushed-2*mib)*int64(time.Second)%(2*mib) == 0 {
		rest = owed
	}
	clk.awaitTimer(t, clk.Now().Add(rest))
	clk.Advance(rest - 1)
	select {
	case e := <-ev.es.Events():
		t.Fatalf("an event before the budget allowed it: %v", e)
	default:
	}
	clk.Advance(1)
	more, _ := ev.records(2)
	t.Logf("%d records at once, 2 more after %v", len(recs), rest)
	if len(more) != 2 {
		t.Errorf("got %d more records", len(more))
	}
}
