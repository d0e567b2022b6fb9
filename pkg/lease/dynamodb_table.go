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

// prepareTable describes the table, creates it if it is missing and allowed to, and waits while
// it is being created. It returns the description of a usable table.
func (s *DynamoDBStore) prepareTable(ctx context.Context, cfg DynamoDBConfig) (*types.TableDescription, error) {
	desc, err := s.describe(ctx)
	if err != nil {
		return nil, err
	}
	if desc == nil {
		if !cfg.CreateTable {
			return nil, fmt.Errorf(
				"%w: DynamoDB table %q does not exist; create it (partition key %q, sort key %q, both strings) or set DynamoDBConfig.CreateTable",
				ErrTableNotFound, s.table, attrPK, attrShardID)
		}
		waitCtx, cancel := context.WithTimeout(ctx, cfg.CreateTableTimeout)
		defer cancel()
		if err := s.create(waitCtx); err != nil {
			return nil, err
		}
		return s.waitUsable(waitCtx, cfg.CreateTableTimeout)
	}
	if desc.TableStatus == types.TableStatusCreating {
		// Someone else is creating it (another instance starting at the same time).
		waitCtx, cancel := context.WithTimeout(ctx, cfg.CreateTableTimeout)
		defer cancel()
		return s.waitUsable(waitCtx, cfg.CreateTableTimeout)
	}
	if !usable(desc.TableStatus) {
		return nil, fmt.Errorf("DynamoDB lease table %q is %s, not ACTIVE", s.table, desc.TableStatus)
	}
	return desc, nil
}

// describe returns the table's description, or nil if the table does not exist.
func (s *DynamoDBStore) describe(ctx context.Context) (*types.TableDescription, error) {
	out, err := s.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("describing DynamoDB lease table %q: %w", s.table, err)
	case out == nil || out.Table == nil:
		return nil, fmt.Errorf("describing DynamoDB lease table %q: the answer has no table description", s.table)
	}
	return out.Table, nil
}

// create creates the table with on-demand capacity. A table created meanwhile by someone else
// (ResourceInUseException) is fine: its key schema is checked like any existing table's.
func (s *DynamoDBStore) create(ctx context.Context) error {
	_, err := s.client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(s.table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrShardID), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrShardID), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("creating DynamoDB lease table %q: %w", s.table, err)
	}
	return nil
}

// waitUsable polls DescribeTable, backing off, until the table is ACTIVE (or UPDATING, which is
// usable too) or ctx ends. A table that is not found yet is waited for, as DescribeTable may
// lag behind CreateTable.
func (s *DynamoDBStore) waitUsable(ctx context.Context, timeout time.Duration) (*types.TableDescription, error) {
	delay := tableWaitFirst
	status := "not found"
	for {
		desc, err := s.describe(ctx)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		if err == nil && desc != nil {
			status = string(desc.TableStatus)
			switch {
			case usable(desc.TableStatus):
				return desc, nil
			case desc.TableStatus != types.TableStatusCreating:
				return nil, fmt.Errorf("DynamoDB lease table %q is %s, not ACTIVE", s.table, desc.TableStatus)
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("DynamoDB lease table %q is not ACTIVE (last status: %s) within DynamoDBConfig.CreateTableTimeout %v or before the context ended: %w",
				s.table, status, timeout, context.Cause(ctx))
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
