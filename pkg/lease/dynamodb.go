package lease

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
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
)

// pkSeparator joins stream and group in the partition key. Kinesis stream names consist of
// [a-zA-Z0-9_.-], so the first separator in a key always ends the stream name.
const pkSeparator = "|"

// DynamoDBConfig configures a DynamoDBStore.
type DynamoDBConfig struct {
	// Client is the DynamoDB client, normally a *dynamodb.Client. Required.
	Client DynamoDBAPI
	// TableName is the lease table: 3 to 255 characters of a-z, A-Z, 0-9, '_', '-' and '.'.
	// Required. One table can hold the leases of many consumer groups and streams.
	TableName string
	// CreateTable makes NewDynamoDBStore create the table (on-demand capacity,
	// PAY_PER_REQUEST) when it does not exist, and wait until it is ACTIVE. Default false: a
	// missing table is an error (ErrTableNotFound), for deployments that manage tables
	// themselves.
	CreateTable bool
	// CreateTableTimeout bounds how long NewDynamoDBStore waits for the table to become ACTIVE
	// (including its creation) when it is being created. Default (zero): 2 minutes
	// (DefaultCreateTableTimeout). Must not be negative.
	CreateTableTimeout time.Duration
}

func (c *DynamoDBConfig) setDefaults() {
	if c.CreateTableTimeout == 0 {
		c.CreateTableTimeout = DefaultCreateTableTimeout
	}
}

var tableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// Validate reports every problem of the configuration at once (errors.Join). Zero values that
// have a default are valid.
func (c DynamoDBConfig) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("DynamoDBConfig.Client is nil"))
	}
	switch {
	case c.TableName == "":
		errs = append(errs, errors.New("DynamoDBConfig.TableName is empty"))
	case !tableNamePattern.MatchString(c.TableName):
		errs = append(errs, fmt.Errorf(
			"DynamoDBConfig.TableName %q is not a valid DynamoDB table name (3 to 255 characters of a-z, A-Z, 0-9, '_', '-', '.')",
			c.TableName))
	}
	if c.CreateTableTimeout < 0 {
		errs = append(errs, fmt.Errorf("DynamoDBConfig.CreateTableTimeout is negative (%v)", c.CreateTableTimeout))
	}
	return errors.Join(errs...)
}

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
	desc, err := s.prepareTable(ctx, cfg)
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

// prepareTable describes the table, creates it if it is missing and allowed to, and waits while
// it is being created. It returns the description of a usable table.
func (s *DynamoDBStore) prepareTable(ctx context.Context, cfg DynamoDBConfig) (*types.TableDescription, error) {
	desc, err := s.describe(ctx)
	if err != nil {
		return nil, err
	}
	if desc == nil {
		if !cfg.CreateTable {
			return nil, fmt.Errorf(
				"%w: DynamoDB table %q does not exist; create it (partition key %q, sort key %q, both strings) or set DynamoDBConfig.CreateTable",
				ErrTableNotFound, s.table, attrPK, attrShardID)
		}
		waitCtx, cancel := context.WithTimeout(ctx, cfg.CreateTableTimeout)
		defer cancel()
		if err := s.create(waitCtx); err != nil {
			return nil, err
		}
		return s.waitUsable(waitCtx, cfg.CreateTableTimeout)
	}
	if desc.TableStatus == types.TableStatusCreating {
		// Someone else is creating it (another instance starting at the same time).
		waitCtx, cancel := context.WithTimeout(ctx, cfg.CreateTableTimeout)
		defer cancel()
		return s.waitUsable(waitCtx, cfg.CreateTableTimeout)
	}
	if !usable(desc.TableStatus) {
		return nil, fmt.Errorf("DynamoDB lease table %q is %s, not ACTIVE", s.table, desc.TableStatus)
	}
	return desc, nil
}

// describe returns the table's description, or nil if the table does not exist.
func (s *DynamoDBStore) describe(ctx context.Context) (*types.TableDescription, error) {
	out, err := s.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("describing DynamoDB lease table %q: %w", s.table, err)
	case out == nil || out.Table == nil:
		return nil, fmt.Errorf("describing DynamoDB lease table %q: the answer has no table description", s.table)
	}
	return out.Table, nil
}

// create creates the table with on-demand capacity. A table created meanwhile by someone else
// (ResourceInUseException) is fine: its key schema is checked like any existing table's.
func (s *DynamoDBStore) create(ctx context.Context) error {
	_, err := s.client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(s.table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrShardID), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrShardID), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("creating DynamoDB lease table %q: %w", s.table, err)
	}
	return nil
}

// Polling bounds of waitUsable.
const (
	tableWaitFirst = 20 * time.Millisecond
	tableWaitMax   = 2 * time.Second
)

// waitUsable polls DescribeTable, backing off, until the table is ACTIVE (or UPDATING, which is
// usable too) or ctx ends. A table that is not found yet is waited for, as DescribeTable may
// lag behind CreateTable.
func (s *DynamoDBStore) waitUsable(ctx context.Context, timeout time.Duration) (*types.TableDescription, error) {
	delay := tableWaitFirst
	status := "not found"
	for {
		desc, err := s.describe(ctx)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		if err == nil && desc != nil {
			status = string(desc.TableStatus)
			switch {
			case usable(desc.TableStatus):
				return desc, nil
			case desc.TableStatus != types.TableStatusCreating:
				return nil, fmt.Errorf("DynamoDB lease table %q is %s, not ACTIVE", s.table, desc.TableStatus)
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("DynamoDB lease table %q is not ACTIVE (last status: %s) within DynamoDBConfig.CreateTableTimeout %v or before the context ended: %w",
				s.table, status, timeout, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, tableWaitMax)
	}
}

func usable(st types.TableStatus) bool {
	return st == types.TableStatusActive || st == types.TableStatusUpdating
}

// checkKeySchema fails unless the table's key is pk (HASH, string) and shard_id (RANGE, string),
// which is what every item the store writes and every query it runs assume.
func checkKeySchema(table string, desc *types.TableDescription) error {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, d := range desc.AttributeDefinitions {
		attrTypes[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	var parts []string
	for _, k := range desc.KeySchema {
		name := aws.ToString(k.AttributeName)
		parts = append(parts, fmt.Sprintf("%s (%s, %s)", name, k.KeyType, attrTypes[name]))
	}
	want := []string{attrPK + " (HASH, S)", attrShardID + " (RANGE, S)"}
	if strings.Join(parts, ", ") == strings.Join(want, ", ") {
		return nil
	}
	got := strings.Join(parts, ", ")
	if got == "" {
		got = "none"
	}
	return fmt.Errorf("DynamoDB table %q has key schema %s, want %s: it was not made for leases; use another DynamoDBConfig.TableName",
		table, got, strings.Join(want, ", "))
}

// validateDynamoKey is validateKey plus what this table's keys need: the stream name must not
// contain the separator of the partition key, or two (stream, group) pairs could share one, nor
// start with the '#' of the member partitions.
func validateDynamoKey(op string, key Key, checkShard bool) error {
	if err := validateKey(op, key, checkShard); err != nil {
		return err
	}
	if strings.Contains(key.Stream, pkSeparator) {
		return fmt.Errorf("lease %s of %s: %w: the stream name contains %q, which is not valid in a Kinesis stream name",
			op, key, errInvalidKey, pkSeparator)
	}
	if strings.HasPrefix(key.Stream, memberPKPrefix) {
		// "#x|g" is the member partition of stream x: a lease of stream "#x" would land in it.
		return fmt.Errorf("lease %s of %s: %w: the stream name starts with %q, which is not valid in a Kinesis stream name",
			op, key, errInvalidKey, memberPKPrefix)
	}
	return nil
}

// before runs the checks every operation shares, as MemoryStore.before does: the caller's input,
// then whether the caller still wants the answer (a cancelled call is never sent).
func (s *DynamoDBStore) before(ctx context.Context, op string, key Key, checkShard bool) error {
	if err := validateDynamoKey(op, key, checkShard); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lease %s of %s: %w", op, key, err)
	}
	return nil
}

// callErr wraps an error of a DynamoDB call, naming the operation, the lease and the table.
func (s *DynamoDBStore) callErr(op string, key Key, err error) error {
	return fmt.Errorf("lease %s of %s in DynamoDB table %q: %w", op, key, s.table, err)
}

// malformedErr reports an item that is not a lease this store could have written.
func (s *DynamoDBStore) malformedErr(op string, key Key, err error) error {
	return fmt.Errorf("lease %s of %s: DynamoDB table %q holds a malformed item: %w", op, key, s.table, err)
}

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

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
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

// itemShardID is the item's sort key, or "" if it has none, for error messages.
func itemShardID(item map[string]types.AttributeValue) string {
	sv, _ := item[attrShardID].(*types.AttributeValueMemberS)
	if sv == nil {
		return ""
	}
	return sv.Value
}

// Take implements Store: one UpdateItem conditioned on the observed owner, generation and
// counter. When the condition fails, a strongly consistent GetItem tells ErrLeaseNotFound from
// ErrLeaseChanged.
func (s *DynamoDBStore) Take(ctx context.Context, observed Lease, owner string) (Lease, error) {
	key := observed.Key()
	if err := s.before(ctx, OpTake, key, true); err != nil {
		return Lease{}, err
	}
	if owner == "" {
		// As in MemoryStore: a take to nobody would be a release by another name.
		return Lease{}, fmt.Errorf("lease %s of %s: the new owner is empty", OpTake, key)
	}
	names := map[string]string{
		"#pk": attrPK, "#owner": attrOwner, "#gen": attrGeneration, "#ctr": attrCounter,
		"#pend": attrPendingOwner,
	}
	values := map[string]types.AttributeValue{
		":g":   numberValue(observed.Generation),
		":c":   numberValue(observed.Counter),
		":new": &types.AttributeValueMemberS{Value: owner},
		":one": numberValue(1),
	}
	cond := "attribute_exists(#pk) AND #gen = :g AND #ctr = :c AND "
	if observed.Owner == "" {
		cond += "attribute_not_exists(#owner)"
	} else {
		cond += "#owner = :o"
		values[":o"] = &types.AttributeValueMemberS{Value: observed.Owner}
	}
	l, failed, err := s.update(ctx, OpTake, key,
		"SET #owner = :new, #gen = #gen + :one, #ctr = #ctr + :one REMOVE #pend", cond, names, values)
	if err != nil || !failed {
		return l, err
	}
	return Lease{}, &ConditionError{Op: OpTake, Key: key, Err: s.notFoundOrChanged(ctx, key)}
}

// notFoundOrChanged reads the lease back after a failed take or handoff request:
// ErrLeaseNotFound if it is gone, ErrLeaseChanged otherwise. If the read fails, the write still
// did not apply; the answer is then ErrLeaseChanged (a lease that is gone has changed too, and
// the caller lists again either way) with the read's error in the message.
func (s *DynamoDBStore) notFoundOrChanged(ctx context.Context, key Key) error {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyItem(key),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#pk"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w (reading it back from DynamoDB table %q to tell whether it still exists failed: %v)",
			ErrLeaseChanged, s.table, err)
	case out == nil || len(out.Item) == 0:
		return ErrLeaseNotFound
	default:
		return ErrLeaseChanged
	}
}

// ownerCondition is the condition of the owner's own writes: it still owns the lease, in the
// same generation. It implies that the lease exists.
const ownerCondition = "#owner = :me AND #gen = :g"

// ownerUpdate runs an owner-side write (Renew, Checkpoint, Release) conditioned on held's owner
// and generation. Any failed condition is ErrLeaseLost: whether the lease is gone, free or owned
// by someone else, the owner's reaction is the same, so no read is spent telling them apart.
// (Handoff has a condition of its own beyond ownership and tells its failures apart.)
func (s *DynamoDBStore) ownerUpdate(ctx context.Context, op string, held Lease, set string,
	names map[string]string, values map[string]types.AttributeValue,
) (Lease, error) {
	key := held.Key()
	if held.Owner == "" {
		// A free lease is held by nobody (MemoryStore's holds); there is nothing to ask.
		return Lease{}, &ConditionError{Op: op, Key: key, Err: ErrLeaseLost}
	}
	names["#owner"] = attrOwner
	names["#gen"] = attrGeneration
	values[":me"] = &types.AttributeValueMemberS{Value: held.Owner}
	values[":g"] = numberValue(held.Generation)
	l, failed, err := s.update(ctx, op, key, set, ownerCondition, names, values)
	if err != nil || !failed {
		return l, err
	}
	return Lease{}, &ConditionError{Op: op, Key: key, Err: ErrLeaseLost}
}

// Renew implements Store: counter + 1, conditioned on owner and generation.
func (s *DynamoDBStore) Renew(ctx context.Context, held Lease) (Lease, error) {
	if err := s.before(ctx, OpRenew, held.Key(), true); err != nil {
		return Lease{}, err
	}
	return s.ownerUpdate(ctx, OpRenew, held, "SET #ctr = #ctr + :one",
		map[string]string{"#ctr": attrCounter},
		map[string]types.AttributeValue{":one": numberValue(1)})
}

// Checkpoint implements Store: checkpoint set and counter + 1, conditioned on owner and
// generation.
func (s *DynamoDBStore) Checkpoint(ctx context.Context, held Lease, checkpoint string) (Lease, error) {
	key := held.Key()
	if err := s.before(ctx, OpCheckpoint, key, true); err != nil {
		return Lease{}, err
	}
	if checkpoint == "" {
		// As in MemoryStore: "" would throw the group's progress on the shard away.
		return Lease{}, fmt.Errorf("lease %s of %s: the checkpoint is empty", OpCheckpoint, key)
	}
	return s.ownerUpdate(ctx, OpCheckpoint, held, "SET #cp = :cp, #ctr = #ctr + :one",
		map[string]string{"#cp": attrCheckpoint, "#ctr": attrCounter},
		map[string]types.AttributeValue{
			":cp":  &types.AttributeValueMemberS{Value: checkpoint},
			":one": numberValue(1),
		})
}

// Release implements Store: owner and pending owner removed, generation and counter + 1,
// conditioned on owner and generation.
func (s *DynamoDBStore) Release(ctx context.Context, held Lease) (Lease, error) {
	if err := s.before(ctx, OpRelease, held.Key(), true); err != nil {
		return Lease{}, err
	}
	return s.ownerUpdate(ctx, OpRelease, held,
		"SET #gen = #gen + :one, #ctr = #ctr + :one REMOVE #owner, #pend",
		map[string]string{"#ctr": attrCounter, "#pend": attrPendingOwner},
		map[string]types.AttributeValue{":one": numberValue(1)})
}

// queryPartition reads every item of one partition with strongly consistent Query pages of at
// most limit items (no limit if it is not positive) and passes each to each, which may stop the
// read with an error.
func (s *DynamoDBStore) queryPartition(ctx context.Context, op string, key Key, pk string, limit int32,
	each func(map[string]types.AttributeValue) error,
) error {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		ConsistentRead:           aws.Bool(true),
		KeyConditionExpression:   aws.String("#pk = :pk"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: pk},
		},
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	for {
		page, err := s.client.Query(ctx, in)
		if err != nil {
			return s.callErr(op, key, err)
		}
		if page == nil {
			return s.callErr(op, key, errors.New("Query returned no page"))
		}
		for _, item := range page.Items {
			if err := each(item); err != nil {
				return err
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// update runs one conditional UpdateItem on key's item and returns the lease as written. failed
// reports that the condition did not hold (nothing was written); err is any other failure.
func (s *DynamoDBStore) update(ctx context.Context, op string, key Key, set, cond string,
	names map[string]string, values map[string]types.AttributeValue,
) (l Lease, failed bool, err error) {
	if err := s.writable(ctx, op, key); err != nil {
		return Lease{}, false, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyItem(key),
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	switch {
	case isConditionFailed(err):
		return Lease{}, true, nil
	case err != nil:
		return Lease{}, false, s.callErr(op, key, err)
	}
	if out == nil {
		return Lease{}, false, s.callErr(op, key, errors.New("UpdateItem returned no answer"))
	}
	l, err = leaseFromItem(out.Attributes)
	if err == nil && l.Key() != key {
		err = fmt.Errorf("the written item is the lease of %s", l.Key())
	}
	if err != nil {
		return Lease{}, false, s.malformedErr(op, key, err)
	}
	return l, false, nil
}

func numberValue(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// leaseToItem is the item of l; see DynamoDBStore for the layout. Empty optional fields are left
// out rather than stored as empty values.
func leaseToItem(l Lease) map[string]types.AttributeValue {
	item := keyItem(l.Key())
	item[attrGroup] = &types.AttributeValueMemberS{Value: l.Group}
	item[attrStream] = &types.AttributeValueMemberS{Value: l.Stream}
	item[attrGeneration] = numberValue(l.Generation)
	item[attrCounter] = numberValue(l.Counter)
	if l.Owner != "" {
		item[attrOwner] = &types.AttributeValueMemberS{Value: l.Owner}
	}
	if l.Checkpoint != "" {
		item[attrCheckpoint] = &types.AttributeValueMemberS{Value: l.Checkpoint}
	}
	if len(l.Parents) > 0 {
		parents := make([]types.AttributeValue, len(l.Parents))
		for i, p := range l.Parents {
			parents[i] = &types.AttributeValueMemberS{Value: p}
		}
		item[attrParents] = &types.AttributeValueMemberL{Value: parents}
	}
	if l.PendingOwner != "" {
		item[attrPendingOwner] = &types.AttributeValueMemberS{Value: l.PendingOwner}
	}
	return item
}

// leaseFromItem reads a lease from an item. It never panics: an item that is not a lease as
// leaseToItem writes it (an attribute missing, of the wrong type, a number that is not an
// int64, a partition key that is not DynamoDBPartitionKey of its group, stream and shard) is an
// error that says what is wrong.
func leaseFromItem(item map[string]types.AttributeValue) (Lease, error) {
	return parseLeaseItem(item, DynamoDBPartitionKey)
}

// oldLeaseFromItem reads a lease item of the old layout: as leaseFromItem, but its partition key
// must be stream|group. It is how earlier versions read every item of their partition, so what
// it refuses (the layout marker, say) an earlier version refuses too.
func oldLeaseFromItem(item map[string]types.AttributeValue) (Lease, error) {
	return parseLeaseItem(item, func(k Key) string { return partitionKey(k.Group, k.Stream) })
}

// parseLeaseItem reads a lease from an item whose partition key must be wantPK of its key.
func parseLeaseItem(item map[string]types.AttributeValue, wantPK func(Key) string) (Lease, error) {
	if len(item) == 0 {
		return Lease{}, errors.New("the item is empty")
	}
	var (
		l    Lease
		errs []error
	)
	str := func(name string, required bool) string {
		v, ok := item[name]
		if !ok {
			if required {
				errs = append(errs, fmt.Errorf("attribute %q is missing", name))
			}
			return ""
		}
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok || sv == nil {
			errs = append(errs, fmt.Errorf("attribute %q is a %s, want a string (S)", name, attrType(v)))
			return ""
		}
		if required && sv.Value == "" {
			errs = append(errs, fmt.Errorf("attribute %q is empty", name))
		}
		return sv.Value
	}
	num := func(name string) int64 {
		v, ok := item[name]
		if !ok {
			errs = append(errs, fmt.Errorf("attribute %q is missing", name))
			return 0
		}
		nv, ok := v.(*types.AttributeValueMemberN)
		if !ok || nv == nil {
			errs = append(errs, fmt.Errorf("attribute %q is a %s, want a number (N)", name, attrType(v)))
			return 0
		}
		n, err := strconv.ParseInt(nv.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q = %q is not a whole number: %w", name, nv.Value, err))
		}
		return n
	}
	pk := str(attrPK, true)
	l.ShardID = str(attrShardID, true)
	l.Group = str(attrGroup, true)
	l.Stream = str(attrStream, true)
	l.Owner = str(attrOwner, false)
	l.Generation = num(attrGeneration)
	l.Counter = num(attrCounter)
	l.Checkpoint = str(attrCheckpoint, false)
	l.PendingOwner = str(attrPendingOwner, false)
	if v, ok := item[attrParents]; ok {
		lv, ok := v.(*types.AttributeValueMemberL)
		if !ok || lv == nil {
			errs = append(errs, fmt.Errorf("attribute %q is a %s, want a list (L) of strings", attrParents, attrType(v)))
		} else if len(lv.Value) > 0 {
			l.Parents = make([]string, 0, len(lv.Value))
			for i, e := range lv.Value {
				sv, ok := e.(*types.AttributeValueMemberS)
				if !ok || sv == nil {
					errs = append(errs, fmt.Errorf("attribute %q element %d is a %s, want a string (S)", attrParents, i, attrType(e)))
					continue
				}
				l.Parents = append(l.Parents, sv.Value)
			}
		}
	}
	if pk != "" && l.Group != "" && l.Stream != "" {
		if want := wantPK(l.Key()); pk != want {
			errs = append(errs, fmt.Errorf("attribute %q = %q does not match stream %q, group %q and shard %q (want %q)",
				attrPK, pk, l.Stream, l.Group, l.ShardID, want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Lease{}, err
	}
	return l, nil
}

// attrType names the DynamoDB type of v for error messages.
func attrType(v types.AttributeValue) string {
	if v == nil {
		return "nil value"
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return "nil value"
	}
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "string (S)"
	case *types.AttributeValueMemberN:
		return "number (N)"
	case *types.AttributeValueMemberB:
		return "binary (B)"
	case *types.AttributeValueMemberBOOL:
		return "boolean (BOOL)"
	case *types.AttributeValueMemberNULL:
		return "null (NULL)"
	case *types.AttributeValueMemberL:
		return "list (L)"
	case *types.AttributeValueMemberM:
		return "map (M)"
	case *types.AttributeValueMemberSS:
		return "string set (SS)"
	case *types.AttributeValueMemberNS:
		return "number set (NS)"
	case *types.AttributeValueMemberBS:
		return "binary set (BS)"
	default:
		return fmt.Sprintf("%T", v)
	}
}
