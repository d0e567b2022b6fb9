package lease

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
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

// Attribute names of the lease table; see DynamoDBStore for what each holds.
const (
	attrPK           = "pk"
	attrShardID      = "shard_id"
	attrGroup        = "group"
	attrStream       = "stream"
	attrOwner        = "owner"
	attrGeneration   = "generation"
	attrCounter      = "counter"
	attrCheckpoint   = "checkpoint"
	attrParents      = "parents"
	attrPendingOwner = "pending_owner"
	attrNotices      = "notices" // member records only: Member.Notices
)

// pkSeparator joins stream and group in the partition key. Kinesis stream names consist of
// [a-zA-Z0-9_.-], so the first separator in a key always ends the stream name.
const pkSeparator = "|"

// DynamoDBStore is a Store and Membership kept in a DynamoDB table. It applies the same
// conditions as MemoryStore, each write as one PutItem, UpdateItem or DeleteItem, and passes the
// same conformance suite (package leasetest). Reads (List, Members, and the read that tells the
// cause of a failed Take, RequestHandoff or Handoff) are strongly consistent. It is safe for
// concurrent use and keeps no state besides its configuration.
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
//	                     ends the stream, and the last three bytes are always the bucket: no
//	                     two groups or streams share a partition)
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
// # Member records
//
// Each worker of a group heartbeats a member record (see Member) in a partition of the group's
// own, "#" + stream + "|" + group (DynamoDBMemberPartitionKey), which no List reads (a stream
// name never starts with '#'):
//
//	attribute  type  contents
//	pk         S     partition key: "#" + stream name + "|" + consumer group, e.g.
//	                 "#orders|billing"
//	shard_id   S     sort key: the worker
//	counter    N     incremented by every Heartbeat, the first of which creates the record
//	notices    N     incremented by every NotifyMember; absent while 0
//
// Nothing else: every member reads every record of its group at each lease sync (Members, one
// strongly consistent Query, paged), so a record's size (DynamoDBMemberItemSize) is what the
// group's reads cost; Members takes the group and stream from its arguments. RemoveMember
// deletes a record.
type DynamoDBStore struct {
	client DynamoDBAPI
	table  string
	// queryLimit, when positive, caps the items per Query page (tests use it to force paging).
	queryLimit int32
}

var (
	_ Store      = (*DynamoDBStore)(nil)
	_ Membership = (*DynamoDBStore)(nil)
)

// NewDynamoDBStore validates cfg, checks that the lease table exists with the expected key
// schema (creating it first and waiting until it is ACTIVE if cfg.CreateTable is set) and
// returns a store on it. A missing table with CreateTable off is a *TableNotFoundError, which
// errors.Is matches to ErrTableNotFound.
func NewDynamoDBStore(ctx context.Context, cfg DynamoDBConfig) (*DynamoDBStore, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid DynamoDB lease store config: %w", err)
	}
	s := &DynamoDBStore{client: cfg.Client, table: cfg.TableName}
	desc, err := dynamo.PrepareTable(ctx, dynamoDBTableSpec(cfg))
	if err != nil {
		return nil, err
	}
	if err := checkKeySchema(cfg.TableName, desc); err != nil {
		return nil, err
	}
	return s, nil
}

// TableNotFoundError is the error of NewDynamoDBStore for a lease table that does not exist
// while DynamoDBConfig.CreateTable is off; errors.Is(err, ErrTableNotFound) matches it. It
// reads:
//
//	lease table not found: DynamoDB table "leases" does not exist; create it (partition key "pk", sort key "shard_id", both strings) or set DynamoDBConfig.CreateTable
//
// A caller that fills DynamoDBConfig from settings of its own names its own setting instead
// of DynamoDBConfig.CreateTable, which its user never sees: it finds the error with errors.As,
// and returns a copy with CreateSetting changed (pkg/kinesis names
// SubscriberConfig.Group.CreateLeaseTable).
type TableNotFoundError struct {
	// Table is the name of the table that does not exist.
	Table string
	// KeySchema is the key a table made by hand needs, in words.
	KeySchema string
	// CreateSetting is the setting that lets the store create the table.
	CreateSetting string
}

func (e *TableNotFoundError) Error() string {
	return fmt.Sprintf("%v: DynamoDB table %q does not exist; create it (%s) or set %s",
		ErrTableNotFound, e.Table, e.KeySchema, e.CreateSetting)
}

// Unwrap returns ErrTableNotFound, so that errors.Is(err, ErrTableNotFound) holds.
func (e *TableNotFoundError) Unwrap() error { return ErrTableNotFound }

// partitionKey is stream + "|" + group: the start of the partition key of each of a group's
// lease buckets, and of its member partition after the "#".
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
	stored := l.Clone()
	stored.Generation = 0
	stored.Counter = 1
	stored.Foreign = false // this table holds no foreign worker's lease
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     leaseToItem(stored),
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
	})
	switch {
	case dynamo.IsConditionFailed(err):
		return Lease{}, &ConditionError{Op: OpCreate, Key: key, Err: ErrLeaseExists}
	case err != nil:
		return Lease{}, s.callErr(OpCreate, key, err)
	}
	return stored.Clone(), nil
}

// List implements Store: strongly consistent Queries of the group's DynamoDBLeaseBuckets
// partitions, each read page by page, merged by shard id.
func (s *DynamoDBStore) List(ctx context.Context, group, stream string) ([]Lease, error) {
	key := Key{Group: group, Stream: stream}
	if err := s.before(ctx, OpList, key, false); err != nil {
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

// listBucket reads one bucket's partition. It holds leases of key's group and stream alone:
// leaseFromItem checks that an item's partition key is the one of its group, stream and shard,
// and no other group's or stream's is this one (see DynamoDBStore).
func (s *DynamoDBStore) listBucket(ctx context.Context, key Key, bucket int) ([]Lease, error) {
	pk := bucketPartitionKey(key.Group, key.Stream, bucket)
	var out []Lease
	err := s.queryPartition(ctx, OpList, key, pk, func(item map[string]types.AttributeValue) error {
		l, err := leaseFromItem(item)
		if err != nil {
			k := key
			k.ShardID = itemShardID(item)
			return s.malformedErr(OpList, k, err)
		}
		out = append(out, l)
		return nil
	})
	return out, err
}

// DeleteFinished implements Store: one DeleteItem conditioned on SHARD_END and the observed
// counter.
func (s *DynamoDBStore) DeleteFinished(ctx context.Context, observed Lease) error {
	key := observed.Key()
	if err := s.before(ctx, OpDeleteFinished, key, true); err != nil {
		return err
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyItem(key),
		ConditionExpression:      aws.String("attribute_not_exists(#pk) OR (#cp = :end AND #c = :c)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#cp": attrCheckpoint, "#c": attrCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":end": &types.AttributeValueMemberS{Value: ShardEnd}, ":c": dynamo.Number(observed.Counter),
		},
	})
	switch {
	case dynamo.IsConditionFailed(err):
		return &ConditionError{Op: OpDeleteFinished, Key: key, Err: ErrLeaseChanged}
	case err != nil:
		return s.callErr(OpDeleteFinished, key, err)
	}
	return nil
}
