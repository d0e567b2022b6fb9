package lease

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// memberPKPrefix starts the partition key of a group's member records: "#" + stream + "|" +
// group. A stream name never starts with '#', so no member partition is a lease partition, and
// a List never reads a member record.
const memberPKPrefix = "#"

func memberPartitionKey(group, stream string) string {
	return memberPKPrefix + partitionKey(group, stream)
}

// memberToItem is m's member record as the store keeps it: the key, the counter, and the
// notices unless there are none (see DynamoDBStore). TestDynamoDBStoreItemSizes checks that
// what Heartbeat and NotifyMember store is this item.
func memberToItem(m Member) map[string]types.AttributeValue {
	item := memberKeyItem(m)
	item[attrCounter] = dynamo.Number(m.Counter)
	if m.Notices != 0 {
		item[attrNotices] = dynamo.Number(m.Notices)
	}
	return item
}

func memberKeyItem(m Member) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:      &types.AttributeValueMemberS{Value: memberPartitionKey(m.Group, m.Stream)},
		attrShardID: &types.AttributeValueMemberS{Value: m.Worker},
	}
}

// memberFromItem reads a member record of group on stream, saying what is wrong with one this
// store could not have written.
func memberFromItem(group, stream string, item map[string]types.AttributeValue) (Member, error) {
	r := &itemReader{item: item}
	m := Member{Group: group, Stream: stream, Worker: r.str(attrShardID, true),
		Counter: r.num(attrCounter, true), Notices: r.num(attrNotices, false)}
	if err := errors.Join(r.errs...); err != nil {
		return Member{}, err
	}
	return m, nil
}

// beforeMember runs the checks of before for a member call.
func (s *DynamoDBStore) beforeMember(ctx context.Context, op string, m Member) error {
	if err := validateMember(op, m); err != nil {
		return err
	}
	return s.before(ctx, op, m.Key(), true)
}

// Heartbeat implements Membership: one UpdateItem that adds 1 to the record's counter, with no
// condition (DynamoDB creates a missing record, ADD starting from 0), returning the record.
func (s *DynamoDBStore) Heartbeat(ctx context.Context, m Member) (Member, error) {
	if err := s.beforeMember(ctx, OpHeartbeat, m); err != nil {
		return Member{}, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       memberKeyItem(m),
		UpdateExpression:          aws.String("ADD #c :one"),
		ExpressionAttributeNames:  map[string]string{"#c": attrCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": dynamo.Number(1)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	switch {
	case err != nil:
		return Member{}, s.callErr(OpHeartbeat, m.Key(), err)
	case out == nil:
		return Member{}, s.callErr(OpHeartbeat, m.Key(), errors.New("UpdateItem returned no answer"))
	}
	got, err := memberFromItem(m.Group, m.Stream, out.Attributes)
	if err != nil {
		return Member{}, s.malformedErr(OpHeartbeat, m.Key(), err)
	}
	return got, nil
}

// Members implements Membership: a strongly consistent Query of the group's member partition,
// paged, which comes in worker order (sort key order, by UTF-8 bytes, as Go compares strings).
func (s *DynamoDBStore) Members(ctx context.Context, group, stream string) ([]Member, error) {
	key := Key{Group: group, Stream: stream}
	if err := s.before(ctx, OpMembers, key, false); err != nil {
		return nil, err
	}
	out := []Member{}
	err := s.queryPartition(ctx, OpMembers, key, memberPartitionKey(group, stream), func(item map[string]types.AttributeValue) error {
		m, err := memberFromItem(group, stream, item)
		if err != nil {
			k := key
			k.ShardID = itemShardID(item)
			return s.malformedErr(OpMembers, k, err)
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RemoveMember implements Membership: one DeleteItem conditioned on the observed counter.
func (s *DynamoDBStore) RemoveMember(ctx context.Context, observed Member) error {
	if err := s.beforeMember(ctx, OpRemoveMember, observed); err != nil {
		return err
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       memberKeyItem(observed),
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #c = :c"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#c": attrCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": dynamo.Number(observed.Counter)},
	})
	switch {
	case dynamo.IsConditionFailed(err):
		return &ConditionError{Op: OpRemoveMember, Key: observed.Key(), Err: ErrMemberChanged}
	case err != nil:
		return s.callErr(OpRemoveMember, observed.Key(), err)
	}
	return nil
}

// NotifyMember implements Membership: one UpdateItem that adds 1 to the record's notices,
// conditioned on the record being there (so as not to make one); a failed condition is no
// error.
func (s *DynamoDBStore) NotifyMember(ctx context.Context, m Member) error {
	if err := s.beforeMember(ctx, OpNotifyMember, m); err != nil {
		return err
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       memberKeyItem(m),
		UpdateExpression:          aws.String("ADD #n :one"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#n": attrNotices, "#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": dynamo.Number(1)},
	})
	if err != nil && !dynamo.IsConditionFailed(err) {
		return s.callErr(OpNotifyMember, m.Key(), err)
	}
	return nil
}
