package memlog_test

import (
	"fmt"
	"math/big"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// Puts racing many reshards (and reads and retention passes racing both): every acknowledged
// record is stored once, in the shard and under the sequence number its put reported, in its key's
// order across parents and children, within its shard's hash key range, and never in a closed
// shard after its EndingSequenceNumber.
func TestPutsDuringReshards(t *testing.T) {
	l, c := newStream(t, "s", 2)
	const writers, keys, minPuts = 4, 5, 20
	type ack struct{ shard, seq string }
	acks := make([]map[string]ack, writers) // by payload; each writer writes only its own
	var finished atomic.Bool
	var started, wg sync.WaitGroup
	errs := make(chan error, 100)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}

	started.Add(writers)
	for w := range writers {
		acks[w] = map[string]ack{}
		wg.Go(func() {
			next := make([]int, keys)
			payload := func(k int) string {
				next[k]++
				return fmt.Sprintf("w%dk%d:%d", w, k, next[k])
			}
			for i := 0; i < minPuts || !finished.Load(); i++ {
				if i%2 == 0 {
					k := i % keys
					p := payload(k)
					out, err := l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"),
						PartitionKey: aws.String(fmt.Sprintf("w%dk%d", w, k)), Data: []byte(p)})
					if err != nil {
						fail(err)
						return
					}
					acks[w][p] = ack{*out.ShardId, *out.SequenceNumber}
				} else {
					batch := make([]types.PutRecordsRequestEntry, 2*keys) // every key twice, in order
					for j := range batch {
						k := j % keys
						batch[j] = types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("w%dk%d", w, k)), Data: []byte(payload(k))}
					}
					out, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: batch})
					if err != nil {
						fail(err)
						return
					}
					for j, r := range out.Records {
						acks[w][string(batch[j].Data)] = ack{*r.ShardId, *r.SequenceNumber}
					}
				}
				if i == 0 {
					started.Done()
				}
			}
		})
	}
	wg.Go(func() { // a reader and a retention pass that drops nothing, to race the reshards
		for !finished.Load() {
			if _, err := l.ExpireRecords("s", c.Now().Add(-time.Hour)); err != nil {
				fail(err)
			}
			out, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s")})
			if err != nil {
				fail(err)
				return
			}
			for _, s := range out.Shards {
				it, err := l.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"),
					ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
				if err == nil {
					_, err = l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(50)})
				}
				if err != nil {
					fail(err)
					return
				}
			}
		}
	})

	started.Wait() // every writer is writing, and keeps writing until the reshards are done
	for round := range 6 {
		for _, target := range []int32{4, 3, 5, 3, 2, 1} {
			splitFirstOpen(t, l)
			mergeFirstOpen(t, l)
			rescale(t, l, "s", clampTarget(t, l, target+int32(round%2)))
		}
	}
	finished.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	shards := listShards(t, l, "s", nil)
	checkLineage(t, shards)
	recs := readStream(t, l, "s")
	checkOrderPerKey(t, recs)
	stored := map[string]ack{}
	for _, r := range recs {
		stored[string(r.Data)] = ack{"", *r.SequenceNumber}
	}
	bySeq := map[string]string{} // sequence number → shard, from the listing
	for _, s := range shards {
		recs, _ := readShard(t, l, "s", *s.ShardId)
		for _, r := range recs {
			bySeq[*r.SequenceNumber] = *s.ShardId
		}
	}
	total := 0
	for _, m := range acks {
		for p, a := range m {
			total++
			got, ok := stored[p]
			if !ok {
				t.Errorf("acknowledged record %s is missing", p)
				continue
			}
			if got.seq != a.seq || bySeq[a.seq] != a.shard {
				t.Errorf("record %s: stored as %s in %s, acknowledged as %s in %s", p, got.seq, bySeq[got.seq], a.seq, a.shard)
			}
		}
	}
	if len(recs) != total {
		t.Errorf("read %d records, %d were acknowledged", len(recs), total)
	}
	t.Logf("%d records, %d shards", total, len(shards))
}

// openShards lists the open shards by starting hash key.
func openShards(t testing.TB, l *memlog.Log) []types.Shard {
	t.Helper()
	open := listShards(t, l, "s", &types.ShardFilter{Type: types.ShardFilterTypeAtLatest})
	sort.Slice(open, func(i, j int) bool {
		return bigOf(open[i].HashKeyRange.StartingHashKey).Cmp(bigOf(open[j].HashKeyRange.StartingHashKey)) < 0
	})
	return open
}

func splitFirstOpen(t testing.TB, l *memlog.Log) {
	t.Helper()
	s := openShards(t, l)[0]
	lo, hi := bigOf(s.HashKeyRange.StartingHashKey), bigOf(s.HashKeyRange.EndingHashKey)
	split(t, l, "s", *s.ShardId, new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1))
}

func mergeFirstOpen(t testing.TB, l *memlog.Log) {
	t.Helper()
	if open := openShards(t, l); len(open) > 1 {
		merge(t, l, "s", *open[0].ShardId, *open[1].ShardId)
	}
}

// clampTarget keeps a target shard count within what UpdateShardCount allows now.
func clampTarget(t testing.TB, l *memlog.Log, n int32) int32 {
	t.Helper()
	cur := int32(len(openShards(t, l)))
	return min(max(n, (cur+1)/2), 2*cur)
}
