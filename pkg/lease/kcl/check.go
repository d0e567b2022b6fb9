package kcl

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// checkStartPositions fails when a lease the KCL created for a shard with no parent starts at
// another sentinel than cfg.InitialPosition. Such a shard was never checkpointed: the group reads
// it from the Subscriber's InitialPosition, which should be the KCL application's
// initialPositionInStream, and Config.InitialPosition says it is. A KCL application at
// TRIM_HORIZON moved to a Subscriber at LATEST would skip what the KCL would have read; the
// other way round, it would read the whole retention period again.
//
// Only single-stream tables are checked (a multi-stream application may start each stream at
// a position of its own), only leases the KCL created (not this store: watermillGeneration),
// and only when they agree on one position (with several, no setting is right for all).
func (s *Store) checkStartPositions(ctx context.Context) error {
	if s.cfg.MultiStream {
		return nil
	}
	in := &dynamodb.ScanInput{
		TableName:            aws.String(s.cfg.TableName),
		ProjectionExpression: aws.String("#key, #cp, #parents, #type, #gen"),
		ExpressionAttributeNames: map[string]string{
			"#key": kclLeaseKey, "#cp": kclCheckpoint, "#parents": kclParents, "#type": kclEntityType, "#gen": kclWatermillGen,
		},
	}
	var odd []string
	positions := map[string]bool{}
	at := ""
	err := s.scan(ctx, in, func(item map[string]types.AttributeValue) error {
		cp, _ := item[kclCheckpoint].(*types.AttributeValueMemberS)
		key, _ := item[kclLeaseKey].(*types.AttributeValueMemberS)
		if !isKCLLease(item) || cp == nil || key == nil || item[kclParents] != nil || item[kclWatermillGen] != nil {
			return nil
		}
		switch cp.Value {
		case TrimHorizon, Latest, AtTimestamp:
			positions[cp.Value] = true
			if cp.Value != s.cfg.InitialPosition {
				at = cp.Value
				odd = append(odd, key.Value)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checking where the unread shards of KCL lease table %q start: %w", s.cfg.TableName, err)
	}
	if len(odd) == 0 || len(positions) > 1 {
		return nil
	}
	shown := odd[:min(len(odd), 3)]
	return fmt.Errorf("KCL lease table %q: %d shards the KCL never checkpointed start at %s (the application's "+
		"initialPositionInStream), e.g. %s, but kcl.Config.InitialPosition is %s: set it, and the Subscriber's InitialPosition, "+
		"to %s, so that they start where the KCL would have started them",
		s.cfg.TableName, len(odd), at, strings.Join(shown, ", "), s.cfg.InitialPosition, at)
}
