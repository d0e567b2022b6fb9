package kinesis_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// Concurrent Publish calls share PutRecords requests; each returns once its own messages are
// stored, and failures name each call's own messages.

// pubRoundTrip delays every PutRecords call as an AWS round trip does (on fake time inside a
// synctest bubble) and counts the calls.
func pubRoundTrip(l *memlog.Log, rtt time.Duration) *atomic.Int64 {
	var calls atomic.Int64
	l.SetFault(func(ctx context.Context, c memlog.Call) error {
		if c.Op != "PutRecords" {
			return nil
		}
		calls.Add(1)
		select {
		case <-time.After(rtt):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return &calls
}

// publishConcurrently runs callers goroutines, each publishing perCaller messages one per call,
// one after another, with the partition key of its goroutine ("key" metadata), and returns the
// messages in each goroutine's publish order.
func publishConcurrently(t *testing.T, p *kinesis.Publisher, stream string, callers, perCaller int) []*message.Message {
	t.Helper()
	msgs := make([]*message.Message, 0, callers*perCaller)
	byCaller := make([][]*message.Message, callers)
	for c := range byCaller {
		byCaller[c] = pubMessages(perCaller, func(int) string { return fmt.Sprintf("caller-%d", c) })
		msgs = append(msgs, byCaller[c]...)
	}
	var wg sync.WaitGroup
	for c := range byCaller {
		wg.Go(func() {
			for _, m := range byCaller[c] {
				if err := p.Publish(stream, m); err != nil {
					t.Errorf("caller %d: Publish: %v", c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return msgs
}

// 64 goroutines publishing one message per call, with a 20 ms round trip: the calls share
// requests (the issue measured one request per message before), every message is stored once,
// and each goroutine's messages in the order it published them.
func TestPublish_ConcurrentCallsShareRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream, callers, perCaller = "orders", 64, 50
		l := pubNewLog(t, stream, 1)
		calls := pubRoundTrip(l, 20*time.Millisecond)
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, PartitionKey: kinesis.PartitionKeyFromMetadata("key")})
		start := time.Now()
		msgs := publishConcurrently(t, p, stream, callers, perCaller)
		took := time.Since(start)
		l.SetFault(nil)
		pubCheckOrder(t, l, stream, msgs)
		n := calls.Load()
		t.Logf("%d messages from %d goroutines: %d PutRecords calls (%.1f messages a call), %s of fake time",
			len(msgs), callers, n, float64(len(msgs))/float64(n), took)
		if n > int64(len(msgs)/4) {
			t.Errorf("%d PutRecords calls for %d messages; concurrent calls should share requests (at most %d)", n, len(msgs), len(msgs)/4)
		}
		// Throughput is bound by callers per round trip: each caller waits for its answer. The
		// callers answered together publish again together; when each of them started a sender
		// of its own, the requests reached MaxInFlightRequests and the rest waited for an
		// answer: 1.8-1.96 s of fake time (1.0-1.06 s since).
		if limit := time.Duration(perCaller) * 20 * time.Millisecond * 5 / 4; took > limit {
			t.Errorf("took %s of fake time, want at most %s (a round trip and a quarter a call)", took, limit)
		}
	})
}

// A call whose context ends while its record waits returns at once; the request that carried
// only its record is cancelled rather than held for RequestTimeout, and the calls queued behind
// it share the next request.
func TestPublish_AbandonedRequestDoesNotHoldOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream = "orders"
		l := pubNewLog(t, stream, 1)
		var calls atomic.Int64
		l.SetFault(func(ctx context.Context, c memlog.Call) error {
			if c.Op == "PutRecords" && calls.Add(1) == 1 {
				<-ctx.Done() // the first request hangs until nobody waits for it
				return ctx.Err()
			}
			return nil
		})
		const timeout = 30 * time.Second
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, MaxInFlightRequests: 1, RequestTimeout: timeout})
		ctx, cancel := context.WithCancel(context.Background())
		first := pubMessages(1, nil)[0]
		first.SetContext(ctx)
		firstErr := make(chan error, 1)
		go func() { firstErr <- p.Publish(stream, first) }()
		synctest.Wait() // the first request is out, its record in it
		others := pubMessages(2, nil)
		var wg sync.WaitGroup
		for _, m := range others {
			wg.Go(func() {
				if err := p.Publish(stream, m); err != nil {
					t.Errorf("a call queued behind the abandoned request: %v", err)
				}
			})
		}
		synctest.Wait() // both queued: the one request allowed is out
		cancelled := time.Now()
		cancel()
		if err := <-firstErr; !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled call: %v, want context.Canceled", err)
		}
		wg.Wait()
		if waited := time.Since(cancelled); waited != 0 {
			t.Errorf("the queued calls returned %s (fake time) after the first call gave up, want at once: the abandoned request held the one slot (RequestTimeout %s)", waited, timeout)
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("%d PutRecords calls, want 2: the abandoned one, then one for both queued calls", n)
		}
		l.SetFault(nil)
		if got := len(pubReadAll(t, l, stream)); got != 2 {
			t.Errorf("%d records stored, want the 2 of the calls that waited", got)
		}
	})
}

// Close returns once the calls in progress have finished, and their messages are stored; a
// Publish during Close fails at once. Close's wait is one synctest sees (fake time advances).
func TestPublish_CloseWaitsForCallsInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream, rtt = "orders", 20 * time.Millisecond
		l := pubNewLog(t, stream, 1)
		pubRoundTrip(l, rtt)
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l})
		published := make(chan error, 1)
		start := time.Now()
		go func() { published <- p.Publish(stream, pubMessages(1, nil)...) }()
		synctest.Wait() // its request is out
		closed := make(chan error, 1)
		go func() { closed <- p.Close() }()
		synctest.Wait() // Close is waiting for the call
		if err := p.Publish(stream, pubMessages(1, nil)...); !errors.Is(err, kinesis.ErrPublisherClosed) {
			t.Errorf("Publish during Close: %v, want ErrPublisherClosed", err)
		}
		select {
		case <-closed:
			t.Fatal("Close returned while a call was in progress")
		default:
		}
		if err := <-published; err != nil {
			t.Errorf("the call in progress at Close: %v", err)
		}
		if err := <-closed; err != nil {
			t.Errorf("Close: %v", err)
		}
		if took := time.Since(start); took != rtt {
			t.Errorf("Close returned %s (fake time) after the call began, want %s (its round trip)", took, rtt)
		}
		l.SetFault(nil)
		if got := len(pubReadAll(t, l, stream)); got != 1 {
			t.Errorf("%d records stored, want the call's 1", got)
		}
	})
}

// Calls that share a request get their own outcome: an entry rejected for good fails its own
// call, naming its message, and the others' messages are written.
func TestPublish_SharedRequestFailsOnlyTheRejectedCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream = "orders"
		l := pubNewLog(t, stream, 1)
		pubRoundTrip(l, 20*time.Millisecond)
		l.SetPutRecordsEntryFault(func(_ string, _ int, e types.PutRecordsRequestEntry) (string, string) {
			if *e.PartitionKey == "bad" {
				return "InvalidArgumentException", "rejected for the test"
			}
			return "", ""
		})
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, PartitionKey: kinesis.PartitionKeyFromMetadata("key"), MaxInFlightRequests: 1})
		msgs := pubMessages(10, func(i int) string { return map[bool]string{true: "bad", false: fmt.Sprint(i)}[i == 3] })
		errs := make([]error, len(msgs))
		var wg sync.WaitGroup
		for i, m := range msgs {
			wg.Go(func() { errs[i] = p.Publish(stream, m) })
		}
		wg.Wait()
		for i, err := range errs {
			var pe *kinesis.PublishError
			switch {
			case i == 3 && (!errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Failed[0].UUID != msgs[3].UUID):
				t.Errorf("the rejected call: %v, want a PublishError naming its message", err)
			case i != 3 && err != nil:
				t.Errorf("call %d, sharing requests with the rejected one: %v", i, err)
			}
		}
		l.SetFault(nil)
		l.SetPutRecordsEntryFault(nil)
		if got := len(pubReadAll(t, l, stream)); got != 9 {
			t.Errorf("%d records stored, want 9", got)
		}
	})
}

// With Linger, records that arrive within it share one request even when one could go out at
// once.
func TestPublish_LingerPacksArrivalsTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream = "orders"
		l := pubNewLog(t, stream, 1)
		calls := pubRoundTrip(l, 20*time.Millisecond)
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, Linger: 5 * time.Millisecond})
		var wg sync.WaitGroup
		for i, m := range pubMessages(10, nil) {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 400 * time.Microsecond) // all within 4 ms
				if err := p.Publish(stream, m); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("10 messages within 4 ms, Linger 5 ms: %d PutRecords calls, want 1", n)
		}
	})
}

// With AggregateKPL, the single messages of concurrent calls, with the default (UUID) partition
// keys, are packed by the shard their keys hash to: far fewer records than messages, and every
// user record of an aggregate belongs to the hash key range of the shard it is stored in (the
// KCL drops those that do not).
func TestPublish_KPLPacksConcurrentCallsByShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream, callers, perCaller = "orders", 64, 20
		l := pubNewLog(t, stream, 4)
		pubRoundTrip(l, 20*time.Millisecond)
		// Two requests in flight: about 32 messages a request, 8 a shard.
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, AggregateKPL: true, MaxInFlightRequests: 2})
		want := publishSingles(t, p, stream, callers, perCaller)
		l.SetFault(nil)
		records, users := pubCheckAggregates(t, l, stream, want)
		t.Logf("%d messages from %d goroutines on 4 shards: %d Kinesis records", users, callers, records)
		if records*4 > users {
			t.Errorf("%d records for %d messages: concurrent single messages should share aggregates", records, users)
		}
	})
}

// pubCheckAggregates reads every shard, unpacks aggregates, and checks that each user record's
// hash key is in its shard's range and that the messages stored are exactly want, once each.
func pubCheckAggregates(t *testing.T, l *memlog.Log, stream string, want map[string]bool) (records, users int) {
	t.Helper()
	ctx := context.Background()
	seen := map[string]int{}
	for _, sh := range pubShards(t, l, stream) {
		lo, _ := new(big.Int).SetString(*sh.HashKeyRange.StartingHashKey, 10)
		hi, _ := new(big.Int).SetString(*sh.HashKeyRange.EndingHashKey, 10)
		it, err := l.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: &stream, ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: pubInt32(10000)})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range out.Records {
			records++
			subs := []kpl.Record{{PartitionKey: *rec.PartitionKey, Data: rec.Data}}
			if kpl.IsAggregated(rec.Data) {
				if subs, err = kpl.Deaggregate(rec.Data); err != nil {
					t.Fatalf("record %s of %s: %v", *rec.SequenceNumber, *sh.ShardId, err)
				}
			}
			for _, u := range subs {
				users++
				sum := md5.Sum([]byte(u.PartitionKey))
				if h := new(big.Int).SetBytes(sum[:]); h.Cmp(lo) < 0 || h.Cmp(hi) > 0 {
					t.Errorf("user record with key %s is stored in %s, whose range does not hold its hash key", u.PartitionKey, *sh.ShardId)
				}
				r := types.Record{Data: u.Data, PartitionKey: &u.PartitionKey, SequenceNumber: rec.SequenceNumber}
				m, err := kinesis.EnvelopeMarshaler{}.Unmarshal(stream, *sh.ShardId, &r)
				if err != nil || !bytes.HasPrefix(m.Payload, []byte("payload")) {
					t.Fatalf("user record of %s: %v", *sh.ShardId, err)
				}
				seen[m.UUID]++
			}
		}
	}
	for uuid := range want {
		if seen[uuid] != 1 {
			t.Errorf("message %s stored %d times, want once", uuid, seen[uuid])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct messages stored, want %d", len(seen), len(want))
	}
	return records, users
}

func pubInt32(n int32) *int32 { return &n }

// Messages of different calls packed into one aggregate are read back as the calls' messages,
// and a group that acked some of them resumes inside the aggregate: only the rest come again.
func TestKPL_ResumeInsideAggregateOfManyCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const calls = 20
		e := newSubEnv(t, 1, nil)
		pubRoundTrip(e.log, 20*time.Millisecond)
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: e.log, AggregateKPL: true, MaxInFlightRequests: 1})
		// The first call has the shard map loaded (in the background); the calls after it are
		// packed by it.
		if err := p.Publish(e.stream, subMsgs(calls, 1)...); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		msgs := subMsgs(0, calls)
		var wg sync.WaitGroup
		for _, m := range msgs {
			wg.Go(func() {
				if err := p.Publish(e.stream, m); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		e.log.SetFault(nil)
		stored := e.subStoredRecords()[1:]
		if len(stored) >= calls/2 {
			t.Fatalf("%d one-message calls stored as %d records; most should share an aggregate", calls, len(stored))
		}

		cfg := e.config(subGroup)
		sub := e.subscriber(cfg)
		acked := map[string]bool{}
		for _, m := range subRecvAck(t, e.subscribe(sub, context.Background()), 1+calls/2) {
			acked[m.UUID] = true
		}
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
		rest := subRecvAck(t, e.subscribe(e.subscriber(cfg), context.Background()), calls/2)
		for _, m := range rest {
			if acked[m.UUID] {
				t.Errorf("message %s was acked before the restart and delivered again", m.UUID)
			}
			acked[m.UUID] = true
		}
		for _, m := range msgs {
			if !acked[m.UUID] {
				t.Errorf("message %s was never delivered", m.UUID)
			}
		}
	})
}

// An entry rejected for good fails its message; the entries of the same round throttled at
// the same time are still retried and written.
func TestPublish_PermanentRejectionLeavesOthersRetried(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	var busy atomic.Int64
	l.SetPutRecordsEntryFault(func(_ string, _ int, e types.PutRecordsRequestEntry) (string, string) {
		switch *e.PartitionKey {
		case "bad":
			return "InvalidArgumentException", "rejected for the test"
		case "busy":
			if busy.Add(1) == 1 {
				return "ProvisionedThroughputExceededException", ""
			}
		}
		return "", ""
	})
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, PartitionKey: kinesis.PartitionKeyFromMetadata("key"), RetryBackoff: time.Millisecond})
	msgs := pubMessages(3, func(i int) string { return []string{"ok", "bad", "busy"}[i] })
	err := p.Publish(stream, msgs...)
	failed := pubMessageErrors(err)
	if len(failed) != 1 || failed[0].UUID != msgs[1].UUID {
		t.Errorf("Publish: %v; want only the message rejected for good named", err)
	}
	if busy.Load() != 2 {
		t.Errorf("the throttled entry was sent %d times, want 2 (retried once)", busy.Load())
	}
}

// A ListShards that fails (throttled) is tried again: packing by shard comes back, rather than
// staying by key for the publisher's life. Until the retry, a second on, about callers x (1 s /
// round trip) = 3,200 messages go one a record (their UUID keys differ); most of the 12,800
// must be packed after it.
func TestPublish_KPLShardMapRetriedAfterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream, callers, perCaller = "orders", 64, 200
		l := pubNewLog(t, stream, 4)
		var lists atomic.Int64
		l.SetFault(func(ctx context.Context, c memlog.Call) error {
			switch c.Op {
			case "ListShards":
				if lists.Add(1) == 1 {
					return &types.LimitExceededException{Message: pubStr("Rate exceeded for stream orders")}
				}
			case "PutRecords":
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, AggregateKPL: true, MaxInFlightRequests: 2})
		want := publishSingles(t, p, stream, callers, perCaller)
		l.SetFault(nil)
		records, users := pubCheckAggregates(t, l, stream, want)
		t.Logf("%d messages, %d Kinesis records, %d ListShards calls", users, records, lists.Load())
		if lists.Load() < 2 || records*2 > users {
			t.Errorf("%d records for %d messages, %d ListShards calls: the map was not loaded again after a failure", records, users, lists.Load())
		}
	})
}

// After a split, the first answer that puts any record in another shard than the map said
// drops the map, a lone unpacked message's as well as a packed one's: here a lone message shows
// the split, and the burst after it, within the second before the map may load again, is packed
// by key only rather than by the parent's range into one child.
func TestPublish_KPLMapDroppedWhenAnyRecordLandsElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream = "orders"
		l := pubNewLog(t, stream, 1)
		lists := pubCountCalls(l, func(ctx context.Context, c memlog.Call) error {
			if c.Op == "PutRecords" { // a round trip, so that the burst's calls share requests
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, AggregateKPL: true})
		want := publishSingles(t, p, stream, 1, 1) // its request starts the map's load
		synctest.Wait()                            // the map is in
		pubSplitFirstShard(t, l, stream)
		maps.Copy(want, publishSingles(t, p, stream, 1, 1))
		maps.Copy(want, publishSingles(t, p, stream, 64, 1))
		l.SetFault(nil)
		pubCheckAggregates(t, l, stream, want) // every user record in a shard whose range holds its key
		if n := lists.get("ListShards"); n != 1 {
			t.Errorf("%d ListShards calls, want 1: the burst ran within a second of the first load", n)
		}
	})
}

// slowListing answers each ListShards after a delay, with the listing as it was when asked
// (on fake time in these tests), as a slow ListShards does.
type slowListing struct {
	*memlog.Log
	delay time.Duration
	list  func(*awskinesis.ListShardsOutput) *awskinesis.ListShardsOutput // changes the answer; nil keeps it
}

func (s slowListing) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, opts ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	out, err := s.Log.ListShards(ctx, in, opts...)
	if err == nil && s.list != nil {
		out = s.list(out)
	}
	select {
	case <-time.After(s.delay):
		return out, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A shard map load is thrown away when, while it was out, Kinesis wrote to a shard its listing
// does not have open (here a child, answering a lone message sent after the split while the
// slow load, which listed the parent, was out): the messages after it are packed by key until
// a load that began after the split, not by the parent's range into one child (the review's
// scenario: 24 user records in the wrong child).
func TestPublish_KPLLoadOutAtSplitIsThrownAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream = "orders"
		l := pubNewLog(t, stream, 1)
		client := slowListing{Log: l, delay: 50 * time.Millisecond}
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: client, AggregateKPL: true})
		want := publishSingles(t, p, stream, 1, 1) // starts the load: 1 shard, answered at 50 ms
		pubSplitFirstShard(t, l, stream)
		maps.Copy(want, publishSingles(t, p, stream, 1, 1)) // answered from a child while the load is out
		time.Sleep(100 * time.Millisecond)                  // the load is back, with one shard
		burst := pubMessages(64, nil)                       // one call of 64 keys: packed by shard if there is a map
		if err := p.Publish(stream, burst...); err != nil {
			t.Fatal(err)
		}
		for _, m := range burst {
			want[m.UUID] = true
		}
		pubCheckAggregates(t, l, stream, want)
	})
}

// An answer naming a shard the map lacks drops it, predicted or not: here the first request,
// sent before any map, is answered from a child only after a slow load installed the parent's
// listing (taken before the split); the call after it is packed by key, not by the parent's
// range into one child (the third review's scenario: 27 user records in the wrong child).
func TestPublish_KPLAnswerFromUnmappedShardDropsMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream = "orders"
		l := pubNewLog(t, stream, 1)
		var puts atomic.Int64
		l.SetFault(func(ctx context.Context, c memlog.Call) error {
			if c.Op == "PutRecords" && puts.Add(1) == 1 {
				time.Sleep(80 * time.Millisecond) // the first request is answered after the load
			}
			return nil
		})
		client := slowListing{Log: l, delay: 50 * time.Millisecond} // lists at 0, answers at 50 ms
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: client, AggregateKPL: true})
		first := make(chan map[string]bool, 1)
		go func() { first <- publishSingles(t, p, stream, 1, 1) }() // its sender starts the load
		time.Sleep(10 * time.Millisecond)
		pubSplitFirstShard(t, l, stream)
		want := <-first // written to a child at 80 ms, the parent's map in since 50 ms
		burst := pubMessages(64, nil)
		if err := p.Publish(stream, burst...); err != nil {
			t.Fatal(err)
		}
		for _, m := range burst {
			want[m.UUID] = true
		}
		pubCheckAggregates(t, l, stream, want)
	})
}

// A listing with no shard the packer can use counts as a failed load: tried again after a
// second, rather than leaving packing by key for the publisher's life.
func TestPublish_KPLUnusableListingIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream = "orders"
		l := pubNewLog(t, stream, 1)
		var lists atomic.Int64
		client := slowListing{Log: l, list: func(out *awskinesis.ListShardsOutput) *awskinesis.ListShardsOutput {
			if lists.Add(1) == 1 {
				shards := slices.Clone(out.Shards)
				for i := range shards {
					shards[i].HashKeyRange = nil // nothing to pack by
				}
				return &awskinesis.ListShardsOutput{Shards: shards}
			}
			return out
		}}
		p := pubNewPublisher(t, kinesis.PublisherConfig{Client: client, AggregateKPL: true})
		publishSingles(t, p, stream, 1, 1)
		synctest.Wait()
		time.Sleep(1100 * time.Millisecond)
		publishSingles(t, p, stream, 1, 1) // its sender loads the map again
		synctest.Wait()
		if n := lists.Load(); n != 2 {
			t.Fatalf("%d ListShards calls, want 2: a load that found no usable shard is tried again", n)
		}
		// Packed by shard now: one call of 16 messages with their UUID keys is one record.
		before := l.Usage(stream).Records
		if err := p.Publish(stream, pubMessages(16, nil)...); err != nil {
			t.Fatal(err)
		}
		if got := l.Usage(stream).Records - before; got != 1 {
			t.Errorf("16 messages of 16 keys went as %d records, want 1 aggregate (packed by shard)", got)
		}
	})
}

// pubSplitFirstShard splits the stream's first shard at 2^127, into two halves.
func pubSplitFirstShard(t *testing.T, l *memlog.Log, stream string) {
	t.Helper()
	mid := new(big.Int).Lsh(big.NewInt(1), 127)
	if _, err := l.SplitShard(context.Background(), &awskinesis.SplitShardInput{
		StreamName: pubStr(stream), ShardToSplit: pubStr("shardId-000000000000"), NewStartingHashKey: pubStr(mid.String()),
	}); err != nil {
		t.Fatal(err)
	}
}

// publishSingles runs callers goroutines, each publishing perCaller messages with the default
// (UUID) keys one per call, and returns the UUIDs published.
func publishSingles(t *testing.T, p *kinesis.Publisher, stream string, callers, perCaller int) map[string]bool {
	t.Helper()
	want := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for _, m := range pubMessages(perCaller, nil) {
				mu.Lock()
				want[m.UUID] = true
				mu.Unlock()
				if err := p.Publish(stream, m); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	return want
}
