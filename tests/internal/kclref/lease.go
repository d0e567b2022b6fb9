package kclref

import (
	"fmt"
	"regexp"
	"strconv"
)

// Attribute names of a lease row, as the KCL's DynamoDBLeaseSerializer and
// DynamoDBMultiStreamLeaseSerializer spell them. They are the wire format: a
// store that shares a table with KCL workers must use exactly these.
const (
	// AttrLeaseKey is the table's hash key (S). Single-stream: the shard ID.
	// Multi-stream: "<streamIdentifier>:<shardId>".
	AttrLeaseKey = "leaseKey"
	// AttrLeaseOwner (S) is the worker ID holding the lease; absent when unowned.
	AttrLeaseOwner = "leaseOwner"
	// AttrLeaseCounter (N, a Java long) is the optimistic-locking counter.
	AttrLeaseCounter = "leaseCounter"
	// AttrOwnerSwitches (N, long) counts owner changes since the last checkpoint.
	AttrOwnerSwitches = "ownerSwitchesSinceCheckpoint"
	// AttrCheckpoint (S) is the checkpoint's sequence number or sentinel name.
	AttrCheckpoint = "checkpoint"
	// AttrCheckpointSubSeq (N, long) is the checkpoint's sub-sequence number.
	AttrCheckpointSubSeq = "checkpointSubSequenceNumber"
	// AttrPendingCheckpoint (S) is a prepared, not yet committed checkpoint.
	AttrPendingCheckpoint = "pendingCheckpoint"
	// AttrPendingCheckpointSubSeq (N, long) is the pending checkpoint's sub-sequence number.
	AttrPendingCheckpointSubSeq = "pendingCheckpointSubSequenceNumber"
	// AttrPendingCheckpointState (B) is application state saved with a prepared checkpoint (2.3+).
	AttrPendingCheckpointState = "pendingCheckpointState"
	// AttrParentShardIDs (SS) holds the parent shard IDs. The name is singular
	// although the value is a set: that is how the KCL spells it.
	AttrParentShardIDs = "parentShardId"
	// AttrChildShardIDs (SS) holds the child shard IDs once the shard is closed (2.3+).
	AttrChildShardIDs = "childShardIds"
	// AttrStartingHashKey (S, a decimal big integer) starts the shard's hash key range (2.3+).
	AttrStartingHashKey = "startingHashKey"
	// AttrEndingHashKey (S, a decimal big integer) ends the shard's hash key range (2.3+).
	AttrEndingHashKey = "endingHashKey"
	// AttrThroughputKBps (N, a Java double) is the owner's measured throughput (3.x).
	AttrThroughputKBps = "throughputKBps"
	// AttrCheckpointOwner (S) names the worker still allowed to checkpoint during a
	// graceful handoff (3.x); absent otherwise.
	AttrCheckpointOwner = "checkpointOwner"
	// AttrEntityType (S) tells lease rows from other rows sharing the table (3.5+).
	AttrEntityType = "entityType"
	// AttrStreamName (S) holds the serialized stream identifier of a multi-stream
	// lease ("account:stream:creationEpoch"); the KCL keeps the old name "streamName".
	AttrStreamName = "streamName"
	// AttrShardID (S) holds the shard ID of a multi-stream lease.
	AttrShardID = "shardId"
)

// EntityTypeLease is the entityType value of a lease row (3.5+). KCL 3.5 also
// writes STREAM, LEADER, CLIENT_VERSION_MIGRATION, TABLE_MIGRATION and
// WORKER_METRIC_STATS rows into the lease table; those are not leases.
const EntityTypeLease = "LEASE"

// Version picks which KCL generation's row layout Encode and the write models
// reproduce. The layouts only add attributes over time; every version ignores
// attributes it does not know, so the newest layout is readable by all of them.
type Version int

const (
	// KCL2 is 2.3 to 2.7: no checkpointOwner, no throughputKBps, no entityType.
	KCL2 Version = iota
	// KCL3 is 3.0 to 3.4: adds checkpointOwner and throughputKBps.
	KCL3
	// KCL35 is 3.5 and later: also writes entityType = "LEASE" on every lease.
	KCL35
)

// Newest is the newest layout the package models.
const Newest = KCL35

// HashKeyRange is a shard's hash key range, each end a decimal big integer as
// the KCL's HashKeyRangeForLease serializes it (BigInteger.toString).
type HashKeyRange struct {
	StartingHashKey string
	EndingHashKey   string
}

// Lease mirrors the persisted fields of the KCL's Lease and MultiStreamLease.
// Non-persisted KCL fields (concurrency token, last counter increment time)
// are left out: they never reach the table.
type Lease struct {
	// LeaseKey -> leaseKey (S), always present.
	LeaseKey string
	// LeaseOwner -> leaseOwner (S); "" means absent (unowned). The KCL never
	// writes an empty string (its attribute helper rejects one), so "" is unambiguous.
	LeaseOwner string
	// LeaseCounter -> leaseCounter (N), always present.
	LeaseCounter int64
	// OwnerSwitchesSinceCheckpoint -> ownerSwitchesSinceCheckpoint (N), always present.
	OwnerSwitchesSinceCheckpoint int64
	// Checkpoint -> checkpoint (S) and checkpointSubSequenceNumber (N), both always present.
	Checkpoint ExtendedSequenceNumber
	// PendingCheckpoint -> pendingCheckpoint (S) and pendingCheckpointSubSequenceNumber (N);
	// nil (or an empty sequence number) means both absent.
	PendingCheckpoint *ExtendedSequenceNumber
	// PendingCheckpointState -> pendingCheckpointState (B); nil means absent.
	PendingCheckpointState []byte
	// ParentShardIDs -> parentShardId (SS); empty means absent. A set: order is not kept.
	ParentShardIDs []string
	// ChildShardIDs -> childShardIds (SS); empty means absent. A set.
	ChildShardIDs []string
	// HashKeyRange -> startingHashKey and endingHashKey (S each); nil means both absent.
	HashKeyRange *HashKeyRange
	// ThroughputKBps -> throughputKBps (N, double); nil means absent. 3.x only.
	ThroughputKBps *float64
	// CheckpointOwner -> checkpointOwner (S); "" means absent. 3.x only.
	CheckpointOwner string
	// StreamIdentifier -> streamName (S); multi-stream leases only, always present there.
	StreamIdentifier string
	// ShardID -> shardId (S); multi-stream leases only, always present there.
	ShardID string
}

// MultiStreamLeaseKey is the lease key the KCL gives a multi-stream lease
// (MultiStreamLease.getLeaseKey): the serialized stream identifier, a colon,
// and the shard ID.
func MultiStreamLeaseKey(streamIdentifier, shardID string) string {
	return streamIdentifier + ":" + shardID
}

// StreamIdentifier serializes a multi-stream identifier as the KCL's
// StreamIdentifier.serialize does: "account:stream:creationEpoch".
func StreamIdentifier(accountID, streamName string, creationEpoch int64) string {
	return accountID + ":" + streamName + ":" + strconv.FormatInt(creationEpoch, 10)
}

// streamIdentifierPattern is the shape StreamIdentifier.multiStreamInstance
// accepts; anything else makes the KCL throw when it builds the stream's
// consumer or emits metrics for the lease.
var streamIdentifierPattern = regexp.MustCompile(`^([0-9]+):([^:]+):([0-9]+)$`)

// ParseStreamIdentifier splits a serialized multi-stream identifier, failing
// where the KCL's StreamIdentifier.multiStreamInstance would: not matching
// digits:name-without-colons:digits, or a creation epoch that is not a
// positive Java long.
func ParseStreamIdentifier(s string) (accountID, streamName string, creationEpoch int64, err error) {
	m := streamIdentifierPattern.FindStringSubmatch(s)
	if m == nil {
		return "", "", 0, fmt.Errorf("stream identifier %q is not account:stream:creationEpoch", s)
	}
	epoch, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return "", "", 0, fmt.Errorf("stream identifier %q: creation epoch does not fit a long", s)
	}
	if epoch <= 0 {
		return "", "", 0, fmt.Errorf("stream identifier %q: creation epoch must be > 0", s)
	}
	return m[1], m[2], epoch, nil
}
