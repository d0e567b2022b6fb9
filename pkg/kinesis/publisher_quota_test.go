package kinesis_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// A publisher above a shard's write quota (memlog enforcing AWS's 1,000 records/s) slows to it
// and loses nothing: no error reaches the callers while retries last, every message is stored
// once, each key's in the order published.
func TestPublish_AboveTheShardWriteQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream, callers, calls, perCall = "orders", 16, 20, 10
		l := memlog.New(memlog.Config{Quotas: &memlog.Quotas{}})
		if _, err := l.CreateStream(t.Context(), &awskinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, PartitionKey: kinesis.PartitionKeyFromMetadata("key")})
		var all []*message.Message
		byCaller := make([][]*message.Message, callers)
		for c := range byCaller {
			byCaller[c] = pubMessages(calls*perCall, func(i int) string { return fmt.Sprintf("caller-%d-%d", c, i%3) })
			all = append(all, byCaller[c]...)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for c, msgs := range byCaller {
			wg.Go(func() {
				for i := 0; i < len(msgs); i += perCall {
					if err := p.Publish(stream, msgs[i:i+perCall]...); err != nil {
						t.Errorf("caller %d: %v", c, err)
						return
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		u := l.Usage(stream)
		t.Logf("%d messages: %s of fake time (%.0f records/s), %d PutRecords calls, %d entries throttled and retried",
			len(all), took, float64(u.Records)/took.Seconds(), u.PutCalls, u.ThrottledRecords)
		if u.ThrottledRecords == 0 {
			t.Error("no entry was throttled: the load did not reach the quota")
		}
		// The shard takes 1,000 records/s after its first second's burst: the publisher went at
		// the limit, neither through it nor far below it.
		if min := time.Duration(len(all)-1000) * time.Millisecond; took < min {
			t.Errorf("%d records in %s: faster than the quota allows (%s at least)", len(all), took, min)
		}
		if max := time.Duration(len(all)) * 3 * time.Millisecond; took > max {
			t.Errorf("%d records in %s: well below the quota's pace (%s at most)", len(all), took, max)
		}
		pubCheckOrder(t, l, stream, all)
	})
}
