package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// DynamoDBConfig configures a DynamoDBStore.
type DynamoDBConfig struct {
	// Client is the DynamoDB client, normally a *dynamodb.Client. Required.
	Client DynamoDBAPI
	// TableName is the lease table: 3 to 255 characters of a-z, A-Z, 0-9, '_', '-' and '.'.
	// Required. One table can hold the leases of many consumer groups and streams.
	TableName string
	// CreateTable makes NewDynamoDBStore create the table (on-demand capacity,
	// PAY_PER_REQUEST) when it does not exist, and wait until it is ACTIVE. Default false: a
	// missing table is an error (a *TableNotFoundError, matched by ErrTableNotFound), for
	// deployments that manage tables themselves.
	CreateTable bool
	// CreateTableTimeout bounds how long NewDynamoDBStore waits for the table to become ACTIVE
	// (including its creation) when it is being created. Default (zero): 2 minutes. Must not be
	// negative.
	CreateTableTimeout time.Duration
}

func (c *DynamoDBConfig) setDefaults() {
	if c.CreateTableTimeout == 0 {
		c.CreateTableTimeout = dynamo.DefaultCreateTableTimeout
	}
}

// Validate reports every problem of the configuration at once (errors.Join). Zero values that
// have a default are valid.
func (c DynamoDBConfig) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("DynamoDBConfig.Client is nil"))
	}
	switch {
	case c.TableName == "":
		errs = append(errs, errors.New("DynamoDBConfig.TableName is empty"))
	case !dynamo.TableNamePattern.MatchString(c.TableName):
		errs = append(errs, fmt.Errorf(
			"DynamoDBConfig.TableName %q is not a valid DynamoDB table name (3 to 255 characters of a-z, A-Z, 0-9, '_', '-', '.')",
			c.TableName))
	}
	if c.CreateTableTimeout < 0 {
		errs = append(errs, fmt.Errorf("DynamoDBConfig.CreateTableTimeout is negative (%v)", c.CreateTableTimeout))
	}
	return errors.Join(errs...)
}
