package memlog_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// BenchmarkPutRecords stores b.N records of 100 bytes in a 4-shard stream in PutRecords batches
// of 500, with nobody reading: the append path alone, which waking subscribers must not slow.
func BenchmarkPutRecords(b *testing.B) {
	l, _ := newStream(b, "s", 4)
	benchPut(b, l)
}

func benchPut(b *testing.B, l interface {
	PutRecords(ctx context.Context, in *awskinesis.PutRecordsInput, _ ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error)
}) {
	keys := make([]*string, 4096)
	for i := range keys {
		keys[i] = aws.String(fmt.Sprintf("%08x-key", uint32(i*2654435761)))
	}
	payload := make([]byte, 100)
	batch := make([]types.PutRecordsRequestEntry, 500)
	b.ReportAllocs()
	b.ResetTimer()
	for put := 0; put < b.N; {
		n := min(len(batch), b.N-put)
		for i := range n {
			batch[i] = types.PutRecordsRequestEntry{PartitionKey: keys[(put+i)%len(keys)], Data: payload}
		}
		if _, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: batch[:n]}); err != nil {
			b.Fatal(err)
		}
		put += n
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkPutRecordsSubscribed is BenchmarkPutRecords with an enhanced fan-out subscription
// draining each shard meanwhile, and waits until the subscriptions have had every record: the
// cost of pushing records to subscribers as they are stored.
func BenchmarkPutRecordsSubscribed(b *testing.B) {
	const shards = 4
	l, _ := newStream(b, "s", shards)
	arn := register(b, l, "bench")
	var wg sync.WaitGroup
	var got atomic.Int64
	all := make(chan struct{})
	for s := range shards {
		out, err := l.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn),
			ShardId: aws.String(shardName(s)), StartingPosition: startAt(types.ShardIteratorTypeLatest)})
		if err != nil {
			b.Fatal(err)
		}
		es := out.GetStream()
		wg.Go(func() {
			defer es.Close()
			for {
				select {
				case ev := <-es.Events():
					v := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value
					if got.Add(int64(len(v.Records))) == int64(b.N) {
						close(all)
					}
				case <-all:
					return
				}
			}
		})
	}
	benchPut(b, l)
	<-all
	wg.Wait()
}
