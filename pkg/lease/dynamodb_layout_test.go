package lease

import (
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestDynamoDBPartitionKey(t *testing.T) {
	for _, tc := range []struct {
		key  Key
		want string
	}{
		// FNV-1a 32 of the shard id, mod 16: 1669912609 % 16 = 1, 1653134990 % 16 = 14,
		// 1686690228 % 16 = 4.
		{Key{Group: "billing", Stream: "orders", ShardID: "shardId-000000000000"}, "orders|billing|01"},
		{Key{Group: "billing", Stream: "orders", ShardID: "shardId-000000000001"}, "orders|billing|14"},
		{Key{Group: "billing", Stream: "orders", ShardID: "shardId-000000000007"}, "orders|billing|04"},
	} {
		if got := DynamoDBPartitionKey(tc.key); got != tc.want {
			t.Errorf("DynamoDBPartitionKey(%v) = %q, want %q", tc.key, got, tc.want)
		}
	}
	if got := DynamoDBMemberPartitionKey("billing", "orders"); got != "#orders|billing" {
		t.Errorf("DynamoDBMemberPartitionKey = %q, want %q", got, "#orders|billing")
	}
}

// TestDynamoDBPartitionKeySpread: the 4,000 shard ids of a stream of 4,000 shards use every
// bucket, and none holds much more than its sixteenth, so that none takes much more than a
// sixteenth of the group's writes.
func TestDynamoDBPartitionKeySpread(t *testing.T) {
	const shards = 4000
	per := map[string]int{}
	for i := range shards {
		per[DynamoDBPartitionKey(Key{Group: "g", Stream: "s", ShardID: fmt.Sprintf("shardId-%012d", i)})]++
	}
	if len(per) != DynamoDBLeaseBuckets {
		t.Fatalf("%d shards landed in %d partitions, want %d: %v", shards, len(per), DynamoDBLeaseBuckets, per)
	}
	for pk, n := range per {
		if limit := shards / DynamoDBLeaseBuckets * 5 / 4; n > limit {
			t.Errorf("partition %q holds %d of %d leases, more than %d", pk, n, shards, limit)
		}
	}
}

// TestDynamoDBItemSize checks the size of a known lease's item against a count by hand.
func TestDynamoDBItemSize(t *testing.T) {
	l := Lease{Group: "billing", Stream: "orders", ShardID: "shardId-000000000007", Owner: "worker-a",
		Generation: 3, Counter: 42, Checkpoint: "49590338271490256608559692538361571095921575989136588898",
		Parents: []string{"shardId-000000000001", "shardId-000000000002"}, PendingOwner: "worker-b"}
	want := 0 +
		len("pk") + len("orders|billing|04") +
		len("shard_id") + len("shardId-000000000007") +
		len("group") + len("billing") +
		len("stream") + len("orders") +
		len("owner") + len("worker-a") +
		len("generation") + 2 + // "3": (1+1)/2+1
		len("counter") + 2 + // "42": (2+1)/2+1
		len("checkpoint") + 56 +
		len("parents") + 3 + 2*(1+20) +
		len("pending_owner") + len("worker-b")
	if want != 244 {
		t.Fatalf("hand count %d, want 244 (the sum above was edited?)", want)
	}
	if got := DynamoDBItemSize(l); got != want {
		t.Fatalf("DynamoDBItemSize = %d, want %d", got, want)
	}

	m := Member{Group: "billing", Stream: "orders", Worker: "worker-a", Counter: 5, Incarnation: 7301029384756473829}
	wantMember := len("pk") + len("#orders|billing") + len("shard_id") + len("worker-a") +
		len("group") + len("billing") + len("stream") + len("orders") + len("counter") + 2 +
		len("layout") + len("buckets-16") + len("changes") + 2 + // 0: (1+1)/2+1
		len("incarnation") + 11 + // 19 digits: (19+1)/2+1
		len("roster") + 2 + len("seen") + 2 // 0 each
	if got := DynamoDBMemberItemSize(m); got != wantMember {
		t.Fatalf("DynamoDBMemberItemSize = %d, want %d", got, wantMember)
	}
}

func TestValueSize(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for _, tc := range []struct {
		v    types.AttributeValue
		want int
	}{
		{s(""), 0},
		{s("é請"), 5}, // UTF-8 bytes, not runes
		{n("0"), 2},
		{n("42"), 2},
		{n("100"), 2}, // trailing zeros are not significant
		{n("123"), 3},
		{n("-1.50"), 2},
		{n("9223372036854775807"), 11},
		{&types.AttributeValueMemberBOOL{Value: true}, 1},
		{&types.AttributeValueMemberNULL{Value: true}, 1},
		{&types.AttributeValueMemberL{}, 3},
		{&types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), n("7")}}, 3 + 1 + 2 + 1 + 2},
		{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": s("ab")}}, 3 + 1 + 1 + 2},
		{&types.AttributeValueMemberB{Value: []byte{1, 2, 3}}, 3},
		{&types.AttributeValueMemberSS{Value: []string{"a", "bc"}}, 3},
	} {
		if got := valueSize(tc.v); got != tc.want {
			t.Errorf("valueSize(%#v) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// TestLayoutMarkerFailsOldParsing: an earlier version reads every item of its partition,
// stream|group, with the leaseFromItem of its time, which is oldLeaseFromItem here: the same
// decoding, with the partition key stream|group (as of c39f71c, before the buckets). It
// requires the attributes group, stream (non-empty strings), generation and counter (numbers),
// and its List fails on an item that lacks them, naming the item's shard_id:
//
//	lease list of group "billing" stream "orders" shard "#layout: leases moved to 16
//	partitions (stream|group|NN); upgrade this worker": DynamoDB table "..." holds a
//	malformed item: attribute "group" is missing ...
//
// (as that version's code answered on dynalite). The marker has none of them, so an earlier
// version fails instead of creating leases beside the bucketed ones, which would have every
// shard read twice. It has no owner either: no version could take it for a held lease.
func TestLayoutMarkerFailsOldParsing(t *testing.T) {
	marker := layoutMarkerItem("billing", "orders")
	for _, name := range []string{attrGroup, attrStream, attrGeneration, attrCounter, attrOwner} {
		if _, ok := marker[name]; ok {
			t.Errorf("the marker has attribute %q; an earlier version could read it as a lease", name)
		}
	}
	l, err := oldLeaseFromItem(marker)
	if err == nil {
		t.Fatalf("an earlier version would read the marker as the lease %+v", l)
	}
	for _, want := range []string{`"group" is missing`, `"stream" is missing`, `"generation" is missing`, `"counter" is missing`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("old parsing of the marker: %q does not say %q", err, want)
		}
	}
	if _, err := leaseFromItem(marker); err == nil {
		t.Fatal("this version reads the marker as a lease")
	}
	if !isLayoutMarker(marker) {
		t.Fatal("isLayoutMarker does not know the marker")
	}
	// What it says is true, and it sorts before every Kinesis shard id.
	if n := strconv.Itoa(DynamoDBLeaseBuckets); !strings.Contains(layoutMarkerShardID, n+" partitions") || layoutName != "buckets-"+n {
		t.Fatalf("marker %q / %q does not name %s buckets", layoutMarkerShardID, layoutName, n)
	}
	if layoutMarkerShardID >= "shardId-" {
		t.Fatalf("the marker's shard id %q sorts after Kinesis shard ids", layoutMarkerShardID)
	}
}

// TestOldAndNewLeaseItems: an item of the old layout is read by oldLeaseFromItem only, one of
// the current layout by leaseFromItem only, so that the store tells them apart in any
// partition.
func TestOldAndNewLeaseItems(t *testing.T) {
	l := Lease{Group: "g", Stream: "s", ShardID: "shardId-000000000000", Owner: "w", Generation: 2, Counter: 3,
		Checkpoint: "9", Parents: []string{"p"}, PendingOwner: "v"}
	item := leaseToItem(l)
	if got, err := leaseFromItem(item); err != nil || !reflect.DeepEqual(got, l) {
		t.Fatalf("leaseFromItem(leaseToItem) = %+v, %v", got, err)
	}
	if _, err := oldLeaseFromItem(item); err == nil || !strings.Contains(err.Error(), `want "s|g"`) {
		t.Fatalf("oldLeaseFromItem of a bucketed item: %v, want a partition key error", err)
	}
	old := maps.Clone(item)
	old[attrPK] = &types.AttributeValueMemberS{Value: "s|g"}
	if got, err := oldLeaseFromItem(old); err != nil || !reflect.DeepEqual(got, l) {
		t.Fatalf("oldLeaseFromItem of an old item = %+v, %v", got, err)
	}
	if _, err := leaseFromItem(old); err == nil || !strings.Contains(err.Error(), `want "s|g|01"`) {
		t.Fatalf("leaseFromItem of an old item: %v, want a partition key error", err)
	}
}

func TestMemberKeyOverhead(t *testing.T) {
	// The longest keys of a group: a lease's partition key adds "|NN" to stream|group, a
	// member record's "#".
	k := Key{Group: "g", Stream: "s", ShardID: "x"}
	base := len(partitionKey(k.Group, k.Stream))
	if got := max(len(DynamoDBPartitionKey(k)), len(DynamoDBMemberPartitionKey(k.Group, k.Stream))) - base; got != MemberKeyOverhead {
		t.Fatalf("the longest key adds %d bytes, MemberKeyOverhead = %d", got, MemberKeyOverhead)
	}
}
