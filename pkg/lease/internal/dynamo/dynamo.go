// Package dynamo holds what the two DynamoDB lease stores share, lease.DynamoDBStore (a table of
// pkg/lease's own layout) and kcl.Store (a KCL application's lease table): preparing a table
// (describe it, create it if allowed, wait until it is usable), reading an item back after a
// conditional write failed, and the small pieces of every request.
//
// It knows nothing of leases: what a store's errors mean (lease.ErrTableNotFound and the
// rest) the store passes in. Only pkg/lease and pkg/lease/kcl import it.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Client is the part of the DynamoDB client these helpers call; both stores' client
// interfaces include it.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// DefaultCreateTableTimeout is how long a store waits for a table it creates (or finds being
// created) to become ACTIVE when its config leaves the timeout zero.
const DefaultCreateTableTimeout = 2 * time.Minute

// TableNamePattern is what DynamoDB accepts as a table name.
var TableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// Number is the DynamoDB number of n.
func Number(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// IsConditionFailed reports whether err is a write's failed condition.
func IsConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// GoneOrChanged reads an item back, by its key and a projection of keyAttr alone, after a
// conditional write to it failed: gone if it is not there, changed otherwise. If the read
// fails, the write still did not apply; the answer is then changed (an item that is gone has
// changed too, and the caller reads again either way) with the read's error in the message.
func GoneOrChanged(ctx context.Context, client Client, table string, key map[string]types.AttributeValue, keyAttr string,
	gone, changed error,
) error {
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(table),
		Key:                      key,
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#k"),
		ExpressionAttributeNames: map[string]string{"#k": keyAttr},
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w (reading it back from DynamoDB table %q to tell whether it still exists failed: %v)",
			changed, table, err)
	case out == nil || len(out.Item) == 0:
		return gone
	default:
		return changed
	}
}

// TableSpec is what PrepareTable needs to know of a table: where it is, how to create it, and
// what to tell an operator whose table is missing or slow to become ACTIVE.
type TableSpec struct {
	Client      Client
	Name        string
	AllowCreate bool
	Timeout     time.Duration
	CreateInput *dynamodb.CreateTableInput
	// NotFound is wrapped by the error of a missing table that may not be created.
	NotFound error
	// MissingHint ends that error: what to do.
	MissingHint string
	// TimeoutSetting names the setting that bounds the wait, for its error.
	TimeoutSetting string
}

// Polling bounds of waitUsable.
const (
	tableWaitFirst = 20 * time.Millisecond
	tableWaitMax   = 2 * time.Second
)

// PrepareTable describes the table, creates it if it is missing and allowed to, and waits
// while it is being created. It returns the description of a usable table; the caller checks
// its key schema.
func PrepareTable(ctx context.Context, spec TableSpec) (*types.TableDescription, error) {
	desc, err := describeTable(ctx, spec.Client, spec.Name)
	if err != nil {
		return nil, err
	}
	if desc == nil {
		if !spec.AllowCreate {
			return nil, fmt.Errorf("%w: DynamoDB table %q does not exist; %s", spec.NotFound, spec.Name, spec.MissingHint)
		}
		waitCtx, cancel := context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
		if err := createTable(waitCtx, spec); err != nil {
			return nil, err
		}
		return waitUsable(waitCtx, spec)
	}
	if desc.TableStatus == types.TableStatusCreating {
		// Someone else is creating it (another instance starting at the same time).
		waitCtx, cancel := context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
		return waitUsable(waitCtx, spec)
	}
	if !usable(desc.TableStatus) {
		return nil, fmt.Errorf("DynamoDB lease table %q is %s, not ACTIVE", spec.Name, desc.TableStatus)
	}
	return desc, nil
}

// describeTable returns the table's description, or nil if the table does not exist.
func describeTable(ctx context.Context, client Client, table string) (*types.TableDescription, error) {
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
func createTable(ctx context.Context, spec TableSpec) error {
	_, err := spec.Client.CreateTable(ctx, spec.CreateInput)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("creating DynamoDB lease table %q: %w", spec.Name, err)
	}
	return nil
}

// waitUsable polls DescribeTable, backing off, until the table is ACTIVE (or UPDATING, which is
// usable too) or ctx ends. A table that is not found yet is waited for, as DescribeTable may
// lag behind CreateTable.
func waitUsable(ctx context.Context, spec TableSpec) (*types.TableDescription, error) {
	delay := tableWaitFirst
	status := "not found"
	for {
		desc, err := describeTable(ctx, spec.Client, spec.Name)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		if err == nil && desc != nil {
			status = string(desc.TableStatus)
			switch {
			case usable(desc.TableStatus):
				return desc, nil
			case desc.TableStatus != types.TableStatusCreating:
				return nil, fmt.Errorf("DynamoDB lease table %q is %s, not ACTIVE", spec.Name, desc.TableStatus)
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("DynamoDB lease table %q is not ACTIVE (last status: %s) within %s %v or before the context ended: %w",
				spec.Name, status, spec.TimeoutSetting, spec.Timeout, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, tableWaitMax)
	}
}

func usable(st types.TableStatus) bool {
	return st == types.TableStatusActive || st == types.TableStatusUpdating
}
