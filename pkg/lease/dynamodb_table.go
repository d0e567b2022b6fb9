package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// tableSpec is what prepareTable needs to know of a table: where it is, how to create it, and
// what to tell an operator whose table is missing or slow to become ACTIVE.
type tableSpec struct {
	client      DynamoDBAPI
	name        string
	allowCreate bool
	timeout     time.Duration
	createInput *dynamodb.CreateTableInput
	// missingHint ends the error of a missing table that may not be created: what to do.
	missingHint string
	// timeoutSetting names the setting that bounds the wait, for its error.
	timeoutSetting string
}

// dynamoDBTableSpec is the spec of a DynamoDBStore's lease table.
func dynamoDBTableSpec(cfg DynamoDBConfig) tableSpec {
	return tableSpec{
		client: cfg.Client, name: cfg.TableName, allowCreate: cfg.CreateTable, timeout: cfg.CreateTableTimeout,
		createInput: &dynamodb.CreateTableInput{
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
		missingHint: fmt.Sprintf("create it (partition key %q, sort key %q, both strings) or set DynamoDBConfig.CreateTable",
			attrPK, attrShardID),
		timeoutSetting: "DynamoDBConfig.CreateTableTimeout",
	}
}

// prepareTable describes the table, creates it if it is missing and allowed to, and waits while
// it is being created. It returns the description of a usable table.
func prepareTable(ctx context.Context, spec tableSpec) (*types.TableDescription, error) {
	desc, err := describeTable(ctx, spec.client, spec.name)
	if err != nil {
		return nil, err
	}
	if desc == nil {
		if !spec.allowCreate {
			return nil, fmt.Errorf("%w: DynamoDB table %q does not exist; %s", ErrTableNotFound, spec.name, spec.missingHint)
		}
		waitCtx, cancel := context.WithTimeout(ctx, spec.timeout)
		defer cancel()
		if err := createTable(waitCtx, spec); err != nil {
			return nil, err
		}
		return waitUsable(waitCtx, spec)
	}
	if desc.TableStatus == types.TableStatusCreating {
		// Someone else is creating it (another instance starting at the same time).
		waitCtx, cancel := context.WithTimeout(ctx, spec.timeout)
		defer cancel()
		return waitUsable(waitCtx, spec)
	}
	if !usable(desc.TableStatus) {
		return nil, fmt.Errorf("DynamoDB lease table %q is %s, not ACTIVE", spec.name, desc.TableStatus)
	}
	return desc, nil
}

// describeTable returns the table's description, or nil if the table does not exist.
func describeTable(ctx context.Context, client DynamoDBAPI, table string) (*types.TableDescription, error) {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("describing DynamoDB lease table %q: %w", table, err)
	case out == nil || out.Table == nil:
		return nil, fmt.Errorf("describing DynamoDB lease table %q: the answer has no table description", table)
	}
	return out.Table, nil
}

// createTable creates the table as spec says. A table created meanwhile by someone else
// (ResourceInUseException) is fine: its key schema is checked like any existing table's.
func createTable(ctx context.Context, spec tableSpec) error {
	_, err := spec.client.CreateTable(ctx, spec.createInput)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("creating DynamoDB lease table %q: %w", spec.name, err)
	}
	return nil
}

// waitUsable polls DescribeTable, backing off, until the table is ACTIVE (or UPDATING, which is
// usable too) or ctx ends. A table that is not found yet is waited for, as DescribeTable may
// lag behind CreateTable.
func waitUsable(ctx context.Context, spec tableSpec) (*types.TableDescription, error) {
	delay := tableWaitFirst
	status := "not found"
	for {
		desc, err := describeTable(ctx, spec.client, spec.name)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		if err == nil && desc != nil {
			status = string(desc.TableStatus)
			switch {
			case usable(desc.TableStatus):
				return desc, nil
			case desc.TableStatus != types.TableStatusCreating:
				return nil, fmt.Errorf("DynamoDB lease table %q is %s, not ACTIVE", spec.name, desc.TableStatus)
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("DynamoDB lease table %q is not ACTIVE (last status: %s) within %s %v or before the context ended: %w",
				spec.name, status, spec.timeoutSetting, spec.timeout, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, tableWaitMax)
	}
}

func usable(st types.TableStatus) bool {
	return st == types.TableStatusActive || st == types.TableStatusUpdating
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
