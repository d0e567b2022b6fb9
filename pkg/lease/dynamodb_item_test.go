package lease

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestLeaseItemRoundTrip(t *testing.T) {
	for _, l := range []Lease{
		{Group: "g", Stream: "s", ShardID: "shardId-000000000000", Counter: 1},
		{Group: "billing", Stream: "orders", ShardID: "shardId-000000000007", Owner: "worker-a",
			Generation: 3, Counter: 42, Checkpoint: "49590338271490256608559692538361571095921575989136588898",
			Parents: []string{"shardId-000000000001", "shardId-000000000002"}, PendingOwner: "worker-b"},
		{Group: "group|with|bars", Stream: "s", ShardID: "x", Checkpoint: ShardEnd, Generation: 1<<63 - 1, Counter: -1},
	} {
		item := leaseToItem(l)
		got, err := leaseFromItem(item)
		if err != nil {
			t.Fatalf("leaseFromItem(leaseToItem(%+v)): %v", l, err)
		}
		if !reflect.DeepEqual(got, l) {
			t.Fatalf("round trip:\n got  %+v\n want %+v", got, l)
		}
		if pk, want := item[attrPK].(*types.AttributeValueMemberS).Value, l.Stream+"|"+l.Group+fmt.Sprintf("|%02d", leaseBucket(l.ShardID)); pk != want {
			t.Fatalf("pk = %q, want stream|group|bucket, %q", pk, want)
		}
	}
}

func TestLeaseItemLeavesEmptyFieldsOut(t *testing.T) {
	item := leaseToItem(Lease{Group: "g", Stream: "s", ShardID: "shard-0", Parents: []string{}})
	for _, name := range []string{attrOwner, attrCheckpoint, attrParents, attrPendingOwner} {
		if v, ok := item[name]; ok {
			t.Errorf("attribute %q = %#v in the item of a lease without it, want it absent", name, v)
		}
	}
	for _, name := range []string{attrPK, attrShardID, attrGroup, attrStream, attrGeneration, attrCounter} {
		if _, ok := item[name]; !ok {
			t.Errorf("attribute %q missing", name)
		}
	}
}

func TestLeaseFromMalformedItem(t *testing.T) {
	valid := leaseToItem(Lease{Group: "g", Stream: "s", ShardID: "shard-0", Owner: "w", Generation: 1,
		Counter: 2, Checkpoint: "5", Parents: []string{"p"}, PendingOwner: "v"})
	if _, err := leaseFromItem(valid); err != nil {
		t.Fatalf("valid item: %v", err)
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for _, tc := range []struct {
		name   string
		change func(map[string]types.AttributeValue)
		want   string // in the error
	}{
		{"no pk", func(m map[string]types.AttributeValue) { delete(m, attrPK) }, `"pk" is missing`},
		{"no shard id", func(m map[string]types.AttributeValue) { delete(m, attrShardID) }, `"shard_id" is missing`},
		{"no group", func(m map[string]types.AttributeValue) { delete(m, attrGroup) }, `"group" is missing`},
		{"no stream", func(m map[string]types.AttributeValue) { delete(m, attrStream) }, `"stream" is missing`},
		{"empty group", func(m map[string]types.AttributeValue) { m[attrGroup] = s("") }, `"group" is empty`},
		{"no generation", func(m map[string]types.AttributeValue) { delete(m, attrGeneration) }, `"generation" is missing`},
		{"no counter", func(m map[string]types.AttributeValue) { delete(m, attrCounter) }, `"counter" is missing`},
		{"generation as string", func(m map[string]types.AttributeValue) { m[attrGeneration] = s("1") }, `"generation" is a string (S), want a number`},
		{"counter not a number", func(m map[string]types.AttributeValue) { m[attrCounter] = n("abc") }, `"counter" = "abc" is not a whole number`},
		{"counter fraction", func(m map[string]types.AttributeValue) { m[attrCounter] = n("1.5") }, `"counter" = "1.5"`},
		{"counter empty", func(m map[string]types.AttributeValue) { m[attrCounter] = n("") }, `"counter" = ""`},
		{"generation overflows int64", func(m map[string]types.AttributeValue) { m[attrGeneration] = n("99999999999999999999") }, `"generation" = "99999999999999999999"`},
		{"owner as number", func(m map[string]types.AttributeValue) { m[attrOwner] = n("1") }, `"owner" is a number (N)`},
		{"checkpoint as bool", func(m map[string]types.AttributeValue) {
			m[attrCheckpoint] = &types.AttributeValueMemberBOOL{Value: true}
		}, `"checkpoint" is a boolean`},
		{"pending owner null", func(m map[string]types.AttributeValue) {
			m[attrPendingOwner] = &types.AttributeValueMemberNULL{Value: true}
		}, `"pending_owner" is a null`},
		{"parents as string set", func(m map[string]types.AttributeValue) {
			m[attrParents] = &types.AttributeValueMemberSS{Value: []string{"p"}}
		}, `"parents" is a string set (SS), want a list`},
		{"parent as number", func(m map[string]types.AttributeValue) {
			m[attrParents] = &types.AttributeValueMemberL{Value: []types.AttributeValue{s("p"), n("1")}}
		}, `"parents" element 1 is a number`},
		{"parent nil", func(m map[string]types.AttributeValue) {
			m[attrParents] = &types.AttributeValueMemberL{Value: []types.AttributeValue{nil}}
		}, `"parents" element 0 is a nil value`},
		{"typed nil string", func(m map[string]types.AttributeValue) { m[attrOwner] = (*types.AttributeValueMemberS)(nil) }, `"owner" is a nil value`},
		{"typed nil number", func(m map[string]types.AttributeValue) { m[attrCounter] = (*types.AttributeValueMemberN)(nil) }, `"counter"`},
		{"typed nil list", func(m map[string]types.AttributeValue) { m[attrParents] = (*types.AttributeValueMemberL)(nil) }, `"parents"`},
		{"nil value", func(m map[string]types.AttributeValue) { m[attrShardID] = nil }, `"shard_id" is a nil value`},
		{"pk of another partition", func(m map[string]types.AttributeValue) { m[attrPK] = s("other|g") }, `"pk" = "other|g" does not match`},
		{"two problems at once", func(m map[string]types.AttributeValue) {
			delete(m, attrGroup)
			m[attrCounter] = n("x")
		}, `"group" is missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			item := maps.Clone(valid)
			tc.change(item)
			got, err := leaseFromItem(item)
			if err == nil {
				t.Fatalf("leaseFromItem accepted a malformed item, returned %+v", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if !reflect.DeepEqual(got, Lease{}) {
				t.Fatalf("a malformed item returned a lease: %+v", got)
			}
		})
	}
	for _, item := range []map[string]types.AttributeValue{nil, {}} {
		if _, err := leaseFromItem(item); err == nil || !strings.Contains(err.Error(), "empty") {
			t.Fatalf("leaseFromItem(%v) = %v, want an error saying the item is empty", item, err)
		}
	}
}

func TestCheckKeySchema(t *testing.T) {
	attr := func(name string, typ types.ScalarAttributeType) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: &name, AttributeType: typ}
	}
	key := func(name string, typ types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: &name, KeyType: typ}
	}
	good := &types.TableDescription{
		AttributeDefinitions: []types.AttributeDefinition{attr("shard_id", "S"), attr("pk", "S")},
		KeySchema:            []types.KeySchemaElement{key("pk", types.KeyTypeHash), key("shard_id", types.KeyTypeRange)},
	}
	if err := checkKeySchema("t1", good); err != nil {
		t.Fatalf("good schema: %v", err)
	}
	for name, desc := range map[string]*types.TableDescription{
		"none": {},
		"hash only": {
			AttributeDefinitions: []types.AttributeDefinition{attr("pk", "S")},
			KeySchema:            []types.KeySchemaElement{key("pk", types.KeyTypeHash)},
		},
		"numeric sort key": {
			AttributeDefinitions: []types.AttributeDefinition{attr("pk", "S"), attr("shard_id", "N")},
			KeySchema:            []types.KeySchemaElement{key("pk", types.KeyTypeHash), key("shard_id", types.KeyTypeRange)},
		},
		"other names": {
			AttributeDefinitions: []types.AttributeDefinition{attr("leaseKey", "S")},
			KeySchema:            []types.KeySchemaElement{key("leaseKey", types.KeyTypeHash)},
		},
	} {
		err := checkKeySchema("t1", desc)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		for _, want := range []string{`"t1"`, "pk (HASH, S), shard_id (RANGE, S)"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: error %q does not say %q", name, err, want)
			}
		}
	}
}
