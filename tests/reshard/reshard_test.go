package reshard_test

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/streams"
)

// reshardAPI is what a resharding scenario needs of Kinesis: the driver's calls and the three
// ways a stream is resharded. memlog and the SDK's client (against kinesis-local) both have it.
type reshardAPI interface {
	kinesis.KinesisAPI
	SplitShard(context.Context, *awskinesis.SplitShardInput, ...func(*awskinesis.Options)) (*awskinesis.SplitShardOutput, error)
	MergeShards(context.Context, *awskinesis.MergeShardsInput, ...func(*awskinesis.Options)) (*awskinesis.MergeShardsOutput, error)
	UpdateShardCount(context.Context, *awskinesis.UpdateShardCountInput, ...func(*awskinesis.Options)) (*awskinesis.UpdateShardCountOutput, error)
}

var (
	_ reshardAPI = (*memlog.Log)(nil)
	_ reshardAPI = (*awskinesis.Client)(nil)
)

// reshardStep is one change to the stream's shards, made while the load runs.
type reshardStep struct {
	name string
	do   func(ctx context.Context, api reshardAPI, stream string) error
}

// splitLowest splits the open shard with the lowest hash keys in the middle of its range.
func splitLowest() reshardStep {
	return reshardStep{name: "split", do: func(ctx context.Context, api reshardAPI, stream string) error {
		open, err := openShards(ctx, api, stream)
		if err != nil {
			return err
		}
		s := open[0]
		lo, hi := streams.HashKey(s.HashKeyRange.StartingHashKey), streams.HashKey(s.HashKeyRange.EndingHashKey)
		mid := new(big.Int).Add(lo, hi)
		mid.Rsh(mid, 1)
		mid.Add(mid, big.NewInt(1))
		_, err = api.SplitShard(ctx, &awskinesis.SplitShardInput{
			StreamName: &stream, ShardToSplit: s.ShardId, NewStartingHashKey: aws.String(mid.String()),
		})
		return err
	}}
}

// mergeLowest merges the two open shards with the lowest hash keys (always adjacent).
func mergeLowest() reshardStep {
	return reshardStep{name: "merge", do: func(ctx context.Context, api reshardAPI, stream string) error {
		open, err := openShards(ctx, api, stream)
		if err != nil {
			return err
		}
		if len(open) < 2 {
			return fmt.Errorf("merge needs two open shards, stream %s has %d", stream, len(open))
		}
		_, err = api.MergeShards(ctx, &awskinesis.MergeShardsInput{
			StreamName: &stream, ShardToMerge: open[0].ShardId, AdjacentShardToMerge: open[1].ShardId,
		})
		return err
	}}
}

func updateShardCount(n int32) reshardStep {
	return reshardStep{name: "UpdateShardCount " + strconv.Itoa(int(n)), do: func(ctx context.Context, api reshardAPI, stream string) error {
		_, err := api.UpdateShardCount(ctx, &awskinesis.UpdateShardCountInput{
			StreamName: &stream, TargetShardCount: &n, ScalingType: types.ScalingTypeUniformScaling,
		})
		return err
	}}
}

// openShards are the stream's open shards, by starting hash key.
func openShards(ctx context.Context, api kinesis.KinesisAPI, stream string) ([]types.Shard, error) {
	all, err := streams.ListAll(ctx, api, stream)
	if err != nil {
		return nil, err
	}
	var open []types.Shard
	for _, s := range all {
		if s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, s)
		}
	}
	sort.Slice(open, func(i, j int) bool {
		return streams.HashKey(open[i].HashKeyRange.StartingHashKey).Cmp(streams.HashKey(open[j].HashKeyRange.StartingHashKey)) < 0
	})
	return open, nil
}

// reshardScenario is a steady keyed load on a stream that is resharded while a consumer group
// of one or more instances reads it.
//
// The load: keys partition keys, each a numbered sequence 0, 1, 2, ...; each round publishes
// the next number of every key in one Publish call, so every key's records enter Kinesis in
// order. Between reshard steps the test waits for perStep more deliveries, so each step meets
// shards that are being read.
type reshardScenario struct {
	api       reshardAPI
	leases    lease.Store
	shards    int32
	instances int
	keys      int
	round     time.Duration // pause between publish rounds
	perStep   int
	steps     []reshardStep
	timeout   time.Duration
	fanOut    bool // read with enhanced fan-out
}

// reshardRecord is one delivery the consumers saw.
type reshardRecord struct {
	key      int
	n        int
	instance int
	shard    string
	at       time.Time
}

// reshardLedger checks per-key order as deliveries arrive and keeps what the report needs.
//
// The rule for each key: the next delivery is the number after the last one delivered. A
// number further on is a violation (a record overtook an earlier one of its key, or one was
// skipped). A number already delivered is a rewind, allowed only after a change of owner: the
// instance delivering it is not the one that delivered the key's previous record, or it is but
// its reader of that shard stopped in between (lease lost or handed over, reported by the
// OnLost and OnRevoked hooks, which run before the shard can be read again). The
// new owner resumes from the checkpoint, and from there the key must go on in order again, so
// only a suffix of the sequence is ever repeated; it is counted as redelivered.
type reshardLedger struct {
	mu         sync.Mutex
	published  map[[2]int]time.Time // (key, n) -> when its Publish call started
	produced   int
	next       []int
	lastInst   []int
	lastStops  []int          // stops[instance/shard] at the key's last delivery
	stops      map[string]int // "instance/shard" -> readers of that shard the instance stopped
	lost       int            // OnLost calls
	seen       map[[2]int]bool
	deliveries int
	rewinds    int
	violations []string
	firstOn    map[string]reshardRecord // shard -> first delivery from it
	lastOn     map[string]time.Time     // shard -> last delivery from it
	changed    chan struct{}            // a value after each delivery (buffered 1)
}

func newReshardLedger(keys int) *reshardLedger {
	l := &reshardLedger{
		published: map[[2]int]time.Time{},
		next:      make([]int, keys),
		lastInst:  make([]int, keys),
		lastStops: make([]int, keys),
		stops:     map[string]int{},
		seen:      map[[2]int]bool{},
		firstOn:   map[string]reshardRecord{},
		lastOn:    map[string]time.Time{},
		changed:   make(chan struct{}, 1),
	}
	for i := range l.lastInst {
		l.lastInst[i] = -1
	}
	return l
}

func (l *reshardLedger) publishing(round, keys int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range keys {
		l.published[[2]int{k, round}] = at
	}
}

func (l *reshardLedger) loadStopped(rounds, keys int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.produced = rounds * keys
}

// stopped notes that an instance's reader of a shard stopped (OnLost or OnRevoked).
func (l *reshardLedger) stopped(instance int, ev kinesis.ShardEvent, lost bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stops[fmt.Sprintf("%d/%s", instance, ev.ShardID)]++
	if lost {
		l.lost++
	}
}

func (l *reshardLedger) deliver(r reshardRecord) {
	l.mu.Lock()
	defer func() {
		l.mu.Unlock()
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}()
	l.deliveries++
	id := [2]int{r.key, r.n}
	l.seen[id] = true
	if f, ok := l.firstOn[r.shard]; !ok || r.at.Before(f.at) {
		l.firstOn[r.shard] = r
	}
	l.lastOn[r.shard] = r.at
	want := l.next[r.key]
	stops := l.stops[fmt.Sprintf("%d/%s", r.instance, r.shard)]
	switch {
	case r.n == want:
	case r.n > want:
		l.violations = append(l.violations, fmt.Sprintf("key %d: %d delivered (shard %s, instance %d) when %d was next", r.key, r.n, r.shard, r.instance, want))
	case r.instance == l.lastInst[r.key] && stops == l.lastStops[r.key]:
		l.violations = append(l.violations, fmt.Sprintf("key %d: rewound from %d to %d by the same instance %d (shard %s) at %s", r.key, want, r.n, r.instance, r.shard, r.at.Format("15:04:05.000000")))
	default:
		l.rewinds++
	}
	l.next[r.key] = r.n + 1
	l.lastInst[r.key] = r.instance
	l.lastStops[r.key] = stops
}

// unique is how many distinct records were delivered; deliveries how many deliveries.
func (l *reshardLedger) counts() (unique, deliveries int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen), l.deliveries
}

// waitFor waits, on delivery signals, until cond holds.
func (l *reshardLedger) waitFor(ctx context.Context, t *testing.T, what string, cond func(unique, deliveries int) bool) {
	t.Helper()
	for {
		if u, d := l.counts(); cond(u, d) {
			return
		}
		select {
		case <-l.changed:
		case <-ctx.Done():
			u, d := l.counts()
			t.Fatalf("waiting for %s: %v (%d distinct records delivered, %d deliveries)", what, ctx.Err(), u, d)
		}
	}
}

// reshardReport is what a scenario measured.
type reshardReport struct {
	produced, delivered, redelivered, rewinds int
	leasesLost                                int
	childWait                                 time.Duration // the longest, over every child shard
	childWaitShard                            string
	// handover is the longest time from the last delivery of a child's parents to the
	// child's first delivery: how fast the child starts once its parents are finished.
	handover       time.Duration
	handoverShard  string
	typicalLatency time.Duration // median publish-to-delivery
	shards         int           // shards the stream had by the end, open and closed
	deleted        int           // leases of finished shards deleted once their children were read
}

func (r reshardReport) String() string {
	return fmt.Sprintf("produced %d, delivered %d, redelivered %d (%d rewinds, %d leases lost), %d shards in all; "+
		"%d leases of finished shards deleted; longest child wait %s (%s), longest handover from parents %s (%s), median latency %s",
		r.produced, r.delivered, r.redelivered, r.rewinds, r.leasesLost, r.shards, r.deleted, r.childWait.Round(time.Millisecond),
		r.childWaitShard, r.handover.Round(time.Millisecond), r.handoverShard, r.typicalLatency.Round(time.Millisecond))
}

func (sc reshardScenario) run(t *testing.T) reshardReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sc.timeout)
	defer cancel()
	stream := "reshard-" + watermill.NewShortUUID()
	group := "group-" + watermill.NewShortUUID()
	var logger watermill.LoggerAdapter = watermill.NopLogger{}
	if os.Getenv("RESHARD_LOG") != "" {
		logger = watermill.NewStdLogger(os.Getenv("RESHARD_LOG") == "debug", false)
	}
	if _, err := sc.api.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: &stream, ShardCount: &sc.shards}); err != nil {
		t.Fatal(err)
	}
	streams.WaitActive(ctx, t, sc.api, stream)
	ledger := newReshardLedger(sc.keys)

	var subs []*kinesis.Subscriber
	var consumers sync.WaitGroup
	for i := range sc.instances {
		sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
			Client: sc.api,
			Group: kinesis.GroupConfig{
				Name:               group,
				LeaseStore:         sc.leases,
				WorkerID:           fmt.Sprintf("instance-%d", i),
				CheckpointInterval: 100 * time.Millisecond,
				LeaseDuration:      3 * time.Second,
				LeaseSyncInterval:  100 * time.Millisecond,
				HandoffTimeout:     2 * time.Second,
				Hooks: kinesis.ShardHooks{
					OnLost:    func(ev kinesis.ShardEvent) { ledger.stopped(i, ev, true) },
					OnRevoked: func(ev kinesis.ShardEvent) { ledger.stopped(i, ev, false) },
				},
			},
			FanOut:            kinesis.FanOutConfig{Enabled: sc.fanOut},
			PollInterval:      20 * time.Millisecond,
			MinReadInterval:   time.Millisecond,
			ShardSyncInterval: time.Second,
		}, logger)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
		msgs, err := sub.Subscribe(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for m := range msgs {
				info, _ := kinesis.RecordFromContext(m.Context())
				key, kerr := strconv.Atoi(m.Metadata.Get("key"))
				n, nerr := strconv.Atoi(m.Metadata.Get("n"))
				if kerr != nil || nerr != nil {
					t.Errorf("message %s has no key or number: %q %q", m.UUID, m.Metadata.Get("key"), m.Metadata.Get("n"))
				}
				ledger.deliver(reshardRecord{key: key, n: n, instance: i, shard: info.ShardID, at: time.Now()})
				m.Ack()
			}
		}()
	}

	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client:       sc.api,
		PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
		RetryBackoff: 10 * time.Millisecond,
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	stopLoad := make(chan struct{})
	loadDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(sc.round)
		defer tick.Stop()
		round := 0
		for {
			msgs := make([]*message.Message, sc.keys)
			for k := range msgs {
				msgs[k] = message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("key %d record %d", k, round)))
				msgs[k].Metadata.Set("key", strconv.Itoa(k))
				msgs[k].Metadata.Set("n", strconv.Itoa(round))
			}
			ledger.publishing(round, sc.keys, time.Now())
			if err := pub.Publish(stream, msgs...); err != nil {
				loadDone <- fmt.Errorf("publishing round %d: %w", round, err)
				return
			}
			round++
			select {
			case <-stopLoad:
				// Before the send: the test reads the count once it receives.
				ledger.loadStopped(round, sc.keys)
				loadDone <- nil
				return
			case <-ctx.Done():
				loadDone <- ctx.Err()
				return
			case <-tick.C:
			}
		}
	}()

	// The steps, each once the group has delivered perStep more records.
	for _, step := range sc.steps {
		_, before := ledger.counts()
		ledger.waitFor(ctx, t, "deliveries before "+step.name, func(_, d int) bool { return d >= before+sc.perStep })
		if err := step.do(ctx, sc.api, stream); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		streams.WaitActive(ctx, t, sc.api, stream)
		open, err := openShards(ctx, sc.api, stream)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s done; %d open shards", step.name, len(open))
	}
	_, before := ledger.counts()
	ledger.waitFor(ctx, t, "deliveries after the last step", func(_, d int) bool { return d >= before+sc.perStep })
	close(stopLoad)
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	ledger.mu.Lock()
	produced := ledger.produced
	ledger.mu.Unlock()
	ledger.waitFor(ctx, t, "every record", func(u, _ int) bool { return u >= produced })

	for _, sub := range subs {
		if err := sub.Close(); err != nil {
			t.Errorf("closing a subscriber: %v", err)
		}
	}
	consumers.Wait()
	if err := pub.Close(); err != nil {
		t.Errorf("closing the publisher: %v", err)
	}
	return sc.check(ctx, t, stream, group, ledger)
}

// check asserts what the scenario promises and measures the report.
func (sc reshardScenario) check(ctx context.Context, t *testing.T, stream, group string, ledger *reshardLedger) reshardReport {
	t.Helper()
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	for _, v := range ledger.violations {
		t.Error(v)
	}
	missing := 0
	for id := range ledger.published {
		if id[1] < ledger.produced/sc.keys && !ledger.seen[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d records never delivered", missing)
	}
	rep := reshardReport{
		produced:    ledger.produced,
		delivered:   len(ledger.seen),
		redelivered: ledger.deliveries - len(ledger.seen),
		rewinds:     ledger.rewinds,
	}
	rep.leasesLost = ledger.lost
	if sc.instances == 1 && rep.leasesLost == 0 && rep.redelivered > 0 {
		t.Errorf("one instance, no lease lost: %d records redelivered", rep.redelivered)
	}

	all, err := streams.ListAll(ctx, sc.api, stream)
	if err != nil {
		t.Fatal(err)
	}
	rep.shards = len(all)
	leases, err := sc.leases.List(ctx, group, stream)
	if err != nil {
		t.Fatal(err)
	}
	byShard := map[string]lease.Lease{}
	for _, l := range leases {
		byShard[l.ShardID] = l
	}
	for _, s := range all {
		id := aws.ToString(s.ShardId)
		l, ok := byShard[id]
		closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
		if !ok {
			// A finished shard's lease is deleted once its children are read; never before.
			if !closed || !childStarted(all, byShard, id) {
				t.Errorf("shard %s has no lease (closed %v), and no child of it was taken", id, closed)
			} else {
				rep.deleted++
			}
			continue
		}
		if closed && l.Checkpoint != lease.ShardEnd {
			t.Errorf("closed shard %s, read to its end, has checkpoint %q, not SHARD_END", id, l.Checkpoint)
		}
		// As a set: kinesis-local names a merge's parents in one order in ListShards and in
		// the other in ChildShards, where the driver may have learned them first.
		if got, want := sortedCopy(l.Parents), sortedCopy(parentsOfShard(s)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("lease of shard %s has parents %v, the shard %v", id, l.Parents, want)
		}
		// A child's wait: from the publish of the first record it delivered (which was in
		// the child, readable, from then on) to that delivery. It includes draining the
		// parents, waking the coordinator and taking the child's lease.
		if first, ok := ledger.firstOn[id]; ok && len(parentsOfShard(s)) > 0 {
			if wait := first.at.Sub(ledger.published[[2]int{first.key, first.n}]); wait > rep.childWait {
				rep.childWait, rep.childWaitShard = wait, id
			}
			var parentsDone time.Time
			for _, p := range parentsOfShard(s) {
				if last := ledger.lastOn[p]; last.After(parentsDone) {
					parentsDone = last
				}
			}
			if gap := first.at.Sub(parentsDone); !parentsDone.IsZero() && gap > rep.handover {
				rep.handover, rep.handoverShard = gap, id
			}
		}
	}
	rep.typicalLatency = medianLatency(ledger)
	return rep
}

func medianLatency(l *reshardLedger) time.Duration {
	var lat []time.Duration
	for _, r := range l.firstOn {
		lat = append(lat, r.at.Sub(l.published[[2]int{r.key, r.n}]))
	}
	if len(lat) == 0 {
		return 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2]
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// childStarted: a shard listed with id among its parents has a lease that was taken, or is
// itself finished with its lease deleted for the same reason.
func childStarted(all []types.Shard, leases map[string]lease.Lease, id string) bool {
	for _, s := range all {
		if !slices.Contains(parentsOfShard(s), id) {
			continue
		}
		child := aws.ToString(s.ShardId)
		l, ok := leases[child]
		closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
		if ok && l.Generation > 0 || !ok && closed && childStarted(all, leases, child) {
			return true
		}
	}
	return false
}

func parentsOfShard(s types.Shard) []string {
	var ps []string
	for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
		if aws.ToString(p) != "" {
			ps = append(ps, *p)
		}
	}
	return ps
}

// splitMergeSteps split the stream's lowest shard twice over and merge everything back:
// 2 shards -> 3 -> 4 -> 3 -> 2 -> 1.
func splitMergeSteps() []reshardStep {
	return []reshardStep{splitLowest(), splitLowest(), mergeLowest(), mergeLowest(), mergeLowest()}
}

// updateShardCountSteps: 2 -> 4 -> 2 -> 1. The 2 -> 4 -> 1 goes through 2: Kinesis
// (and kinesis-local) refuse an UpdateShardCount below half the open shards.
func updateShardCountSteps() []reshardStep {
	return []reshardStep{updateShardCount(4), updateShardCount(2), updateShardCount(1)}
}

// reshardCase is one scenario: its steps, with one instance or three.
type reshardCase struct {
	name      string
	instances int
	steps     []reshardStep
}

func reshardCases() []reshardCase {
	return []reshardCase{
		{"SplitMerge/1", 1, splitMergeSteps()},
		{"SplitMerge/3", 3, splitMergeSteps()},
		{"UpdateShardCount/1", 1, updateShardCountSteps()},
		{"UpdateShardCount/3", 3, updateShardCountSteps()},
	}
}

func TestReshardMemlog(t *testing.T) {
	for _, tc := range reshardCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := reshardScenario{
				api: memlog.New(memlog.Config{}), leases: lease.NewMemoryStore(),
				shards: 2, instances: tc.instances, keys: 16,
				round: 2 * time.Millisecond, perStep: 2000, steps: tc.steps, timeout: 2 * time.Minute,
			}.run(t)
			t.Logf("memlog %s: %s", tc.name, rep)
		})
	}
}

// TestReshardMemlogFanOut runs the scenarios with enhanced fan-out: a parent's subscription
// ends with its ChildShards, and the children are read after the parents, as with polling.
func TestReshardMemlogFanOut(t *testing.T) {
	for _, tc := range reshardCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := memlog.New(memlog.Config{})
			calls := streams.CountOps(log)
			rep := reshardScenario{
				api: log, leases: lease.NewMemoryStore(),
				shards: 2, instances: tc.instances, keys: 16,
				round: 2 * time.Millisecond, perStep: 2000, steps: tc.steps, timeout: 2 * time.Minute,
				fanOut: true,
			}.run(t)
			calls.NoPolling(t)
			t.Logf("memlog fan-out %s: %s", tc.name, rep)
		})
	}
}

// TestLiveReshardKinesisMock runs the same scenarios against kinesis-local (kinesis-mock),
// which implements ChildShards and UpdateShardCount, with the leases in DynamoDB (dynalite).
func TestLiveReshardKinesisMock(t *testing.T) {
	endpoint := os.Getenv("KINESIS_MOCK_ENDPOINT")
	if endpoint == "" || os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		t.Skip("KINESIS_MOCK_ENDPOINT or AWS_ENDPOINT_URL_DYNAMODB is not set: run `make test`, which starts kinesis-local and dynalite")
	}
	// The region, keys and dynalite's address come from the environment the emulator script
	// sets; kinesis-local is a second Kinesis, so its client is pointed at it by hand.
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	client := awskinesis.NewFromConfig(cfg, func(o *awskinesis.Options) { o.BaseEndpoint = aws.String(endpoint) })
	leaseStore := func(t *testing.T) lease.Store {
		store, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{
			Client: dynamodb.NewFromConfig(cfg), TableName: "leases-" + watermill.NewShortUUID(), CreateTable: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		return store
	}
	for _, tc := range reshardCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := reshardScenario{
				api: client, leases: leaseStore(t),
				shards: 2, instances: tc.instances, keys: 16,
				round: 50 * time.Millisecond, perStep: 300, steps: tc.steps, timeout: 3 * time.Minute,
			}.run(t)
			t.Logf("kinesis-local %s: %s", tc.name, rep)
		})
	}
}
