package lease_test

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// scanItems reads every item of the table.
func scanItems(t *testing.T, c *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := c.Scan(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func attrS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// leaseItem is the item of l as this version's leaseToItem writes it, in partition pk.
func leaseItem(l lease.Lease, pk string) map[string]types.AttributeValue {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
	item := map[string]types.AttributeValue{
		"pk": s(pk), "shard_id": s(l.ShardID), "group": s(l.Group), "stream": s(l.Stream),
		"generation": n(l.Generation), "counter": n(l.Counter),
	}
	if l.Owner != "" {
		item["owner"] = s(l.Owner)
	}
	if l.Checkpoint != "" {
		item["checkpoint"] = s(l.Checkpoint)
	}
	if len(l.Parents) > 0 {
		var ps []types.AttributeValue
		for _, p := range l.Parents {
			ps = append(ps, s(p))
		}
		item["parents"] = &types.AttributeValueMemberL{Value: ps}
	}
	if l.PendingOwner != "" {
		item["pending_owner"] = s(l.PendingOwner)
	}
	return item
}

// putItem writes an item by hand, as an earlier version (or an operator) would have.
func putItem(t *testing.T, c *dynamodb.Client, table string, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// putOldLease writes l as the previous version wrote every lease: in partition stream|group.
func putOldLease(t *testing.T, c *dynamodb.Client, table string, l lease.Lease) {
	t.Helper()
	putItem(t, c, table, leaseItem(l, l.Stream+"|"+l.Group))
}

func TestDynamoDBStoreListBuckets(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, table := newTableStore(t, cc, c, "buckets")
	const n = 100
	wantPKs := map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("shardId-%012d", i*37%n) // every shard once, out of order
		if _, err := s.Create(t.Context(), lease.Lease{Group: "g", Stream: "s", ShardID: id}); err != nil {
			t.Fatal(err)
		}
		wantPKs[lease.DynamoDBPartitionKey(lease.Key{Group: "g", Stream: "s", ShardID: id})] = true
	}
	// Another group on the same stream, which List must not return.
	if _, err := s.Create(t.Context(), lease.Lease{Group: "g2", Stream: "s", ShardID: "shardId-000000000000"}); err != nil {
		t.Fatal(err)
	}

	pks := map[string]int{}
	for _, item := range scanItems(t, c, table) {
		if attrS(item, "group") != "g" {
			continue
		}
		key := lease.Key{Group: "g", Stream: "s", ShardID: attrS(item, "shard_id")}
		if pk := attrS(item, "pk"); pk != lease.DynamoDBPartitionKey(key) {
			t.Fatalf("the item of %v is in partition %q, want %q", key, pk, lease.DynamoDBPartitionKey(key))
		}
		pks[attrS(item, "pk")]++
	}
	if len(pks) < 2 || len(pks) != len(wantPKs) {
		t.Fatalf("%d leases are in %d partitions (%v), want the %d their shard ids hash to", n, len(pks), pks, len(wantPKs))
	}
	t.Logf("%d leases in %d partitions", n, len(pks))

	for _, limit := range []int32{0, 3} {
		lease.SetDynamoDBQueryLimit(s, limit)
		before := cc.count("Query")
		ls, err := s.List(t.Context(), "g", "s")
		if err != nil {
			t.Fatal(err)
		}
		queries := cc.count("Query") - before
		if limit > 0 && queries < n/int(limit) {
			t.Fatalf("List of %d leases, %d per page, made %d queries, want at least %d", n, limit, queries, n/int(limit))
		}
		if limit == 0 && queries != lease.DynamoDBLeaseBuckets {
			t.Fatalf("List made %d queries, want one per partition, %d", queries, lease.DynamoDBLeaseBuckets)
		}
		if len(ls) != n {
			t.Fatalf("List (page limit %d) returned %d leases, want %d", limit, len(ls), n)
		}
		for i, l := range ls {
			if want := fmt.Sprintf("shardId-%012d", i); l.ShardID != want || l.Group != "g" {
				t.Fatalf("List (page limit %d): lease %d is %v, want shard %s of group g", limit, i, l.Key(), want)
			}
		}
	}
}

// TestDynamoDBStoreMarksOldPartition: List writes nothing (it may run with read-only
// credentials); the first write marks the old layout's partition; the marker is as documented
// and never listed; a store reads the old partition once.
func TestDynamoDBStoreMarksOldPartition(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, table := newTableStore(t, cc, c, "marker")
	ctx := t.Context()

	cc.setFault(func(method string) error {
		if method == "PutItem" {
			return errors.New("injected: AccessDeniedException")
		}
		return nil
	})
	if ls, err := s.List(ctx, "g", "s"); err != nil || len(ls) != 0 {
		t.Fatalf("List of an empty group with PutItem denied = %v, %v; want no leases and no error", ls, err)
	}
	if items := scanItems(t, c, table); len(items) != 0 {
		t.Fatalf("List wrote %d items: %v", len(items), items)
	}
	cc.setFault(nil)

	held, err := s.Create(ctx, lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0", Owner: "worker-a"})
	if err != nil {
		t.Fatal(err)
	}
	var markers []map[string]string
	for _, item := range scanItems(t, c, table) {
		if attrS(item, "shard_id") == lease.LayoutMarkerShardID {
			markers = append(markers, describeItem(item))
		}
	}
	want := map[string]string{"pk": "S:s|g", "shard_id": "S:" + lease.LayoutMarkerShardID, "layout": "S:buckets-16"}
	if len(markers) != 1 || !reflect.DeepEqual(markers[0], want) {
		t.Fatalf("markers after the first write: %v, want one, %v", markers, want)
	}
	if ls, err := s.List(ctx, "g", "s"); err != nil || len(ls) != 1 || ls[0].ShardID != "shard-0" {
		t.Fatalf("List = %+v, %v; want the one lease, not the marker", ls, err)
	}

	queries := cc.count("Query")
	if _, err := s.Renew(ctx, held); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Join(ctx, lease.Member{Group: "g", Stream: "s", Worker: "worker-a", Incarnation: 1}); err != nil {
		t.Fatal(err)
	}
	if got := cc.count("Query") - queries; got != 0 {
		t.Fatalf("writes after the first read the old partition %d more times, want 0", got)
	}

	// Another store value (another worker) reads the marker once and does not write it again.
	s2, err := lease.NewDynamoDBStore(ctx, lease.DynamoDBConfig{Client: cc, TableName: table})
	if err != nil {
		t.Fatal(err)
	}
	puts, queries := cc.count("PutItem"), cc.count("Query")
	for i := range 3 {
		if _, err := s2.Create(ctx, lease.Lease{Group: "g", Stream: "s", ShardID: fmt.Sprintf("shard-%d", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	if dp, dq := cc.count("PutItem")-puts, cc.count("Query")-queries; dp != 3 || dq != 1 {
		t.Fatalf("3 creates by a second store made %d PutItem and %d Query calls, want 3 and 1", dp, dq)
	}
}

// TestDynamoDBStoreRefusesOldLayout: a table with a lease the previous version wrote (in
// partition stream|group) is refused by List and every write with ErrOldLeaseLayout, which says
// what to do; nothing is written; after the migration the same store goes on.
func TestDynamoDBStoreRefusesOldLayout(t *testing.T) {
	c := dynamoClient(t)
	s, table := newTableStore(t, c, c, "oldlayout")
	ctx := t.Context()
	old := lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0", Owner: "worker-a", Generation: 1, Counter: 2,
		Checkpoint: "49590338271490256608559692538361571095921575989136588898"}
	putOldLease(t, c, table, old)

	errs := calls(ctx, s, old)
	errs[lease.OpDeleteFinished] = s.DeleteFinished(ctx, old)
	_, errs[lease.OpJoin] = s.Join(ctx, lease.Member{Group: "g", Stream: "s", Worker: "worker-b", Incarnation: 1})
	_, errs[lease.OpHeartbeat] = s.Heartbeat(ctx, lease.Member{Group: "g", Stream: "s", Worker: "worker-b", Incarnation: 1})
	for op, err := range errs {
		if !errors.Is(err, lease.ErrOldLeaseLayout) {
			t.Errorf("%s: %v, want ErrOldLeaseLayout", op, err)
			continue
		}
		var ce *lease.ConditionError
		if errors.As(err, &ce) {
			t.Errorf("%s: the old layout is reported as a condition error: %v", op, err)
		}
		for _, want := range []string{"lease " + op + " of", table, `group "g" on stream "s"`, `partition "s|g"`,
			`shard "shard-0"`, "single-partition layout", "stop every instance of the group",
			fmt.Sprintf("lease.MigrateDynamoDBLayout(ctx, client, %q, %q, %q)", table, "g", "s"),
			"delete those items to start the group again from its initial position"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", op, err, want)
			}
		}
	}
	t.Logf("List: %v", errs[lease.OpList])
	if items := scanItems(t, c, table); len(items) != 1 || attrS(items[0], "pk") != "s|g" {
		t.Fatalf("the refused calls wrote: the table holds %v, want the old lease only", items)
	}

	moved, err := lease.MigrateDynamoDBLayout(ctx, c, table, "g", "s")
	if err != nil || moved != 1 {
		t.Fatalf("MigrateDynamoDBLayout = %d, %v; want 1 moved", moved, err)
	}
	ls, err := s.List(ctx, "g", "s")
	if err != nil || len(ls) != 1 || !reflect.DeepEqual(ls[0], old) {
		t.Fatalf("List by the store that was refused, after the migration = %+v, %v; want %+v", ls, err, old)
	}
	if _, err := s.Renew(ctx, old); err != nil {
		t.Fatalf("Renew by the old owner after the migration: %v", err)
	}
}

// TestDynamoDBStoreRereadsAfterMarker: an instance of an earlier version that writes a lease
// into the old partition between a new store's check and its marker (it does not look for a
// marker) is caught by the read the store makes after writing the marker: the write is
// refused with ErrOldLeaseLayout, and so is every later one until the migration.
func TestDynamoDBStoreRereadsAfterMarker(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, table := newTableStore(t, cc, c, "markerrace")
	ctx := t.Context()
	old := lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0", Owner: "worker-old", Generation: 1, Counter: 1}
	var injected atomic.Bool
	cc.setFault(func(method string) error {
		if method == "PutItem" && injected.CompareAndSwap(false, true) {
			putOldLease(t, c, table, old) // the earlier version, just before the marker lands
		}
		return nil
	})
	_, err := s.Create(ctx, lease.Lease{Group: "g", Stream: "s", ShardID: "shard-1"})
	if !errors.Is(err, lease.ErrOldLeaseLayout) {
		t.Fatalf("Create while an earlier version wrote an old lease before the marker = %v, want ErrOldLeaseLayout", err)
	}
	if !injected.Load() {
		t.Fatal("the marker was never written: the race was not staged")
	}
	for _, item := range scanItems(t, c, table) {
		if attrS(item, "shard_id") == "shard-1" {
			t.Fatalf("the refused Create wrote its lease: %v", describeItem(item))
		}
	}
	if _, err := s.Create(ctx, lease.Lease{Group: "g", Stream: "s", ShardID: "shard-1"}); !errors.Is(err, lease.ErrOldLeaseLayout) {
		t.Fatalf("a second Create = %v, want ErrOldLeaseLayout until the migration", err)
	}
	if moved, err := lease.MigrateDynamoDBLayout(ctx, c, table, "g", "s"); err != nil || moved != 1 {
		t.Fatalf("MigrateDynamoDBLayout = %d, %v; want 1 moved", moved, err)
	}
	if _, err := s.Create(ctx, lease.Lease{Group: "g", Stream: "s", ShardID: "shard-1"}); err != nil {
		t.Fatalf("Create after the migration: %v", err)
	}
}

func TestMigrateDynamoDBLayout(t *testing.T) {
	c := dynamoClient(t)
	s, table := newTableStore(t, c, c, "migrate")
	ctx := t.Context()
	olds := []lease.Lease{
		{Group: "g", Stream: "s", ShardID: "shardId-000000000000", Checkpoint: lease.ShardEnd, Generation: 4, Counter: 17},
		{Group: "g", Stream: "s", ShardID: "shardId-000000000001", Checkpoint: lease.ShardEnd, Generation: 1, Counter: 5},
		{Group: "g", Stream: "s", ShardID: "shardId-000000000002", Owner: "worker-a", Generation: 3, Counter: 42,
			Checkpoint: "49590338271490256608559692538361571095921575989136588898",
			Parents:    []string{"shardId-000000000000", "shardId-000000000001"}, PendingOwner: "worker-b"},
	}
	for i := 3; i < 40; i++ {
		olds = append(olds, lease.Lease{Group: "g", Stream: "s", ShardID: fmt.Sprintf("shardId-%012d", i), Counter: 1})
	}
	for _, l := range olds {
		putOldLease(t, c, table, l)
	}
	// Another group's old lease on the same stream stays where it is.
	other := lease.Lease{Group: "g-other", Stream: "s", ShardID: "shardId-000000000000", Counter: 1}
	putOldLease(t, c, table, other)

	moved, err := lease.MigrateDynamoDBLayout(ctx, c, table, "g", "s")
	if err != nil || moved != len(olds) {
		t.Fatalf("MigrateDynamoDBLayout = %d, %v; want %d moved", moved, err, len(olds))
	}
	partitions := map[string]bool{}
	for _, item := range scanItems(t, c, table) {
		pk, shard := attrS(item, "pk"), attrS(item, "shard_id")
		switch {
		case pk == "s|g" && shard != lease.LayoutMarkerShardID:
			t.Errorf("an old item is left: %v", describeItem(item))
		case pk == "s|g-other" && shard != other.ShardID:
			t.Errorf("the other group's old partition holds %v", describeItem(item))
		case strings.HasPrefix(pk, "s|g|"):
			partitions[pk] = true
		}
	}
	if len(partitions) < 2 {
		t.Fatalf("the moved leases are in %d partitions", len(partitions))
	}
	ls, err := s.List(ctx, "g", "s")
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(olds, func(i, j int) bool { return olds[i].ShardID < olds[j].ShardID })
	if !reflect.DeepEqual(ls, olds) {
		t.Fatalf("List after the migration:\n got  %+v\n want %+v", ls, olds)
	}

	again, err := lease.MigrateDynamoDBLayout(ctx, c, table, "g", "s")
	if err != nil || again != 0 {
		t.Fatalf("a second migration = %d, %v; want 0 moved", again, err)
	}
	// The moved leases are the leases: their owner renews and hands over as before.
	held := olds[2]
	if _, err := s.Renew(ctx, held); err != nil {
		t.Fatal(err)
	}
	if l, err := s.Handoff(ctx, held); err != nil || l.Owner != "worker-b" {
		t.Fatalf("Handoff of a moved lease = %+v, %v; want it owned by the pending owner", l, err)
	}
	if _, err := s.List(ctx, "g-other", "s"); !errors.Is(err, lease.ErrOldLeaseLayout) {
		t.Fatalf("List of the group not migrated: %v, want ErrOldLeaseLayout", err)
	}
}

// TestMigrateDynamoDBLayoutConflicts: a copy identical to the old item (a migration that
// stopped half way) is fine; a different one, or an item in the old partition that is not a
// lease, stops the migration with an error naming the shard; an old item that changes while
// it is moved (a worker still running) stops it, and its copy is taken back.
func TestMigrateDynamoDBLayoutConflicts(t *testing.T) {
	c := dynamoClient(t)
	_, table := newTableStore(t, c, c, "conflicts")
	ctx := t.Context()
	bucketed := func(l lease.Lease) map[string]types.AttributeValue {
		return leaseItem(l, lease.DynamoDBPartitionKey(l.Key()))
	}

	same := lease.Lease{Group: "same", Stream: "s", ShardID: "shard-0", Owner: "worker-a", Generation: 2, Counter: 7, Checkpoint: "12"}
	putOldLease(t, c, table, same)
	putItem(t, c, table, bucketed(same))
	if moved, err := lease.MigrateDynamoDBLayout(ctx, c, table, "same", "s"); err != nil || moved != 1 {
		t.Fatalf("migration over an identical copy = %d, %v; want 1 moved", moved, err)
	}

	diff := lease.Lease{Group: "diff", Stream: "s", ShardID: "shard-0", Owner: "worker-a", Generation: 2, Counter: 7}
	putOldLease(t, c, table, diff)
	newer := diff
	newer.Counter = 9
	putItem(t, c, table, bucketed(newer))
	moved, err := lease.MigrateDynamoDBLayout(ctx, c, table, "diff", "s")
	if err == nil || moved != 0 {
		t.Fatalf("migration over a different copy = %d, %v; want an error", moved, err)
	}
	for _, want := range []string{table, `shard "shard-0"`, "differ", "Counter:9", "Counter:7"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}

	bad := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "s|bad"}, "shard_id": &types.AttributeValueMemberS{Value: "shard-bad"},
		"group": &types.AttributeValueMemberS{Value: "bad"}, "stream": &types.AttributeValueMemberS{Value: "s"},
		"generation": &types.AttributeValueMemberS{Value: "one"}, "counter": &types.AttributeValueMemberN{Value: "1"},
	}
	putItem(t, c, table, bad)
	putOldLease(t, c, table, lease.Lease{Group: "bad", Stream: "s", ShardID: "shard-good", Counter: 1})
	moved, err = lease.MigrateDynamoDBLayout(ctx, c, table, "bad", "s")
	if err == nil || moved != 0 || !strings.Contains(err.Error(), "shard-bad") || !strings.Contains(err.Error(), `"generation"`) {
		t.Fatalf("migration of a partition with a malformed item = %d, %v; want an error naming it", moved, err)
	}
	for _, item := range scanItems(t, c, table) {
		if attrS(item, "group") == "bad" && attrS(item, "pk") != "s|bad" {
			t.Fatalf("a migration that found a malformed item moved %v", describeItem(item))
		}
	}

	// A worker still running renews its old lease between the copy and the delete.
	busy := lease.Lease{Group: "busy", Stream: "s", ShardID: "shard-0", Owner: "worker-a", Generation: 1, Counter: 3}
	putOldLease(t, c, table, busy)
	cc := &countingClient{inner: c}
	var renewed atomic.Bool
	cc.setFault(func(method string) error {
		if method == "DeleteItem" && renewed.CompareAndSwap(false, true) {
			busy.Counter++
			putOldLease(t, c, table, busy)
		}
		return nil
	})
	moved, err = lease.MigrateDynamoDBLayout(ctx, cc, table, "busy", "s")
	if err == nil || moved != 0 || !strings.Contains(err.Error(), "still running") || !strings.Contains(err.Error(), "copy was taken back") {
		t.Fatalf("migration of a lease renewed meanwhile = %d, %v; want an error saying the group still runs", moved, err)
	}
	for _, item := range scanItems(t, c, table) {
		if attrS(item, "group") == "busy" && attrS(item, "pk") != "s|busy" {
			t.Fatalf("the copy of a lease renewed meanwhile is still there: %v", describeItem(item))
		}
	}
	cc.setFault(nil)
	if moved, err := lease.MigrateDynamoDBLayout(ctx, c, table, "busy", "s"); err != nil || moved != 1 {
		t.Fatalf("migration once the group stopped = %d, %v; want 1 moved", moved, err)
	}
	s, err := lease.NewDynamoDBStore(ctx, lease.DynamoDBConfig{Client: c, TableName: table})
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := s.List(ctx, "busy", "s"); err != nil || len(ls) != 1 || ls[0].Counter != busy.Counter {
		t.Fatalf("List after the second migration = %+v, %v; want the lease with counter %d", ls, err, busy.Counter)
	}
}

// TestDynamoDBStoreGroupNameWithSeparator: group names may contain '|', so the old-layout
// partition of group "g|NN" is partition NN of group "g". Each group's leases stay its own:
// g's leases in that partition are not old leases of "g|NN", "g|NN"'s marker is not listed as
// one of g's, and old leases of "g|NN" there (whose items would share keys with g's) stop g's
// List until "g|NN" is migrated.
func TestDynamoDBStoreGroupNameWithSeparator(t *testing.T) {
	c := dynamoClient(t)
	s, table := newTableStore(t, c, c, "separator-group")
	ctx := t.Context()
	var gLeases []lease.Lease
	for i := range 20 {
		l, err := s.Create(ctx, lease.Lease{Group: "g", Stream: "s", ShardID: fmt.Sprintf("shardId-%012d", i)})
		if err != nil {
			t.Fatal(err)
		}
		gLeases = append(gLeases, l)
	}
	shared := lease.DynamoDBPartitionKey(gLeases[0].Key()) // "s|g|NN"
	other := strings.TrimPrefix(shared, "s|")              // "g|NN", whose old partition is shared

	if ls, err := s.List(ctx, other, "s"); err != nil || len(ls) != 0 {
		t.Fatalf("List of group %q = %+v, %v; want none (g's leases in its old partition are not its own)", other, ls, err)
	}
	if _, err := s.Create(ctx, lease.Lease{Group: other, Stream: "s", ShardID: "shardId-000000000000"}); err != nil {
		t.Fatal(err)
	}
	if ls, err := s.List(ctx, "g", "s"); err != nil || !reflect.DeepEqual(ls, gLeases) {
		t.Fatalf("List of g with %q's marker in one of its partitions = %d leases, %v; want its %d", other, len(ls), err, len(gLeases))
	}

	putOldLease(t, c, table, lease.Lease{Group: other, Stream: "s", ShardID: "shardId-000000000099", Counter: 1})
	_, err := s.List(ctx, "g", "s")
	if !errors.Is(err, lease.ErrOldLeaseLayout) || !strings.Contains(err.Error(), fmt.Sprintf("group %q on stream", other)) ||
		!strings.Contains(err.Error(), `partition of group "g"`) {
		t.Fatalf("List of g with an old lease of %q in one of its partitions: %v; want ErrOldLeaseLayout naming %q", other, err, other)
	}
	fresh, err := lease.NewDynamoDBStore(ctx, lease.DynamoDBConfig{Client: c, TableName: table})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.List(ctx, other, "s"); !errors.Is(err, lease.ErrOldLeaseLayout) {
		t.Fatalf("List of %q with an old lease: %v, want ErrOldLeaseLayout", other, err)
	}
	if moved, err := lease.MigrateDynamoDBLayout(ctx, c, table, other, "s"); err != nil || moved != 1 {
		t.Fatalf("migration of %q = %d, %v; want 1 moved (and none of g's)", other, moved, err)
	}
	if ls, err := s.List(ctx, "g", "s"); err != nil || !reflect.DeepEqual(ls, gLeases) {
		t.Fatalf("List of g after %q's migration = %d leases, %v; want its %d", other, len(ls), err, len(gLeases))
	}
	if ls, err := fresh.List(ctx, other, "s"); err != nil || len(ls) != 2 {
		t.Fatalf("List of %q after its migration = %+v, %v; want its 2 leases", other, ls, err)
	}
}

// TestDynamoDBStoreMembersOfThisLayout: the member record of a worker of an earlier version
// (no layout attribute) comes marked Legacy, so that it is not counted (it cannot list the
// leases once the marker is there) and can be removed once stale.
func TestDynamoDBStoreMembersOfThisLayout(t *testing.T) {
	c := dynamoClient(t)
	s, table := newTableStore(t, c, c, "oldmember")
	ctx := t.Context()
	if _, err := s.Join(ctx, lease.Member{Group: "g", Stream: "s", Worker: "worker-new", Incarnation: 1}); err != nil {
		t.Fatal(err)
	}
	putItem(t, c, table, map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "#s|g"}, "shard_id": &types.AttributeValueMemberS{Value: "worker-old"},
		"group": &types.AttributeValueMemberS{Value: "g"}, "stream": &types.AttributeValueMemberS{Value: "s"},
		"counter": &types.AttributeValueMemberN{Value: "4"},
	})
	ms, err := s.Members(ctx, "g", "s")
	if err != nil || len(ms) != 2 || ms[0].Worker != "worker-new" || ms[0].Legacy || ms[1].Worker != "worker-old" || !ms[1].Legacy {
		t.Fatalf("Members = %+v, %v; want worker-new, and worker-old marked Legacy", ms, err)
	}
	if err := s.RemoveMember(ctx, ms[1]); err != nil {
		t.Fatalf("RemoveMember of the legacy record: %v", err)
	}
	if ms, err := s.Members(ctx, "g", "s"); err != nil || len(ms) != 1 || ms[0].Worker != "worker-new" {
		t.Fatalf("Members after removing the legacy record = %+v, %v; want worker-new only", ms, err)
	}
}

// TestDynamoDBStoreItemSizes: DynamoDBItemSize and DynamoDBMemberItemSize are the sizes of the
// items the store really wrote, and memberToItem is the record Heartbeat leaves.
func TestDynamoDBStoreItemSizes(t *testing.T) {
	c := dynamoClient(t)
	s, table := newTableStore(t, c, c, "sizes")
	ctx := t.Context()
	l, err := s.Create(ctx, lease.Lease{Group: "billing", Stream: "orders", ShardID: "shardId-000000000007",
		Parents: []string{"shardId-000000000001", "shardId-000000000002"}})
	if err != nil {
		t.Fatal(err)
	}
	if l, err = s.Take(ctx, l, "worker-a"); err != nil {
		t.Fatal(err)
	}
	if l, err = s.Checkpoint(ctx, l, "49590338271490256608559692538361571095921575989136588898"); err != nil {
		t.Fatal(err)
	}
	if l, err = s.RequestHandoff(ctx, l, "worker-b"); err != nil {
		t.Fatal(err)
	}
	m, err := s.Join(ctx, lease.Member{Group: "billing", Stream: "orders", Worker: "worker-a", Incarnation: 1})
	if err != nil {
		t.Fatal(err)
	}
	get := func(pk, sk string) map[string]types.AttributeValue {
		t.Helper()
		out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: pk}, "shard_id": &types.AttributeValueMemberS{Value: sk},
			}})
		if err != nil || len(out.Item) == 0 {
			t.Fatalf("GetItem(%q, %q) = %v, %v", pk, sk, out, err)
		}
		return out.Item
	}
	raw := get(lease.DynamoDBPartitionKey(l.Key()), l.ShardID)
	if got, want := lease.DynamoDBItemSize(l), lease.DynamoDBRawItemSize(raw); got != want {
		t.Fatalf("DynamoDBItemSize = %d, the stored item %v is %d bytes", got, describeItem(raw), want)
	}
	rawMember := get(lease.DynamoDBMemberPartitionKey("billing", "orders"), "worker-a")
	if got, want := describeItem(rawMember), describeItem(lease.DynamoDBMemberItem(m)); !reflect.DeepEqual(got, want) {
		t.Fatalf("the stored member record\n got  %v\n want %v (memberToItem)", got, want)
	}
	if got, want := lease.DynamoDBMemberItemSize(m), lease.DynamoDBRawItemSize(rawMember); got != want {
		t.Fatalf("DynamoDBMemberItemSize = %d, the stored record is %d bytes", got, want)
	}
	t.Logf("lease item %d bytes, member record %d bytes", lease.DynamoDBItemSize(l), lease.DynamoDBMemberItemSize(m))
}
