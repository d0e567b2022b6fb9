package lease

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// Expressions of the handoff writes. They are constants so that a reader of the table (or of a
// CloudTrail log) can match a request to the code that sent it.
const (
	// requestHandoffCondition: the lease exists, has the observed owner and generation (the
	// counter may have moved: the owner's renewals do not void a request), is not owned by
	// the taker, and no other worker's request is pending. #owner <> :t follows from
	// #owner = :o because :o != :t is checked before; it is kept so that the expression says
	// the whole rule by itself.
	requestHandoffCondition = "attribute_exists(#pk) AND #owner = :o AND #gen = :g AND #owner <> :t" +
		" AND (attribute_not_exists(#pend) OR #pend = :t)"
	requestHandoffUpdate = "SET #pend = :t, #ctr = #ctr + :one"

	// handoffCondition: the caller still owns the lease in the same generation, and someone
	// asked for it.
	handoffCondition = ownerCondition + " AND attribute_exists(#pend)"
	// handoffUpdate moves the stored pending owner into owner. A SET value may be a path of the
	// item; every value is read from the item as it was before any action of the expression
	// applies (DynamoDB's rule, which dynalite models), so REMOVE #pend in the same expression
	// does not affect what #owner receives, and no two actions write the same path.
	handoffUpdate = "SET #owner = #pend, #gen = #gen + :one, #ctr = #ctr + :one REMOVE #pend"
)

// RequestHandoff implements Store: one UpdateItem that sets pending_owner, conditioned as
// requestHandoffCondition says. When the condition fails, a strongly consistent GetItem tells
// ErrLeaseNotFound from ErrLeaseChanged, as for Take.
func (s *DynamoDBStore) RequestHandoff(ctx context.Context, observed Lease, taker string) (Lease, error) {
	key := observed.Key()
	if err := s.before(ctx, OpRequestHandoff, key, true); err != nil {
		return Lease{}, err
	}
	if err := checkHandoffRequest(observed, taker); err != nil {
		return Lease{}, err
	}
	names := map[string]string{
		"#pk": attrPK, "#owner": attrOwner, "#gen": attrGeneration, "#ctr": attrCounter,
		"#pend": attrPendingOwner,
	}
	values := map[string]types.AttributeValue{
		":o":   &types.AttributeValueMemberS{Value: observed.Owner},
		":g":   dynamo.Number(observed.Generation),
		":t":   &types.AttributeValueMemberS{Value: taker},
		":one": dynamo.Number(1),
	}
	l, failed, err := s.update(ctx, OpRequestHandoff, key, requestHandoffUpdate, requestHandoffCondition, names, values)
	if err != nil || !failed {
		return l, err
	}
	return Lease{}, &ConditionError{Op: OpRequestHandoff, Key: key, Err: s.notFoundOrChanged(ctx, key)}
}

// Handoff implements Store: one UpdateItem that moves pending_owner into owner (see
// handoffUpdate), conditioned on the caller's owner and generation and on a pending owner being
// there.
//
// The new owner is taken from the item, not from held.PendingOwner, so the write needs no read
// before it and cannot hand the lease to a worker that is not (or no longer) pending. Within one
// generation pending_owner is only ever set once, to one taker (RequestHandoff refuses a second
// one, and only a change of owner, which is a new generation, removes it), so the stored value
// is the taker of held.PendingOwner whenever held shows one.
//
// When the condition fails, a strongly consistent GetItem tells why: if the lease still has
// held's owner and generation, nobody asked for it and the answer is ErrNoPendingOwner (the
// caller keeps it); otherwise, or if the read fails, ErrLeaseLost. A failed read is answered
// with ErrLeaseLost because an owner that was about to hand the lease over has already stopped
// delivering it; stopping for good costs little, and the pending taker takes the lease after its
// timeout, whereas keeping a lease that is gone would let two workers read one shard.
func (s *DynamoDBStore) Handoff(ctx context.Context, held Lease) (Lease, error) {
	key := held.Key()
	if err := s.before(ctx, OpHandoff, key, true); err != nil {
		return Lease{}, err
	}
	if held.Owner == "" {
		// A free lease is held by nobody, as in ownerUpdate.
		return Lease{}, &ConditionError{Op: OpHandoff, Key: key, Err: ErrLeaseLost}
	}
	names := map[string]string{
		"#owner": attrOwner, "#gen": attrGeneration, "#ctr": attrCounter, "#pend": attrPendingOwner,
	}
	values := map[string]types.AttributeValue{
		":me":  &types.AttributeValueMemberS{Value: held.Owner},
		":g":   dynamo.Number(held.Generation),
		":one": dynamo.Number(1),
	}
	l, failed, err := s.update(ctx, OpHandoff, key, handoffUpdate, handoffCondition, names, values)
	if err != nil || !failed {
		return l, err
	}
	return Lease{}, &ConditionError{Op: OpHandoff, Key: key, Err: s.whyHandoffFailed(ctx, held)}
}

// whyHandoffFailed reads the lease back after a failed handoff; see Handoff.
func (s *DynamoDBStore) whyHandoffFailed(ctx context.Context, held Lease) error {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyItem(held.Key()),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#owner, #gen"),
		ExpressionAttributeNames: map[string]string{"#owner": attrOwner, "#gen": attrGeneration},
	})
	if err != nil {
		return fmt.Errorf("%w (reading it back from DynamoDB table %q to tell whether it is still held failed: %v)",
			ErrLeaseLost, s.table, err)
	}
	if out == nil || len(out.Item) == 0 {
		return ErrLeaseLost
	}
	owner, _ := out.Item[attrOwner].(*types.AttributeValueMemberS)
	gen, _ := out.Item[attrGeneration].(*types.AttributeValueMemberN)
	if owner == nil || gen == nil || owner.Value != held.Owner {
		return ErrLeaseLost
	}
	if n, err := strconv.ParseInt(gen.Value, 10, 64); err != nil || n != held.Generation {
		return ErrLeaseLost
	}
	return ErrNoPendingOwner
}
