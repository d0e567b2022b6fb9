package tests_test

import (
	"context"
	"crypto/md5"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Integration tests against kinesalite and dynalite (scripts/with-emulators.sh). Each test has
// its own streams, groups and (unless the test is about sharing one) its own lease table.
// Helpers here are prefixed "it" so that they do not collide with those of live_test.go.

const (
	// itWait bounds every wait for deliveries; the emulators answer in milliseconds, so it
	// is only reached when something is wrong.
	itWait = 60 * time.Second
	// itKeyField is the metadata field that holds a message's partition key, so that tests
	// choose the shard of every message.
	itKeyField = "it_partition_key"
	// itSentinelField marks the messages published at the end of a test to flush out
	// anything still on its way (a shard delivers in sequence order, so whatever the shard
	// would deliver again arrives before its sentinel).
	itSentinelField = "it_sentinel"
)

// itName is a unique name for a stream, group, table or worker.
func itName(prefix string) string { return prefix + "-" + watermill.NewShortUUID() }

// itCreateStream creates a stream of shards shards, waits until it is ACTIVE and returns its
// name and shards, ordered by shard id.
func itCreateStream(t testing.TB, env *liveEnv, shards int32) (string, []types.Shard) {
	t.Helper()
	name := itName("stream")
	client := env.kinesisClient()
	ctx, cancel := context.WithTimeout(context.Background(), itWait)
	defer cancel()
	if _, err := client.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: &name, ShardCount: &shards}); err != nil {
		t.Fatalf("creating stream %q: %v", name, err)
	}
	waiter := awskinesis.NewStreamExistsWaiter(client, func(o *awskinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	})
	if err := waiter.Wait(ctx, &awskinesis.DescribeStreamInput{StreamName: &name}, itWait); err != nil {
		t.Fatalf("waiting for stream %q: %v", name, err)
	}
	out, err := client.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: &name})
	if err != nil {
		t.Fatalf("listing the shards of %q: %v", name, err)
	}
	list := append([]types.Shard(nil), out.Shards...)
	sort.Slice(list, func(i, j int) bool { return *list[i].ShardId < *list[j].ShardId })
	if len(list) != int(shards) {
		t.Fatalf("stream %q has %d shards, want %d", name, len(list), shards)
	}
	return name, list
}

func itShardIDs(shards []types.Shard) []string {
	ids := make([]string, len(shards))
	for i, s := range shards {
		ids[i] = *s.ShardId
	}
	return ids
}

// itShardOfKey is the shard a partition key maps to, as Kinesis maps it: the MD5 of the key
// as a 128-bit number, within the shard's hash key range.
func itShardOfKey(shards []types.Shard, key string) string {
	sum := md5.Sum([]byte(key))
	h := new(big.Int).SetBytes(sum[:])
	for _, s := range shards {
		lo, _ := new(big.Int).SetString(*s.HashKeyRange.StartingHashKey, 10)
		hi, _ := new(big.Int).SetString(*s.HashKeyRange.EndingHashKey, 10)
		if h.Cmp(lo) >= 0 && h.Cmp(hi) <= 0 {
			return *s.ShardId
		}
	}
	return ""
}

// itKeys returns n partition keys per shard, each landing on that shard.
func itKeys(shards []types.Shard, perShard int) map[string][]string {
	keys := map[string][]string{}
	full := 0
	prefix := watermill.NewShortUUID()
	for i := 0; full < len(shards); i++ {
		key := prefix + "-" + strconv.Itoa(i)
		shard := itShardOfKey(shards, key)
		if shard == "" || len(keys[shard]) == perShard {
			continue
		}
		keys[shard] = append(keys[shard], key)
		if len(keys[shard]) == perShard {
			full++
		}
	}
	return keys
}

// itInterleave lists the keys of every shard, one of each shard in turn.
func itInterleave(shards []types.Shard, keys map[string][]string) []string {
	var out []string
	for i := 0; ; i++ {
		added := false
		for _, s := range shards {
			if k := keys[*s.ShardId]; i < len(k) {
				out = append(out, k[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// itPublisher publishes straight to kinesalite, keyed by itKeyField.
func itPublisher(t testing.TB, env *liveEnv) *kinesis.Publisher {
	t.Helper()
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client:       env.kinesisClient(),
		PartitionKey: kinesis.PartitionKeyFromMetadata(itKeyField),
		RetryBackoff: 10 * time.Millisecond,
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// itPublish publishes one message per key, in order, and returns their UUIDs.
func itPublish(t testing.TB, pub message.Publisher, stream string, keys []string) []string {
	t.Helper()
	msgs := make([]*message.Message, len(keys))
	uuids := make([]string, len(keys))
	for i, key := range keys {
		uuids[i] = watermill.NewUUID()
		msgs[i] = message.NewMessage(uuids[i], []byte(fmt.Sprintf("%s #%d", stream, i)))
		msgs[i].Metadata.Set(itKeyField, key)
	}
	if err := pub.Publish(stream, msgs...); err != nil {
		t.Fatalf("publishing %d messages to %q: %v", len(msgs), stream, err)
	}
	return uuids
}

// itPublishSentinels publishes one sentinel per shard and returns their UUIDs.
func itPublishSentinels(t testing.TB, pub message.Publisher, stream string, shards []types.Shard) []string {
	t.Helper()
	var msgs []*message.Message
	var uuids []string
	for shard, keys := range itKeys(shards, 1) {
		m := message.NewMessage(watermill.NewUUID(), []byte("sentinel of "+shard))
		m.Metadata.Set(itKeyField, keys[0])
		m.Metadata.Set(itSentinelField, shard)
		msgs = append(msgs, m)
		uuids = append(uuids, m.UUID)
	}
	if err := pub.Publish(stream, msgs...); err != nil {
		t.Fatalf("publishing sentinels to %q: %v", stream, err)
	}
	return uuids
}

// itSubscriberConfig is a group subscriber on the given clients with the tests' short
// intervals.
func itSubscriberConfig(client kinesis.KinesisAPI, store lease.Store, group, worker string) kinesis.SubscriberConfig {
	return kinesis.SubscriberConfig{
		Client: client,
		Group: kinesis.GroupConfig{
			Name:               group,
			LeaseStore:         store,
			WorkerID:           worker,
			LeaseSyncInterval:  100 * time.Millisecond,
			CheckpointInterval: 100 * time.Millisecond,
		},
		PollInterval:    50 * time.Millisecond,
		MinReadInterval: 10 * time.Millisecond,
		NackResendSleep: 10 * time.Millisecond,
		CloseTimeout:    20 * time.Second,
	}
}

// itSubscribe subscribes, failing the test on error; Close runs at cleanup too.
func itSubscribe(t testing.TB, cfg kinesis.SubscriberConfig, logger watermill.LoggerAdapter, stream string) (*kinesis.Subscriber, <-chan *message.Message) {
	t.Helper()
	sub, err := kinesis.NewSubscriber(cfg, logger)
	if err != nil {
		t.Fatalf("NewSubscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	// The subscription lives until Close: cancelling Subscribe's context would end it.
	ch, err := sub.Subscribe(context.Background(), stream)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", stream, err)
	}
	return sub, ch
}

// itDelivery is one message as the subscriber delivered it.
type itDelivery struct {
	UUID, Shard, Seq string
	Sentinel         bool
}

// itCollector reads a subscription's channel in a goroutine of its own and records every
// delivery. It acks the first ackLimit messages (all of them when ackLimit < 0) and holds the
// rest, unacked. Waits are on its changed signal, never on a clock.
type itCollector struct {
	mu            sync.Mutex
	ackLimit      int
	deliveries    []itDelivery
	count         map[string]int
	acked         map[string]itDelivery
	ackedPerShard map[string]int
	lastAcked     map[string]string // shard -> sequence number of the last acked message
	held          []*message.Message
	heldPerShard  map[string]int
	lastSeq       map[string]*big.Int
	orderErrs     []string // a shard's message delivered after a newer one of the same shard
	noInfo        int      // messages without RecordInfo in their context

	changed chan struct{}
	done    chan struct{}
}

func itCollect(ch <-chan *message.Message, ackLimit int) *itCollector {
	c := &itCollector{
		ackLimit: ackLimit, count: map[string]int{}, acked: map[string]itDelivery{},
		ackedPerShard: map[string]int{}, lastAcked: map[string]string{}, heldPerShard: map[string]int{},
		lastSeq: map[string]*big.Int{}, changed: make(chan struct{}, 1), done: make(chan struct{}),
	}
	go func() {
		defer close(c.done)
		for msg := range ch {
			c.receive(msg)
			select {
			case c.changed <- struct{}{}:
			default:
			}
		}
	}()
	return c
}

func (c *itCollector) receive(msg *message.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	info, ok := kinesis.RecordFromContext(msg.Context())
	if !ok {
		c.noInfo++
	}
	d := itDelivery{UUID: msg.UUID, Shard: info.ShardID, Seq: info.SequenceNumber, Sentinel: msg.Metadata.Get(itSentinelField) != ""}
	c.deliveries = append(c.deliveries, d)
	c.count[d.UUID]++
	if seq, ok := new(big.Int).SetString(d.Seq, 10); ok {
		if prev := c.lastSeq[d.Shard]; prev != nil && seq.Cmp(prev) <= 0 {
			c.orderErrs = append(c.orderErrs, fmt.Sprintf("%s: %s after %s", d.Shard, seq, prev))
		}
		c.lastSeq[d.Shard] = seq
	}
	if c.ackLimit >= 0 && len(c.acked) >= c.ackLimit {
		c.held = append(c.held, msg)
		c.heldPerShard[d.Shard]++
		return
	}
	msg.Ack()
	c.acked[d.UUID] = d
	c.ackedPerShard[d.Shard]++
	c.lastAcked[d.Shard] = d.Seq
}

// waitUntil waits until cond (called with the collector locked) holds.
func (c *itCollector) waitUntil(t testing.TB, what string, cond func(c *itCollector) bool) {
	t.Helper()
	deadline := time.NewTimer(itWait)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok := cond(c)
		summary := c.summaryLocked()
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-c.done:
			c.mu.Lock()
			ok := cond(c)
			c.mu.Unlock()
			if !ok {
				t.Fatalf("%s: the subscription's channel closed first (%s)", what, summary)
			}
			return
		case <-deadline.C:
			t.Fatalf("%s: not within %s (%s)", what, itWait, summary)
		}
	}
}

// waitAll waits until every one of uuids was delivered.
func (c *itCollector) waitAll(t testing.TB, what string, uuids ...[]string) {
	t.Helper()
	c.waitUntil(t, what, func(c *itCollector) bool {
		for _, list := range uuids {
			for _, u := range list {
				if c.count[u] == 0 {
					return false
				}
			}
		}
		return true
	})
}

func (c *itCollector) summaryLocked() string {
	return fmt.Sprintf("%d deliveries, %d distinct messages, %d acked, %d held", len(c.deliveries), len(c.count), len(c.acked), len(c.held))
}

// stats returns deliveries, distinct messages and duplicates (deliveries beyond the first).
func (c *itCollector) stats() (deliveries, distinct, duplicates int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.deliveries), len(c.count), len(c.deliveries) - len(c.count)
}

// total is the number of deliveries so far.
func (c *itCollector) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.deliveries)
}

// redelivered lists the UUIDs delivered more than once.
func (c *itCollector) redelivered() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for u, n := range c.count {
		if n > 1 {
			out[u] = n
		}
	}
	return out
}

// checkClean fails on deliveries without RecordInfo and on messages of one shard out of
// sequence order.
func (c *itCollector) checkClean(t testing.TB, what string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noInfo > 0 {
		t.Errorf("%s: %d messages had no RecordInfo in their context", what, c.noInfo)
	}
	if len(c.orderErrs) > 0 {
		t.Errorf("%s: %d messages out of shard order, first: %v", what, len(c.orderErrs), c.orderErrs[0])
	}
}

// itClose closes the subscriber and waits until the collector saw its channel close.
func itClose(t testing.TB, sub *kinesis.Subscriber, cols ...*itCollector) {
	t.Helper()
	if err := sub.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for _, c := range cols {
		select {
		case <-c.done:
		case <-time.After(itWait):
			t.Fatalf("the subscription's channel was not closed within %s of Close", itWait)
		}
	}
}

// itWaitLeases polls the lease store until the leases of (group, stream) are exactly one per
// shard of shardIDs, each with the given owner and the checkpoint in want ("" where a shard
// has none). There is no signal for a checkpoint write, so this polls, bounded by itWait.
func itWaitLeases(t testing.TB, store lease.Store, group, stream string, shardIDs []string, owner string, want map[string]string) []lease.Lease {
	t.Helper()
	deadline := time.Now().Add(itWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		list, err := store.List(ctx, group, stream)
		cancel()
		problem := ""
		if err != nil {
			problem = err.Error()
		} else {
			problem = itLeaseProblem(list, group, stream, shardIDs, owner, want)
		}
		if problem == "" {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases of group %q stream %q: %s (leases: %+v)", group, stream, problem, list)
		}
		<-tick.C
	}
}

func itLeaseProblem(list []lease.Lease, group, stream string, shardIDs []string, owner string, want map[string]string) string {
	var got []string
	for _, l := range list {
		got = append(got, l.ShardID)
		switch {
		case l.Group != group || l.Stream != stream:
			return fmt.Sprintf("lease of shard %s names group %q stream %q", l.ShardID, l.Group, l.Stream)
		case l.Owner != owner:
			return fmt.Sprintf("shard %s is owned by %q, want %q", l.ShardID, l.Owner, owner)
		case l.Checkpoint != want[l.ShardID]:
			return fmt.Sprintf("shard %s has checkpoint %q, want %q", l.ShardID, l.Checkpoint, want[l.ShardID])
		}
	}
	if strings.Join(got, ",") != strings.Join(shardIDs, ",") {
		return fmt.Sprintf("leases are of shards %v, want %v", got, shardIDs)
	}
	return ""
}

// TestLiveIntegration_RestartResumesAfterCheckpoint: a group reads 60 of 100 messages, is
// closed (Close writes the final checkpoint and releases the leases) and a new subscriber of
// the group delivers exactly the 40 not acked: none lost, none of the acked ones again. The
// only messages delivered twice are those sent and not acked when the first one closed, at
// most one per shard (MaxInFlight 1).
func TestLiveIntegration_RestartResumesAfterCheckpoint(t *testing.T) {
	env := newLiveEnv(t)
	start := time.Now()
	stream, shards := itCreateStream(t, env, 2)
	store := env.leaseStore(t, newCallCounter())
	group := itName("group")
	pub := itPublisher(t, env)

	const total, ackFirst = 100, 60
	keys := itKeys(shards, total/len(shards))
	uuids := itPublish(t, pub, stream, itInterleave(shards, keys))
	perShard := map[string]int{}
	expectShard := map[string]string{}
	for i, k := range itInterleave(shards, keys) {
		s := itShardOfKey(shards, k)
		perShard[s]++
		expectShard[uuids[i]] = s
	}

	// First run: ack 60, then keep taking messages without acking them until each shard
	// that has any left has one in flight.
	sub1, ch1 := itSubscribe(t, itSubscriberConfig(env.kinesisClient(), store, group, "worker-1"), nil, stream)
	run1 := itCollect(ch1, ackFirst)
	run1.waitUntil(t, "first run: 60 acked and one in flight on every shard with messages left", func(c *itCollector) bool {
		if len(c.acked) < ackFirst {
			return false
		}
		for _, s := range itShardIDs(shards) {
			if c.heldPerShard[s] == 0 && c.ackedPerShard[s] < perShard[s] {
				return false
			}
		}
		return true
	})
	itClose(t, sub1, run1)
	run1.checkClean(t, "first run")

	run1.mu.Lock()
	held := append([]*message.Message(nil), run1.held...)
	acked := run1.acked
	lastAcked := run1.lastAcked
	for s, n := range run1.heldPerShard {
		if n > 1 {
			t.Errorf("first run: shard %s had %d messages delivered and not acked; MaxInFlight is 1", s, n)
		}
	}
	for _, d := range run1.deliveries {
		if d.Shard != expectShard[d.UUID] {
			t.Errorf("message %s came from shard %s, its key maps to %s", d.UUID, d.Shard, expectShard[d.UUID])
		}
	}
	run1.mu.Unlock()
	for _, m := range held {
		select {
		case <-m.Context().Done():
		default:
			t.Errorf("message %s was in flight at Close and its context is not cancelled", m.UUID)
		}
	}
	if len(acked) != ackFirst {
		t.Fatalf("first run acked %d messages, want %d", len(acked), ackFirst)
	}
	// Close wrote the final checkpoint (the last acked message of each shard) and released.
	itWaitLeases(t, store, group, stream, itShardIDs(shards), "", lastAcked)

	var notAcked []string
	for _, u := range uuids {
		if _, ok := acked[u]; !ok {
			notAcked = append(notAcked, u)
		}
	}

	// Second run: a new subscriber (another worker) in the same group and table.
	sub2, ch2 := itSubscribe(t, itSubscriberConfig(env.kinesisClient(), store, group, "worker-2"), nil, stream)
	run2 := itCollect(ch2, -1)
	run2.waitAll(t, "second run: every message not acked in the first", notAcked)
	sentinels := itPublishSentinels(t, pub, stream, shards)
	run2.waitAll(t, "second run: the sentinels", sentinels)
	itClose(t, sub2, run2)
	run2.checkClean(t, "second run")

	run2.mu.Lock()
	defer run2.mu.Unlock()
	ackedAgain, twiceInRun2 := 0, 0
	for u, n := range run2.count {
		if _, ok := acked[u]; ok {
			ackedAgain++
		}
		if n > 1 {
			twiceInRun2++
		}
	}
	redelivered := 0 // delivered in both runs
	for _, m := range held {
		if run2.count[m.UUID] > 0 {
			redelivered++
		}
	}
	delivered2 := len(run2.deliveries) - len(sentinels)
	t.Logf("restart: first run acked %d, held %d in flight at Close; second run delivered %d (want %d), "+
		"acked-before-checkpoint delivered again: %d, redelivered in-flight: %d (bound %d, one per shard), "+
		"duplicates within the second run: %d; took %s",
		len(acked), len(held), delivered2, len(notAcked), ackedAgain, redelivered, len(shards), twiceInRun2, time.Since(start).Round(time.Millisecond))
	if ackedAgain != 0 {
		t.Errorf("%d messages acked (and checkpointed by Close) were delivered again", ackedAgain)
	}
	if twiceInRun2 != 0 {
		t.Errorf("%d messages were delivered twice by the second subscriber", twiceInRun2)
	}
	if delivered2 != len(notAcked) {
		t.Errorf("second run delivered %d messages, want exactly the %d not acked", delivered2, len(notAcked))
	}
	if redelivered != len(held) || len(held) > len(shards) {
		t.Errorf("redelivered %d of the %d in flight at Close; at most one per shard (%d) may be in flight", redelivered, len(held), len(shards))
	}
}

// TestLiveIntegration_TwoGroupsEachGetEverything: groups A and B on one stream and one lease
// table each receive all 200 messages.
func TestLiveIntegration_TwoGroupsEachGetEverything(t *testing.T) {
	env := newLiveEnv(t)
	start := time.Now()
	stream, shards := itCreateStream(t, env, 2)
	store := env.leaseStore(t, newCallCounter())
	pub := itPublisher(t, env)

	groups := []string{itName("group-a"), itName("group-b")}
	subs := make([]*kinesis.Subscriber, len(groups))
	cols := make([]*itCollector, len(groups))
	for i, g := range groups {
		var ch <-chan *message.Message
		subs[i], ch = itSubscribe(t, itSubscriberConfig(env.kinesisClient(), store, g, itName("worker")), nil, stream)
		cols[i] = itCollect(ch, -1)
	}
	var keys []string
	for i := 0; i < 200; i++ {
		keys = append(keys, watermill.NewShortUUID())
	}
	uuids := itPublish(t, pub, stream, keys)
	for i, c := range cols {
		c.waitAll(t, "group "+groups[i]+": all 200", uuids)
	}
	sentinels := itPublishSentinels(t, pub, stream, shards)
	for i, c := range cols {
		c.waitAll(t, "group "+groups[i]+": sentinels", sentinels)
		itClose(t, subs[i], c)
		c.checkClean(t, groups[i])
		n, distinct, dups := c.stats()
		t.Logf("group %d: %d deliveries, %d distinct (200 + %d sentinels), %d duplicates", i, n, distinct, len(sentinels), dups)
		if distinct != 200+len(sentinels) || dups != 0 {
			t.Errorf("group %s: %d distinct messages and %d duplicates, want %d and 0", groups[i], distinct, dups, 200+len(sentinels))
		}
	}
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestLiveIntegration_SharedLeaseTableKeepsGroupsAndStreamsApart: two streams and two groups
// on one lease table (opened through SubscriberConfig.Group.LeaseTable); each (group, stream) gets
// exactly its stream's messages, and its leases name only its own shards, owner and
// checkpoints.
func TestLiveIntegration_SharedLeaseTableKeepsGroupsAndStreamsApart(t *testing.T) {
	env := newLiveEnv(t)
	start := time.Now()
	table := itName("shared-leases")
	awsCfg := env.awsConfig
	pub := itPublisher(t, env)

	type streamInfo struct {
		name   string
		shards []types.Shard
	}
	var streams []streamInfo
	for _, n := range []int32{1, 2} {
		name, shards := itCreateStream(t, env, n)
		streams = append(streams, streamInfo{name, shards})
	}
	groups := []string{itName("group-a"), itName("group-b")}
	workers := map[string]string{}
	subs := map[string]*kinesis.Subscriber{}
	cols := map[[2]string]*itCollector{}
	for _, g := range groups {
		workers[g] = itName("worker")
		cfg := itSubscriberConfig(nil, nil, g, workers[g])
		cfg.AWSConfig = &awsCfg
		cfg.KinesisOptions = []func(*awskinesis.Options){env.kinesisOptions}
		cfg.Group.LeaseTable = table
		cfg.Group.CreateLeaseTable = true
		cfg.Group.DynamoDBOptions = []func(*dynamodb.Options){env.dynamoDBOptions}
		sub, err := kinesis.NewSubscriber(cfg, nil)
		if err != nil {
			t.Fatalf("NewSubscriber (group %s): %v", g, err)
		}
		t.Cleanup(func() { _ = sub.Close() })
		subs[g] = sub
		for _, s := range streams {
			ch, err := sub.Subscribe(context.Background(), s.name)
			if err != nil {
				t.Fatalf("Subscribe(%q) in group %s: %v", s.name, g, err)
			}
			cols[[2]string{g, s.name}] = itCollect(ch, -1)
		}
	}

	published := map[string][]string{}
	for i, s := range streams {
		keys := itInterleave(s.shards, itKeys(s.shards, 15+5*i))
		published[s.name] = append(itPublish(t, pub, s.name, keys), itPublishSentinels(t, pub, s.name, s.shards)...)
	}
	for _, g := range groups {
		for _, s := range streams {
			col := cols[[2]string{g, s.name}]
			col.waitAll(t, fmt.Sprintf("group %s stream %s", g, s.name), published[s.name])
		}
	}

	store, err := lease.NewDynamoDBStore(context.Background(), lease.DynamoDBConfig{
		Client: dynamodb.NewFromConfig(env.awsConfig, env.dynamoDBOptions), TableName: table,
	})
	if err != nil {
		t.Fatalf("opening the shared table: %v", err)
	}
	lastAcked := func(col *itCollector) map[string]string {
		col.mu.Lock()
		defer col.mu.Unlock()
		out := map[string]string{}
		for k, v := range col.lastAcked {
			out[k] = v
		}
		return out
	}
	for _, g := range groups {
		for _, s := range streams {
			col := cols[[2]string{g, s.name}]
			list := itWaitLeases(t, store, g, s.name, itShardIDs(s.shards), workers[g], lastAcked(col))
			t.Logf("group %s stream %s: %d leases, owner %s", g, s.name, len(list), workers[g])
		}
		// Nothing of this group under a stream it does not read.
		if list, err := store.List(context.Background(), g, itName("other-stream")); err != nil || len(list) != 0 {
			t.Errorf("group %s on a stream it never read: %d leases, err %v", g, len(list), err)
		}
	}
	for _, g := range groups {
		var gcols []*itCollector
		for _, s := range streams {
			gcols = append(gcols, cols[[2]string{g, s.name}])
		}
		itClose(t, subs[g], gcols...)
	}
	for _, g := range groups {
		for _, s := range streams {
			col := cols[[2]string{g, s.name}]
			col.checkClean(t, g+"/"+s.name)
			n, distinct, dups := col.stats()
			want := map[string]bool{}
			for _, u := range published[s.name] {
				want[u] = true
			}
			col.mu.Lock()
			foreign := 0
			for u := range col.count {
				if !want[u] {
					foreign++
				}
			}
			col.mu.Unlock()
			t.Logf("group %s stream %s: %d deliveries, %d distinct of %d published, %d duplicates, %d from elsewhere", g, s.name, n, distinct, len(want), dups, foreign)
			if distinct != len(want) || foreign != 0 || dups != 0 {
				t.Errorf("group %s stream %s: %d distinct, %d foreign, %d duplicates; want %d, 0, 0", g, s.name, distinct, foreign, dups, len(want))
			}
			// Closed: released, checkpoints kept.
			itWaitLeases(t, store, g, s.name, itShardIDs(s.shards), "", lastAcked(col))
		}
	}
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
}

// TestLiveIntegration_ConfigFromAWSConfig: no ready clients; the publisher and the subscriber
// build theirs from an aws.Config with endpoint options, and the subscriber creates its lease
// table.
func TestLiveIntegration_ConfigFromAWSConfig(t *testing.T) {
	env := newLiveEnv(t)
	start := time.Now()
	awsCfg := env.awsConfig
	stream := itName("stream")
	table := itName("leases")
	group := itName("group")

	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		AWSConfig:      &awsCfg,
		KinesisOptions: []func(*awskinesis.Options){env.kinesisOptions},
		Group: kinesis.GroupConfig{
			Name:               group,
			LeaseTable:         table,
			CreateLeaseTable:   true,
			DynamoDBOptions:    []func(*dynamodb.Options){env.dynamoDBOptions},
			LeaseSyncInterval:  100 * time.Millisecond,
			CheckpointInterval: 100 * time.Millisecond,
		},
		CreateStream:       true,
		CreateStreamShards: 2,
		PollInterval:       50 * time.Millisecond,
		MinReadInterval:    10 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatalf("NewSubscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	ch, err := sub.Subscribe(context.Background(), stream)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	col := itCollect(ch, -1)

	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		AWSConfig:      &awsCfg,
		KinesisOptions: []func(*awskinesis.Options){env.kinesisOptions},
	}, nil)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	defer pub.Close()
	var uuids []string
	var msgs []*message.Message
	for i := 0; i < 10; i++ {
		m := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("config path #%d", i)))
		m.Metadata.Set("n", strconv.Itoa(i))
		msgs = append(msgs, m)
		uuids = append(uuids, m.UUID)
	}
	if err := pub.Publish(stream, msgs...); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	col.waitAll(t, "10 messages", uuids)
	itClose(t, sub, col)
	col.checkClean(t, "config path")
	n, distinct, dups := col.stats()
	if distinct != 10 || dups != 0 {
		t.Errorf("%d distinct, %d duplicates; want 10 and 0", distinct, dups)
	}

	// The table was created where DynamoDBOptions pointed, and holds the group's leases.
	store, err := lease.NewDynamoDBStore(context.Background(), lease.DynamoDBConfig{
		Client: dynamodb.NewFromConfig(env.awsConfig, env.dynamoDBOptions), TableName: table,
	})
	if err != nil {
		t.Fatalf("the lease table %q was not created: %v", table, err)
	}
	list, err := store.List(context.Background(), group, stream)
	if err != nil || len(list) != 2 {
		t.Errorf("leases of the group: %+v, err %v; want 2", list, err)
	}
	t.Logf("config path: %d deliveries, %d duplicates, took %s", n, dups, time.Since(start).Round(time.Millisecond))
}
