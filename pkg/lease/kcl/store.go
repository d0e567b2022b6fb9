package kcl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/internal/dynamo"
)

// DynamoDBAPI is the part of the DynamoDB client a Store uses: a lease.DynamoDBStore's calls
// (for the member table) and Scan, since a KCL lease table has a partition key only (leaseKey)
// and is listed whole. *dynamodb.Client implements it.
type DynamoDBAPI interface {
	lease.DynamoDBAPI
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// The KCL's sentinel checkpoints: where a shard with no checkpoint of a record starts, or that
// it was read to its end (lease.ShardEnd, the same string).
const (
	TrimHorizon = "TRIM_HORIZON"
	Latest      = "LATEST"
	AtTimestamp = "AT_TIMESTAMP"
)

// ErrNoMemberTable is the error of a member call on a Store opened with Config.LeasesOnly.
var ErrNoMemberTable = errors.New("KCL lease store opened with LeasesOnly: it has no member table")

// Config configures a Store.
type Config struct {
	// Client is the DynamoDB client, normally a *dynamodb.Client. Required.
	Client DynamoDBAPI
	// TableName is the KCL application's lease table: by default the KCL names it after the
	// application. Required.
	TableName string
	// Application is the consumer group whose leases the table holds: every call must name it
	// as the group (SubscriberConfig.Group.Name). Default: TableName, as the KCL's default
	// table name is its application name.
	Application string
	// Stream is the stream a single-stream KCL application reads (its leaseKey is the shard
	// id alone). Required unless MultiStream is set; must be empty then.
	Stream string
	// MultiStream says the table is a multi-stream KCL application's: leaseKey is
	// "account:stream:creationEpoch:shardId" and the items carry streamName and shardId.
	// Default false.
	MultiStream bool
	// StreamIdentifiers maps a stream name to its KCL stream identifier
	// ("account:stream:creationEpoch") for multi-stream tables, for a stream of which the table
	// holds no lease yet: the store learns the identifiers of the others from their items.
	// Default: none.
	StreamIdentifiers map[string]string
	// InitialPosition is the KCL application's initialPositionInStream: TrimHorizon, Latest or
	// AtTimestamp. Set the Subscriber's InitialPosition to the same: a shard the KCL never
	// checkpointed starts there. NewStore fails if the table holds a lease of a shard with no
	// parent that the KCL created at another one (unless LeasesOnly), and the store writes it
	// in the leases it creates for shards with no parent, so that a KCL worker handed the table
	// starts them where the Subscriber would. Children of a split or merge always get
	// TrimHorizon, as the KCL gives them. Default TrimHorizon.
	InitialPosition string
	// MemberTableName is the table of the group's member records (lease.Membership), kept
	// apart from the lease table, in the layout of a lease.DynamoDBStore: a KCL worker takes
	// every item of its lease table for a lease. Default: TableName + "-WatermillMembers".
	MemberTableName string
	// CreateMemberTable makes NewStore create the member table (on-demand capacity) when
	// it does not exist. Default false: a missing member table is lease.ErrTableNotFound.
	CreateMemberTable bool
	// CreateLeaseTable makes NewStore create a missing lease table as the KCL creates it
	// (partition key leaseKey, on-demand capacity): for a group that starts on the KCL's
	// layout, not one that moves in. Default false: a missing lease table is
	// lease.ErrTableNotFound, so that a misspelt TableName is an error rather than a new, empty
	// table whose shards start from the initial position.
	CreateLeaseTable bool
	// LeasesOnly opens the lease table alone, for tools that only read the leases
	// (kinesis-leases): the member table is not opened, and every member call fails with
	// ErrNoMemberTable. A Subscriber needs the member table. Default false.
	LeasesOnly bool
	// CreateTableTimeout bounds the wait for a table being created. Default (zero): 2 minutes.
	// Must not be negative.
	CreateTableTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Application == "" {
		c.Application = c.TableName
	}
	if c.InitialPosition == "" {
		c.InitialPosition = TrimHorizon
	}
	if c.MemberTableName == "" && c.TableName != "" {
		c.MemberTableName = c.TableName + "-WatermillMembers"
	}
	if c.CreateTableTimeout == 0 {
		c.CreateTableTimeout = dynamo.DefaultCreateTableTimeout
	}
}

// Validate reports every problem of the configuration at once (errors.Join). Zero values that
// have a default are valid.
func (c Config) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("kcl.Config.Client is nil"))
	}
	for field, name := range map[string]string{"TableName": c.TableName, "MemberTableName": c.MemberTableName} {
		if name != "" && !dynamo.TableNamePattern.MatchString(name) {
			errs = append(errs, fmt.Errorf(
				"kcl.Config.%s %q is not a valid DynamoDB table name (3 to 255 characters of a-z, A-Z, 0-9, '_', '-', '.')", field, name))
		}
	}
	if c.TableName == "" {
		errs = append(errs, errors.New("kcl.Config.TableName is empty: name the KCL application's lease table"))
	}
	if c.TableName != "" && c.MemberTableName == c.TableName {
		errs = append(errs, fmt.Errorf("kcl.Config.MemberTableName is the lease table %q: member records there would be taken for leases by KCL workers", c.TableName))
	}
	switch {
	case c.MultiStream && c.Stream != "":
		errs = append(errs, fmt.Errorf("kcl.Config.Stream is %q with MultiStream set: a multi-stream table names its streams in its items", c.Stream))
	case !c.MultiStream && c.Stream == "":
		errs = append(errs, errors.New("kcl.Config.Stream is empty: name the stream the KCL application reads, or set MultiStream"))
	}
	for stream, id := range c.StreamIdentifiers {
		if got, ok := streamOfIdentifier(id); !ok || got != stream {
			errs = append(errs, fmt.Errorf("kcl.Config.StreamIdentifiers[%q] is %q, want \"account:%s:creationEpoch\"", stream, id, stream))
		}
	}
	switch c.InitialPosition {
	case TrimHorizon, Latest, AtTimestamp:
	default:
		errs = append(errs, fmt.Errorf("kcl.Config.InitialPosition is %q, want %s, %s or %s", c.InitialPosition, TrimHorizon, Latest, AtTimestamp))
	}
	if c.CreateTableTimeout < 0 {
		errs = append(errs, fmt.Errorf("kcl.Config.CreateTableTimeout is negative (%v)", c.CreateTableTimeout))
	}
	return errors.Join(errs...)
}

// streamOfIdentifier is the stream name of a KCL stream identifier "account:stream:epoch".
func streamOfIdentifier(id string) (string, bool) {
	parts := strings.Split(id, ":")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", false
	}
	return parts[1], true
}

// Store is a lease.Store on the lease table of a Kinesis Client Library (KCL 2.x or 3.x)
// application: a grouped Subscriber pointed at it resumes every shard where the KCL
// checkpointed, and a KCL worker started on a table it wrote resumes where the Subscriber
// stopped. See docs/kcl.md for a move from the KCL and back.
//
// # The lease items
//
// The store reads and writes the KCL's own attributes as the KCL does (leaseKey, leaseOwner,
// leaseCounter, checkpoint, checkpointSubSequenceNumber, ownerSwitchesSinceCheckpoint,
// parentShardId, childShardIds, and in multi-stream tables streamName and shardId). A
// checkpoint "seq:sub" is written as checkpoint seq and checkpointSubSequenceNumber sub, a
// plain "seq" with sub-sequence number 0, lease.ShardEnd as the KCL's SHARD_END; a KCL
// sentinel of an unread shard (TRIM_HORIZON, LATEST, AT_TIMESTAMP) reads as no checkpoint ("").
//
// What the KCL has no attribute for is kept in attributes of this store's own, which KCL
// workers ignore: watermillGeneration (lease.Lease.Generation), watermillCheckpoint (the
// checkpoint as given), and watermillOwner and watermillPendingOwner, which counts only while
// watermillOwner is the item's leaseOwner: a KCL worker that takes the lease changes leaseOwner
// alone, and a handoff request then no longer applies. Every write is one UpdateItem (a PutItem
// for Create) that sets only what it changes, so attributes this store does not know (hash key
// range, throughput, anything a later KCL adds) are kept as they are.
//
// # The KCL's rules
//
// Like the KCL, every write increments leaseCounter, and a take is conditioned on the counter
// the taker observed; leases are judged expired by an unchanged counter on the observer's
// clock. A lease held by a KCL worker (lease.Lease.Foreign: a leaseOwner that this store did
// not write) is never asked for (RequestHandoff): it is taken only once its counter stood
// still for the lease duration, and a KCL worker that still renews it keeps it. Owner writes
// are conditioned on leaseOwner, watermillGeneration and the absence of checkpointOwner (a KCL
// 3.x handoff in progress), so a worker whose lease a KCL worker took is fenced.
//
// # Member records
//
// The group's member records live in a second table (Config.MemberTableName) in a
// lease.DynamoDBStore's layout: KCL workers read every item of their lease table as a lease.
type Store struct {
	client  DynamoDBAPI
	cfg     Config
	members *lease.DynamoDBStore
	// streamIDs are the multi-stream identifiers known, by stream name: the configured ones and
	// those learned from items.
	streamIDs *identifierCache
}

var (
	_ lease.Store      = (*Store)(nil)
	_ lease.Membership = (*Store)(nil)
)

// NewStore validates cfg, checks that the KCL lease table exists with the KCL's key schema
// (partition key leaseKey, a string, and no sort key), and opens the member table (creating
// a missing one first if cfg.CreateLeaseTable or cfg.CreateMemberTable says so). A missing
// table that may not be created is lease.ErrTableNotFound.
func NewStore(ctx context.Context, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid KCL lease store config: %w", err)
	}
	desc, err := dynamo.PrepareTable(ctx, kclTableSpec(cfg))
	if err != nil {
		return nil, err
	}
	if err := checkKCLKeySchema(cfg.TableName, desc); err != nil {
		return nil, err
	}
	s := &Store{client: cfg.Client, cfg: cfg, streamIDs: newIdentifierCache(cfg.StreamIdentifiers)}
	if cfg.LeasesOnly {
		return s, nil
	}
	if err := s.checkStartPositions(ctx); err != nil {
		return nil, err
	}
	s.members, err = lease.NewDynamoDBStore(ctx, lease.DynamoDBConfig{
		Client: cfg.Client, TableName: cfg.MemberTableName, CreateTable: cfg.CreateMemberTable, CreateTableTimeout: cfg.CreateTableTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("member table of KCL lease table %q (kcl.Config.MemberTableName): %w", cfg.TableName, err)
	}
	return s, nil
}

// kclTableSpec is the spec of a KCL lease table, created as the KCL creates it.
func kclTableSpec(cfg Config) dynamo.TableSpec {
	return dynamo.TableSpec{
		Client: cfg.Client, Name: cfg.TableName, AllowCreate: cfg.CreateLeaseTable, Timeout: cfg.CreateTableTimeout,
		CreateInput: &dynamodb.CreateTableInput{
			TableName:            aws.String(cfg.TableName),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(kclLeaseKey), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(kclLeaseKey), KeyType: types.KeyTypeHash}},
		},
		Missing: func() error {
			return fmt.Errorf("%w: DynamoDB table %q does not exist; a KCL application's lease table is named after the application; "+
				"check kcl.Config.TableName and the region, or, for a new table in the KCL's layout, set kcl.Config.CreateLeaseTable", lease.ErrTableNotFound, cfg.TableName)
		},
		TimeoutSetting: "kcl.Config.CreateTableTimeout",
	}
}

// checkKCLKeySchema fails unless the table's key is leaseKey (HASH, string) alone.
func checkKCLKeySchema(table string, desc *types.TableDescription) error {
	var parts []string
	for _, k := range desc.KeySchema {
		parts = append(parts, fmt.Sprintf("%s (%s)", aws.ToString(k.AttributeName), k.KeyType))
	}
	if len(desc.KeySchema) == 1 && aws.ToString(desc.KeySchema[0].AttributeName) == kclLeaseKey {
		return nil
	}
	return fmt.Errorf("DynamoDB table %q has key schema %s, want %s (HASH) alone: it is not a KCL lease table; for the driver's own table use lease.NewDynamoDBStore",
		table, strings.Join(parts, ", "), kclLeaseKey)
}

// scope checks that key is complete (as pkg/lease's stores check it, with the same error) and
// of this table's application and, single-stream, of its stream: a KCL table holds one
// application's leases, and its single-stream keys do not say the stream.
func (s *Store) scope(op string, key lease.Key, checkShard bool) error {
	missing := ""
	switch {
	case key.Group == "":
		missing = "consumer group"
	case key.Stream == "":
		missing = "stream name"
	case checkShard && key.ShardID == "":
		missing = "shard id"
	}
	switch {
	case missing != "":
		return fmt.Errorf("lease %s of %s: incomplete lease key: the %s is empty", op, key, missing)
	case key.Group != s.cfg.Application:
		return fmt.Errorf("lease %s of %s: KCL lease table %q holds the leases of application %q: set the consumer group to %q, or kcl.Config.Application",
			op, key, s.cfg.TableName, s.cfg.Application, s.cfg.Application)
	case !s.cfg.MultiStream && key.Stream != s.cfg.Stream:
		return fmt.Errorf("lease %s of %s: KCL lease table %q is a single-stream application's, of stream %q (kcl.Config.Stream)",
			op, key, s.cfg.TableName, s.cfg.Stream)
	}
	return nil
}

// before runs the checks every lease operation shares: scope, then whether the caller still
// wants the answer.
func (s *Store) before(ctx context.Context, op string, key lease.Key, checkShard bool) error {
	if err := s.scope(op, key, checkShard); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lease %s of %s: %w", op, key, err)
	}
	return nil
}

// callErr wraps an error of a DynamoDB call, naming the operation, the lease and the table.
func (s *Store) callErr(op string, key lease.Key, err error) error {
	return fmt.Errorf("lease %s of %s in KCL lease table %q: %w", op, key, s.cfg.TableName, err)
}

// memberTable is the member table's store, or ErrNoMemberTable.
func (s *Store) memberTable() (*lease.DynamoDBStore, error) {
	if s.members == nil {
		return nil, fmt.Errorf("%w (KCL lease table %q)", ErrNoMemberTable, s.cfg.TableName)
	}
	return s.members, nil
}

// Heartbeat implements lease.Membership on the member table.
func (s *Store) Heartbeat(ctx context.Context, m lease.Member) (lease.Member, error) {
	t, err := s.memberTable()
	if err != nil {
		return lease.Member{}, err
	}
	return t.Heartbeat(ctx, m)
}

// Members implements lease.Membership on the member table.
func (s *Store) Members(ctx context.Context, group, stream string) ([]lease.Member, error) {
	t, err := s.memberTable()
	if err != nil {
		return nil, err
	}
	return t.Members(ctx, group, stream)
}

// RemoveMember implements lease.Membership on the member table.
func (s *Store) RemoveMember(ctx context.Context, observed lease.Member) error {
	t, err := s.memberTable()
	if err != nil {
		return err
	}
	return t.RemoveMember(ctx, observed)
}

// NotifyMember implements lease.Membership on the member table.
func (s *Store) NotifyMember(ctx context.Context, m lease.Member) error {
	t, err := s.memberTable()
	if err != nil {
		return err
	}
	return t.NotifyMember(ctx, m)
}

var _ lease.ForeignTable = (*Store)(nil)

// ForeignWorkers implements lease.ForeignTable: KCL workers may hold leases in a KCL lease table.
func (s *Store) ForeignWorkers() string { return "KCL workers" }
