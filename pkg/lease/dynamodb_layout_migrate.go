package lease

import (
	"context"
	"fmt"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// opMigrate names the migration in errors, as the Op constants name a Store's calls.
const opMigrate = "layout migration"

// MigrateDynamoDBLayout moves the leases of group on stream in table from the single-partition
// layout of earlier versions (partition key stream|group) to the partitions this version reads
// (DynamoDBPartitionKey), and returns how many it moved. It is what the message of
// ErrOldLeaseLayout asks for.
//
// Every instance of the group must be stopped while it runs: a worker of an earlier version
// keeps renewing and checkpointing the old items, and what it writes after its item was copied
// would be lost. The migration first writes the layout marker, so that an earlier version
// started meanwhile fails to list the group instead of creating leases; then, for each old lease,
// it copies the item as it is (owner, generation, counter, checkpoint, parents, pending owner)
// into its partition, conditioned on nothing being there, and deletes the old item, conditioned
// on its counter being the one copied. If an old item changed meanwhile (a worker is still
// running) the copy is taken back and the migration stops with an error saying so.
//
// It can be run again: after a failure it goes on where it stopped (a copy identical to the
// old item is fine; a different one is an error naming the shard), and a second run moves 0.
// It needs DescribeTable, Query, GetItem, PutItem and DeleteItem on the table, and touches no
// other group and no member record.
func MigrateDynamoDBLayout(ctx context.Context, client DynamoDBAPI, table, group, stream string) (moved int, err error) {
	key := Key{Group: group, Stream: stream}
	if err := validateDynamoKey(opMigrate, key, false); err != nil {
		return 0, err
	}
	s, err := NewDynamoDBStore(ctx, DynamoDBConfig{Client: client, TableName: table})
	if err != nil {
		return 0, fmt.Errorf("lease %s of %s: %w", opMigrate, key, err)
	}
	return s.migrateLayout(ctx, key)
}

// DynamoDBOldLayoutLeases returns the leases of group on stream that MigrateDynamoDBLayout
// would move (those in the partition stream|group of earlier versions), and writes nothing: a
// dry run of the migration. An item there that the migration would stop at is an error, as it
// is for the migration. It needs DescribeTable and Query on the table.
func DynamoDBOldLayoutLeases(ctx context.Context, client DynamoDBAPI, table, group, stream string) ([]Lease, error) {
	key := Key{Group: group, Stream: stream}
	if err := validateDynamoKey(opMigrate, key, false); err != nil {
		return nil, err
	}
	s, err := NewDynamoDBStore(ctx, DynamoDBConfig{Client: client, TableName: table})
	if err != nil {
		return nil, fmt.Errorf("lease %s of %s: %w", opMigrate, key, err)
	}
	return s.oldLeases(ctx, key)
}

func (s *DynamoDBStore) migrateLayout(ctx context.Context, key Key) (int, error) {
	if err := s.before(ctx, opMigrate, key, false); err != nil {
		return 0, err
	}
	if err := s.putLayoutMarker(ctx, opMigrate, key); err != nil {
		return 0, err
	}
	olds, err := s.oldLeases(ctx, key)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, l := range olds {
		if err := s.moveLease(ctx, l); err != nil {
			return moved, err
		}
		moved++
	}
	return moved, nil
}

// oldLeases reads the group's old partition: its leases, past the marker and any lease of
// another group in the current layout (see readOldPartition). Any other item stops the
// migration before it moves anything.
func (s *DynamoDBStore) oldLeases(ctx context.Context, key Key) ([]Lease, error) {
	old := partitionKey(key.Group, key.Stream)
	var out []Lease
	err := s.queryPartition(ctx, opMigrate, key, old, s.queryLimit, func(item map[string]types.AttributeValue) error {
		if isLayoutMarker(item) {
			return nil
		}
		if _, err := leaseFromItem(item); err == nil {
			return nil
		}
		l, err := oldLeaseFromItem(item)
		if err == nil && (l.Group != key.Group || l.Stream != key.Stream) {
			err = fmt.Errorf("it names group %q stream %q", l.Group, l.Stream)
		}
		if err != nil {
			k := key
			k.ShardID = itemShardID(item)
			return fmt.Errorf("lease %s of %s: DynamoDB table %q, partition %q holds an item that is not a lease of the old layout (%w); delete or mend it, then run the migration again",
				opMigrate, k, s.table, old, err)
		}
		out = append(out, l)
		return nil
	})
	return out, err
}

// moveLease copies one old lease into its partition and deletes the old item; see
// MigrateDynamoDBLayout.
func (s *DynamoDBStore) moveLease(ctx context.Context, l Lease) error {
	key := l.Key()
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     leaseToItem(l),
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
	})
	switch {
	case isConditionFailed(err):
		if err := s.sameCopy(ctx, l); err != nil {
			return err
		}
	case err != nil:
		return s.callErr(opMigrate, key, fmt.Errorf("copying the lease into partition %q: %w", DynamoDBPartitionKey(key), err))
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      oldKeyItem(key),
		ConditionExpression:      aws.String("attribute_not_exists(#pk) OR #ctr = :c"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#ctr": attrCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": numberValue(l.Counter),
		},
	})
	switch {
	case isConditionFailed(err):
		return s.oldItemChanged(ctx, l)
	case err != nil:
		return s.callErr(opMigrate, key, fmt.Errorf(
			"deleting the old item from partition %q after copying it (the lease is in both partitions; run the migration again): %w",
			partitionKey(key.Group, key.Stream), err))
	}
	return nil
}

// sameCopy accepts a lease already in its partition if it is the old lease as it is (a
// migration that stopped after copying it), and is an error naming the shard otherwise.
func (s *DynamoDBStore) sameCopy(ctx context.Context, l Lease) error {
	key := l.Key()
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyItem(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return s.callErr(opMigrate, key, fmt.Errorf("reading the lease already in partition %q: %w", DynamoDBPartitionKey(key), err))
	}
	var got Lease
	if out != nil {
		got, err = leaseFromItem(out.Item)
	}
	switch {
	case out == nil || len(out.Item) == 0:
		return s.callErr(opMigrate, key, fmt.Errorf("partition %q holds the lease, by the condition of the copy, but reading it found nothing; run the migration again",
			DynamoDBPartitionKey(key)))
	case err != nil:
		return s.malformedErr(opMigrate, key, err)
	case !reflect.DeepEqual(got, l):
		return fmt.Errorf("lease %s of %s: DynamoDB table %q holds the lease in both layouts, and they differ: %+v in partition %q, %+v in the old partition %q; "+
			"the group ran on this version while old items were there: delete the one not to keep, then run the migration again",
			opMigrate, key, s.table, got, DynamoDBPartitionKey(key), l, partitionKey(key.Group, key.Stream))
	}
	return nil
}

// oldItemChanged handles an old item that changed after it was read: a worker of the group is
// still running. The copy is deleted again (if it is still the one written), so that a
// migration run once the group is stopped copies the item as it is then.
func (s *DynamoDBStore) oldItemChanged(ctx context.Context, l Lease) error {
	key := l.Key()
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyItem(key),
		ConditionExpression:      aws.String("#ctr = :c AND #gen = :g"),
		ExpressionAttributeNames: map[string]string{"#ctr": attrCounter, "#gen": attrGeneration},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": numberValue(l.Counter), ":g": numberValue(l.Generation),
		},
	})
	undo := "its copy was taken back"
	if err != nil {
		undo = fmt.Sprintf("taking its copy back from partition %q failed too (%v): delete it before the next run", DynamoDBPartitionKey(key), err)
	}
	return fmt.Errorf("lease %s of %s: the old item in DynamoDB table %q changed while it was being moved, so an instance of the group is still running (%s); stop every instance of the group, then run the migration again",
		opMigrate, key, s.table, undo)
}

// oldKeyItem is the key of a lease's item in the old layout.
func oldKeyItem(key Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:      &types.AttributeValueMemberS{Value: partitionKey(key.Group, key.Stream)},
		attrShardID: &types.AttributeValueMemberS{Value: key.ShardID},
	}
}
