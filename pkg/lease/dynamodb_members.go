package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// memberPKPrefix starts the partition key of a group's member records: "#" + stream + "|" +
// group. A stream name never starts with '#', so no member partition is a lease partition, and
// a List never reads a member record (nor does an older version of this store, which knows
// nothing of members).
const memberPKPrefix = "#"

// MemberKeyOverhead is how many bytes the longest partition key the store writes adds to
// stream + "|" + group, which bounds the length of a group name: 3, the "|NN" of a lease's
// bucket (DynamoDBPartitionKey), more than the "#" that starts a member record's. (The name is
// older than the buckets; it is kept for the callers that bound group names with it.)
const MemberKeyOverhead = max(len(memberPKPrefix), bucketSuffixLen)

func memberPartitionKey(group, stream string) string {
	return memberPKPrefix + partitionKey(group, stream)
}

// memberToItem is the member record of m as Join writes it and Heartbeat keeps it: the key,
// the group, the stream, the counter, the changes, the incarnation, the layout, and the fenced
// mark once FenceMember set it. TestDynamoDBStoreItemSizes checks that what Heartbeat stores
// is this item.
func memberToItem(m Member) map[string]types.AttributeValue {
	item := memberKeyItem(m)
	item[attrGroup] = &types.AttributeValueMemberS{Value: m.Group}
	item[attrStream] = &types.AttributeValueMemberS{Value: m.Stream}
	item[attrCounter] = numberValue(m.Counter)
	item[attrChanges] = numberValue(m.Changes)
	item[attrIncarnation] = numberValue(m.Incarnation)
	item[attrRoster] = numberValue(m.Roster)
	item[attrSeen] = numberValue(m.Seen)
	if m.Asked != 0 {
		item[attrAsked] = numberValue(m.Asked)
	}
	item[attrLayout] = &types.AttributeValueMemberS{Value: layoutName}
	if m.Fenced {
		item[attrFenced] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return item
}

func memberKeyItem(m Member) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:      &types.AttributeValueMemberS{Value: memberPartitionKey(m.Group, m.Stream)},
		attrShardID: &types.AttributeValueMemberS{Value: m.Worker},
	}
}

// beforeMember runs the checks of before for a member call.
func (s *DynamoDBStore) beforeMember(ctx context.Context, op string, m Member) error {
	if err := validateMember(op, m); err != nil {
		return err
	}
	return s.before(ctx, op, m.Key(), true)
}

// Join implements Store: one PutItem of a fresh record (counter 1), replacing any record of the
// worker. Like a lease write it is refused while the group has leases in the old layout
// (ErrOldLeaseLayout): a worker that cannot take a lease must not be counted for the shares, by
// this version or an earlier one.
func (s *DynamoDBStore) Join(ctx context.Context, m Member) (Member, error) {
	if err := s.beforeMember(ctx, OpJoin, m); err != nil {
		return Member{}, err
	}
	if err := s.writable(ctx, OpJoin, m.Key()); err != nil {
		return Member{}, err
	}
	m.Counter, m.Fenced, m.Asked = 1, false, 0
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: memberToItem(m)}); err != nil {
		return Member{}, s.callErr(OpJoin, m.Key(), err)
	}
	return m, nil
}

// Heartbeat implements Store: one UpdateItem that adds 1 to the member's counter and sets its
// changes, conditioned on the incarnation and on the record not being fenced. It is refused
// while the group has leases in the old layout, as Join is.
func (s *DynamoDBStore) Heartbeat(ctx context.Context, m Member) (Member, error) {
	if err := s.beforeMember(ctx, OpHeartbeat, m); err != nil {
		return Member{}, err
	}
	if err := s.writable(ctx, OpHeartbeat, m.Key()); err != nil {
		return Member{}, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 memberKeyItem(m),
		UpdateExpression:    aws.String("SET #ch = :ch, #ro = :ro, #se = :se ADD #c :one"),
		ConditionExpression: aws.String("#inc = :inc AND attribute_not_exists(#f)"),
		ExpressionAttributeNames: map[string]string{
			"#c": attrCounter, "#ch": attrChanges, "#inc": attrIncarnation, "#f": attrFenced,
			"#ro": attrRoster, "#se": attrSeen,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": numberValue(1), ":ch": numberValue(m.Changes), ":inc": numberValue(m.Incarnation),
			":ro": numberValue(m.Roster), ":se": numberValue(m.Seen),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	switch {
	case isConditionFailed(err):
		return Member{}, &ConditionError{Op: OpHeartbeat, Key: m.Key(), Err: ErrMemberFenced}
	case err != nil:
		return Member{}, s.callErr(OpHeartbeat, m.Key(), err)
	case out == nil:
		return Member{}, s.callErr(OpHeartbeat, m.Key(), errors.New("UpdateItem returned no answer"))
	}
	got, err := memberFromItem(out.Attributes)
	if want := m; err == nil && got != func() Member { want.Counter, want.Asked = got.Counter, got.Asked; return want }() {
		err = fmt.Errorf("the written item is the member record of %s", got.Key())
	}
	if err != nil {
		return Member{}, s.malformedErr(OpHeartbeat, m.Key(), err)
	}
	return got, nil
}

// NotifyMember implements Store: one UpdateItem that adds 1 to the record's Asked count,
// conditioned on the record being there (so as not to make one); a refused condition is no
// error.
func (s *DynamoDBStore) NotifyMember(ctx context.Context, group, stream, worker string) error {
	m := Member{Group: group, Stream: stream, Worker: worker}
	if err := s.beforeMember(ctx, OpNotifyMember, m); err != nil {
		return err
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       memberKeyItem(m),
		UpdateExpression:          aws.String("ADD #a :one"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#a": attrAsked, "#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": numberValue(1)},
	})
	if err != nil && !isConditionFailed(err) {
		return s.callErr(OpNotifyMember, m.Key(), err)
	}
	return nil
}

// FenceMember implements Store: one UpdateItem that marks the record fenced, conditioned on
// the observed incarnation and counter. When the condition fails, a strongly consistent
// GetItem tells a record that is gone (nil: that incarnation cannot heartbeat again either)
// from one that moved on.
func (s *DynamoDBStore) FenceMember(ctx context.Context, observed Member) error {
	if err := s.beforeMember(ctx, OpFenceMember, observed); err != nil {
		return err
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      memberKeyItem(observed),
		UpdateExpression:         aws.String("SET #f = :true"),
		ConditionExpression:      aws.String("#inc = :inc AND #c = :c"),
		ExpressionAttributeNames: map[string]string{"#f": attrFenced, "#inc": attrIncarnation, "#c": attrCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":true": &types.AttributeValueMemberBOOL{Value: true},
			":inc":  numberValue(observed.Incarnation), ":c": numberValue(observed.Counter),
		},
	})
	switch {
	case isConditionFailed(err):
	case err != nil:
		return s.callErr(OpFenceMember, observed.Key(), err)
	default:
		return nil
	}
	got, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: memberKeyItem(observed), ConsistentRead: aws.Bool(true),
	})
	switch {
	case err != nil:
		return &ConditionError{Op: OpFenceMember, Key: observed.Key(),
			Err: fmt.Errorf("%w (reading it back from DynamoDB table %q failed: %v)", ErrMemberChanged, s.table, err)}
	case got == nil || len(got.Item) == 0:
		return nil
	}
	return &ConditionError{Op: OpFenceMember, Key: observed.Key(), Err: ErrMemberChanged}
}

// Members implements Store: a strongly consistent Query of the group's member partition. The
// records of workers of versions older than the bucketed layout (without the layout attribute)
// come marked Legacy: such a worker fails to list the group's leases once the layout marker is
// there, so it takes no share and must not be counted, and its record is removed once stale.
func (s *DynamoDBStore) Members(ctx context.Context, group, stream string) ([]Member, error) {
	return s.members(ctx, OpMembers, group, stream, 0)
}

// LeadingMembers implements Store: a strongly consistent Query of the member partition that
// stops after n items.
func (s *DynamoDBStore) LeadingMembers(ctx context.Context, group, stream string, n int) ([]Member, error) {
	if n <= 0 {
		return []Member{}, nil
	}
	return s.members(ctx, OpLeading, group, stream, n)
}

// members reads the member partition in worker order, the first n items if n > 0.
func (s *DynamoDBStore) members(ctx context.Context, op, group, stream string, n int) ([]Member, error) {
	key := Key{Group: group, Stream: stream}
	if err := s.before(ctx, op, key, false); err != nil {
		return nil, err
	}
	limit, stop := s.queryLimit, errors.New("enough")
	if n > 0 {
		limit = int32(min(n, 1<<20))
	}
	out := []Member{}
	read := 0
	err := s.queryPartition(ctx, op, key, memberPartitionKey(group, stream), limit, func(item map[string]types.AttributeValue) error {
		read++
		m, err := memberFromItem(item)
		if err == nil && (m.Group != group || m.Stream != stream) {
			err = fmt.Errorf("it names group %q stream %q, but is in the member partition of group %q stream %q",
				m.Group, m.Stream, group, stream)
		}
		if err != nil {
			return s.malformedErr(op, key, err)
		}
		m.Legacy = !ofThisLayout(item)
		out = append(out, m)
		if n > 0 && read >= n {
			return stop
		}
		return nil
	})
	if err != nil && err != stop {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
	return out, nil
}

// RemoveMember implements Store: one DeleteItem conditioned on the observed counter (and
// incarnation, when observed has one).
func (s *DynamoDBStore) RemoveMember(ctx context.Context, observed Member) error {
	if err := s.beforeMember(ctx, OpRemoveMember, observed); err != nil {
		return err
	}
	cond := "attribute_not_exists(#pk) OR #c = :c"
	names := map[string]string{"#pk": attrPK, "#c": attrCounter}
	values := map[string]types.AttributeValue{":c": numberValue(observed.Counter)}
	if observed.Incarnation != 0 {
		cond = "attribute_not_exists(#pk) OR (#c = :c AND #inc = :inc)"
		names["#inc"], values[":inc"] = attrIncarnation, numberValue(observed.Incarnation)
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: memberKeyItem(observed),
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	switch {
	case isConditionFailed(err):
		return &ConditionError{Op: OpRemoveMember, Key: observed.Key(), Err: ErrMemberChanged}
	case err != nil:
		return s.callErr(OpRemoveMember, observed.Key(), err)
	}
	return nil
}

// DeleteFinished implements Store: one DeleteItem conditioned on SHARD_END and the observed
// counter.
func (s *DynamoDBStore) DeleteFinished(ctx context.Context, observed Lease) error {
	key := observed.Key()
	if err := s.before(ctx, OpDeleteFinished, key, true); err != nil {
		return err
	}
	if err := s.writable(ctx, OpDeleteFinished, key); err != nil {
		return err
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyItem(key),
		ConditionExpression:      aws.String("attribute_not_exists(#pk) OR (#cp = :end AND #c = :c)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#cp": attrCheckpoint, "#c": attrCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":end": &types.AttributeValueMemberS{Value: ShardEnd}, ":c": numberValue(observed.Counter),
		},
	})
	switch {
	case isConditionFailed(err):
		return &ConditionError{Op: OpDeleteFinished, Key: key, Err: ErrLeaseChanged}
	case err != nil:
		return s.callErr(OpDeleteFinished, key, err)
	}
	return nil
}

// memberFromItem reads a member record, saying what is wrong with one this store could not
// have written.
func memberFromItem(item map[string]types.AttributeValue) (Member, error) {
	var errs []error
	str := func(name string) string {
		sv, ok := item[name].(*types.AttributeValueMemberS)
		switch {
		case !ok || sv == nil:
			errs = append(errs, fmt.Errorf("attribute %q is missing or not a string (S)", name))
			return ""
		case sv.Value == "":
			errs = append(errs, fmt.Errorf("attribute %q is empty", name))
		}
		return sv.Value
	}
	m := Member{Worker: str(attrShardID), Group: str(attrGroup), Stream: str(attrStream)}
	pk := str(attrPK)
	if nv, ok := item[attrCounter].(*types.AttributeValueMemberN); !ok || nv == nil {
		errs = append(errs, fmt.Errorf("attribute %q is missing or not a number (N)", attrCounter))
	} else if n, err := strconv.ParseInt(nv.Value, 10, 64); err != nil {
		errs = append(errs, fmt.Errorf("attribute %q = %q is not a whole number: %w", attrCounter, nv.Value, err))
	} else {
		m.Counter = n
	}
	// changes, incarnation, roster and seen are absent from the records of earlier versions:
	// 0 (an incarnation that no lease names).
	m.Changes = optNumber(item, attrChanges, &errs)
	m.Incarnation = optNumber(item, attrIncarnation, &errs)
	m.Roster = optNumber(item, attrRoster, &errs)
	m.Seen = optNumber(item, attrSeen, &errs)
	m.Asked = optNumber(item, attrAsked, &errs)
	if bv, ok := item[attrFenced].(*types.AttributeValueMemberBOOL); ok && bv != nil {
		m.Fenced = bv.Value
	} else if _, present := item[attrFenced]; present {
		errs = append(errs, fmt.Errorf("attribute %q is not a boolean (BOOL)", attrFenced))
	}
	if pk != "" && m.Group != "" && m.Stream != "" && pk != memberPartitionKey(m.Group, m.Stream) {
		errs = append(errs, fmt.Errorf("attribute %q = %q does not match stream %q and group %q", attrPK, pk, m.Stream, m.Group))
	}
	if err := errors.Join(errs...); err != nil {
		return Member{}, err
	}
	return m, nil
}

// optNumber reads an optional whole-number attribute: 0 when absent, an error in errs when it is
// not a whole number.
func optNumber(item map[string]types.AttributeValue, name string, errs *[]error) int64 {
	v, present := item[name]
	if !present {
		return 0
	}
	nv, ok := v.(*types.AttributeValueMemberN)
	if !ok || nv == nil {
		*errs = append(*errs, fmt.Errorf("attribute %q is not a number (N)", name))
		return 0
	}
	n, err := strconv.ParseInt(nv.Value, 10, 64)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("attribute %q = %q is not a whole number: %w", name, nv.Value, err))
	}
	return n
}
