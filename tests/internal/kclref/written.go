package kclref

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CheckAsWritten is Decode plus the shape rules every KCL-written lease row
// obeys, for checking rows another writer (our store) puts into a table that
// KCL workers share. Decode accepts what the KCL can read; this also rejects
// what no KCL would ever write, because such a row means the writer diverged
// from the format even where today's KCL happens to read it:
//
//   - checkpointSubSequenceNumber missing (every KCL write path sets it);
//   - pendingCheckpoint and pendingCheckpointSubSequenceNumber not both
//     present or both absent, or an empty or incomparable pending checkpoint
//     (the KCL PUTs or DELETEs the two together);
//   - startingHashKey and endingHashKey not both present and non-empty;
//   - negative leaseCounter, ownerSwitchesSinceCheckpoint or sub-sequence
//     numbers (the counters only grow from 0; the KCL's checkpointer refuses
//     negative sub-sequence numbers);
//   - an entityType that is not the string "LEASE" (a lease row either has
//     none, if written before 3.5, or has "LEASE").
func CheckAsWritten(item map[string]types.AttributeValue, multiStream bool) error {
	l, err := Decode(item, multiStream)
	if err != nil {
		return err
	}
	if _, ok := item[AttrCheckpointSubSeq]; !ok {
		return attrErr(AttrCheckpointSubSeq, "missing: every KCL write sets it with the checkpoint")
	}
	_, hasSeq := item[AttrPendingCheckpoint]
	_, hasSub := item[AttrPendingCheckpointSubSeq]
	if hasSeq != hasSub {
		return attrErr(AttrPendingCheckpoint, "pendingCheckpoint and pendingCheckpointSubSequenceNumber must come together")
	}
	if hasSeq {
		if l.PendingCheckpoint == nil {
			return attrErr(AttrPendingCheckpoint, "is empty: the KCL deletes it instead")
		}
		if !l.PendingCheckpoint.Valid() {
			return attrErr(AttrPendingCheckpoint, "%q is neither digits nor a sentinel", l.PendingCheckpoint.SequenceNumber)
		}
		if l.PendingCheckpoint.SubSequenceNumber < 0 {
			return attrErr(AttrPendingCheckpointSubSeq, "is negative")
		}
	}
	_, hasStart := item[AttrStartingHashKey]
	_, hasEnd := item[AttrEndingHashKey]
	if (hasStart || hasEnd) && l.HashKeyRange == nil {
		return attrErr(AttrStartingHashKey, "startingHashKey and endingHashKey must both be present and non-empty")
	}
	if av, ok := item[AttrEntityType]; ok {
		if s, isS := av.(*types.AttributeValueMemberS); !isS || s.Value != EntityTypeLease {
			return attrErr(AttrEntityType, "a lease row's entityType is the string %q", EntityTypeLease)
		}
	}
	switch {
	case l.LeaseCounter < 0:
		return attrErr(AttrLeaseCounter, "is negative")
	case l.OwnerSwitchesSinceCheckpoint < 0:
		return attrErr(AttrOwnerSwitches, "is negative")
	case l.Checkpoint.SubSequenceNumber < 0:
		return attrErr(AttrCheckpointSubSeq, "is negative")
	}
	return nil
}
