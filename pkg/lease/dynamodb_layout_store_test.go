package lease_test

import (
	"fmt"
	"reflect"
	"strings"
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
	// Other groups on the same stream, which List must not return: one of them is named as a
	// partition key of g's without the stream, "g|NN", so that its keys start with that one.
	other := strings.TrimPrefix(lease.DynamoDBPartitionKey(lease.Key{Group: "g", Stream: "s", ShardID: "shardId-000000000000"}), "s|")
	for _, g := range []string{"g2", other} {
		if _, err := s.Create(t.Context(), lease.Lease{Group: g, Stream: "s", ShardID: "shardId-000000000000"}); err != nil {
			t.Fatal(err)
		}
	}
	if ls, err := s.List(t.Context(), other, "s"); err != nil || len(ls) != 1 || ls[0].Group != other {
		t.Fatalf("List of group %q = %+v, %v; want its one lease", other, ls, err)
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

// TestDynamoDBStoreItemSizes: DynamoDBItemSize and DynamoDBMemberItemSize are the sizes of the
// items the store really wrote, and memberToItem is the record Heartbeat and NotifyMember leave.
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
	m := lease.Member{Group: "billing", Stream: "orders", Worker: "worker-a"}
	if err := s.NotifyMember(ctx, m); err != nil { // no record yet: none is made
		t.Fatal(err)
	}
	for range 2 {
		if m, err = s.Heartbeat(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if m.Notices != 0 {
		t.Fatalf("Heartbeat = %+v after a NotifyMember of no record, want Notices 0", m)
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
	if err := s.NotifyMember(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Notices = 1
	rawMember = get(lease.DynamoDBMemberPartitionKey("billing", "orders"), "worker-a")
	if got, want := describeItem(rawMember), describeItem(lease.DynamoDBMemberItem(m)); !reflect.DeepEqual(got, want) {
		t.Fatalf("the stored member record after NotifyMember\n got  %v\n want %v (memberToItem)", got, want)
	}
	t.Logf("lease item %d bytes, member record %d bytes", lease.DynamoDBItemSize(l), lease.DynamoDBMemberItemSize(m))
}
