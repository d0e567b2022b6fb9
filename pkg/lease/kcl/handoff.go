package kcl

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// RequestHandoff implements lease.Store: watermillPendingOwner set and leaseCounter + 1,
// provided the lease is held by the observed owner by this store's protocol (a KCL worker does
// not answer requests: its leases are not asked for), as in lease.DynamoDBStore.RequestHandoff.
func (s *Store) RequestHandoff(ctx context.Context, observed lease.Lease, taker string) (lease.Lease, error) {
	key := observed.Key()
	if err := s.before(ctx, lease.OpRequestHandoff, key, true); err != nil {
		return lease.Lease{}, err
	}
	// What every store checks before asking the table (lease.Store says why).
	switch {
	case taker == "":
		return lease.Lease{}, fmt.Errorf("lease %s of %s: the taker is empty", lease.OpRequestHandoff, key)
	case observed.Owner == taker:
		return lease.Lease{}, fmt.Errorf("lease %s of %s: the taker %q is the lease's owner; a worker cannot ask itself for a lease",
			lease.OpRequestHandoff, key, taker)
	case observed.Owner == "":
		return lease.Lease{}, &lease.ConditionError{Op: lease.OpRequestHandoff, Key: key, Err: lease.ErrLeaseChanged}
	}
	l, failed, err := s.update(ctx, lease.OpRequestHandoff, key, "SET #pend = :t, #ctr = #ctr + :one",
		"attribute_exists(#key) AND #owner = :o AND #wo = :o AND "+kclGenerationCondition(observed.Generation)+
			" AND attribute_not_exists(#cpo) AND (attribute_not_exists(#pend) OR #pend = :t)",
		map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: observed.Owner}, ":g": dynamo.Number(observed.Generation),
			":t": &types.AttributeValueMemberS{Value: taker}, ":one": dynamo.Number(1),
		})
	if err != nil || !failed {
		return l, err
	}
	return lease.Lease{}, &lease.ConditionError{Op: lease.OpRequestHandoff, Key: key, Err: s.notFoundOrChanged(ctx, key)}
}

// Handoff implements lease.Store: the pending owner becomes leaseOwner (an owner switch),
// generation and leaseCounter + 1, conditioned on ownership and a pending owner; see
// lease.DynamoDBStore.Handoff for why the new owner is read from the item and how a failure is
// told apart.
func (s *Store) Handoff(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	key := held.Key()
	if err := s.before(ctx, lease.OpHandoff, key, true); err != nil {
		return lease.Lease{}, err
	}
	if held.Owner == "" {
		return lease.Lease{}, &lease.ConditionError{Op: lease.OpHandoff, Key: key, Err: lease.ErrLeaseLost}
	}
	l, failed, err := s.update(ctx, lease.OpHandoff, key,
		"SET #owner = #pend, #wo = #pend, #gen = :next, #ctr = #ctr + :one, #sw = if_not_exists(#sw, :zero) + :one REMOVE #pend",
		kclOwnerCondition+kclGenerationCondition(held.Generation)+" AND attribute_exists(#pend)",
		map[string]types.AttributeValue{
			":me": &types.AttributeValueMemberS{Value: held.Owner}, ":g": dynamo.Number(held.Generation),
			":next": dynamo.Number(held.Generation + 1), ":one": dynamo.Number(1), ":zero": dynamo.Number(0),
		})
	if err != nil || !failed {
		return l, err
	}
	return lease.Lease{}, &lease.ConditionError{Op: lease.OpHandoff, Key: key, Err: s.whyHandoffFailed(ctx, held)}
}

// whyHandoffFailed reads the lease back after a failed handoff: lease.ErrNoPendingOwner if the
// caller still holds it, lease.ErrLeaseLost otherwise or if the read fails.
func (s *Store) whyHandoffFailed(ctx context.Context, held lease.Lease) error {
	item, err := s.itemKey(lease.OpHandoff, held.Key())
	if err != nil {
		return fmt.Errorf("%w (%v)", lease.ErrLeaseLost, err)
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.cfg.TableName), Key: item, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("%w (reading it back from KCL lease table %q to tell whether it is still held failed: %v)",
			lease.ErrLeaseLost, s.cfg.TableName, err)
	}
	if out == nil || len(out.Item) == 0 {
		return lease.ErrLeaseLost
	}
	// Still the caller's, by this store's protocol, in held's generation (as leaseOfKCL reads it:
	// a 3.x handoff away from it, or a KCL worker's take, makes it foreign).
	if l, err := s.leaseOfKCL(out.Item); err != nil || l.Foreign || l.Owner != held.Owner || l.Generation != held.Generation {
		return lease.ErrLeaseLost
	}
	return lease.ErrNoPendingOwner
}

// DeleteFinished implements lease.Store: one DeleteItem conditioned on SHARD_END and the observed
// counter (a lease already gone is not an error). The KCL deletes finished leases too, once
// their children are being read.
func (s *Store) DeleteFinished(ctx context.Context, observed lease.Lease) error {
	key := observed.Key()
	if err := s.before(ctx, lease.OpDeleteFinished, key, true); err != nil {
		return err
	}
	item, err := s.itemKey(lease.OpDeleteFinished, key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.cfg.TableName),
		Key:                      item,
		ConditionExpression:      aws.String("attribute_not_exists(#key) OR (#cp = :end AND #ctr = :c)"),
		ExpressionAttributeNames: map[string]string{"#key": kclLeaseKey, "#cp": kclCheckpoint, "#ctr": kclCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":end": &types.AttributeValueMemberS{Value: lease.ShardEnd}, ":c": dynamo.Number(observed.Counter),
		},
	})
	switch {
	case dynamo.IsConditionFailed(err):
		return &lease.ConditionError{Op: lease.OpDeleteFinished, Key: key, Err: lease.ErrLeaseChanged}
	case err != nil:
		return s.callErr(lease.OpDeleteFinished, key, err)
	}
	return nil
}
