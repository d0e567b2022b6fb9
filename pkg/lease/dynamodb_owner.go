package lease

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// Take implements Store: one UpdateItem conditioned on the observed owner, generation and
// counter. When the condition fails, a strongly consistent GetItem tells ErrLeaseNotFound from
// ErrLeaseChanged.
func (s *DynamoDBStore) Take(ctx context.Context, observed Lease, owner string) (Lease, error) {
	key := observed.Key()
	if err := s.before(ctx, OpTake, key, true); err != nil {
		return Lease{}, err
	}
	if owner == "" {
		// As in MemoryStore: a take to nobody would be a release by another name.
		return Lease{}, fmt.Errorf("lease %s of %s: the new owner is empty", OpTake, key)
	}
	names := map[string]string{
		"#pk": attrPK, "#owner": attrOwner, "#gen": attrGeneration, "#ctr": attrCounter,
		"#pend": attrPendingOwner,
	}
	values := map[string]types.AttributeValue{
		":g":   dynamo.Number(observed.Generation),
		":c":   dynamo.Number(observed.Counter),
		":new": &types.AttributeValueMemberS{Value: owner},
		":one": dynamo.Number(1),
	}
	cond := "attribute_exists(#pk) AND #gen = :g AND #ctr = :c AND "
	if observed.Owner == "" {
		cond += "attribute_not_exists(#owner)"
	} else {
		cond += "#owner = :o"
		values[":o"] = &types.AttributeValueMemberS{Value: observed.Owner}
	}
	l, failed, err := s.update(ctx, OpTake, key,
		"SET #owner = :new, #gen = #gen + :one, #ctr = #ctr + :one REMOVE #pend", cond, names, values)
	if err != nil || !failed {
		return l, err
	}
	return Lease{}, &ConditionError{Op: OpTake, Key: key, Err: s.notFoundOrChanged(ctx, key)}
}

// notFoundOrChanged reads the lease back after a failed take or handoff request:
// ErrLeaseNotFound if it is gone, ErrLeaseChanged otherwise or if the read fails (see
// dynamo.GoneOrChanged).
func (s *DynamoDBStore) notFoundOrChanged(ctx context.Context, key Key) error {
	return dynamo.GoneOrChanged(ctx, s.client, s.table, keyItem(key), attrPK, ErrLeaseNotFound, ErrLeaseChanged)
}

// ownerCondition is the condition of the owner's own writes: it still owns the lease, in the
// same generation. It implies that the lease exists.
const ownerCondition = "#owner = :me AND #gen = :g"

// ownerUpdate runs an owner-side write (Renew, Checkpoint, Release) conditioned on held's owner
// and generation. Any failed condition is ErrLeaseLost: whether the lease is gone, free or owned
// by someone else, the owner's reaction is the same, so no read is spent telling them apart.
// (Handoff has a condition of its own beyond ownership and tells its failures apart.)
func (s *DynamoDBStore) ownerUpdate(ctx context.Context, op string, held Lease, set string,
	names map[string]string, values map[string]types.AttributeValue,
) (Lease, error) {
	key := held.Key()
	if held.Owner == "" {
		// A free lease is held by nobody (MemoryStore's holds); there is nothing to ask.
		return Lease{}, &ConditionError{Op: op, Key: key, Err: ErrLeaseLost}
	}
	names["#owner"] = attrOwner
	names["#gen"] = attrGeneration
	values[":me"] = &types.AttributeValueMemberS{Value: held.Owner}
	values[":g"] = dynamo.Number(held.Generation)
	l, failed, err := s.update(ctx, op, key, set, ownerCondition, names, values)
	if err != nil || !failed {
		return l, err
	}
	return Lease{}, &ConditionError{Op: op, Key: key, Err: ErrLeaseLost}
}

// Renew implements Store: counter + 1, conditioned on owner and generation.
func (s *DynamoDBStore) Renew(ctx context.Context, held Lease) (Lease, error) {
	if err := s.before(ctx, OpRenew, held.Key(), true); err != nil {
		return Lease{}, err
	}
	return s.ownerUpdate(ctx, OpRenew, held, "SET #ctr = #ctr + :one",
		map[string]string{"#ctr": attrCounter},
		map[string]types.AttributeValue{":one": dynamo.Number(1)})
}

// Checkpoint implements Store: checkpoint set and counter + 1, conditioned on owner and
// generation.
func (s *DynamoDBStore) Checkpoint(ctx context.Context, held Lease, checkpoint string) (Lease, error) {
	key := held.Key()
	if err := s.before(ctx, OpCheckpoint, key, true); err != nil {
		return Lease{}, err
	}
	if checkpoint == "" {
		// As in MemoryStore: "" would throw the group's progress on the shard away.
		return Lease{}, fmt.Errorf("lease %s of %s: the checkpoint is empty", OpCheckpoint, key)
	}
	return s.ownerUpdate(ctx, OpCheckpoint, held, "SET #cp = :cp, #ctr = #ctr + :one",
		map[string]string{"#cp": attrCheckpoint, "#ctr": attrCounter},
		map[string]types.AttributeValue{
			":cp":  &types.AttributeValueMemberS{Value: checkpoint},
			":one": dynamo.Number(1),
		})
}

// Release implements Store: owner and pending owner removed, generation and counter + 1,
// conditioned on owner and generation.
func (s *DynamoDBStore) Release(ctx context.Context, held Lease) (Lease, error) {
	if err := s.before(ctx, OpRelease, held.Key(), true); err != nil {
		return Lease{}, err
	}
	return s.ownerUpdate(ctx, OpRelease, held,
		"SET #gen = #gen + :one, #ctr = #ctr + :one REMOVE #owner, #pend",
		map[string]string{"#ctr": attrCounter, "#pend": attrPendingOwner},
		map[string]types.AttributeValue{":one": dynamo.Number(1)})
}
