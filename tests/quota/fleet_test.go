package quota_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// The fleet's run: 50 instances of one consumer group, at the driver's defaults, Subscribe at
// the same fake instant to a stream of 100 shards holding one record each, on memlog with AWS's
// quotas. The group must spread evenly (two shards an instance) and read every shard within
// the spread goal of docs/scaling.md, "even within 3 lease syncs of a start", with no call
// refused for a quota reaching the application.
const (
	fleetStream    = "fleet"
	fleetGroup     = "fleet-group"
	fleetShards    = 100
	fleetInstances = 50
	fleetGoal      = 3 * 2 * time.Second // three lease syncs at the default LeaseSyncInterval
	fleetQuiet     = 30 * time.Second    // the steady stretch after the spread, for the call rates
	fleetSample    = 100 * time.Millisecond
)

// fleet is what the run saw: who holds which shard (by the driver's own hooks) and which
// shards delivered their record.
type fleet struct {
	mu        sync.Mutex
	holder    map[string]string // shard -> instance, between OnAcquired and OnRevoked/OnLost
	delivered map[string]string // shard -> the instance that delivered its record first
	twice     []string          // shards acquired by one instance while another held them
	joined    time.Duration     // from the start until the last Subscribe returned
}

func (f *fleet) hooks(who string) kinesis.ShardHooks {
	return kinesis.ShardHooks{
		OnAcquired: func(ev kinesis.ShardEvent) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if h, ok := f.holder[ev.ShardID]; ok && h != who {
				f.twice = append(f.twice, fmt.Sprintf("%s: %s acquired it while %s held it", ev.ShardID, who, h))
			}
			f.holder[ev.ShardID] = who
		},
		OnRevoked: func(ev kinesis.ShardEvent) { f.release(who, ev.ShardID) },
		OnLost:    func(ev kinesis.ShardEvent) { f.release(who, ev.ShardID) },
	}
}

func (f *fleet) release(who, shard string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holder[shard] == who {
		delete(f.holder, shard)
	}
}

// state reports whether the spread is even (every shard held, each instance within one of the
// others) and every shard's record was delivered, with the spread's minimum and maximum.
func (f *fleet) state() (even, read bool, lo, hi int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	per := map[string]int{}
	for _, who := range f.holder {
		per[who]++
	}
	lo, hi = fleetShards, 0
	for i := range fleetInstances {
		n := per[instanceName(i)]
		lo, hi = min(lo, n), max(hi, n)
	}
	return len(f.holder) == fleetShards && hi-lo <= 1, len(f.delivered) == fleetShards, lo, hi
}

func instanceName(i int) string { return fmt.Sprintf("w%02d", i) }

// fleetVariant is one way the fleet is configured, and what it is held to.
type fleetVariant struct {
	name string
	tune func(*kinesis.SubscriberConfig)
	// goal bounds the time from the start until the spread is even and every shard read.
	goal time.Duration
	// maxRefused bounds the calls refused for a quota, each of which the driver retried.
	maxRefused int64
}

// maxJoin bounds how late the last Subscribe may return: the retries of a call the quota
// refused wait at most 1, 2, 4 and 8 s (awscall.QuotaBackoff).
const maxJoin = 15 * time.Second

// describeSummaryRate is DescribeStreamSummary's quota, 20 calls a second per account: of 50
// instances asking at the same instant, 30 must be refused once; their retries are spread
// (awscall.QuotaBackoff) so that few are refused again.
const describeSummaryRate = 20

// The fleet starts at the defaults; with CreateStream (each instance asks DescribeStreamSummary
// whether the stream is there); and with FanOut (each instance finds or registers the group's
// stream consumer: DescribeStreamSummary, ListStreamConsumers at 5 a second per stream,
// RegisterStreamConsumer at 5 per account, DescribeStreamConsumer at 20 per stream, then a
// SubscribeToShard per shard, one a second per consumer and shard). With FanOut a shard handed
// over waits for Kinesis's 5-second rule (docs/fan-out.md), rounded up to whole lease syncs: the
// group spreads in 12 s with or without quotas.
func TestQuotaFleetStart(t *testing.T) {
	refusedOnce := int64(fleetInstances - describeSummaryRate)
	for _, v := range []fleetVariant{
		{"defaults", func(*kinesis.SubscriberConfig) {}, fleetGoal, fleetInstances / 10},
		{"CreateStream", func(c *kinesis.SubscriberConfig) { c.CreateStream = true }, fleetGoal, 2 * refusedOnce},
		{"FanOut", func(c *kinesis.SubscriberConfig) { c.FanOut = kinesis.FanOutConfig{Enabled: true} }, fleetGoal + 3*2*time.Second, 2 * refusedOnce},
	} {
		t.Run(v.name, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { runFleet(t, v) }) })
	}
}

func runFleet(t *testing.T, v fleetVariant) {
	lg := newLogs()
	l := memlog.New(memlog.Config{Quotas: &memlog.Quotas{}})
	seedFleet(t, l)
	before := l.Usage(fleetStream)
	store := lease.NewMemoryStore()
	f := &fleet{holder: map[string]string{}, delivered: map[string]string{}}
	subs := make([]*kinesis.Subscriber, fleetInstances)
	for i := range subs {
		cfg := kinesis.SubscriberConfig{
			Client:      l,
			Group:       kinesis.GroupConfig{Name: fleetGroup, LeaseStore: store, WorkerID: instanceName(i), Hooks: f.hooks(instanceName(i))},
			Unmarshaler: kinesis.RawMarshaler{},
		}
		v.tune(&cfg)
		sub, err := kinesis.NewSubscriber(cfg, lg.logger(watermill.LogFields{"instance": instanceName(i)}))
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = sub
	}
	start := time.Now()
	var wg sync.WaitGroup
	subErrs := make(chan error, fleetInstances)
	for i, sub := range subs {
		wg.Add(1)
		go func() { // every instance Subscribes at the same fake instant
			defer wg.Done()
			ch, err := sub.Subscribe(context.Background(), fleetStream)
			if err != nil {
				subErrs <- fmt.Errorf("%s: Subscribe: %w", instanceName(i), err)
				return
			}
			f.mu.Lock()
			f.joined = max(f.joined, time.Since(start))
			f.mu.Unlock()
			for msg := range ch {
				f.mu.Lock()
				shard, _ := kinesis.ShardIDFromContext(msg.Context())
				if _, ok := f.delivered[shard]; !ok {
					f.delivered[shard] = instanceName(i)
				}
				f.mu.Unlock()
				msg.Ack()
			}
		}()
	}
	// The goal counts from when the fleet is there: every Subscribe returned. Instances
	// refused DescribeStreamSummary join a few seconds late (the quota answers 20 of them a
	// second), and the group cannot spread over members it has not met.
	var evenAt, joined time.Duration
	for {
		even, read, lo, hi := f.state()
		f.mu.Lock()
		joined = f.joined
		f.mu.Unlock()
		if even && read {
			evenAt = time.Since(start)
			t.Logf("even (%d to %d shards an instance) and every shard read %v after the start, %v after the last Subscribe returned",
				lo, hi, evenAt, evenAt-joined)
			break
		}
		if time.Since(start) > 2*v.goal+maxJoin {
			t.Fatalf("after %v: spread %d to %d shards an instance, even %v, every shard read %v", time.Since(start), lo, hi, even, read)
		}
		time.Sleep(fleetSample)
	}
	if evenAt-joined > v.goal+fleetSample {
		t.Errorf("the group took %v after the last Subscribe returned to spread evenly and read every shard; the goal is %v", evenAt-joined, v.goal)
	}
	if joined > maxJoin {
		t.Errorf("the last Subscribe returned %v after the start; want at most %v", joined, maxJoin)
	}
	atEven := l.Usage(fleetStream)
	time.Sleep(fleetQuiet)
	steady := l.Usage(fleetStream)
	for _, sub := range subs {
		if err := sub.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	wg.Wait()
	close(subErrs)
	for err := range subErrs {
		t.Error(err)
	}
	f.report(t, lg, v, before, atEven, steady, evenAt)
}

// seedFleet creates the stream and writes one record to each shard, addressed by its first
// hash key.
func seedFleet(t *testing.T, l *memlog.Log) {
	ctx := context.Background()
	if _, err := l.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(fleetStream), ShardCount: aws.Int32(fleetShards)}); err != nil {
		t.Fatal(err)
	}
	out, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(fleetStream)})
	if err != nil || len(out.Shards) != fleetShards {
		t.Fatalf("ListShards: %d shards, %v", len(out.Shards), err)
	}
	var entries []types.PutRecordsRequestEntry
	for _, s := range out.Shards {
		entries = append(entries, types.PutRecordsRequestEntry{Data: []byte(*s.ShardId), PartitionKey: aws.String("k"), ExplicitHashKey: s.HashKeyRange.StartingHashKey})
	}
	res, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String(fleetStream), Records: entries})
	if err != nil || aws.ToInt32(res.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %v (%d failed)", err, aws.ToInt32(res.FailedRecordCount))
	}
}

// report asserts that no call refused for a quota reached the application (no ERROR log line,
// which is how the driver tells it of a failure it cannot ride out) and that the refused calls
// the driver retried stayed few; it logs the calls of the start and of the steady stretch.
func (f *fleet) report(t *testing.T, lg *logs, v fleetVariant, before, atEven, steady memlog.Usage, evenAt time.Duration) {
	f.mu.Lock()
	for _, v := range f.twice {
		t.Errorf("two instances at once: %s", v)
	}
	f.mu.Unlock()
	ops := map[string]bool{}
	for op := range steady.Calls {
		ops[op] = true
	}
	var names []string
	for op := range ops {
		names = append(names, op)
	}
	sort.Strings(names)
	throttled := int64(0)
	for _, op := range names {
		start := atEven.Calls[op] - before.Calls[op]
		quiet := steady.Calls[op] - atEven.Calls[op]
		th := steady.Throttled[op] - before.Throttled[op]
		throttled += th
		t.Logf("%-22s start (%v): %4d calls; steady: %.2f calls/s; refused for a quota: %d",
			op, evenAt.Round(time.Millisecond), start, float64(quiet)/fleetQuiet.Seconds(), th)
	}
	reads := steady.GetRecordsCalls - atEven.GetRecordsCalls
	t.Logf("GetRecords: %d at the start, %.1f/s steady over %d shards, %d refused",
		atEven.GetRecordsCalls-before.GetRecordsCalls, float64(reads)/fleetQuiet.Seconds(), fleetShards, steady.GetRecordsThrottled-before.GetRecordsThrottled)
	// Every refused call was retried by the driver (nothing reached the application, checked
	// below and by Subscribe's errors); how many were refused is bounded by the variant.
	if throttled > v.maxRefused {
		t.Errorf("%d calls refused for a quota during the run; want at most %d", throttled, v.maxRefused)
	}
	if errs := lg.at("ERROR"); len(errs) > 0 {
		t.Errorf("logged at ERROR:\n%s", strings.Join(errs, "\n"))
	}
	if warns := lg.at("WARN"); len(warns) > 0 {
		t.Logf("logged at WARN:\n%s", strings.Join(warns, "\n"))
	}
}
