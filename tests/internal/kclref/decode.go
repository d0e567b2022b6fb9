package kclref

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrNotLease is returned by Decode for a row KCL 3.5+ skips as not a lease.
var ErrNotLease = errors.New("kclref: not a lease row (entityType is not LEASE)")

// AttrError names the attribute the KCL would fail on or misread, and how.
type AttrError struct {
	Attr   string
	Reason string
}

func (e *AttrError) Error() string { return "kclref: attribute " + e.Attr + ": " + e.Reason }

func attrErr(attr, format string, args ...any) error {
	return &AttrError{Attr: attr, Reason: fmt.Sprintf(format, args...)}
}

// IsLease reports whether KCL 3.5+ reads the row as a lease: entityType is
// absent (rows written before 3.5, or by 2.x) or is the string "LEASE". A
// non-string entityType also counts as a lease: the KCL reads it as absent.
// Rows of other entity types share the table in 3.5's single-table format
// (e.g. the leader lock "Leader", "Migration3.0", "TableMigration3.5", worker
// metrics keyed by worker ID). KCL 2.x and 3.0-3.4 know no entityType and
// read every row as a lease. How a row that fails to decode is handled
// matters: in 2.x, and in 3.0-3.4's plain listLeases, the exception fails
// the whole table scan, and with it every round of the lease taker, the
// renewer's start-up, shard sync and leader election that list leases; 3.x's
// parallel scan and 3.5's listLeases log it and skip the row.
func IsLease(item map[string]types.AttributeValue) bool {
	s, ok := item[AttrEntityType].(*types.AttributeValueMemberS)
	return !ok || s.Value == EntityTypeLease
}

// Decode reads an item as the KCL's fromDynamoRecord does, but strictly: it
// fails, with an *AttrError naming the attribute, wherever the KCL would
// throw or would silently read something other than what the row holds.
// The SDK getters the KCL uses return null (S, N, B) or an empty list (SS)
// for a value of another type, so a mistyped S or SS attribute reads as
// absent and a mistyped N or B one throws; Decode reports the misreads as
// errors too rather than copying them.
//
// Where the KCL throws: leaseKey missing or not S; leaseCounter or
// ownerSwitchesSinceCheckpoint missing or not an N holding a Java long;
// checkpointSubSequenceNumber, pendingCheckpointSubSequenceNumber (read only
// with a pending checkpoint) or throughputKBps not an N of the right kind;
// pendingCheckpointState not B; a hash key that is not a big integer, or a
// range whose start is not below its end; for multi-stream, streamName or
// shardId missing, or streamName not "account:stream:creationEpoch".
//
// Where the KCL would misread, also errors: a present leaseOwner, checkpoint,
// pendingCheckpoint, checkpointOwner, hash key or shard set of the wrong type
// (read as absent); an empty leaseOwner or checkpointOwner (read as a worker
// named ""); a checkpoint that is missing or neither digits nor a sentinel
// (the worker fails to start the shard); a multi-stream leaseKey other than
// streamName + ":" + shardId (the KCL addresses rows by key but shards by the
// two attributes, so they would diverge).
//
// Tolerated as the KCL tolerates them: a missing checkpointSubSequenceNumber
// or pendingCheckpointSubSequenceNumber (read as 0), an empty pendingCheckpoint
// (read as none), only one of the hash keys (read as no range), unknown
// attributes (ignored). CheckAsWritten rejects those shapes but the last,
// because the KCL never writes them.
//
// Decode returns ErrNotLease for rows IsLease rejects.
func Decode(item map[string]types.AttributeValue, multiStream bool) (Lease, error) {
	var l Lease
	if !IsLease(item) {
		return l, ErrNotLease
	}
	var err error
	if l.LeaseKey, err = requiredString(item, AttrLeaseKey); err != nil {
		return l, err
	}
	if l.LeaseOwner, err = optionalString(item, AttrLeaseOwner); err != nil {
		return l, err
	}
	if l.LeaseCounter, err = requiredLong(item, AttrLeaseCounter); err != nil {
		return l, err
	}
	if l.OwnerSwitchesSinceCheckpoint, err = requiredLong(item, AttrOwnerSwitches); err != nil {
		return l, err
	}
	if l.Checkpoint.SequenceNumber, err = requiredString(item, AttrCheckpoint); err != nil {
		return l, err
	}
	if !l.Checkpoint.Valid() {
		return l, attrErr(AttrCheckpoint, "%q is neither digits nor a sentinel: the KCL cannot compare it", l.Checkpoint.SequenceNumber)
	}
	if l.Checkpoint.SubSequenceNumber, err = optionalLong(item, AttrCheckpointSubSeq); err != nil {
		return l, err
	}
	if l.ParentShardIDs, err = optionalSet(item, AttrParentShardIDs); err != nil {
		return l, err
	}
	if l.ChildShardIDs, err = optionalSet(item, AttrChildShardIDs); err != nil {
		return l, err
	}
	if err = decodePending(item, &l); err != nil {
		return l, err
	}
	if err = decodeHashKeyRange(item, &l); err != nil {
		return l, err
	}
	if av, ok := item[AttrThroughputKBps]; ok {
		n, isN := av.(*types.AttributeValueMemberN)
		if !isN {
			return l, attrErr(AttrThroughputKBps, "is %s, not N: the KCL throws", typeName(av))
		}
		f, perr := strconv.ParseFloat(n.Value, 64)
		if perr != nil {
			return l, attrErr(AttrThroughputKBps, "%q is not a double: the KCL throws", n.Value)
		}
		l.ThroughputKBps = &f
	}
	if l.CheckpointOwner, err = optionalString(item, AttrCheckpointOwner); err != nil {
		return l, err
	}
	if multiStream {
		if err = decodeMultiStream(item, &l); err != nil {
			return l, err
		}
	}
	return l, nil
}

func decodePending(item map[string]types.AttributeValue, l *Lease) error {
	seq, err := optionalString(item, AttrPendingCheckpoint)
	if err != nil {
		return err
	}
	// The KCL reads the sub-sequence number only when the sequence number is
	// non-empty, so a lone or mistyped sub-sequence number is never looked at.
	if seq != "" {
		sub, err := optionalLong(item, AttrPendingCheckpointSubSeq)
		if err != nil {
			return err
		}
		l.PendingCheckpoint = &ExtendedSequenceNumber{SequenceNumber: seq, SubSequenceNumber: sub}
	}
	if av, ok := item[AttrPendingCheckpointState]; ok {
		b, isB := av.(*types.AttributeValueMemberB)
		if !isB {
			return attrErr(AttrPendingCheckpointState, "is %s, not B: the KCL throws", typeName(av))
		}
		l.PendingCheckpointState = slices.Clone(b.Value)
		if l.PendingCheckpointState == nil {
			l.PendingCheckpointState = []byte{}
		}
	}
	return nil
}

func decodeHashKeyRange(item map[string]types.AttributeValue, l *Lease) error {
	start, err := optionalString(item, AttrStartingHashKey)
	if err != nil {
		return err
	}
	end, err := optionalString(item, AttrEndingHashKey)
	if err != nil {
		return err
	}
	// The KCL builds a range only when both ends are non-empty strings.
	if start == "" || end == "" {
		return nil
	}
	s, ok := new(big.Int).SetString(start, 10)
	if !ok {
		return attrErr(AttrStartingHashKey, "%q is not a big integer: the KCL throws", start)
	}
	e, ok := new(big.Int).SetString(end, 10)
	if !ok {
		return attrErr(AttrEndingHashKey, "%q is not a big integer: the KCL throws", end)
	}
	if s.Cmp(e) >= 0 {
		return attrErr(AttrStartingHashKey, "%s is not below endingHashKey %s: the KCL throws", start, end)
	}
	l.HashKeyRange = &HashKeyRange{StartingHashKey: start, EndingHashKey: end}
	return nil
}

func decodeMultiStream(item map[string]types.AttributeValue, l *Lease) error {
	var err error
	if l.StreamIdentifier, err = requiredString(item, AttrStreamName); err != nil {
		return err
	}
	if l.ShardID, err = requiredString(item, AttrShardID); err != nil {
		return err
	}
	if _, _, _, err = ParseStreamIdentifier(l.StreamIdentifier); err != nil {
		return attrErr(AttrStreamName, "%v: the KCL throws", err)
	}
	if want := MultiStreamLeaseKey(l.StreamIdentifier, l.ShardID); l.LeaseKey != want {
		return attrErr(AttrLeaseKey, "%q is not streamName:shardId %q", l.LeaseKey, want)
	}
	return nil
}

// requiredString models a value the KCL hands to a non-null setter.
func requiredString(item map[string]types.AttributeValue, name string) (string, error) {
	av, ok := item[name]
	if !ok {
		return "", attrErr(name, "missing: the KCL requires it")
	}
	s, isS := av.(*types.AttributeValueMemberS)
	if !isS {
		return "", attrErr(name, "is %s, not S: the KCL reads null and fails", typeName(av))
	}
	if s.Value == "" {
		return "", attrErr(name, "is empty: the KCL never writes an empty string")
	}
	return s.Value, nil
}

// optionalString returns "" when absent; a mistyped value would read as
// absent in the KCL, and an empty one as a real value, so both are errors.
func optionalString(item map[string]types.AttributeValue, name string) (string, error) {
	av, ok := item[name]
	if !ok {
		return "", nil
	}
	s, isS := av.(*types.AttributeValueMemberS)
	if !isS {
		return "", attrErr(name, "is %s, not S: the KCL would read it as absent", typeName(av))
	}
	// The KCL treats an empty pending checkpoint or hash key as absent (it
	// tests isNullOrEmpty); an empty owner it would take for a worker's name.
	switch name {
	case AttrPendingCheckpoint, AttrStartingHashKey, AttrEndingHashKey:
	default:
		if s.Value == "" {
			return "", attrErr(name, "is an empty string: the KCL would read it as a real value")
		}
	}
	return s.Value, nil
}

func requiredLong(item map[string]types.AttributeValue, name string) (int64, error) {
	if _, ok := item[name]; !ok {
		return 0, attrErr(name, "missing: the KCL passes null to a non-null setter and throws")
	}
	return optionalLong(item, name)
}

// optionalLong parses like Java's Long.parseLong (optional sign, decimal
// digits, within a signed 64-bit range); absent reads as 0.
func optionalLong(item map[string]types.AttributeValue, name string) (int64, error) {
	av, ok := item[name]
	if !ok {
		return 0, nil
	}
	n, isN := av.(*types.AttributeValueMemberN)
	if !isN {
		return 0, attrErr(name, "is %s, not N: the KCL throws", typeName(av))
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, attrErr(name, "%q is not a Java long: the KCL throws", n.Value)
	}
	return v, nil
}

// optionalSet returns the set sorted; a non-SS value reads as an empty set
// in the KCL (the SDK's auto-constructed list), silently losing shard IDs.
func optionalSet(item map[string]types.AttributeValue, name string) ([]string, error) {
	av, ok := item[name]
	if !ok {
		return nil, nil
	}
	ss, isSS := av.(*types.AttributeValueMemberSS)
	if !isSS {
		return nil, attrErr(name, "is %s, not SS: the KCL would read an empty set", typeName(av))
	}
	out := slices.Clone(ss.Value)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func typeName(av types.AttributeValue) string {
	switch av.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberL:
		return "L"
	case *types.AttributeValueMemberM:
		return "M"
	}
	return fmt.Sprintf("%T", av)
}
