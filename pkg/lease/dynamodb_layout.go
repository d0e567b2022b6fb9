package lease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDBLeaseBuckets is how many partitions the leases of one consumer group on one stream
// are spread over in a DynamoDBStore's table. DynamoDB serves at most 1,000 write and 3,000
// read capacity units a second per partition key; at 4,000 shards a group's renewals and
// checkpoints are about 1,600 writes a second, which one key cannot take. Over 16 keys each
// takes about a sixteenth, under half of what a partition serves. Changing it moves every
// lease to another partition: it is part of the table layout, not a tuning knob.
const DynamoDBLeaseBuckets = 16

// DynamoDBPartitionKey is the partition key of the item of the lease k in a DynamoDBStore's
// table: stream + "|" + group + "|" + the lease's bucket as two decimal digits, e.g.
// "orders|billing|07". The bucket is the FNV-1a (32-bit) hash of the shard id modulo
// DynamoDBLeaseBuckets, so that every worker, and a capacity plan, puts a shard in the same
// partition without asking the table.
func DynamoDBPartitionKey(k Key) string {
	return bucketPartitionKey(k.Group, k.Stream, leaseBucket(k.ShardID))
}

// bucketPartitionKey is the partition key of one bucket of a group's leases.
func bucketPartitionKey(group, stream string, bucket int) string {
	return partitionKey(group, stream) + pkSeparator + fmt.Sprintf("%02d", bucket)
}

// bucketSuffixLen is how many bytes the bucket adds to stream|group: "|" and two digits.
const bucketSuffixLen = len(pkSeparator) + 2

// leaseBucket is the bucket of a shard; see DynamoDBPartitionKey.
func leaseBucket(shardID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(shardID)) // a hash.Hash never fails to write
	return int(h.Sum32() % DynamoDBLeaseBuckets)
}

// DynamoDBMemberPartitionKey is the partition key of the member records (heartbeats) of a
// group on a stream: "#" + stream + "|" + group. All of a group's member records share it:
// there is one per worker, written once per lease sync, far from a partition's limits.
func DynamoDBMemberPartitionKey(group, stream string) string {
	return memberPartitionKey(group, stream)
}

// DynamoDBItemSize is the size in bytes of the item a DynamoDBStore keeps for l, as DynamoDB
// counts it for capacity units: a write takes one write unit per started kilobyte of it, a
// strongly consistent read one read unit per started 4 KB. It is worked out from the item the
// store writes, so it follows the layout when attributes change.
func DynamoDBItemSize(l Lease) int { return itemSize(leaseToItem(l)) }

// DynamoDBMemberItemSize is the size in bytes of m's member record, as DynamoDBItemSize counts
// it for a lease.
func DynamoDBMemberItemSize(m Member) int { return itemSize(memberToItem(m)) }

// itemSize follows DynamoDB's rules for item sizes: the UTF-8 length of every attribute name
// plus the size of its value.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is the size of one attribute value: strings and binaries their length, a number
// about one byte per two significant digits plus one, a boolean or null one byte, a list or map
// three bytes plus one per element plus the elements (and a map's element names), a set the
// sum of its elements.
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value) // Go strings are the UTF-8 bytes DynamoDB counts
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for name, e := range v.Value {
			n += 1 + len(name) + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, e := range v.Value {
			n += numberSize(e)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	default:
		return 0
	}
}

// numberSize is DynamoDB's approximate size of a number: (significant digits + 1) / 2 + 1
// bytes. Leading and trailing zeros are not significant (DynamoDB keeps a mantissa and an
// exponent); zero counts as one digit.
func numberSize(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimLeft(s, "+-")
	s = strings.ReplaceAll(s, ".", "")
	s = strings.TrimRight(strings.TrimLeft(s, "0"), "0")
	digits := max(1, utf8.RuneCountInString(s))
	return (digits+1)/2 + 1
}

// ErrOldLeaseLayout is the error of a DynamoDBStore call on a group whose leases are still in
// the single-partition layout of earlier versions (partition key stream|group). The error that
// wraps it names the table, stream, group and a shard, and says what to do: stop every
// instance of the group and run MigrateDynamoDBLayout, or delete those items.
var ErrOldLeaseLayout = errors.New("the lease table holds leases in the single-partition layout of earlier watermill-kinesis versions")

// The layout marker: an item in a group's old-layout partition that says the leases are in
// buckets. It has a shard id and the layout, and none of a lease's other attributes, so that
// an earlier version, which reads every item of that partition as a lease, fails to list it
// and names it: "lease list of group ... shard "#layout: ...": ... holds a malformed item:
// attribute "group" is missing ...". Its shard id starts with '#', which no Kinesis shard id
// does, and sorts before them all.
const (
	layoutMarkerShardID = "#layout: leases moved to 16 partitions (stream|group|NN); upgrade this worker"
	attrLayout          = "layout"
	layoutName          = "buckets-16"
)

// layoutCheckLimit is the page size of the read of the old partition: it holds the marker, or
// the leases of a group not migrated yet (one of which is enough to know), or nothing.
const layoutCheckLimit = 10

// layoutState is what a store has found of a (group, stream)'s old-layout partition.
type layoutState uint8

const (
	layoutUnknown  layoutState = iota
	layoutListable             // it held no lease when last read
	layoutMarked               // it held no lease and the marker is there
)

// layoutCache remembers the layoutState of each (group, stream), keyed by stream|group. A state
// only rises: a store does not look again at a partition it found clean and marked.
type layoutCache struct {
	mu sync.Mutex
	m  map[string]layoutState
}

func (c *layoutCache) get(pk string) layoutState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[pk]
}

func (c *layoutCache) raise(pk string, st layoutState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]layoutState{}
	}
	if st > c.m[pk] {
		c.m[pk] = st
	}
}

// listable makes sure key's group has no lease in the old layout before a List, reading the
// old partition once per store unless a read found a lease (then every List reads it again,
// so that a migration lets the store go on). It writes nothing: a List may run with read-only
// credentials (kinesis-leases), and the marker matters only once the store writes a lease.
func (s *DynamoDBStore) listable(ctx context.Context, op string, key Key) error {
	old := partitionKey(key.Group, key.Stream)
	if s.layouts.get(old) >= layoutListable {
		return nil
	}
	marked, err := s.readOldPartition(ctx, op, key)
	if err != nil {
		return err
	}
	st := layoutListable
	if marked {
		st = layoutMarked
	}
	s.layouts.raise(old, st)
	return nil
}

// writable makes sure, before the store's first write of key's group and stream, that the
// group has no lease in the old layout and that the marker is there, writing it if need be:
// the marker fences earlier versions out before this store creates, takes or renews anything.
// A store that wrote the marker reads the old partition again after it, so that a lease an
// earlier version wrote between the first read and the marker is found too.
func (s *DynamoDBStore) writable(ctx context.Context, op string, key Key) error {
	old := partitionKey(key.Group, key.Stream)
	if s.layouts.get(old) == layoutMarked {
		return nil
	}
	marked, err := s.readOldPartition(ctx, op, key)
	if err != nil {
		return err
	}
	if !marked {
		if err := s.putLayoutMarker(ctx, op, key); err != nil {
			return err
		}
		// An instance of an earlier version may have written a lease there between the read
		// and the marker (it checks no marker before it writes). Once the marker is there no
		// earlier version writes again, so one more read settles it.
		if _, err := s.readOldPartition(ctx, op, key); err != nil {
			return err
		}
	}
	s.layouts.raise(old, layoutMarked)
	return nil
}

// readOldPartition reads key's group's old-layout partition, stream|group, and reports
// whether the marker is there. A lease there, or any item that is neither the marker nor a
// lease of the current layout, is ErrOldLeaseLayout. (A lease of the current layout can be
// there when another group's name is this one's plus "|NN": its bucket NN has this key.)
func (s *DynamoDBStore) readOldPartition(ctx context.Context, op string, key Key) (marked bool, err error) {
	old := partitionKey(key.Group, key.Stream)
	var found error
	err = s.queryPartition(ctx, op, key, old, layoutCheckLimit, func(item map[string]types.AttributeValue) error {
		if isLayoutMarker(item) {
			marked = true
			return nil
		}
		if _, err := leaseFromItem(item); err == nil {
			return nil // another group's, in the current layout
		}
		k := key
		k.ShardID = itemShardID(item)
		found = fmt.Errorf("lease %s of %s: %w", op, key, s.oldLayoutErr(k, ""))
		return found
	})
	switch {
	case found != nil:
		return false, found
	case err != nil:
		return false, fmt.Errorf("reading the partition %q of the old lease layout: %w", old, err)
	}
	return marked, nil
}

// oldLayoutErr is ErrOldLeaseLayout for the group and stream of k, k.ShardID being one of the
// items found; more is added to the description.
func (s *DynamoDBStore) oldLayoutErr(k Key, more string) error {
	return fmt.Errorf("%w: DynamoDB table %q holds leases of group %q on stream %q in partition %q (shard %q among them)%s; "+
		"stop every instance of the group, then run lease.MigrateDynamoDBLayout(ctx, client, %q, %q, %q), "+
		"which moves them to the %d partitions this version reads and keeps their owners and checkpoints, "+
		"or delete those items to start the group again from its initial position",
		ErrOldLeaseLayout, s.table, k.Group, k.Stream, partitionKey(k.Group, k.Stream), k.ShardID, more,
		s.table, k.Group, k.Stream, DynamoDBLeaseBuckets)
}

// putLayoutMarker writes the marker into key's group's old partition, unless it is there.
func (s *DynamoDBStore) putLayoutMarker(ctx context.Context, op string, key Key) error {
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     layoutMarkerItem(key.Group, key.Stream),
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
	})
	if err != nil && !isConditionFailed(err) {
		return s.callErr(op, key, fmt.Errorf("writing the layout marker into partition %q: %w",
			partitionKey(key.Group, key.Stream), err))
	}
	return nil
}

// layoutMarkerItem is the marker of a group on a stream; see layoutMarkerShardID.
func layoutMarkerItem(group, stream string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:      &types.AttributeValueMemberS{Value: partitionKey(group, stream)},
		attrShardID: &types.AttributeValueMemberS{Value: layoutMarkerShardID},
		attrLayout:  &types.AttributeValueMemberS{Value: layoutName},
	}
}

// isLayoutMarker reports whether item is a layout marker (of any group).
func isLayoutMarker(item map[string]types.AttributeValue) bool {
	return itemShardID(item) == layoutMarkerShardID
}

// ofThisLayout reports whether a member record was written by a store of this layout.
func ofThisLayout(item map[string]types.AttributeValue) bool {
	sv, _ := item[attrLayout].(*types.AttributeValueMemberS)
	return sv != nil && sv.Value == layoutName
}
