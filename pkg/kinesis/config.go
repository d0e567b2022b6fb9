package kinesis

import (
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"go.opentelemetry.io/otel/metric"

	"github.com/google/uuid"
)

const (
	// TrimHorizon starts at the oldest record the stream keeps, so nothing published before
	// the first subscriber is lost.
	TrimHorizon PositionType = iota
	// Latest starts after the newest record: only what is published from now on is read.
	Latest
	// AtTimestamp starts at the first record that arrived at or after Position.Timestamp.
	AtTimestamp
)

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
	// PollInterval is the wait after a read that reached the tip of the shard (it returned
	// what there was, records or none), an eighth more or less at random. Kinesis allows 5 reads
	// per second per shard, shared by every group reading the stream; the default leaves room
	// for a second group, and a reader whose reads are throttled polls more slowly for a
	// while (up to 2.5 × PollInterval), so that more groups share the reads. Default: 400 ms.
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
	// each lease store call of the coordinator. A call that outlasts it, or
	// that the HTTP client times out, is retried as a transient failure; a shard's reads
	// that keep timing out get up to 8 times as long, so that a slow server's answers get
	// through. A reader's own renewals and checkpoints are bounded by Group.LeaseRenewInterval
	// as well, so that a hung store cannot hold it past the point where it must stop.
	// Default: 10 s.
	RequestTimeout time.Duration

	// MeterProvider receives the subscriber's OpenTelemetry metrics: per stream and shard,
	// messages delivered, bytes, acks, nacks, redeliveries, millis behind latest, read
	// throttles, iterator renewals, checkpoint writes and failures, and leases held,
	// acquired, handed over, released and lost (README, "Metrics"). Default: none (a no-op
	// provider, which costs next to nothing).
	MeterProvider metric.MeterProvider
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
}

func setDefault[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

// defaultConcurrentInFlight is MaxInFlight's default with OrderByKey or Unordered: enough
// handlers at once per shard for a 1 ms handler to move 40,000 messages a second on four
// shards, few enough that a shard's window stays small.
const defaultConcurrentInFlight = 32
