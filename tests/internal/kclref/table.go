package kclref

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// LeaseOwnerIndexName is the global secondary index KCL 3.x adds to the
// lease table (DynamoDBLeaseRefresher.createLeaseOwnerToLeaseKeyIndexIfNotExists)
// so a worker can list its own leases.
const LeaseOwnerIndexName = "LeaseOwnerToLeaseKeyIndex"

// TableKeySchema is the lease table's key: leaseKey alone, as the hash key.
// There is no range key; a lease row is addressed by its leaseKey only.
func TableKeySchema() []types.KeySchemaElement {
	return []types.KeySchemaElement{{AttributeName: aws.String(AttrLeaseKey), KeyType: types.KeyTypeHash}}
}

// CreateTableInput is the request the KCL's lease refresher sends when the
// lease table does not exist (createLeaseTableIfNotExists), with the
// defaults of 2.x and 3.x: hash key leaseKey of type S, on-demand billing
// (PAY_PER_REQUEST is the default billing mode of both generations; an
// application may configure PROVISIONED capacity instead), deletion
// protection off unless configured, no tags, point-in-time recovery off
// unless configured (turned on by a separate call). The KCL creates the
// table without the 3.x index; LeaseOwnerIndex adds it.
func CreateTableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		KeySchema: TableKeySchema(),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrLeaseKey), AttributeType: types.ScalarAttributeTypeS},
		},
		BillingMode:               types.BillingModePayPerRequest,
		DeletionProtectionEnabled: aws.Bool(false),
	}
}

// LeaseOwnerIndex is the UpdateTable request with which KCL 3.x adds its
// index once the table exists (when the worker runs in 3.x mode): hash key
// leaseOwner (S), range key leaseKey (S), keys-only projection; on an
// on-demand table without provisioned throughput. Rows without a leaseOwner
// are simply not in the index (it is sparse). KCL 3.x's listLeaseKeysForWorker
// queries this index and fails while it is missing.
func LeaseOwnerIndex(table string) *dynamodb.UpdateTableInput {
	return &dynamodb.UpdateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrLeaseOwner), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrLeaseKey), AttributeType: types.ScalarAttributeTypeS},
		},
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{
			Create: &types.CreateGlobalSecondaryIndexAction{
				IndexName: aws.String(LeaseOwnerIndexName),
				KeySchema: []types.KeySchemaElement{
					{AttributeName: aws.String(AttrLeaseOwner), KeyType: types.KeyTypeHash},
					{AttributeName: aws.String(AttrLeaseKey), KeyType: types.KeyTypeRange},
				},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
			},
		}},
	}
}
