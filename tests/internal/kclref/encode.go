package kclref

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Encode returns the item the newest modelled KCL (3.5+) puts when it creates
// the lease (DynamoDBLeaseSerializer.toDynamoRecord, plus streamName and
// shardId from DynamoDBMultiStreamLeaseSerializer when multiStream).
func Encode(l Lease, multiStream bool) map[string]types.AttributeValue {
	return EncodeAs(l, multiStream, Newest)
}

// EncodeAs is Encode for a given KCL generation. The rules, attribute by
// attribute (types: S string, N number, SS string set, B binary):
//
//   - leaseKey S, leaseCounter N, ownerSwitchesSinceCheckpoint N, checkpoint S
//     and checkpointSubSequenceNumber N: always written. Sentinel checkpoints
//     are their names (e.g. "TRIM_HORIZON") with sub-sequence "0".
//   - leaseOwner S: only when the lease has an owner.
//   - parentShardId SS, childShardIds SS: only when non-empty.
//   - pendingCheckpoint S + pendingCheckpointSubSequenceNumber N: both, only
//     when a pending checkpoint with a non-empty sequence number exists.
//   - pendingCheckpointState B: only when non-nil (see the note below).
//   - startingHashKey S + endingHashKey S: both, only when the range is known.
//   - throughputKBps N (3.x): only when known, formatted as Java's
//     Double.toString ("5.0", "1.0E-4").
//   - checkpointOwner S (3.x): only during a graceful handoff.
//   - entityType S = "LEASE" (3.5+): always.
//   - multi-stream: streamName S (the stream identifier) and shardId S, always.
//
// Numbers are Java Long.toString output: plain decimal, no exponent, "-" for
// negatives. Sets are de-duplicated (the KCL holds them in a HashSet) and
// sorted here only to make the output deterministic.
//
// A note on pendingCheckpointState: the KCL's create path (toDynamoRecord)
// has a slip that writes the checkpoint's sub-sequence number as an N under
// this name; its update path (getDynamoUpdateLeaseUpdate) writes the bytes as
// B, and its reader only accepts B. New leases never carry state, so the slip
// is unreachable in practice; EncodeAs writes B, the form the KCL reads.
//
// EncodeAs panics on a lease the KCL's serializer itself would reject (empty
// leaseKey or checkpoint, a multi-stream lease without stream or shard),
// because such a fixture can only be a mistake in the test.
func EncodeAs(l Lease, multiStream bool, v Version) map[string]types.AttributeValue {
	if l.LeaseKey == "" {
		panic("kclref: the KCL cannot write a lease without a leaseKey")
	}
	if l.Checkpoint.SequenceNumber == "" {
		panic("kclref: the KCL cannot write a lease without a checkpoint (new leases carry a sentinel)")
	}
	item := map[string]types.AttributeValue{
		AttrLeaseKey:         str(l.LeaseKey),
		AttrLeaseCounter:     num(l.LeaseCounter),
		AttrOwnerSwitches:    num(l.OwnerSwitchesSinceCheckpoint),
		AttrCheckpoint:       str(l.Checkpoint.SequenceNumber),
		AttrCheckpointSubSeq: num(l.Checkpoint.SubSequenceNumber),
	}
	if l.LeaseOwner != "" {
		item[AttrLeaseOwner] = str(l.LeaseOwner)
	}
	if len(l.ParentShardIDs) > 0 {
		item[AttrParentShardIDs] = strSet(l.ParentShardIDs)
	}
	if len(l.ChildShardIDs) > 0 {
		item[AttrChildShardIDs] = strSet(l.ChildShardIDs)
	}
	if p := l.PendingCheckpoint; p != nil && p.SequenceNumber != "" {
		item[AttrPendingCheckpoint] = str(p.SequenceNumber)
		item[AttrPendingCheckpointSubSeq] = num(p.SubSequenceNumber)
	}
	if l.PendingCheckpointState != nil {
		item[AttrPendingCheckpointState] = &types.AttributeValueMemberB{Value: slices.Clone(l.PendingCheckpointState)}
	}
	if r := l.HashKeyRange; r != nil {
		item[AttrStartingHashKey] = str(r.StartingHashKey)
		item[AttrEndingHashKey] = str(r.EndingHashKey)
	}
	// 2.x leases have no such fields, so a 2.x worker never writes them.
	if v >= KCL3 {
		if l.ThroughputKBps != nil {
			item[AttrThroughputKBps] = &types.AttributeValueMemberN{Value: JavaDouble(*l.ThroughputKBps)}
		}
		if l.CheckpointOwner != "" {
			item[AttrCheckpointOwner] = str(l.CheckpointOwner)
		}
	}
	if v >= KCL35 {
		item[AttrEntityType] = str(EntityTypeLease)
	}
	if multiStream {
		if l.StreamIdentifier == "" || l.ShardID == "" {
			panic("kclref: a multi-stream lease needs StreamIdentifier and ShardID")
		}
		item[AttrStreamName] = str(l.StreamIdentifier)
		item[AttrShardID] = str(l.ShardID)
	}
	return item
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func strSet(ss []string) types.AttributeValue {
	out := slices.Clone(ss)
	slices.Sort(out)
	return &types.AttributeValueMemberSS{Value: slices.Compact(out)}
}

// JavaDouble formats f as Java's Double.toString does, which is how the KCL
// renders throughputKBps: plain decimal with at least one fractional digit
// for 1e-3 <= |f| < 1e7, otherwise "d.dddE<exp>". Digits are the shortest that
// round-trip (what Java 19+ prints; older JVMs may print a longer tail).
func JavaDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	if a := math.Abs(f); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. "1.2345e+07", "1e-04"
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, err := strconv.Atoi(exp)
	if err != nil {
		panic(fmt.Sprintf("kclref: unexpected float format %q", s))
	}
	return mant + "E" + strconv.Itoa(e)
}
