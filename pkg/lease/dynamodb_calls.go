package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// before runs the checks every operation shares, as MemoryStore.before does: the caller's input,
// then whether the caller still wants the answer (a cancelled call is never sent). Besides
// validateKey, the stream name must not contain the separator of the partition key, or two
// (stream, group) pairs could share one, nor start with the '#' of the member partitions.
func (s *DynamoDBStore) before(ctx context.Context, op string, key Key, checkShard bool) error {
	if err := validateKey(op, key, checkShard); err != nil {
		return err
	}
	if strings.Contains(key.Stream, pkSeparator) {
		return fmt.Errorf("lease %s of %s: %w: the stream name contains %q, which is not valid in a Kinesis stream name",
			op, key, errInvalidKey, pkSeparator)
	}
	if strings.HasPrefix(key.Stream, memberPKPrefix) {
		// "#x|g" is the member partition of stream x: a lease of stream "#x" would land in it.
		return fmt.Errorf("lease %s of %s: %w: the stream name starts with %q, which is not valid in a Kinesis stream name",
			op, key, errInvalidKey, memberPKPrefix)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lease %s of %s: %w", op, key, err)
	}
	return nil
}

// callErr wraps an error of a DynamoDB call, naming the operation, the lease and the table.
func (s *DynamoDBStore) callErr(op string, key Key, err error) error {
	return fmt.Errorf("lease %s of %s in DynamoDB table %q: %w", op, key, s.table, err)
}

// malformedErr reports an item that is not a lease this store could have written.
func (s *DynamoDBStore) malformedErr(op string, key Key, err error) error {
	return fmt.Errorf("lease %s of %s: DynamoDB table %q holds a malformed item: %w", op, key, s.table, err)
}

// queryPartition reads every item of one partition with strongly consistent Query pages (of at
// most queryLimit items, if it is set) and passes each to each, which may stop the read with an
// error.
func (s *DynamoDBStore) queryPartition(ctx context.Context, op string, key Key, pk string,
	each func(map[string]types.AttributeValue) error,
) error {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		ConsistentRead:           aws.Bool(true),
		KeyConditionExpression:   aws.String("#pk = :pk"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: pk},
		},
	}
	if s.queryLimit > 0 {
		in.Limit = aws.Int32(s.queryLimit)
	}
	for {
		page, err := s.client.Query(ctx, in)
		if err != nil {
			return s.callErr(op, key, err)
		}
		if page == nil {
			return s.callErr(op, key, errors.New("Query returned no page"))
		}
		for _, item := range page.Items {
			if err := each(item); err != nil {
				return err
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// update runs one conditional UpdateItem on key's item and returns the lease as written. failed
// reports that the condition did not hold (nothing was written); err is any other failure.
func (s *DynamoDBStore) update(ctx context.Context, op string, key Key, set, cond string,
	names map[string]string, values map[string]types.AttributeValue,
) (l Lease, failed bool, err error) {
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyItem(key),
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	switch {
	case dynamo.IsConditionFailed(err):
		return Lease{}, true, nil
	case err != nil:
		return Lease{}, false, s.callErr(op, key, err)
	}
	if out == nil {
		return Lease{}, false, s.callErr(op, key, errors.New("UpdateItem returned no answer"))
	}
	l, err = leaseFromItem(out.Attributes)
	if err == nil && l.Key() != key {
		err = fmt.Errorf("the written item is the lease of %s", l.Key())
	}
	if err != nil {
		return Lease{}, false, s.malformedErr(op, key, err)
	}
	return l, false, nil
}
