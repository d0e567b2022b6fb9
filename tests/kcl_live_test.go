package tests_test

import (
	"context"
	"math/big"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dyntypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/kcl"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/kclref"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/streams"
)

// kclUserRecord is one user record of the stream as both the KCL and this driver deliver it.
type kclUserRecord struct {
	rec  kclref.Record
	uuid string
}

// kclStream is a stream laid out for the move from the KCL: plain records, KPL aggregates, and
// a shard split after it was written to, with records in its children.
type kclStream struct {
	name     string
	shards   []types.Shard // every shard, the closed parent included
	parent   string        // the split shard
	children []string
	open     []types.Shard // the shards still open: every one but the parent
	epoch    int64         // creation time, for the multi-stream identifier
}

// kclCreateStream makes the stream and writes its records: 5 plain ones to shard 0, two
// aggregates of 4 user records and a plain one to shard 1, 3 plain ones to shard 2, which is
// then split, and 2 plain ones to each child.
func kclCreateStream(t *testing.T, env *liveEnv) kclStream {
	t.Helper()
	name, shards := itCreateStream(t, env, 3)
	keys := itKeys(shards, 1)
	pub, agg := itPublisher(t, env), kclAggregatingPublisher(t, env)
	key := func(s types.Shard, n int) []string { return slices.Repeat([]string{keys[*s.ShardId][0]}, n) }
	itPublish(t, pub, name, key(shards[0], 5))
	itPublish(t, agg, name, key(shards[1], 4))
	itPublish(t, agg, name, key(shards[1], 4))
	itPublish(t, pub, name, key(shards[1], 1))
	itPublish(t, pub, name, key(shards[2], 3))

	client := env.kinesisClient()
	ctx, cancel := context.WithTimeout(context.Background(), itWait)
	defer cancel()
	s := shards[2]
	lo, hi := streams.HashKey(s.HashKeyRange.StartingHashKey), streams.HashKey(s.HashKeyRange.EndingHashKey)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := client.SplitShard(ctx, &awskinesis.SplitShardInput{
		StreamName: &name, ShardToSplit: s.ShardId, NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		t.Fatalf("splitting %s: %v", *s.ShardId, err)
	}
	streams.WaitActive(ctx, t, client, name)
	all, err := streams.ListAll(ctx, client, name)
	if err != nil {
		t.Fatal(err)
	}
	ks := kclStream{name: name, shards: all, parent: *s.ShardId}
	for _, sh := range all {
		switch {
		case aws.ToString(sh.ParentShardId) == ks.parent:
			ks.children = append(ks.children, *sh.ShardId)
			ks.open = append(ks.open, sh)
		case *sh.ShardId != ks.parent:
			ks.open = append(ks.open, sh)
		}
	}
	sort.Strings(ks.children)
	if len(ks.children) != 2 {
		t.Fatalf("split of %s made children %v", ks.parent, ks.children)
	}
	childKeys := itKeys(ks.open, 1)
	for _, c := range ks.children {
		itPublish(t, pub, name, slices.Repeat([]string{childKeys[c][0]}, 2))
	}
	out, err := client.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: &name})
	if err != nil {
		t.Fatal(err)
	}
	ks.epoch = out.StreamDescriptionSummary.StreamCreationTimestamp.Unix()
	return ks
}

// kclAggregatingPublisher packs each Publish call's messages of one key into a KPL aggregate.
func kclAggregatingPublisher(t *testing.T, env *liveEnv) *kinesis.Publisher {
	t.Helper()
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client: env.kinesisClient(), PartitionKey: kinesis.PartitionKeyFromMetadata(itKeyField), AggregateKPL: true,
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// kclReadAll reads every shard from its start with a subscriber of no group until want user
// records came, and returns them per shard, in shard order.
func kclReadAll(t *testing.T, env *liveEnv, stream string, want int) map[string][]kclUserRecord {
	t.Helper()
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: env.kinesisClient(), PollInterval: 50 * time.Millisecond, MinReadInterval: 10 * time.Millisecond,
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	ch, err := sub.Subscribe(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]kclUserRecord{}
	timeout := time.NewTimer(itWait)
	defer timeout.Stop()
	for n := 0; n < want; n++ {
		select {
		case msg := <-ch:
			info, _ := kinesis.RecordFromContext(msg.Context())
			got[info.ShardID] = append(got[info.ShardID], kclUserRecord{uuid: msg.UUID, rec: kclref.Record{
				SequenceNumber: info.SequenceNumber, SubSequenceNumber: int64(info.SubSequenceNumber), Aggregated: info.Aggregated,
			}})
			msg.Ack()
		case <-timeout.C:
			t.Fatalf("reading the stream: %d of %d user records within %s", n, want, itWait)
		}
	}
	return got
}

// kclLeaseKey is the KCL's leaseKey of a shard.
func (ks kclStream) leaseKey(shardID string, multi bool) string {
	if !multi {
		return shardID
	}
	return kclref.MultiStreamLeaseKey(ks.identifier(), shardID)
}

func (ks kclStream) identifier() string {
	return kclref.StreamIdentifier("123456789012", ks.name, ks.epoch)
}

// kclApp is a stopped KCL application's lease table, with the checkpoints it left.
type kclApp struct {
	table       string
	checkpoints map[string]kclref.ExtendedSequenceNumber // by shard
}

// kclWriteTable creates the lease table as the KCL does and writes the items a stopped KCL
// application left: shard 0 checkpointed after its second record (sub-sequence 0, as
// checkpoint() writes a plain record), shard 1 inside its first aggregate, with a prepared
// checkpoint and an attribute of a later KCL, the parent at SHARD_END with its children, one
// child inside its records and one never read (TRIM_HORIZON), and a row that is not a lease.
func kclWriteTable(t *testing.T, c *dynamodb.Client, ks kclStream, recs map[string][]kclUserRecord, multi bool) kclApp {
	t.Helper()
	ctx := context.Background()
	app := kclApp{table: itName("kclapp"), checkpoints: map[string]kclref.ExtendedSequenceNumber{}}
	if _, err := c.CreateTable(ctx, kclref.CreateTableInput(app.table)); err != nil {
		t.Fatalf("creating the KCL table: %v", err)
	}
	waiter := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &app.table}, itWait); err != nil {
		t.Fatalf("waiting for the KCL table: %v", err)
	}
	s0, s1 := *ks.shards[0].ShardId, *ks.shards[1].ShardId
	c0, c1 := ks.children[0], ks.children[1]
	app.checkpoints[s0] = kclref.CheckpointOf(recs[s0][1].rec)
	app.checkpoints[s1] = kclref.CheckpointOf(recs[s1][1].rec) // user record 1 of the first aggregate
	app.checkpoints[ks.parent] = kclref.ESN(kclref.SentinelShardEnd, 0)
	app.checkpoints[c0] = kclref.CheckpointOf(recs[c0][0].rec)
	app.checkpoints[c1] = kclref.ESN(kclref.SentinelTrimHorizon, 0)
	pending := kclref.CheckpointOf(recs[s1][5].rec)
	for _, sh := range ks.shards {
		id := *sh.ShardId
		l := kclref.Lease{
			LeaseKey: ks.leaseKey(id, multi), LeaseOwner: "kcl-worker-a", LeaseCounter: 40, OwnerSwitchesSinceCheckpoint: 1,
			Checkpoint:   app.checkpoints[id],
			HashKeyRange: &kclref.HashKeyRange{StartingHashKey: *sh.HashKeyRange.StartingHashKey, EndingHashKey: *sh.HashKeyRange.EndingHashKey},
		}
		if multi {
			l.StreamIdentifier, l.ShardID = ks.identifier(), id
		}
		switch id {
		case s1:
			l.LeaseOwner, l.PendingCheckpoint, l.PendingCheckpointState = "kcl-worker-b", &pending, []byte("state")
		case ks.parent:
			l.ChildShardIDs = ks.children
		case c0, c1:
			l.ParentShardIDs = []string{ks.parent}
		}
		if id == c1 {
			l.LeaseOwner = ""
		}
		item := kclref.Encode(l, multi)
		if id == s0 {
			item = kclref.EncodeAs(l, multi, kclref.KCL2)
		}
		if id == s1 {
			item["someLaterKCLAttribute"] = &dyntypes.AttributeValueMemberS{Value: "kept"}
		}
		kclPut(t, c, app.table, item)
	}
	kclPut(t, c, app.table, map[string]dyntypes.AttributeValue{
		kclref.AttrLeaseKey: &dyntypes.AttributeValueMemberS{Value: "worker-metrics-kcl-worker-a"}, kclref.AttrEntityType: &dyntypes.AttributeValueMemberS{Value: "WORKER_METRICS"},
	})
	return app
}

func kclPut(t *testing.T, c *dynamodb.Client, table string, item map[string]dyntypes.AttributeValue) {
	t.Helper()
	if _, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatalf("writing a KCL item: %v", err)
	}
}

// kclScan reads every item of the table.
func kclScan(t *testing.T, c *dynamodb.Client, table string) []map[string]dyntypes.AttributeValue {
	t.Helper()
	in := &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)}
	var items []map[string]dyntypes.AttributeValue
	for {
		out, err := c.Scan(context.Background(), in)
		if err != nil {
			t.Fatalf("scanning the KCL table: %v", err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// kclExpected is what a KCL worker would deliver from the checkpoints, by UUID.
func kclExpected(recs map[string][]kclUserRecord, checkpoints map[string]kclref.ExtendedSequenceNumber) map[string]bool {
	want := map[string]bool{}
	for shard, rs := range recs {
		plain := make([]kclref.Record, len(rs))
		byPos := map[string]string{}
		for i, r := range rs {
			plain[i] = r.rec
			byPos[kclref.CheckpointOf(r.rec).String()] = r.uuid
		}
		for _, r := range kclref.Resume(checkpoints[shard], plain) {
			want[byPos[kclref.CheckpointOf(r).String()]] = true
		}
	}
	return want
}

// kclCollector acks everything a subscription delivers and records it.
type kclCollector struct {
	mu      sync.Mutex
	got     map[string]int // deliveries by UUID
	changed chan struct{}
}

func kclCollect(ch <-chan *message.Message) *kclCollector {
	c := &kclCollector{got: map[string]int{}, changed: make(chan struct{}, 1)}
	go func() {
		for msg := range ch {
			c.mu.Lock()
			c.got[msg.UUID]++
			c.mu.Unlock()
			msg.Ack()
			select {
			case c.changed <- struct{}{}:
			default:
			}
		}
	}()
	return c
}

// waitFor waits until every one of uuids was delivered.
func (c *kclCollector) waitFor(t *testing.T, what string, uuids []string) {
	t.Helper()
	timeout := time.NewTimer(itWait)
	defer timeout.Stop()
	for {
		c.mu.Lock()
		missing := 0
		for _, u := range uuids {
			if c.got[u] == 0 {
				missing++
			}
		}
		c.mu.Unlock()
		if missing == 0 {
			return
		}
		select {
		case <-c.changed:
		case <-timeout.C:
			t.Fatalf("%s: %d of %d not delivered within %s", what, missing, len(uuids), itWait)
		}
	}
}

// Moving from a stopped KCL application and back, on kinesalite and dynalite: a group pointed
// at the KCL's lease table delivers exactly what a KCL worker would have delivered from its
// checkpoints (kclref.Resume: nothing checkpointed again, nothing after a checkpoint lost),
// inside aggregates, after SHARD_END and from the children of a split, and leaves a table that
// the KCL's decoder accepts, from whose checkpoints a KCL worker would deliver exactly what
// came after.
func TestLiveKCLMoveInAndHandBack(t *testing.T) {
	env := newLiveEnv(t)
	for _, multi := range []bool{false, true} {
		name := "single-stream"
		if multi {
			name = "multi-stream"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kclMoveInAndHandBack(t, env, multi)
		})
	}
}

func kclMoveInAndHandBack(t *testing.T, env *liveEnv, multi bool) {
	ks := kclCreateStream(t, env)
	const written = 5 + 8 + 1 + 3 + 2*2
	recs := kclReadAll(t, env, ks.name, written)
	dyn := dynamodb.NewFromConfig(env.awsConfig, env.dynamoDBOptions)
	app := kclWriteTable(t, dyn, ks, recs, multi)
	want := kclExpected(recs, app.checkpoints)

	cfg := kcl.Config{Client: dyn, TableName: app.table, CreateMemberTable: true}
	if multi {
		cfg.MultiStream = true
	} else {
		cfg.Stream = ks.name
	}
	store, err := kcl.NewStore(context.Background(), cfg)
	if err != nil {
		t.Fatalf("kcl.NewStore: %v", err)
	}
	subCfg := itSubscriberConfig(env.kinesisClient(), store, app.table, "wm-1")
	// The KCL's leases are taken once they expire: LeaseDuration after the group first saw
	// them (the KCL's failoverTimeMillis is 10 s; shorter here to keep the test short).
	subCfg.Group.LeaseDuration = 3 * time.Second
	sub, err := kinesis.NewSubscriber(subCfg, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	ch, err := sub.Subscribe(context.Background(), ks.name)
	if err != nil {
		t.Fatal(err)
	}
	col := kclCollect(ch)
	wantList := make([]string, 0, len(want))
	for u := range want {
		wantList = append(wantList, u)
	}
	col.waitFor(t, "the records after the KCL's checkpoints", wantList)
	took := time.Since(started)
	// A sentinel per open shard, delivered after anything that could still come from it.
	sentinels := itPublishSentinels(t, itPublisher(t, env), ks.name, ks.open)
	col.waitFor(t, "the sentinels", sentinels)
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	col.mu.Lock()
	var replayed, extra []string
	for u, n := range col.got {
		switch {
		case n > 1:
			replayed = append(replayed, u)
		case !want[u] && !slices.Contains(sentinels, u):
			extra = append(extra, u)
		}
	}
	col.mu.Unlock()
	t.Logf("%d user records written, %d after the KCL's checkpoints, all delivered %s after Subscribe; %d delivered twice, %d delivered that the KCL had checkpointed",
		written, len(want), took.Round(time.Millisecond), len(replayed), len(extra))
	if len(replayed) != 0 || len(extra) != 0 {
		t.Errorf("delivered twice: %v; delivered though the KCL had checkpointed them: %v", replayed, extra)
	}
	kclCheckHandBack(t, env, dyn, ks, app, multi, written+len(sentinels))
}

// kclCheckHandBack decodes every item as the KCL would and checks that, from its checkpoint, a
// KCL worker would deliver exactly the records published after the group closed.
func kclCheckHandBack(t *testing.T, env *liveEnv, dyn *dynamodb.Client, ks kclStream, app kclApp, multi bool, before int) {
	t.Helper()
	after := itPublishSentinels(t, itPublisher(t, env), ks.name, ks.open)
	recs := kclReadAll(t, env, ks.name, before+len(after))
	checkpoints := map[string]kclref.ExtendedSequenceNumber{}
	otherRows := 0
	for _, item := range kclScan(t, dyn, app.table) {
		if !kclref.IsLease(item) {
			otherRows++
			continue
		}
		l, err := kclref.Decode(item, multi)
		if err == nil {
			err = kclref.CheckAsWritten(item, multi)
		}
		if err != nil {
			t.Errorf("item %v is not a lease the KCL accepts: %v", item[kclref.AttrLeaseKey], err)
			continue
		}
		id := l.LeaseKey
		if multi {
			id = l.ShardID
		}
		checkpoints[id] = l.Checkpoint
		if l.PendingCheckpoint != nil || l.PendingCheckpointState != nil || l.OwnerSwitchesSinceCheckpoint != 0 && id != ks.parent {
			t.Errorf("%s: a checkpoint left pending %v, state %q, owner switches %d", id, l.PendingCheckpoint, l.PendingCheckpointState, l.OwnerSwitchesSinceCheckpoint)
		}
		if id == *ks.shards[1].ShardId {
			if v, ok := item["someLaterKCLAttribute"].(*dyntypes.AttributeValueMemberS); !ok || v.Value != "kept" {
				t.Errorf("%s: an attribute of a later KCL was not kept: %v", id, item["someLaterKCLAttribute"])
			}
		}
	}
	if otherRows != 1 {
		t.Errorf("%d rows that are not leases, want the one written", otherRows)
	}
	if cp, ok := checkpoints[ks.parent]; ok && !cp.IsShardEnd() {
		t.Errorf("the split parent's lease is at %v, want SHARD_END (or deleted)", cp)
	}
	afterSet := map[string]bool{}
	for _, u := range after {
		afterSet[u] = true
	}
	got := kclExpected(recs, checkpoints)
	for u := range got {
		if !afterSet[u] {
			t.Errorf("a KCL worker resuming from the table would deliver %s again", u)
		}
	}
	for _, u := range after {
		if !got[u] {
			t.Errorf("a KCL worker resuming from the table would not deliver %s, published after the group closed", u)
		}
	}
}
