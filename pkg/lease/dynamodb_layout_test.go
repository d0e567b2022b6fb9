package lease

import (
	"fmt"
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

	m := Member{Group: "billing", Stream: "orders", Worker: "worker-a", Counter: 1234}
	wantMember := len("pk") + len("#orders|billing") + len("shard_id") + len("worker-a") +
		len("counter") + 3 // "1234": (4+1)/2+1
	if got := DynamoDBMemberItemSize(m); got != wantMember {
		t.Fatalf("DynamoDBMemberItemSize = %d, want %d", got, wantMember)
	}
	m.Notices = 2
	if got, want := DynamoDBMemberItemSize(m), wantMember+len("notices")+2; got != want {
		t.Fatalf("DynamoDBMemberItemSize with notices = %d, want %d", got, want)
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
