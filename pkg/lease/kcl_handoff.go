package lease

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RequestHandoff implements Store: watermillPendingOwner set and leaseCounter + 1, provided the
// lease is held by the observed owner by this store's protocol (a KCL worker does not answer
// requests: its leases are not asked for), as in DynamoDBStore.RequestHandoff.
func (s *KCLStore) RequestHandoff(ctx context.Context, observed Lease, taker string) (Lease, error) {
	key := observed.Key()
	if err := s.before(ctx, OpRequestHandoff, key, true); err != nil {
		return Lease{}, err
	}
	if err := checkHandoffRequest(observed, taker); err != nil {
		return Lease{}, err
	}
	l, failed, err := s.update(ctx, OpRequestHandoff, key, "SET #pend = :t, #ctr = #ctr + :one",
		"attribute_exists(#key) AND #owner = :o AND #wo = :o AND "+kclGenerationCondition(observed.Generation)+
			" AND attribute_not_exists(#cpo) AND (attribute_not_exists(#pend) OR #pend = :t)",
		map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: observed.Owner}, ":g": numberValue(observed.Generation),
			":t": &types.AttributeValueMemberS{Value: taker}, ":one": numberValue(1),
		})
	if err != nil || !failed {
		return l, err
	}
	return Lease{}, &ConditionError{Op: OpRequestHandoff, Key: key, Err: s.notFoundOrChanged(ctx, key)}
}

// Handoff implements Store: the pending owner becomes leaseOwner (an owner switch), generation
// and leaseCounter + 1, conditioned on ownership and a pending owner; see DynamoDBStore.Handoff
// for why the new owner is read from the item and how a failure is told apart.
func (s *KCLStore) Handoff(ctx context.Context, held Lease) (Lease, error) {
	key := held.Key()
	if err := s.before(ctx, OpHandoff, key, true); err != nil {
		return Lease{}, err
	}
	if held.Owner == "" {
		return Lease{}, &ConditionError{Op: OpHandoff, Key: key, Err: ErrLeaseLost}
	}
	l, failed, err := s.update(ctx, OpHandoff, key,
		"SET #owner = #pend, #wo = #pend, #gen = :next, #ctr = #ctr + :one, #sw = if_not_exists(#sw, :zero) + :one REMOVE #pend",
		kclOwnerCondition+kclGenerationCondition(held.Generation)+" AND attribute_exists(#pend)",
		map[string]types.AttributeValue{
			":me": &types.AttributeValueMemberS{Value: held.Owner}, ":g": numberValue(held.Generation),
			":next": numberValue(held.Generation + 1), ":one": numberValue(1), ":zero": numberValue(0),
		})
	if err != nil || !failed {
		return l, err
	}
	return Lease{}, &ConditionError{Op: OpHandoff, Key: key, Err: s.whyHandoffFailed(ctx, held)}
}

// whyHandoffFailed reads the lease back after a failed handoff: ErrNoPendingOwner if the caller
// still holds it, ErrLeaseLost otherwise or if the read fails.
func (s *KCLStore) whyHandoffFailed(ctx context.Context, held Lease) error {
	item, err := s.itemKey(OpHandoff, held.Key())
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrLeaseLost, err)
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.cfg.TableName), Key: item, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("%w (reading it back from KCL lease table %q to tell whether it is still held failed: %v)",
			ErrLeaseLost, s.cfg.TableName, err)
	}
	if out == nil || len(out.Item) == 0 {
		return ErrLeaseLost
	}
	// Still the caller's, by this store's protocol, in held's generation (as leaseOfKCL reads it:
	// a 3.x handoff away from it, or a KCL worker's take, makes it foreign).
	if l, err := s.leaseOfKCL(out.Item); err != nil || l.Foreign || l.Owner != held.Owner || l.Generation != held.Generation {
		return ErrLeaseLost
	}
	return ErrNoPendingOwner
}

// DeleteFinished implements Store: one DeleteItem conditioned on SHARD_END and the observed
// counter (a lease already gone is not an error). The KCL deletes finished leases too, once
// their children are being read.
func (s *KCLStore) DeleteFinished(ctx context.Context, observed Lease) error {
	key := observed.Key()
	if err := s.before(ctx, OpDeleteFinished, key, true); err != nil {
		return err
	}
	item, err := s.itemKey(OpDeleteFinished, key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.cfg.TableName),
		Key:                      item,
		ConditionExpression:      aws.String("attribute_not_exists(#key) OR (#cp = :end AND #ctr = :c)"),
		ExpressionAttributeNames: map[string]string{"#key": kclLeaseKey, "#cp": kclCheckpoint, "#ctr": kclCounter},
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
