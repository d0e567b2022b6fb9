package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDBAPI is the part of the DynamoDB client the DynamoDBStore uses. *dynamodb.Client
// implements it; tests wrap it to inject faults.
type DynamoDBAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// ErrTableNotFound is returned by NewDynamoDBStore when the lease table does not exist and
// DynamoDBConfig.CreateTable is off.
var ErrTableNotFound = errors.New("lease table not found")

// DefaultCreateTableTimeout is how long NewDynamoDBStore waits for a table it creates to become
// ACTIVE when DynamoDBConfig.CreateTableTimeout is zero.
const DefaultCreateTableTimeout = 2 * time.Minute

// Attribute names of the lease table; see DynamoDBStore for what each holds.
const (
	attrPK           = "pk"
	attrShardID      = "shard_id"
	attrGroup        = "group"
	attrStream       = "stream"
	attrOwner        = "owner"
	attrGeneration   = "generation"
	attrCounter      = "counter"
	attrChanges      = "changes" // member records only: see Member.Changes
	attrCheckpoint   = "checkpoint"
	attrParents      = "parents"
	attrPendingOwner = "pending_owner"
	attrIncarnation  = "incarnation" // leases: Lease.Incarnation (absent: 0); members: Member.Incarnation
	attrFenced       = "fenced"      // member records only: present (true) once fenced
	attrRoster       = "roster"      // member records only: see Member.Roster
	attrSeen         = "seen"        // member records only: see Member.Seen
	attrAsked        = "asked"       // member records only: see Member.Asked
)

// pkSeparator joins stream and group in the partition key. Kinesis stream names consist of
// [a-zA-Z0-9_.-], so the first separator in a key always ends the stream name.
const pkSeparator = "|"

// DynamoDBStore is a Store kept in a DynamoDB table. It applies the same conditions as
// MemoryStore, each write as one conditional PutItem or UpdateItem, and passes the same
// conformance suite (package leasetest). Reads (List, and the read that tells the cause of a
// failed Take, RequestHandoff or Handoff) are strongly consistent. It is safe for concurrent
// use; besides its configuration it only remembers, per (group, stream), what it found of the
// old layout (see below), so that it reads the old partition once, not at every call.
//
// # Table layout
//
// One item per lease. The leases of one consumer group on one stream are spread over
// DynamoDBLeaseBuckets (16) partitions, by a hash of the shard id (DynamoDBPartitionKey), so
// that no partition key takes more than about a sixteenth of the group's renewals and
// checkpoints: at 4,000 shards, about 100 writes a second each, where DynamoDB serves 1,000 per
// partition key. List reads the 16 partitions (strongly consistent Queries, paged) and merges
// them by shard id.
//
//	attribute      type  contents
//	pk             S     partition key: stream name + "|" + consumer group + "|" + bucket, the
//	                     bucket being two digits 00-15 (FNV-1a 32 of the shard id, mod 16), e.g.
//	                     "orders|billing|07" (stream names cannot contain '|', so the first '|'
//	                     ends the stream, and the last three bytes are always the bucket)
//	shard_id       S     sort key: the shard id, e.g. "shardId-000000000003"
//	group          S     the consumer group
//	stream         S     the stream name
//	owner          S     the worker that holds the lease; absent while the lease is free
//	generation     N     changes whenever the owner changes (take, release, handoff); fences
//	                     old owners
//	counter        N     incremented by every write; an owner that renews keeps it moving
//	checkpoint     S     the last sequence number the group finished, or SHARD_END; absent
//	                     before the group finished any record of the shard
//	parents        L     the parent shard ids (strings) after a split or merge; absent when none
//	pending_owner  S     a worker that asked for the lease to be handed over; absent when none
//
// A table can be created by hand (any capacity mode) with partition key "pk" (string) and sort
// key "shard_id" (string); NewDynamoDBStore checks that key schema. Lease items are never
// deleted by the store, but for DeleteFinished. DynamoDBItemSize gives an item's size, for
// capacity planning.
//
// # The old layout, its marker, and migration
//
// Earlier versions kept all of a group's leases in one partition, "stream|group". A store's
// first List of a (group, stream) reads that partition (one small strongly consistent Query),
// and so does its first write (of a lease, or a Heartbeat):
//
//   - if it holds leases, the group was run by an earlier version and has not been migrated:
//     List and every write fail with ErrOldLeaseLayout, whose message says what to do (stop
//     every instance of the group and run MigrateDynamoDBLayout, or delete those items).
//     Nothing is written. The store reads the partition again at its next call, so a migration
//     lets it go on without a restart.
//   - if it is empty, the first write puts a marker item into it (one conditional PutItem):
//     shard_id "#layout: leases moved to 16 partitions (stream|group|NN); upgrade this worker",
//     layout "buckets-16", and none of a lease's other attributes. An earlier version that
//     starts on the group later fails to list its partition, with that shard id in its error,
//     rather than creating leases of its own beside these (every shard would be read twice).
//     List does not write the marker: it may run with read-only credentials (kinesis-leases),
//     and the marker is in place before the store writes anything else.
//
// The marker is never deleted, and List never returns it. Member records written by this
// version carry layout "buckets-16" too, and Members leaves out those without it, so that an
// earlier version's worker, which heartbeats but cannot take a lease, is not counted for the
// shares (the others would leave its share unread).
//
// Group names may contain '|', so the old partition of a group "g|07" is partition 07 of group
// "g". The store tells the items apart by their attributes: g's leases there are not old leases
// of "g|07", and "g|07"'s marker is not one of g's leases. Old leases of "g|07" there would share
// keys with g's, so g's List fails with ErrOldLeaseLayout, naming "g|07", until it is migrated.
//
// # Member records
//
// Each worker of a group heartbeats a member record (see Member) in a partition of its own,
// "#" + stream + "|" + group (DynamoDBMemberPartitionKey), with the worker as the sort key, the
// group and stream, a counter and the layout. A stream name never starts with '#', so List
// never reads them. RemoveMember deletes one.
type DynamoDBStore struct {
	client DynamoDBAPI
	table  string
	// queryLimit, when positive, caps the items per Query page (tests use it to force paging).
	queryLimit int32
	// layouts records what the store found of the old layout per (group, stream); see
	// listable and writable.
	layouts layoutCache
}

var _ Store = (*DynamoDBStore)(nil)

// NewDynamoDBStore validates cfg, checks that the lease table exists with the expected key
// schema (creating it first and waiting until it is ACTIVE if cfg.CreateTable is set) and
// returns a store on it. A missing table with CreateTable off is ErrTableNotFound.
func NewDynamoDBStore(ctx context.Context, cfg DynamoDBConfig) (*DynamoDBStore, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid DynamoDB lease store config: %w", err)
	}
	s := &DynamoDBStore{client: cfg.Client, table: cfg.TableName}
	desc, err := prepareTable(ctx, dynamoDBTableSpec(cfg))
	if err != nil {
		return nil, err
	}
	if err := checkKeySchema(cfg.TableName, desc); err != nil {
		return nil, err
	}
	return s, nil
}

// TableName is the lease table's name.
func (s *DynamoDBStore) TableName() string { return s.table }

// Polling bounds of waitUsable.
const (
	tableWaitFirst = 20 * time.Millisecond
	tableWaitMax   = 2 * time.Second
)

// partitionKey is stream + "|" + group: the partition of all of a group's leases in the old
// layout, and the start of every partition key of the current one.
func partitionKey(group, stream string) string { return stream + pkSeparator + group }

// keyItem is the key of the lease's item, in its bucket's partition.
func keyItem(key Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:      &types.AttributeValueMemberS{Value: DynamoDBPartitionKey(key)},
		attrShardID: &types.AttributeValueMemberS{Value: key.ShardID},
	}
}

// Create implements Store: one PutItem conditioned on attribute_not_exists(pk).
func (s *DynamoDBStore) Create(ctx context.Context, l Lease) (Lease, error) {
	key := l.Key()
	if err := s.before(ctx, OpCreate, key, true); err != nil {
		return Lease{}, err
	}
	if err := s.writable(ctx, OpCreate, key); err != nil {
		return Lease{}, err
	}
	stored := l.Clone()
	stored.Generation = 0
	stored.Counter = 1
	stored.Incarnation = 0 // no heartbeat vouches for a lease nobody has written as its owner
	stored.Foreign = false // this table holds no foreign worker's lease
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     leaseToItem(stored),
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
	})
	switch {
	case isConditionFailed(err):
		return Lease{}, &ConditionError{Op: OpCreate, Key: key, Err: ErrLeaseExists}
	case err != nil:
		return Lease{}, s.callErr(OpCreate, key, err)
	}
	return stored.Clone(), nil
}

// List implements Store: strongly consistent Queries of the group's DynamoDBLeaseBuckets
// partitions, each read page by page, merged by shard id. The first
// List of a (group, stream) reads the old layout's partition first (see DynamoDBStore).
func (s *DynamoDBStore) List(ctx context.Context, group, stream string) ([]Lease, error) {
	key := Key{Group: group, Stream: stream}
	if err := s.before(ctx, OpList, key, false); err != nil {
		return nil, err
	}
	if err := s.listable(ctx, OpList, key); err != nil {
		return nil, err
	}
	out, err := s.listBuckets(ctx, key)
	if err != nil {
		return nil, err
	}
	// Each partition comes in sort key order (by UTF-8 bytes, as Go compares strings), but the
	// buckets interleave.
	sort.SliceStable(out, func(i, j int) bool { return out[i].ShardID < out[j].ShardID })
	return out, nil
}

// listBuckets reads every bucket of the group, one Query after another in the caller's
// goroutine, and returns their leases, unordered. At 4,000 shards that is 16 round trips of
// about 60 kB each, well within a lease sync; Queries in goroutines of their own would save
// some of that time but start goroutines that outlive nothing yet show up, mid-call, in the
// goroutine leak checks of programs and tests that run several subscribers.
func (s *DynamoDBStore) listBuckets(ctx context.Context, key Key) ([]Lease, error) {
	out := []Lease{}
	for b := range DynamoDBLeaseBuckets {
		part, err := s.listBucket(ctx, key, b)
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// listBucket reads one bucket's partition. Besides the group's leases it may hold, when a group
// name contains '|', items of another group whose old-layout partition key is this bucket's:
// that group's layout marker, skipped, or its leases in the old layout, which stop the List
// (see listedItem).
func (s *DynamoDBStore) listBucket(ctx context.Context, key Key, bucket int) ([]Lease, error) {
	pk := bucketPartitionKey(key.Group, key.Stream, bucket)
	var out []Lease
	err := s.queryPartition(ctx, OpList, key, pk, s.queryLimit, func(item map[string]types.AttributeValue) error {
		l, keep, err := s.listedItem(key, item)
		if keep {
			out = append(out, l)
		}
		return err
	})
	return out, err
}

// listedItem sorts one item of a bucket of key's group: a lease of the group (kept), another
// group's layout marker (skipped), another group's lease in the old layout (ErrOldLeaseLayout,
// naming that group: its leases and this group's would share items), or a malformed item.
func (s *DynamoDBStore) listedItem(key Key, item map[string]types.AttributeValue) (Lease, bool, error) {
	if isLayoutMarker(item) {
		return Lease{}, false, nil
	}
	l, err := leaseFromItem(item)
	if err == nil && (l.Group != key.Group || l.Stream != key.Stream) {
		err = fmt.Errorf("it names group %q stream %q, but is in the partition of group %q stream %q",
			l.Group, l.Stream, key.Group, key.Stream)
	}
	if err == nil {
		return l, true, nil
	}
	k := key
	k.ShardID = itemShardID(item)
	if old, oerr := oldLeaseFromItem(item); oerr == nil {
		return Lease{}, false, fmt.Errorf("lease %s of %s: %w", OpList, k, s.oldLayoutErr(old.Key(),
			fmt.Sprintf(", which is also the key of a partition of group %q", key.Group)))
	}
	return Lease{}, false, s.malformedErr(OpList, k, err)
}
