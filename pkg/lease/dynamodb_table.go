package lease

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// dynamoDBTableSpec is the spec of a DynamoDBStore's lease table.
func dynamoDBTableSpec(cfg DynamoDBConfig) dynamo.TableSpec {
	return dynamo.TableSpec{
		Client: cfg.Client, Name: cfg.TableName, AllowCreate: cfg.CreateTable, Timeout: cfg.CreateTableTimeout,
		CreateInput: &dynamodb.CreateTableInput{
			TableName:   aws.String(cfg.TableName),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(attrShardID), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrShardID), KeyType: types.KeyTypeRange},
			},
		},
		Missing: func() error {
			return &TableNotFoundError{
				Table:         cfg.TableName,
				KeySchema:     fmt.Sprintf("partition key %q, sort key %q, both strings", attrPK, attrShardID),
				CreateSetting: "DynamoDBConfig.CreateTable",
			}
		},
		TimeoutSetting: "DynamoDBConfig.CreateTableTimeout",
	}
}

// checkKeySchema fails unless the table's key is pk (HASH, string) and shard_id (RANGE, string),
// which is what every item the store writes and every query it runs assume.
func checkKeySchema(table string, desc *types.TableDescription) error {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, d := range desc.AttributeDefinitions {
		attrTypes[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	var parts []string
	for _, k := range desc.KeySchema {
		name := aws.ToString(k.AttributeName)
		parts = append(parts, fmt.Sprintf("%s (%s, %s)", name, k.KeyType, attrTypes[name]))
	}
	want := []string{attrPK + " (HASH, S)", attrShardID + " (RANGE, S)"}
	if strings.Join(parts, ", ") == strings.Join(want, ", ") {
		return nil
	}
	got := strings.Join(parts, ", ")
	if got == "" {
		got = "none"
	}
	return fmt.Errorf("DynamoDB table %q has key schema %s, want %s: it was not made for leases; use another DynamoDBConfig.TableName",
		table, got, strings.Join(want, ", "))
}
