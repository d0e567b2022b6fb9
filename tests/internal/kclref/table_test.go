package kclref_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/kclref"
)

func TestCreateTableInput(t *testing.T) {
	in := kclref.CreateTableInput("app")
	if *in.TableName != "app" || in.BillingMode != types.BillingModePayPerRequest || in.ProvisionedThroughput != nil {
		t.Fatalf("table: %+v", in)
	}
	if len(in.KeySchema) != 1 || *in.KeySchema[0].AttributeName != "leaseKey" || in.KeySchema[0].KeyType != types.KeyTypeHash {
		t.Fatalf("key schema: %+v", in.KeySchema)
	}
	if len(in.AttributeDefinitions) != 1 || in.AttributeDefinitions[0].AttributeType != types.ScalarAttributeTypeS {
		t.Fatalf("attribute definitions: %+v", in.AttributeDefinitions)
	}
	if len(in.GlobalSecondaryIndexes) != 0 {
		t.Fatal("the KCL creates the table without an index")
	}
}

func TestLeaseOwnerIndex(t *testing.T) {
	gsi := kclref.LeaseOwnerIndex("app").GlobalSecondaryIndexUpdates[0].Create
	if *gsi.IndexName != "LeaseOwnerToLeaseKeyIndex" || gsi.Projection.ProjectionType != types.ProjectionTypeKeysOnly {
		t.Fatalf("index: %+v", gsi)
	}
	ks := gsi.KeySchema
	if *ks[0].AttributeName != "leaseOwner" || ks[0].KeyType != types.KeyTypeHash ||
		*ks[1].AttributeName != "leaseKey" || ks[1].KeyType != types.KeyTypeRange {
		t.Fatalf("index keys: %+v", ks)
	}
}

func TestStreamIdentifier(t *testing.T) {
	id := kclref.StreamIdentifier("123456789012", "orders", 1700000000)
	acct, name, epoch, err := kclref.ParseStreamIdentifier(id)
	if err != nil || acct != "123456789012" || name != "orders" || epoch != 1700000000 {
		t.Fatalf("ParseStreamIdentifier(%q) = %q %q %d %v", id, acct, name, epoch, err)
	}
	for _, bad := range []string{"orders", "acct:orders:1", "1:a:b:2", "1::2", "1:orders:0", "1:orders:99999999999999999999"} {
		if _, _, _, err := kclref.ParseStreamIdentifier(bad); err == nil {
			t.Errorf("ParseStreamIdentifier(%q) accepted", bad)
		}
	}
}
