package kclref

import (
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Write is one conditional write a KCL worker sends for a lease row, in the
// legacy Expected / AttributeUpdates form the KCL's DynamoDBLeaseRefresher
// uses. Tests can send it to a DynamoDB (PutItemInput, UpdateItemInput) or
// play it on an item in memory (Apply) to make a KCL worker act on a row our
// store wrote, and see whether our store then notices.
//
// Every constructor takes the lease as the acting KCL worker last saw it
// (its in-memory copy), because that copy is what the KCL's conditions
// compare against.
type Write struct {
	// Op names the KCL operation: create, renew, take, update, evict, assign, handoff.
	Op string
	// LeaseKey addresses the row.
	LeaseKey string
	// Put is the whole item of a PutItem (create); nil for an UpdateItem.
	Put map[string]types.AttributeValue
	// Expected are the conditions, all of which must hold.
	Expected map[string]types.ExpectedAttributeValue
	// Updates are the attribute actions of an UpdateItem.
	Updates map[string]types.AttributeValueUpdate
}

func expectValue(av types.AttributeValue) types.ExpectedAttributeValue {
	return types.ExpectedAttributeValue{Value: av}
}

func expectAbsent() types.ExpectedAttributeValue {
	return types.ExpectedAttributeValue{Exists: aws.Bool(false)}
}

// expectValueOrAbsent is the KCL's "equal to what I saw, or absent if I saw none".
func expectValueOrAbsent(s string) types.ExpectedAttributeValue {
	if s == "" {
		return expectAbsent()
	}
	return expectValue(str(s))
}

func put(av types.AttributeValue) types.AttributeValueUpdate {
	return types.AttributeValueUpdate{Action: types.AttributeActionPut, Value: av}
}

func del() types.AttributeValueUpdate {
	return types.AttributeValueUpdate{Action: types.AttributeActionDelete}
}

func addOne() types.AttributeValueUpdate {
	return types.AttributeValueUpdate{Action: types.AttributeActionAdd, Value: num(1)}
}

// counterGuard is the optimistic lock of renew, take and update: the counter
// must still be what the worker saw, and becomes that plus one (a PUT, not an ADD).
func counterGuard(l Lease) (map[string]types.ExpectedAttributeValue, map[string]types.AttributeValueUpdate) {
	return map[string]types.ExpectedAttributeValue{AttrLeaseCounter: expectValue(num(l.LeaseCounter))},
		map[string]types.AttributeValueUpdate{AttrLeaseCounter: put(num(l.LeaseCounter + 1))}
}

// CreateWrite is createLeaseIfNotExists: a PutItem of the whole encoded
// lease on condition that no row has its leaseKey. New leases come from the
// shard syncer with no owner, counter 0, ownerSwitchesSinceCheckpoint 0, a
// sentinel checkpoint (usually the configured initial position; TRIM_HORIZON
// for a child shard found at a parent's end), parents and hash key range.
func CreateWrite(l Lease, multiStream bool, v Version) Write {
	return Write{
		Op:       "create",
		LeaseKey: l.LeaseKey,
		Put:      EncodeAs(l, multiStream, v),
		Expected: map[string]types.ExpectedAttributeValue{AttrLeaseKey: expectAbsent()},
	}
}

// RenewWrite is renewLease. Both generations: leaseCounter must equal the
// seen value and is PUT to seen+1. 3.x adds: checkpointOwner must be absent
// unless the worker already knows a handoff is under way (so the old owner
// learns of a handoff by failing this condition, then renews without it), and
// throughputKBps is PUT when the worker has measured it.
func RenewWrite(l Lease, v Version) Write {
	exp, upd := counterGuard(l)
	if v >= KCL3 {
		if l.CheckpointOwner == "" {
			exp[AttrCheckpointOwner] = expectAbsent()
		}
		if l.ThroughputKBps != nil {
			upd[AttrThroughputKBps] = put(&types.AttributeValueMemberN{Value: JavaDouble(*l.ThroughputKBps)})
		}
	}
	return Write{Op: "renew", LeaseKey: l.LeaseKey, Expected: exp, Updates: upd}
}

// ownerSwitch reports whether take/assign add 1 to ownerSwitchesSinceCheckpoint:
// the lease had an owner other than the new one or, in 3.x, the new owner is
// the checkpoint owner (a lease handed back to the worker that was giving it
// away). As written in the KCL this does not count the completion of a
// graceful handoff (assign to the current leaseOwner), though the new owner
// is a different worker.
func ownerSwitch(l Lease, newOwner string, v Version) bool {
	if l.LeaseOwner != "" && l.LeaseOwner != newOwner {
		return true
	}
	return v >= KCL3 && l.CheckpointOwner != "" && l.CheckpointOwner == newOwner
}

// TakeWrite is takeLease (the 2.x lease taker, and 3.x while it runs the
// 2.x-compatible assignment): leaseCounter must equal the seen value and is
// PUT to seen+1, leaseOwner is PUT to the taker, ownerSwitchesSinceCheckpoint
// gets ADD 1 on an owner switch (see ownerSwitch). 3.x also DELETEs
// checkpointOwner. The taker takes leases that are unowned or whose counter
// it has not seen change for the failover time (10 s by default), measured
// on its own clock from its scans; no time is stored in the row.
func TakeWrite(l Lease, newOwner string, v Version) Write {
	exp, upd := counterGuard(l)
	upd[AttrLeaseOwner] = put(str(newOwner))
	if ownerSwitch(l, newOwner, v) {
		upd[AttrOwnerSwitches] = addOne()
	}
	if v >= KCL3 {
		upd[AttrCheckpointOwner] = del()
	}
	return Write{Op: "take", LeaseKey: l.LeaseKey, Expected: exp, Updates: upd}
}

// UpdateWrite is updateLease, through which every checkpoint, prepared
// checkpoint and child-shard record goes; the same in 2.3+ and 3.x. The
// counter guard as in renew, and PUTs of checkpoint, checkpointSubSequenceNumber
// and ownerSwitchesSinceCheckpoint; pendingCheckpoint and its sub-sequence
// number PUT together or DELETEd together; pendingCheckpointState PUT (B) or
// DELETEd; childShardIds PUT when known (never deleted); the hash keys PUT
// when known; for multi-stream also streamName and shardId PUT. Owner fields
// are not touched or checked: holding the counter is the proof of ownership.
func UpdateWrite(l Lease, multiStream bool) Write {
	exp, upd := counterGuard(l)
	upd[AttrCheckpoint] = put(str(l.Checkpoint.SequenceNumber))
	upd[AttrCheckpointSubSeq] = put(num(l.Checkpoint.SubSequenceNumber))
	upd[AttrOwnerSwitches] = put(num(l.OwnerSwitchesSinceCheckpoint))
	if p := l.PendingCheckpoint; p != nil && p.SequenceNumber != "" {
		upd[AttrPendingCheckpoint] = put(str(p.SequenceNumber))
		upd[AttrPendingCheckpointSubSeq] = put(num(p.SubSequenceNumber))
	} else {
		upd[AttrPendingCheckpoint] = del()
		upd[AttrPendingCheckpointSubSeq] = del()
	}
	if l.PendingCheckpointState != nil {
		upd[AttrPendingCheckpointState] = put(&types.AttributeValueMemberB{Value: slices.Clone(l.PendingCheckpointState)})
	} else {
		upd[AttrPendingCheckpointState] = del()
	}
	if len(l.ChildShardIDs) > 0 {
		upd[AttrChildShardIDs] = put(strSet(l.ChildShardIDs))
	}
	if r := l.HashKeyRange; r != nil {
		upd[AttrStartingHashKey] = put(str(r.StartingHashKey))
		upd[AttrEndingHashKey] = put(str(r.EndingHashKey))
	}
	if multiStream {
		upd[AttrStreamName] = put(str(l.StreamIdentifier))
		upd[AttrShardID] = put(str(l.ShardID))
	}
	return Write{Op: "update", LeaseKey: l.LeaseKey, Expected: exp, Updates: upd}
}

// CheckpointWrite is DynamoDBCheckpointer.setCheckpoint: the held lease with
// checkpoint cp, no pending checkpoint or state, and ownerSwitchesSinceCheckpoint
// reset to 0, written by UpdateWrite.
func CheckpointWrite(l Lease, cp ExtendedSequenceNumber, multiStream bool) Write {
	l.Checkpoint = cp
	l.PendingCheckpoint = nil
	l.PendingCheckpointState = nil
	l.OwnerSwitchesSinceCheckpoint = 0
	return UpdateWrite(l, multiStream)
}

// PrepareCheckpointWrite is DynamoDBCheckpointer.prepareCheckpoint: the held
// lease with a pending checkpoint and optional state (nil deletes it); the
// checkpoint and ownerSwitchesSinceCheckpoint are rewritten unchanged.
func PrepareCheckpointWrite(l Lease, pending ExtendedSequenceNumber, state []byte, multiStream bool) Write {
	l.PendingCheckpoint = &pending
	l.PendingCheckpointState = state
	return UpdateWrite(l, multiStream)
}

// EvictWrite is evictLease (an API the KCL's own workers do not call).
// 2.x: leaseOwner must equal the seen owner (or be absent if none was seen);
// leaseOwner DELETEd, leaseCounter PUT to seen+1. 3.x: leaseOwner and
// checkpointOwner must each equal the seen value or be absent if none was
// seen, and the row must exist; checkpointOwner DELETEd, leaseOwner DELETEd
// only when no handoff was under way (otherwise the handoff's target keeps
// it), leaseCounter ADD 1.
func EvictWrite(l Lease, v Version) Write {
	if v < KCL3 {
		return Write{
			Op:       "evict",
			LeaseKey: l.LeaseKey,
			Expected: map[string]types.ExpectedAttributeValue{AttrLeaseOwner: expectValueOrAbsent(l.LeaseOwner)},
			Updates: map[string]types.AttributeValueUpdate{
				AttrLeaseOwner:   del(),
				AttrLeaseCounter: put(num(l.LeaseCounter + 1)),
			},
		}
	}
	upd := map[string]types.AttributeValueUpdate{AttrCheckpointOwner: del(), AttrLeaseCounter: addOne()}
	if l.CheckpointOwner == "" {
		upd[AttrLeaseOwner] = del()
	}
	return Write{Op: "evict", LeaseKey: l.LeaseKey, Expected: ownersGuard(l), Updates: upd}
}

// ownersGuard is 3.x's assign/evict condition: both owner fields as seen,
// and the row still there (leaseKey equal to itself).
func ownersGuard(l Lease) map[string]types.ExpectedAttributeValue {
	return map[string]types.ExpectedAttributeValue{
		AttrLeaseOwner:      expectValueOrAbsent(l.LeaseOwner),
		AttrCheckpointOwner: expectValueOrAbsent(l.CheckpointOwner),
		AttrLeaseKey:        expectValue(str(l.LeaseKey)),
	}
}

// AssignWrite is 3.x's assignLease, used by the leader's lease assignment
// and to finish a graceful handoff. Condition: ownersGuard (the counter is
// not checked). Updates: leaseOwner PUT newOwner, checkpointOwner DELETEd,
// ownerSwitchesSinceCheckpoint ADD 1 on an owner switch, leaseCounter ADD 1
// (which makes the previous holder's next renew fail).
func AssignWrite(l Lease, newOwner string) Write {
	upd := map[string]types.AttributeValueUpdate{
		AttrLeaseOwner:      put(str(newOwner)),
		AttrCheckpointOwner: del(),
		AttrLeaseCounter:    addOne(),
	}
	if ownerSwitch(l, newOwner, KCL3) {
		upd[AttrOwnerSwitches] = addOne()
	}
	return Write{Op: "assign", LeaseKey: l.LeaseKey, Expected: ownersGuard(l), Updates: upd}
}

// HandoffWrite is 3.x's initiateGracefulLeaseHandoff, sent by the leader to
// move a lease from its owner to newOwner. Condition: leaseOwner equals the
// seen owner (which must exist), checkpointOwner absent, row exists. Updates:
// leaseOwner PUT newOwner, checkpointOwner PUT the old owner; the counter is
// deliberately left alone so the old owner keeps renewing.
//
// From then on, the rule of checkpointOwner: while it is set, the worker it
// names (the old owner) still holds the lease for processing, renews it
// (after its first renew fails on the checkpointOwner condition it re-reads
// the row and renews without that condition) and checkpoints as usual; the
// worker named by leaseOwner must not start processing: it skips leases with
// a checkpointOwner. When the old owner's record processor has shut down
// (after checkpointing) or its handoff timeout passes, it sends
// AssignWrite(seen, seen.LeaseOwner), which removes checkpointOwner and bumps
// the counter; only then does the new owner take up the lease. If the old
// owner dies instead, the lease expires and the leader reassigns it with
// AssignWrite, which also removes checkpointOwner.
func HandoffWrite(l Lease, newOwner string) Write {
	if l.LeaseOwner == "" {
		panic("kclref: the KCL hands off only an owned lease")
	}
	return Write{
		Op:       "handoff",
		LeaseKey: l.LeaseKey,
		Expected: map[string]types.ExpectedAttributeValue{
			AttrLeaseOwner:      expectValue(str(l.LeaseOwner)),
			AttrCheckpointOwner: expectAbsent(),
			AttrLeaseKey:        expectValue(str(l.LeaseKey)),
		},
		Updates: map[string]types.AttributeValueUpdate{
			AttrLeaseOwner:      put(str(newOwner)),
			AttrCheckpointOwner: put(str(l.LeaseOwner)),
		},
	}
}
