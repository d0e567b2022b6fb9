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
	// Missing is the error of a missing table that may not be created, in the store's own
	// type and words (what to do about it).
	Missing func() error
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
			return nil, spec.Missing()
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

// waitUsable waits, with the SDK's TableExists waiter, until the table is ACTIVE (or UPDATING,
// which is usable too) or ctx ends. A table that is not found yet is waited for, as
// DescribeTable may lag behind CreateTable.
//
// The waiter's own acceptors do not fit as they are: they accept ACTIVE alone (an UPDATING
// table would be waited on until it is done), and they wait on DELETING or ARCHIVED tables,
// which will never be usable. Its Retryable is replaced by one that decides as the store needs;
// its polling (exponential, jittered, from tableWaitFirst to tableWaitMax) and its bound are
// kept. Its timeout error says neither the table nor what was seen, so a timeout is reported
// here, with the table's last status.
func waitUsable(ctx context.Context, spec TableSpec) (*types.TableDescription, error) {
	status := "not found" // the last status seen, for the timeout's error
	var verdict error     // the error a DescribeTable answer decided on, as opposed to a timeout
	retryable := func(_ context.Context, _ *dynamodb.DescribeTableInput, out *dynamodb.DescribeTableOutput, err error) (bool, error) {
		var notFound *types.ResourceNotFoundException
		switch {
		case errors.As(err, &notFound):
			return true, nil
		case err != nil && ctx.Err() != nil:
			return true, nil // the call was cut by ctx's end: a timeout, reported below
		case err != nil:
			verdict = fmt.Errorf("describing DynamoDB lease table %q: %w", spec.Name, err)
		case out == nil || out.Table == nil:
			verdict = fmt.Errorf("describing DynamoDB lease table %q: the answer has no table description", spec.Name)
		case usable(out.Table.TableStatus):
			return false, nil
		case out.Table.TableStatus == types.TableStatusCreating:
			status = string(out.Table.TableStatus)
			return true, nil
		default:
			verdict = fmt.Errorf("DynamoDB lease table %q is %s, not ACTIVE", spec.Name, out.Table.TableStatus)
		}
		return false, verdict
	}
	waiter := dynamodb.NewTableExistsWaiter(spec.Client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay, o.Retryable = tableWaitFirst, tableWaitMax, retryable
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(spec.Name)}, spec.Timeout)
	switch {
	case verdict != nil:
		return nil, verdict
	case err != nil:
		cause := context.Cause(ctx)
		if cause == nil { // the waiter's own bound, spec.Timeout, which ctx also has
			cause = context.DeadlineExceeded
		}
		return nil, fmt.Errorf("DynamoDB lease table %q is not ACTIVE (last status: %s) within %s %v or before the context ended: %w",
			spec.Name, status, spec.TimeoutSetting, spec.Timeout, cause)
	}
	return out.Table, nil
}

func usable(st types.TableStatus) bool {
	return st == types.TableStatusActive || st == types.TableStatusUpdating
}
