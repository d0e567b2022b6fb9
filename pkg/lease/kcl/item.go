package kcl

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Attributes of a KCL lease item, as the KCL's lease serializers name them.
const (
	kclLeaseKey         = "leaseKey"
	kclOwner            = "leaseOwner"
	kclCounter          = "leaseCounter"
	kclOwnerSwitches    = "ownerSwitchesSinceCheckpoint"
	kclCheckpoint       = "checkpoint"
	kclCheckpointSub    = "checkpointSubSequenceNumber"
	kclPending          = "pendingCheckpoint"
	kclPendingSub       = "pendingCheckpointSubSequenceNumber"
	kclPendingState     = "pendingCheckpointState"
	kclParents          = "parentShardId"
	kclChildren         = "childShardIds"
	kclCheckpointOwner  = "checkpointOwner" // KCL 3.x: the owner finishing its work during a handoff
	kclStreamName       = "streamName"      // multi-stream: account:stream:creationEpoch
	kclShardID          = "shardId"         // multi-stream
	kclEntityType       = "entityType"      // late KCL 3.x: rows other than leases carry another value
	kclEntityTypeLease  = "LEASE"
	kclWatermillGen     = "watermillGeneration"
	kclWatermillOwner   = "watermillOwner"
	kclWatermillPending = "watermillPendingOwner"
	// kclWatermillCheckpoint is the checkpoint as this store was given it, beside the KCL's
	// pair: "seq" and "seq:0" are the same pair, but not the same resume (checkpointOfKCL).
	kclWatermillCheckpoint = "watermillCheckpoint"
)

// identifierCache holds the multi-stream identifiers known by stream name: those configured
// (Config.StreamIdentifiers), which always win, and those the last listing of a stream
// found. Safe for concurrent use.
type identifierCache struct {
	configured map[string]string // never written after newIdentifierCache
	mu         sync.Mutex
	learned    map[string]string
}

func newIdentifierCache(configured map[string]string) *identifierCache {
	c := &identifierCache{configured: map[string]string{}, learned: map[string]string{}}
	for stream, id := range configured {
		c.configured[stream] = id
	}
	return c
}

func (c *identifierCache) get(stream string) (string, bool) {
	if id, ok := c.configured[stream]; ok {
		return id, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.learned[stream]
	return id, ok
}

// learn records the identifier a listing of stream found, unless one of a later creation of
// the stream is known already: two listings that overlap may end in either order.
func (c *identifierCache) learn(stream, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if known, ok := c.learned[stream]; ok && creationEpoch(known) > creationEpoch(id) {
		return
	}
	c.learned[stream] = id
}

// creationEpoch is the creation epoch of a stream identifier account:stream:epoch, 0 if it has
// none that parses.
func creationEpoch(id string) int64 {
	n, _ := strconv.ParseInt(id[strings.LastIndexByte(id, ':')+1:], 10, 64)
	return n
}

// itemKey is the KCL item key of a lease: the shard id, or in a multi-stream table the stream
// identifier, ':' and the shard id.
func (s *Store) itemKey(op string, key lease.Key) (map[string]types.AttributeValue, error) {
	item, _, err := s.itemKeyOf(op, key)
	return item, err
}

// itemKeyOf is itemKey and, in a multi-stream table, the stream identifier it is made of (read
// once, so that a Create writes the same in leaseKey and streamName).
func (s *Store) itemKeyOf(op string, key lease.Key) (map[string]types.AttributeValue, string, error) {
	leaseKey, id := key.ShardID, ""
	if s.cfg.MultiStream {
		var ok bool
		id, ok = s.streamIDs.get(key.Stream)
		if !ok {
			return nil, "", fmt.Errorf("lease %s of %s: multi-stream KCL lease table %q has no lease of stream %q to learn its identifier from, and kcl.Config.StreamIdentifiers does not name it: add %q: \"account:%s:creationEpoch\"",
				op, key, s.cfg.TableName, key.Stream, key.Stream, key.Stream)
		}
		leaseKey = id + ":" + key.ShardID
	}
	return map[string]types.AttributeValue{kclLeaseKey: &types.AttributeValueMemberS{Value: leaseKey}}, id, nil
}

// kclCheckpointOf is the KCL checkpoint (sequence number and sub-sequence number) of a
// lease.Lease's checkpoint: "seq" is (seq, 0), "seq:sub" is (seq, sub), lease.ShardEnd is
// (SHARD_END, 0), lease.TrimHorizon (a reset's) is (TRIM_HORIZON, 0). Anything else is an error: the KCL compares checkpoints as numbers.
func kclCheckpointOf(cp string) (seq string, sub int64, err error) {
	switch cp {
	case lease.ShardEnd:
		return lease.ShardEnd, 0, nil
	case lease.TrimHorizon: // a reset's (admin.ResetGroup), the KCL's own sentinel
		return TrimHorizon, 0, nil
	}
	seq, subText, inside := strings.Cut(cp, ":")
	if inside {
		if sub, err = strconv.ParseInt(subText, 10, 64); err != nil || sub < 0 {
			return "", 0, fmt.Errorf("checkpoint %q: the sub-sequence number after ':' is not a non-negative integer", cp)
		}
	}
	if n, ok := new(big.Int).SetString(seq, 10); !ok || n.Sign() < 0 {
		return "", 0, fmt.Errorf("checkpoint %q is neither SHARD_END nor a sequence number (decimal digits, optionally ':' and a sub-sequence number)", cp)
	}
	return seq, sub, nil
}

// checkpointOfKCL is the lease.Lease checkpoint of a KCL one: "" for a sentinel of an unread
// shard, lease.ShardEnd, and "seq:sub" for a sequence number. The KCL writes sub-sequence
// number 0 both for a plain record and for the first user record of an aggregate; "seq:0" makes
// the reader resume at seq and skip what (seq, 0) covers either way (see the reader's
// DropDone), where "seq" would skip the rest of the aggregate.
//
// mine is what this store wrote as the checkpoint (kclWatermillCheckpoint): when it still says
// the same as the KCL's attributes, it is the checkpoint, as it was given.
func checkpointOfKCL(seq string, sub int64, mine string) string {
	switch seq {
	case TrimHorizon:
		if mine == lease.TrimHorizon {
			return lease.TrimHorizon // a reset's: TRIM_HORIZON whatever the subscriber's InitialPosition
		}
		return ""
	case Latest, AtTimestamp, "":
		return ""
	case lease.ShardEnd:
		return lease.ShardEnd
	}
	if mine != "" {
		if mineSeq, mineSub, err := kclCheckpointOf(mine); err == nil && mineSeq == seq && mineSub == sub {
			return mine
		}
	}
	return seq + ":" + strconv.FormatInt(sub, 10)
}

// kclItem reads the attributes of one KCL item, collecting what is wrong.
type kclItem struct {
	item map[string]types.AttributeValue
	errs []error
}

func (r *kclItem) str(name string, required bool) string {
	switch v := r.item[name].(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case nil:
		if required {
			r.errs = append(r.errs, fmt.Errorf("attribute %s is missing", name))
		}
	default:
		r.errs = append(r.errs, fmt.Errorf("attribute %s is a %T, want a string (S)", name, v))
	}
	return ""
}

func (r *kclItem) num(name string, required bool) int64 {
	switch v := r.item[name].(type) {
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("attribute %s is %q, not a 64-bit integer", name, v.Value))
		}
		return n
	case nil:
		if required {
			r.errs = append(r.errs, fmt.Errorf("attribute %s is missing", name))
		}
	default:
		r.errs = append(r.errs, fmt.Errorf("attribute %s is a %T, want a number (N)", name, v))
	}
	return 0
}

func (r *kclItem) strings(name string) []string {
	switch v := r.item[name].(type) {
	case *types.AttributeValueMemberSS:
		return append([]string(nil), v.Value...)
	case nil:
	default:
		r.errs = append(r.errs, fmt.Errorf("attribute %s is a %T, want a string set (SS)", name, v))
	}
	return nil
}

// isKCLLease reports whether an item of a KCL table is a lease: late KCL 3.x versions keep
// other rows in it, marked by another entity type.
func isKCLLease(item map[string]types.AttributeValue) bool {
	v, ok := item[kclEntityType].(*types.AttributeValueMemberS)
	return !ok || v.Value == kclEntityTypeLease
}

// leaseOfKCL reads a lease of this store's group from a KCL item. It never panics: an item the
// KCL could not have written is an error that names the item and what is wrong.
func (s *Store) leaseOfKCL(item map[string]types.AttributeValue) (lease.Lease, error) {
	r := &kclItem{item: item}
	leaseKey := r.str(kclLeaseKey, true)
	l := lease.Lease{Group: s.cfg.Application, Stream: s.cfg.Stream, ShardID: leaseKey}
	if s.cfg.MultiStream {
		id := r.str(kclStreamName, true)
		l.ShardID = r.str(kclShardID, true)
		stream, ok := streamOfIdentifier(id)
		switch {
		case len(r.errs) > 0:
		case !ok:
			r.errs = append(r.errs, fmt.Errorf("attribute %s is %q, want account:stream:creationEpoch", kclStreamName, id))
		case leaseKey != id+":"+l.ShardID:
			r.errs = append(r.errs, fmt.Errorf("leaseKey is not %s:%s", kclStreamName, kclShardID))
		default:
			l.Stream = stream
		}
	}
	owner, mine := r.str(kclOwner, false), r.str(kclWatermillOwner, false)
	l.Owner = owner
	if checkpointOwner := r.str(kclCheckpointOwner, false); checkpointOwner != "" && checkpointOwner != mine {
		// A KCL 3.x handoff: the old owner finishes its work, leaseOwner is the next one.
		// (One away from a worker of this group, which never answers it, reads as the KCL
		// worker's: leaseOwner.)
		l.Owner, l.PendingOwner = checkpointOwner, owner
	}
	l.Counter = r.num(kclCounter, true)
	l.Generation = r.num(kclWatermillGen, false)
	seq := r.str(kclCheckpoint, true)
	switch seq {
	case TrimHorizon, Latest, AtTimestamp, lease.ShardEnd, "":
	default:
		if n, ok := new(big.Int).SetString(seq, 10); !ok || n.Sign() < 0 {
			r.errs = append(r.errs, fmt.Errorf("attribute %s is %q: neither a sentinel (TRIM_HORIZON, LATEST, AT_TIMESTAMP, SHARD_END) nor a sequence number", kclCheckpoint, seq))
		}
	}
	l.Checkpoint = checkpointOfKCL(seq, r.num(kclCheckpointSub, false), r.str(kclWatermillCheckpoint, false))
	l.Parents = r.strings(kclParents)
	if owner != "" && mine == owner {
		l.PendingOwner = r.str(kclWatermillPending, false)
	} else if owner != "" {
		// leaseOwner was written by a KCL worker: it took or created the lease, or is taking
		// it over in a 3.x handoff (this store writes watermillOwner with every owner).
		l.Foreign = true
	}
	if len(r.errs) > 0 {
		return lease.Lease{}, fmt.Errorf("KCL lease table %q: item %q is not a KCL lease: %w", s.cfg.TableName, leaseKey, errors.Join(r.errs...))
	}
	return l, nil
}
