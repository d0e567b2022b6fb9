package kcl

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// Conditions of the Store's writes; the names (#owner and the rest) are those of kclNames.
const (
	// kclOwnerCondition: the caller still owns the lease by this store's protocol (leaseOwner
	// and watermillOwner are it), and no KCL 3.x handoff is under way; with the generation's
	// condition (kclGenerationCondition).
	kclOwnerCondition = "#owner = :me AND #wo = :me AND attribute_not_exists(#cpo) AND "
	// kclCounterCondition is the KCL's own rule for a take: the counter the taker observed.
	kclCounterCondition = "attribute_exists(#key) AND #ctr = :c"
)

// kclNames are the attribute names every Store expression may use.
func kclNames() map[string]string {
	return map[string]string{
		"#key": kclLeaseKey, "#owner": kclOwner, "#ctr": kclCounter, "#gen": kclWatermillGen, "#wo": kclWatermillOwner,
		"#pend": kclWatermillPending, "#cpo": kclCheckpointOwner, "#sw": kclOwnerSwitches,
		"#cp": kclCheckpoint, "#cpsub": kclCheckpointSub, "#wcp": kclWatermillCheckpoint,
		"#pcp": kclPending, "#pcpsub": kclPendingSub, "#pcpstate": kclPendingState,
	}
}

// kclGenerationCondition is the condition that the lease is of generation :g. A lease the KCL
// wrote has no watermillGeneration: generation 0, matched by the attribute's absence too.
func kclGenerationCondition(g int64) string {
	if g == 0 {
		return "(attribute_not_exists(#gen) OR #gen = :g)"
	}
	return "#gen = :g"
}

// Create implements lease.Store: one PutItem conditioned on attribute_not_exists(leaseKey), of the
// item as the KCL creates one (counter 1, a sentinel checkpoint for a shard never read), after
// adding the shard to its parents' childShardIds, as the KCL records its children.
func (s *Store) Create(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	key := l.Key()
	if err := s.before(ctx, lease.OpCreate, key, true); err != nil {
		return lease.Lease{}, err
	}
	item, id, err := s.itemKeyOf(lease.OpCreate, key)
	if err != nil {
		return lease.Lease{}, err
	}
	seq, sub := s.cfg.InitialPosition, int64(0)
	if len(l.Parents) > 0 {
		seq = TrimHorizon // a child is read from its start, whatever the application's position
	}
	if l.Checkpoint != "" {
		if seq, sub, err = kclCheckpointOf(l.Checkpoint); err != nil {
			return lease.Lease{}, fmt.Errorf("lease %s of %s: %w", lease.OpCreate, key, err)
		}
		item[kclWatermillCheckpoint] = &types.AttributeValueMemberS{Value: l.Checkpoint}
	}
	item[kclCounter] = dynamo.Number(1)
	item[kclCheckpoint] = &types.AttributeValueMemberS{Value: seq}
	item[kclCheckpointSub] = dynamo.Number(sub)
	item[kclOwnerSwitches] = dynamo.Number(0)
	// This store's mark on what it created (checkStartPositions leaves its sentinels alone).
	item[kclWatermillGen] = dynamo.Number(0)
	if s.cfg.MultiStream {
		item[kclStreamName] = &types.AttributeValueMemberS{Value: id}
		item[kclShardID] = &types.AttributeValueMemberS{Value: key.ShardID}
	}
	if len(l.Parents) > 0 {
		item[kclParents] = &types.AttributeValueMemberSS{Value: append([]string(nil), l.Parents...)}
	}
	if l.Owner != "" {
		item[kclOwner] = &types.AttributeValueMemberS{Value: l.Owner}
		item[kclWatermillOwner] = &types.AttributeValueMemberS{Value: l.Owner}
		if l.PendingOwner != "" {
			item[kclWatermillPending] = &types.AttributeValueMemberS{Value: l.PendingOwner}
		}
	}
	for _, parent := range l.Parents {
		if err := s.addChild(ctx, key, parent); err != nil {
			return lease.Lease{}, err
		}
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.cfg.TableName),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#key)"),
		ExpressionAttributeNames: map[string]string{"#key": kclLeaseKey},
	})
	switch {
	case dynamo.IsConditionFailed(err):
		return lease.Lease{}, &lease.ConditionError{Op: lease.OpCreate, Key: key, Err: lease.ErrLeaseExists}
	case err != nil:
		return lease.Lease{}, s.callErr(lease.OpCreate, key, err)
	}
	return s.leaseOfKCL(item)
}

// addChild adds the shard of key to its parent's childShardIds, if the parent's lease is
// there. The write leaves leaseCounter alone: nothing a worker judges the lease by changes, and
// a KCL worker's renewals and checkpoints of the parent (conditioned on the counter) go on.
func (s *Store) addChild(ctx context.Context, child lease.Key, parent string) error {
	key, err := s.itemKey(lease.OpCreate, lease.Key{Group: child.Group, Stream: child.Stream, ShardID: parent})
	if err != nil {
		return err
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.cfg.TableName),
		Key:                       key,
		UpdateExpression:          aws.String("ADD #children :child"),
		ConditionExpression:       aws.String("attribute_exists(#key)"),
		ExpressionAttributeNames:  map[string]string{"#children": kclChildren, "#key": kclLeaseKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":child": &types.AttributeValueMemberSS{Value: []string{child.ShardID}}},
	})
	if err != nil && !dynamo.IsConditionFailed(err) {
		return fmt.Errorf("lease %s of %s: adding it to the childShardIds of its parent %q in KCL lease table %q: %w",
			lease.OpCreate, child, parent, s.cfg.TableName, err)
	}
	return nil
}

// List implements lease.Store: a strongly consistent Scan of the table, paged, keeping the leases
// of the stream (rows that late KCL 3.x versions keep beside the leases are skipped).
func (s *Store) List(ctx context.Context, group, stream string) ([]lease.Lease, error) {
	key := lease.Key{Group: group, Stream: stream}
	if err := s.before(ctx, lease.OpList, key, false); err != nil {
		return nil, err
	}
	var out []lease.Lease
	ids := map[string]bool{} // the stream's identifiers in a multi-stream table
	configured, isConfigured := s.streamIDs.configured[stream]
	err := s.scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.cfg.TableName), ConsistentRead: aws.Bool(true)},
		func(item map[string]types.AttributeValue) error {
			if !isKCLLease(item) {
				return nil
			}
			l, err := s.leaseOfKCL(item)
			if err != nil {
				return err
			}
			if l.Stream != stream {
				return nil
			}
			if s.cfg.MultiStream {
				id := item[kclStreamName].(*types.AttributeValueMemberS).Value // leaseOfKCL checked it
				if isConfigured && id != configured {
					return nil // a lease of an earlier stream of the same name
				}
				ids[id] = true
			}
			out = append(out, l)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("lease %s of %s: %w", lease.OpList, key, err)
	}
	if len(ids) > 1 {
		names := make([]string, 0, len(ids))
		for id := range ids {
			names = append(names, id)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("lease %s of %s: multi-stream KCL lease table %q holds leases of stream %q under %d identifiers, %s "+
			"(the stream was deleted and created again): set kcl.Config.StreamIdentifiers[%q] to the current stream's account:%s:creationEpoch",
			lease.OpList, key, s.cfg.TableName, stream, len(names), strings.Join(names, " and "), stream, stream)
	}
	for id := range ids { // one at most
		if !isConfigured {
			s.streamIDs.learn(stream, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ShardID < out[j].ShardID })
	return out, nil
}

// scan reads every item of the lease table with Scan pages as in asks for, and passes each to
// each, which may stop the read with an error.
func (s *Store) scan(ctx context.Context, in *dynamodb.ScanInput, each func(map[string]types.AttributeValue) error) error {
	for {
		page, err := s.client.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("scanning KCL lease table %q: %w", s.cfg.TableName, err)
		}
		if page == nil {
			return fmt.Errorf("scanning KCL lease table %q: Scan returned no page", s.cfg.TableName)
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
func (s *Store) update(ctx context.Context, op string, key lease.Key, set, cond string, values map[string]types.AttributeValue,
) (l lease.Lease, failed bool, err error) {
	item, err := s.itemKey(op, key)
	if err != nil {
		return lease.Lease{}, false, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.cfg.TableName),
		Key:                       item,
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  usedNames(kclNames(), set, cond),
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	switch {
	case dynamo.IsConditionFailed(err):
		return lease.Lease{}, true, nil
	case err != nil:
		return lease.Lease{}, false, s.callErr(op, key, err)
	case out == nil:
		return lease.Lease{}, false, s.callErr(op, key, errors.New("UpdateItem returned no answer"))
	}
	if l, err = s.leaseOfKCL(out.Attributes); err == nil && l.Key() != key {
		err = fmt.Errorf("the written item is the lease of %s", l.Key())
	}
	if err != nil {
		return lease.Lease{}, false, fmt.Errorf("lease %s of %s: %w", op, key, err)
	}
	return l, false, nil
}

// Take implements lease.Store: the KCL's take, one UpdateItem conditioned on the observed counter
// (and generation), that makes owner the leaseOwner, counts an owner switch when the owner
// changes, and ends any handoff request or KCL 3.x handoff. When the condition fails, a
// strongly consistent GetItem tells lease.ErrLeaseNotFound from lease.ErrLeaseChanged.
func (s *Store) Take(ctx context.Context, observed lease.Lease, owner string) (lease.Lease, error) {
	key := observed.Key()
	if err := s.before(ctx, lease.OpTake, key, true); err != nil {
		return lease.Lease{}, err
	}
	if owner == "" {
		return lease.Lease{}, fmt.Errorf("lease %s of %s: the new owner is empty", lease.OpTake, key)
	}
	switches := int64(0)
	if observed.Owner != "" && observed.Owner != owner { // as the KCL counts a take
		switches = 1
	}
	values := map[string]types.AttributeValue{
		":new": &types.AttributeValueMemberS{Value: owner}, ":c": dynamo.Number(observed.Counter),
		":g": dynamo.Number(observed.Generation), ":next": dynamo.Number(observed.Generation + 1),
		":one": dynamo.Number(1), ":zero": dynamo.Number(0), ":sw": dynamo.Number(switches),
	}
	// The counter alone is the KCL's condition; the owner (as List reads it, see leaseOfKCL)
	// makes the rule whole by itself.
	ownerCond := "attribute_not_exists(#owner)"
	if observed.Owner != "" {
		ownerCond = "(#owner = :o OR #cpo = :o)"
		values[":o"] = &types.AttributeValueMemberS{Value: observed.Owner}
	}
	l, failed, err := s.update(ctx, lease.OpTake, key,
		"SET #owner = :new, #wo = :new, #gen = :next, #ctr = #ctr + :one, #sw = if_not_exists(#sw, :zero) + :sw REMOVE #pend, #cpo",
		kclCounterCondition+" AND "+ownerCond+" AND "+kclGenerationCondition(observed.Generation), values)
	if err != nil || !failed {
		return l, err
	}
	return lease.Lease{}, &lease.ConditionError{Op: lease.OpTake, Key: key, Err: s.notFoundOrChanged(ctx, key)}
}

// notFoundOrChanged reads the lease back after a failed take or handoff request; see
// itemGoneOrChanged.
func (s *Store) notFoundOrChanged(ctx context.Context, key lease.Key) error {
	item, err := s.itemKey(lease.OpTake, key)
	if err != nil {
		return fmt.Errorf("%w (%v)", lease.ErrLeaseChanged, err)
	}
	return dynamo.GoneOrChanged(ctx, s.client, s.cfg.TableName, item, kclLeaseKey, lease.ErrLeaseNotFound, lease.ErrLeaseChanged)
}

// ownerUpdate runs an owner-side write (Renew, Checkpoint, Release) conditioned on
// kclOwnerCondition. Any failed condition is lease.ErrLeaseLost, as in lease.DynamoDBStore's
// owner writes.
func (s *Store) ownerUpdate(ctx context.Context, op string, held lease.Lease, set string, values map[string]types.AttributeValue) (lease.Lease, error) {
	key := held.Key()
	if err := s.before(ctx, op, key, true); err != nil {
		return lease.Lease{}, err
	}
	if held.Owner == "" {
		return lease.Lease{}, &lease.ConditionError{Op: op, Key: key, Err: lease.ErrLeaseLost}
	}
	values[":me"] = &types.AttributeValueMemberS{Value: held.Owner}
	values[":g"] = dynamo.Number(held.Generation)
	values[":one"] = dynamo.Number(1)
	l, failed, err := s.update(ctx, op, key, set, kclOwnerCondition+kclGenerationCondition(held.Generation), values)
	if err != nil || !failed {
		return l, err
	}
	return lease.Lease{}, &lease.ConditionError{Op: op, Key: key, Err: lease.ErrLeaseLost}
}

// Renew implements lease.Store: leaseCounter + 1, conditioned on ownership.
func (s *Store) Renew(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.ownerUpdate(ctx, lease.OpRenew, held, "SET #ctr = #ctr + :one", map[string]types.AttributeValue{})
}

// Checkpoint implements lease.Store as the KCL checkpoints: checkpoint and
// checkpointSubSequenceNumber set, ownerSwitchesSinceCheckpoint 0, a prepared checkpoint
// (pendingCheckpoint) dropped as superseded, leaseCounter + 1; conditioned on ownership.
func (s *Store) Checkpoint(ctx context.Context, held lease.Lease, checkpoint string) (lease.Lease, error) {
	key := held.Key()
	if checkpoint == "" {
		return lease.Lease{}, fmt.Errorf("lease %s of %s: the checkpoint is empty", lease.OpCheckpoint, key)
	}
	seq, sub, err := kclCheckpointOf(checkpoint)
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease %s of %s: %w", lease.OpCheckpoint, key, err)
	}
	values := map[string]types.AttributeValue{
		":seq": &types.AttributeValueMemberS{Value: seq}, ":sub": dynamo.Number(sub),
		":cp": &types.AttributeValueMemberS{Value: checkpoint}, ":zero": dynamo.Number(0),
	}
	return s.ownerUpdate(ctx, lease.OpCheckpoint, held,
		"SET #cp = :seq, #cpsub = :sub, #wcp = :cp, #sw = :zero, #ctr = #ctr + :one REMOVE #pcp, #pcpsub, #pcpstate", values)
}

// Release implements lease.Store as the KCL evicts a lease: leaseOwner removed (and this store's
// owner attributes), generation and leaseCounter + 1, conditioned on ownership.
func (s *Store) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.ownerUpdate(ctx, lease.OpRelease, held, "SET #gen = :next, #ctr = #ctr + :one REMOVE #owner, #wo, #pend",
		map[string]types.AttributeValue{":next": dynamo.Number(held.Generation + 1)})
}

// namePattern finds the attribute name placeholders of an expression.
var namePattern = regexp.MustCompile(`#[a-zA-Z]+`)

// usedNames keeps the names the expressions use: DynamoDB refuses a request with names it does
// not use.
func usedNames(all map[string]string, exprs ...string) map[string]string {
	used := map[string]string{}
	for _, e := range exprs {
		for _, n := range namePattern.FindAllString(e, -1) {
			if v, ok := all[n]; ok {
				used[n] = v
			}
		}
	}
	return used
}
