package kinesis

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"go.opentelemetry.io/otel/metric"

	"github.com/google/uuid"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// PositionType says where a consumer group with no checkpoint starts reading a shard.
type PositionType int

const (
	// TrimHorizon starts at the oldest record the stream keeps, so nothing published before
	// the first subscriber is lost.
	TrimHorizon PositionType = iota
	// Latest starts after the newest record: only what is published from now on is read.
	Latest
	// AtTimestamp starts at the first record that arrived at or after Position.Timestamp.
	AtTimestamp
)

func (p PositionType) String() string {
	switch p {
	case TrimHorizon:
		return "TRIM_HORIZON"
	case Latest:
		return "LATEST"
	case AtTimestamp:
		return "AT_TIMESTAMP"
	}
	return fmt.Sprintf("PositionType(%d)", int(p))
}

// Position is where reading starts when there is no checkpoint.
type Position struct {
	Type PositionType
	// Timestamp is used with AtTimestamp.
	Timestamp time.Time
}

// ShardEvent names a shard whose ownership changed, for the ShardHooks.
type ShardEvent struct {
	Stream  string
	ShardID string
	// ConsumerGroup is the GroupConfig.Name of the subscriber.
	ConsumerGroup string
	// WorkerID is the subscription's name in the lease table: GroupConfig.WorkerID for the
	// first subscription of a stream, WorkerID#2, #3, ... for others open beside it.
	WorkerID string
}

// Ordering is SubscriberConfig.Ordering: which messages of one shard a subscriber may have
// out (delivered and not acked) at the same time.
type Ordering int

const (
	// OrderDefault is OrderByShard when MaxInFlight is 1 (or unset) and Unordered when it is
	// more, as MaxInFlight behaved before Ordering existed.
	OrderDefault Ordering = iota
	// OrderByShard delivers a shard's messages one at a time, in sequence order: the next is
	// sent once the one before it is acked. MaxInFlight must be 1.
	OrderByShard
	// OrderByKey sends a message only when no earlier message of its shard with the same
	// partition key is still unacked: different keys of a shard are handled concurrently (up
	// to MaxInFlight at once), each key in order, also across a Nack and its redelivery. The
	// checkpoint stays the watermark below which every record is acked.
	OrderByKey
	// Unordered lets up to MaxInFlight messages of a shard out at once, whatever their keys.
	// The checkpoint is still the watermark, so nothing is skipped on a restart.
	Unordered
)

func (o Ordering) String() string {
	switch o {
	case OrderDefault:
		return "OrderDefault"
	case OrderByShard:
		return "OrderByShard"
	case OrderByKey:
		return "OrderByKey"
	case Unordered:
		return "Unordered"
	}
	return fmt.Sprintf("Ordering(%d)", int(o))
}

// NoSleep, as SubscriberConfig.NackResendSleep, resends a nacked message at once.
const NoSleep time.Duration = -1

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Client is the Kinesis client: *kinesis.Client of aws-sdk-go-v2, or a *memlog.Log.
	// Required unless AWSConfig is set.
	Client KinesisAPI
	// AWSConfig, when Client is nil, builds the Kinesis client, and the DynamoDB client of
	// Group.LeaseTable. Load it with the SDK's config.LoadDefaultConfig to follow its credential
	// chain and region settings. Unless it carries an HTTPClient, the clients built from it keep
	// up to 1,024 idle connections per host (the SDK's default is 10), so that a subscriber
	// reading many shards does not open a connection, and a TLS handshake, per read.
	AWSConfig *aws.Config
	// KinesisOptions adjust the Kinesis client built from AWSConfig, for example BaseEndpoint.
	KinesisOptions []func(*awskinesis.Options)

	// Group makes this subscriber one instance of a consumer group when Group.Name is set:
	// each shard is read by one instance at a time, through leases, and acked progress is
	// checkpointed, so a restarted group resumes where it left off. When Group.Name is
	// empty, every subscription reads every shard from InitialPosition, with no leases and no
	// checkpoints, and a lease store set without the name is refused. Default: no group.
	Group GroupConfig

	// Unmarshaler decodes records. Default: EnvelopeMarshaler.
	Unmarshaler Unmarshaler
	// PoisonHandler decides what becomes of a record the Unmarshaler rejects. Default:
	// DeliverPoisonRaw, which delivers the record's data as a raw payload with the decode
	// error in the message's context (DecodeErrorFromContext), so that Watermill's PoisonQueue
	// middleware, or the handler, can route it.
	PoisonHandler PoisonHandler
	// KeepKPLAggregates delivers records written by the Kinesis Producer Library's
	// aggregation as they are, one message per Kinesis record. Default: false, each user
	// record of an aggregate is its own message, as the KCL does.
	KeepKPLAggregates bool

	// InitialPosition is where a shard with no checkpoint is read from. Default: TrimHorizon.
	InitialPosition Position

	// FanOut reads with enhanced fan-out (SubscribeToShard) instead of polling GetRecords: the
	// group gets 2 MiB/s per shard of its own, and records are pushed as they arrive. It needs a
	// consumer group (Group.Name). Default: off, polling.
	FanOut FanOutConfig

	// GetRecordsLimit is the most records one GetRecords call returns (1..10000).
	// Default: 10000.
	GetRecordsLimit int32
	// PollInterval is the wait after a read that returned nothing. Kinesis allows 5 reads per
	// second per shard, shared by every group reading the stream; the default leaves room for
	// a second group. Default: 400 ms.
	PollInterval time.Duration
	// MinReadInterval is the shortest time between two reads of one shard while records keep
	// coming. Kinesis allows 5 reads per second per shard; the default stays within that.
	// Lower it only for memlog or emulators. Default: 200 ms.
	MinReadInterval time.Duration
	// MaxInFlight is how many messages of one shard may be delivered and not yet acked at
	// once (a nacked message waiting to go out again counts as not acked). Default: 1, a
	// shard's messages handled strictly one after another; 32 with OrderByKey or Unordered.
	// With more than 1 the checkpoint is the watermark: the newest record below which all are
	// acked. Acked messages behind an unacked one stay in the shard's share of
	// MaxBufferedRecords until it is acked, so one slow message holds its shard back only
	// once that share is used up.
	MaxInFlight int
	// Ordering says which messages of a shard may be handled at the same time: OrderByShard
	// (one at a time), OrderByKey (one at a time per partition key, different keys
	// concurrently, up to MaxInFlight), or Unordered (any MaxInFlight at once). Default:
	// OrderByShard when MaxInFlight is 1 or unset, Unordered when it is more.
	Ordering Ordering
	// MaxBufferedRecords bounds the records a subscription holds in memory across its shards:
	// fetched and not yet delivered, or delivered and not yet done. Each shard's reads are
	// sized to its share (MaxBufferedRecords / shards read), but never below what outruns
	// Kinesis's write limit of 1,000 records/s per shard at MinReadInterval (250 records at
	// the default 200 ms), nor above GetRecordsLimit. Default: 10000.
	MaxBufferedRecords int
	// MaxBufferedBytes bounds the record data a subscription holds in memory across its
	// shards, as MaxBufferedRecords does records: a shard's reads are sized by the average
	// record size of its previous read so that they fit its share, but never below what
	// outruns Kinesis's write limit of 1 MiB/s per shard at MinReadInterval. Default: 64 MiB.
	MaxBufferedBytes int64
	// NackResendSleep is the wait before a nacked message is delivered again; NoSleep
	// resends at once. Default: 100 ms.
	NackResendSleep time.Duration

	// ShardSyncInterval is how often the stream's shards are listed to find new ones.
	// Default: 30 s.
	ShardSyncInterval time.Duration

	// CreateStream makes Subscribe and SubscribeInitialize create a missing stream.
	// Default: false (a missing stream is an error).
	CreateStream bool
	// CreateStreamShards is the shard count of streams created by CreateStream. Default: 1.
	CreateStreamShards int32

	// CloseTimeout bounds how long Close waits for readers to checkpoint and release their
	// leases. Default: 30 s.
	CloseTimeout time.Duration
	// RequestTimeout bounds each Kinesis call (GetRecords, GetShardIterator, ListShards) and
	// each lease store call of the coordinator, timed on Clock. A call that outlasts it, or
	// that the HTTP client times out, is retried as a transient failure; a shard's reads
	// that keep timing out get up to 8 times as long, so that a slow server's answers get
	// through. A reader's own renewals and checkpoints are bounded by Group.LeaseRenewInterval
	// as well, so that a hung store cannot hold it past the point where it must stop.
	// Default: 10 s.
	RequestTimeout time.Duration

	// Clock times leases, renewals, checkpoints and reads. Tests inject a *clock.Fake to
	// run lease expiry and handoff deterministically. Default: clock.Real().
	Clock clock.Clock

	// MeterProvider receives the subscriber's OpenTelemetry metrics: per stream and shard,
	// messages delivered, bytes, acks, nacks, redeliveries, millis behind latest, read
	// throttles, iterator renewals, checkpoint writes and failures, and leases held,
	// acquired, handed over, released and lost (README, "Metrics"). Default: none (a no-op
	// provider, which costs next to nothing).
	MeterProvider metric.MeterProvider
}

// FanOutConfig is SubscriberConfig.FanOut: reading with enhanced fan-out.
//
// Subscribe registers the stream consumer (or finds it: the group's instances share one) and
// waits until it is ACTIVE; each shard reader then subscribes to its shard from the checkpoint
// and subscribes again before Kinesis ends the subscription (after 5 minutes). Leases,
// fencing, handoff, checkpoints and resharding are those of polling. Close never deregisters
// the consumer, since other instances read through it: DeregisterConsumer does, explicitly.
type FanOutConfig struct {
	// Enabled turns enhanced fan-out on. Default: false.
	Enabled bool
	// ConsumerName is the name of the stream consumer: 1 to 128 characters of a-z, A-Z, 0-9,
	// '_', '.' and '-', unique per stream. Default: Group.Name (which must then be such a name).
	ConsumerName string
	// RegisterTimeout bounds how long Subscribe waits for a consumer it registered, or found
	// being created or deleted, to become ACTIVE. AWS takes some seconds. Default: 2 minutes.
	RegisterTimeout time.Duration
}

// GroupConfig makes a Subscriber one instance of a consumer group (SubscriberConfig.Group).
// With Name empty there is no group: LeaseStore, LeaseTable and CreateLeaseTable are then
// refused (a store with no group is a group name lost on the way), and the other settings are
// unused.
type GroupConfig struct {
	// Name names the group. Instances that share it, on one stream, share its shards: each
	// shard is read by one of them at a time, through leases in LeaseStore, and progress is
	// checkpointed there. It must be valid UTF-8 of at most 1916 bytes, so that the stream
	// name, a "|", the group and the "|NN" that ends the partition key of a lease (one of 16
	// per group) fit DynamoDB's 2048-byte partition key. Default: empty, no group.
	Name string
	// LeaseStore keeps the group's leases and checkpoints: lease.NewDynamoDBStore for
	// instances in many processes, lease.NewMemoryStore for one. Required with Name unless
	// LeaseTable is set.
	LeaseStore lease.Store
	// LeaseTable, when LeaseStore is nil, is the DynamoDB table of the leases: NewSubscriber
	// opens it with lease.NewDynamoDBStore, with a client built from SubscriberConfig.AWSConfig
	// and DynamoDBOptions. One table can serve many groups and streams.
	LeaseTable string
	// CreateLeaseTable creates LeaseTable (on-demand capacity) when it is missing, and waits
	// until it is active. Default: false (a missing table is an error).
	CreateLeaseTable bool
	// DynamoDBOptions adjust the DynamoDB client built for LeaseTable, for example
	// BaseEndpoint.
	DynamoDBOptions []func(*dynamodb.Options)
	// WorkerID names this instance in leases and in its log lines: at most 1000 bytes of
	// UTF-8, without '#'.
	// A second subscription open on one stream beside the first is WorkerID#2, and so on.
	// Give an instance the same WorkerID across restarts (a pod name, say) and it takes its
	// own leases back at once. Default: host name plus a random UUID.
	WorkerID string

	// CheckpointInterval is how often acked progress is written to the lease store; it is
	// also written when a shard is given up. A crash redelivers at most what was acked in
	// the last interval, so a shorter interval means fewer duplicates after a crash and more
	// lease store writes (one per shard per interval while messages are acked). Default: 5 s.
	CheckpointInterval time.Duration
	// LeaseDuration is how long a lease whose counter has not moved (as timed by the
	// observer) stays with its owner before another instance may take it: how long a
	// crashed instance's shards wait for a new reader. Default: 10 s.
	LeaseDuration time.Duration
	// LeaseRenewInterval is how often an owner renews its leases, and the time limit of each
	// renewal and checkpoint call its readers make. Shorter gives an owner that cannot renew
	// more tries before it pauses its shards (at 0.8 × LeaseDuration after its last renewal),
	// at more writes; it must stay above the store's latency and below LeaseDuration.
	// Default: LeaseDuration / 3.
	LeaseRenewInterval time.Duration
	// LeaseSyncInterval is how often a worker reads the group's members (it heartbeats twice
	// per interval, but at most every 250 ms) and, when they show a change, lists the leases
	// to take free or expired ones and to even out the group; a quiet group lists them every
	// 30 intervals. Default: 2 s.
	LeaseSyncInterval time.Duration
	// HandoffTimeout is how long a worker that asked for a lease (to even out the group)
	// waits for the owner to hand it over before taking it. The owner lets the messages in
	// flight finish for up to half of it, checkpoints, and hands over. The taker waits at
	// least LeaseDuration, so that an owner that never saw the request has stopped delivering
	// by then. Default: 10 s.
	HandoffTimeout time.Duration

	// Hooks are told when this instance starts and stops reading a shard.
	Hooks ShardHooks
}

// ShardHooks are told when this instance starts, pauses or stops reading a shard of its
// consumer group (GroupConfig.Hooks), for handlers that keep state per shard. Each may be nil. They run on the shard's reader
// goroutine (several shards' hooks may run at once) and hold up that shard while they run.
type ShardHooks struct {
	// OnAcquired is called when this instance starts reading a shard, before the shard's
	// first message is delivered, and again when deliveries resume after a pause (see
	// OnLost).
	OnAcquired func(ShardEvent)
	// OnRevoked is called when this instance gives a shard up while it may still
	// checkpoint: on Close, on the Subscribe context's end, when it hands the shard to
	// another instance, and when the shard is read to its end after a reshard (every
	// message of it acked, SHARD_END written). Messages acked before it returns are
	// checkpointed.
	OnRevoked func(ShardEvent)
	// OnLost is called when this instance lost a shard and may not checkpoint it any more:
	// another instance took the lease, or renewals failed for too long. Its unacked
	// messages will be redelivered by the new owner.
	OnLost func(ShardEvent)
}

func (c *SubscriberConfig) setDefaults() {
	if c.Client == nil && c.AWSConfig != nil {
		c.Client = awskinesis.NewFromConfig(*c.AWSConfig, append(kinesisPooled(*c.AWSConfig), c.KinesisOptions...)...)
	}
	if c.Group.WorkerID == "" {
		host, _ := os.Hostname()
		c.Group.WorkerID = host + "-" + uuid.NewString()
	}
	c.setValueDefaults()
}

// setValueDefaults fills in every default but the client and the worker id, so that Validate
// judges a config as NewSubscriber will use it.
func (c *SubscriberConfig) setValueDefaults() {
	if c.PoisonHandler == nil {
		c.PoisonHandler = DeliverPoisonRaw
	}
	if c.Unmarshaler == nil {
		c.Unmarshaler = EnvelopeMarshaler{}
	}
	setDefault(&c.GetRecordsLimit, 10000)
	setDefault(&c.PollInterval, 400*time.Millisecond)
	setDefault(&c.MinReadInterval, 200*time.Millisecond)
	if c.Ordering == OrderByKey || c.Ordering == Unordered {
		setDefault(&c.MaxInFlight, defaultConcurrentInFlight)
	}
	setDefault(&c.MaxInFlight, 1)
	if c.Ordering == OrderDefault {
		c.Ordering = OrderByShard
		if c.MaxInFlight > 1 {
			c.Ordering = Unordered
		}
	}
	setDefault(&c.MaxBufferedRecords, 10000)
	setDefault(&c.MaxBufferedBytes, 64<<20)
	setDefault(&c.NackResendSleep, 100*time.Millisecond)
	setDefault(&c.Group.CheckpointInterval, 5*time.Second)
	g := &c.Group
	setDefault(&g.LeaseDuration, 10*time.Second)
	if g.LeaseDuration > 0 { // a negative one is reported; a renewal derived from it would be too
		setDefault(&g.LeaseRenewInterval, g.LeaseDuration/3)
	}
	setDefault(&c.Group.LeaseSyncInterval, 2*time.Second)
	setDefault(&c.ShardSyncInterval, 30*time.Second)
	setDefault(&c.Group.HandoffTimeout, 10*time.Second)
	setDefault(&c.CreateStreamShards, 1)
	setDefault(&c.CloseTimeout, 30*time.Second)
	setDefault(&c.RequestTimeout, defaultRequestTimeout)
	if c.FanOut.Enabled {
		setDefault(&c.FanOut.ConsumerName, c.Group.Name)
		setDefault(&c.FanOut.RegisterTimeout, 2*time.Minute)
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
}

func setDefault[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

// isNil reports a nil interface or one holding a nil pointer (a "typed nil", which would panic
// on first use).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Validate reports every problem of the config at once. Fields left at zero are judged at
// their defaults, as NewSubscriber uses them.
func (c SubscriberConfig) Validate() error {
	unnamed := c.Group.storeWithoutName()
	c.setValueDefaults()
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kinesis: SubscriberConfig."+format, args...))
	}
	if c.Client == nil && c.AWSConfig == nil {
		add("Client and AWSConfig are both nil; pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log as Client, or an aws.Config (config.LoadDefaultConfig) as AWSConfig")
	} else if c.Client != nil && isNil(c.Client) {
		add("Client is a nil %T; pass an aws-sdk-go-v2 client (kinesis.NewFromConfig) or memlog.New(...), or leave Client nil and set AWSConfig", c.Client)
	}
	g := c.Group
	if len(unnamed) > 0 {
		add("Group.Name is empty but %s set; these lease settings serve a consumer group: name the group in Group.Name, or leave them unset to read every shard without leases", joinAnd(unnamed))
	}
	// The store's own checks would only add advice about a store that is refused anyway.
	if len(unnamed) == 0 && g.LeaseStore != nil && isNil(g.LeaseStore) {
		add("Group.LeaseStore is a nil %T; pass lease.NewMemoryStore() or a store made with lease.NewDynamoDBStore, or leave it nil and set Group.LeaseTable", g.LeaseStore)
	}
	if g.Name != "" && g.LeaseStore == nil && g.LeaseTable == "" {
		add("Group.LeaseStore is nil and Group.LeaseTable is empty but Group.Name %q is set; a group keeps its leases in a store (LeaseTable for DynamoDB, lease.NewMemoryStore for one process)", g.Name)
	}
	if len(unnamed) == 0 && g.LeaseStore == nil && g.LeaseTable != "" && c.AWSConfig == nil {
		add("Group.LeaseTable %q is set but AWSConfig is nil; the DynamoDB client is built from AWSConfig (or pass Group.LeaseStore: lease.NewDynamoDBStore)", g.LeaseTable)
	}
	if err := validateGroupName(g.Name); err != nil {
		errs = append(errs, err)
	}
	switch {
	case strings.Contains(g.WorkerID, "#"):
		add("Group.WorkerID %q contains '#', which names the subscriptions of one Subscriber in the lease table (WorkerID#2, ...); choose an ID without it", g.WorkerID)
	case !utf8.ValidString(g.WorkerID):
		add("Group.WorkerID %q is not valid UTF-8; the lease table keys the worker's member record by it, and DynamoDB keys are UTF-8 strings", g.WorkerID)
	case len(g.WorkerID) > maxWorkerIDBytes:
		add("Group.WorkerID is %d bytes long (%.40q...); at most %d fit the sort key of its member record in the lease table", len(g.WorkerID), g.WorkerID, maxWorkerIDBytes)
	}
	if c.GetRecordsLimit < 1 || c.GetRecordsLimit > 10000 {
		add("GetRecordsLimit is %d; Kinesis allows 1 to 10000", c.GetRecordsLimit)
	}
	if c.MaxInFlight < 1 {
		add("MaxInFlight is %d; it must be at least 1", c.MaxInFlight)
	}
	switch {
	case c.Ordering < OrderDefault || c.Ordering > Unordered:
		add("Ordering is %s; use OrderByShard, OrderByKey or Unordered", c.Ordering)
	case c.Ordering == OrderByShard && c.MaxInFlight > 1:
		add("Ordering is OrderByShard, which has one message of a shard out at a time, but MaxInFlight is %d; set MaxInFlight to 1, or choose OrderByKey (one at a time per partition key) or Unordered", c.MaxInFlight)
	}
	if c.MaxBufferedRecords < 1 {
		add("MaxBufferedRecords is %d; it must be at least 1", c.MaxBufferedRecords)
	}
	if c.MaxBufferedBytes < 1 {
		add("MaxBufferedBytes is %d; it must be at least 1", c.MaxBufferedBytes)
	}
	if c.InitialPosition.Type < TrimHorizon || c.InitialPosition.Type > AtTimestamp {
		add("InitialPosition.Type is %s; use TrimHorizon, Latest or AtTimestamp", c.InitialPosition.Type)
	}
	if c.InitialPosition.Type == AtTimestamp && c.InitialPosition.Timestamp.IsZero() {
		add("InitialPosition is AtTimestamp but Timestamp is zero")
	}
	if c.NackResendSleep < 0 && c.NackResendSleep != NoSleep {
		add("NackResendSleep is %s; use NoSleep to resend at once", c.NackResendSleep)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"PollInterval", c.PollInterval}, {"MinReadInterval", c.MinReadInterval},
		{"ShardSyncInterval", c.ShardSyncInterval}, {"CloseTimeout", c.CloseTimeout}, {"RequestTimeout", c.RequestTimeout},
		{"Group.CheckpointInterval", g.CheckpointInterval}, {"Group.LeaseDuration", g.LeaseDuration},
		{"Group.LeaseRenewInterval", g.LeaseRenewInterval}, {"Group.LeaseSyncInterval", g.LeaseSyncInterval},
		{"Group.HandoffTimeout", g.HandoffTimeout},
	} {
		if d.value < 0 {
			add("%s is %s; it must not be negative", d.name, d.value)
		}
	}
	if g.LeaseDuration > 0 && g.LeaseRenewInterval >= g.LeaseDuration {
		add("Group.LeaseRenewInterval (%s) must be shorter than Group.LeaseDuration (%s), or the lease expires between renewals", g.LeaseRenewInterval, g.LeaseDuration)
	}
	errs = append(errs, c.validateFanOut()...)
	if c.CreateStreamShards < 0 {
		add("CreateStreamShards is %d; it must be at least 1", c.CreateStreamShards)
	}
	return errors.Join(errs...)
}

// storeWithoutName lists the lease store settings that are set while Name is empty. A store
// with no group to keep is a group name lost on the way (an unset environment variable, say),
// which would otherwise turn an instance of a group into a subscriber that reads every shard
// from InitialPosition and checkpoints nothing. DynamoDBOptions, the timings and the hooks are
// left out: a config (or a helper that sets the endpoints) shared by grouped and ungrouped
// subscribers may carry them, and without a group they are simply unused.
func (g GroupConfig) storeWithoutName() []string {
	if g.Name != "" {
		return nil
	}
	var set []string
	for _, f := range []struct {
		name  string
		isSet bool
	}{
		{"LeaseStore", g.LeaseStore != nil}, {"LeaseTable", g.LeaseTable != ""},
		{"CreateLeaseTable", g.CreateLeaseTable},
	} {
		if f.isSet {
			set = append(set, "Group."+f.name)
		}
	}
	return set
}

// joinAnd lists names for an error: "A is", "A and B are", "A, B and C are".
func joinAnd(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0] + " is"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " are"
}

// defaultConcurrentInFlight is MaxInFlight's default with OrderByKey or Unordered: enough
// handlers at once per shard for a 1 ms handler to move 40,000 messages a second on four
// shards, few enough that a shard's window stays small.
const defaultConcurrentInFlight = 32

// maxGroupNameBytes is the longest consumer group name whose leases every stream can hold: the
// DynamoDB lease table's partition key is stream + "|" + group + "|NN" for a lease ("#" + stream
// + "|" + group for the member records), DynamoDB allows 2048 bytes in a partition key, and a
// stream name takes up to 128.
const maxGroupNameBytes = 2048 - maxStreamNameLength - len("|") - lease.MemberKeyOverhead

// maxWorkerIDBytes is the longest WorkerID: it is the sort key of the worker's member record,
// which DynamoDB bounds at 1024 bytes, with room for the "#n" of a Subscriber's later
// subscriptions.
const maxWorkerIDBytes = 1000

// validateGroupName checks that a consumer group name can key the lease table: DynamoDB keys
// are UTF-8 strings of bounded size. Without it, a bad name passed NewSubscriber and every
// Subscribe then failed with an error that blamed the table.
func validateGroupName(group string) error {
	switch {
	case !utf8.ValidString(group):
		return fmt.Errorf("kinesis: SubscriberConfig.Group.Name %q is not valid UTF-8; the lease table keys leases by group name, and DynamoDB keys are UTF-8 strings", group)
	case len(group) > maxGroupNameBytes:
		return fmt.Errorf("kinesis: SubscriberConfig.Group.Name is %d bytes long (%.40q...); at most %d fit the lease table's key with any stream name", len(group), group, maxGroupNameBytes)
	}
	return nil
}
