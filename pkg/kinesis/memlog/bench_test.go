package memlog_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// BenchmarkPutGet moves b.N records of 100 bytes through a 4-shard stream: PutRecords batches
// of 500 with varied keys, then one reader per shard draining its shard with GetRecords, in
// parallel, as the driver's publisher and shard readers do. It reports records per second for
// the whole trip (put and get).
func BenchmarkPutGet(b *testing.B) {
	const shards = 4
	l, _ := newStream(b, "s", shards)
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
	var wg sync.WaitGroup
	var read atomic.Int64
	for s := range shards {
		wg.Go(func() { drain(b, l, shardName(s), &read) })
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	if got := read.Load(); got != int64(b.N) {
		b.Fatalf("read %d records, put %d", got, b.N)
	}
}

// drain reads one shard from TRIM_HORIZON to its end, counting records into read.
func drain(b *testing.B, l *memlog.Log, shard string, read *atomic.Int64) {
	it := iterOf(b, l, "s", shard, types.ShardIteratorTypeTrimHorizon)
	for {
		out, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: &it})
		if err != nil {
			b.Error(err)
			return
		}
		if len(out.Records) == 0 {
			return
		}
		for _, r := range out.Records {
			if len(r.Data) != 100 {
				b.Errorf("record of %d bytes", len(r.Data))
			}
		}
		read.Add(int64(len(out.Records)))
		it = *out.NextShardIterator
	}
}
