package kinesis

import (
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
)

// PartitionKeyFunc chooses a message's partition key. Messages with the same key go to the same
// shard and are read in the order they were published.
type PartitionKeyFunc func(stream string, msg *message.Message) (string, error)

// PartitionKeyFromUUID uses the message UUID, which spreads messages evenly over the shards.
// Watermill allows an empty UUID; such a message gets a random key, which spreads it the same
// way (Kinesis refuses an empty key).
func PartitionKeyFromUUID(_ string, msg *message.Message) (string, error) {
	if msg.UUID == "" {
		return uuid.NewString(), nil
	}
	return msg.UUID, nil
}

// PartitionKeyFromMetadata reads the key from a metadata field, so that messages about one
// entity (an order, a user) stay in order. A message without the field is an error rather than
// a silent fallback that would break that order.
func PartitionKeyFromMetadata(field string) PartitionKeyFunc {
	return func(_ string, msg *message.Message) (string, error) {
		key, ok := msg.Metadata[field]
		if !ok {
			return "", fmt.Errorf("%w: metadata field %q, the partition key, is missing", ErrInvalidMessage, field)
		}
		return key, nil
	}
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Client is the Kinesis client: *kinesis.Client of aws-sdk-go-v2, or a *memlog.Log.
	// Required unless AWSConfig is set.
	Client KinesisAPI
	// AWSConfig, when Client is nil, builds the Kinesis client. Load it with the SDK's
	// config.LoadDefaultConfig to follow its credential chain and region settings.
	AWSConfig *aws.Config
	// KinesisOptions adjust the client built from AWSConfig, for example BaseEndpoint to reach
	// a local Kinesis.
	KinesisOptions []func(*awskinesis.Options)

	// Marshaler encodes messages. Default: EnvelopeMarshaler.
	Marshaler Marshaler

	// PartitionKey chooses each message's partition key. Default: PartitionKeyFromUUID.
	PartitionKey PartitionKeyFunc

	// AggregateKPL packs messages into KPL aggregated records (up to 1 MiB each), which this
	// Subscriber, the KCL and other KPL-aware consumers unpack into the original messages.
	// Kinesis counts records against a shard's 1,000 records/s and bills each in 25 KiB
	// units, so small messages packed go out in far fewer records: 100-byte messages one per
	// record reach a shard's record limit at a tenth of its 1 MiB/s.
	//
	// The messages of one call that share a partition key are packed together, in order; the
	// single messages of calls waiting at the same moment are packed with others bound for
	// the same shard, as the KPL packs, from the stream's shard map (ListShards, reloaded
	// after a reshard; without the kinesis:ListShards permission only messages with the same
	// key share a record). During a reshard a record packed by the old map may carry messages
	// whose keys now belong to a sibling shard: this Subscriber delivers them all; the KCL
	// drops those outside the shard's hash key range, as it does for the KPL's own records.
	// Default: false.
	AggregateKPL bool

	// MaxInFlightRequests bounds the PutRecords requests out at once per stream. Concurrent
	// Publish calls share requests: what queues while they are out goes in the next one, so
	// fewer in flight means fuller requests (fewer calls, and records when AggregateKPL packs
	// them) and more means less waiting. Default: 8.
	MaxInFlightRequests int

	// Linger is how long a record may wait for others to share its request when a request
	// could go out at once. 0, the default, adds no latency: records wait only while
	// MaxInFlightRequests requests are out. A few milliseconds pack fuller requests at a low
	// rate of calls. The wait ends early once 500 records (a request's count) are queued.
	Linger time.Duration

	// CreateStream creates a stream that does not exist on first publish. Default: false
	// (publishing to a missing stream is an error).
	CreateStream bool
	// CreateStreamShards is the shard count of streams created by CreateStream. Default: 1.
	CreateStreamShards int32

	// MaxRetries is how many times entries that Kinesis rejected for throttling or an
	// internal failure are sent again before Publish gives up on them. Default: 10.
	MaxRetries int
	// RetryBackoff is the first wait before a retry; it doubles, with jitter, up to
	// MaxRetryBackoff. Defaults: 100 ms and 5 s.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// RequestTimeout bounds each PutRecords call. A call that outlasts it (or that the HTTP
	// client times out) is retried like a throttled one, as long as the message's context
	// is not done. Default: 10 s.
	RequestTimeout time.Duration

	// MeterProvider receives the publisher's OpenTelemetry metrics, per stream: messages
	// written, PutRecords calls, records retried, messages that failed, and the duration of
	// each Publish call (README, "Metrics"). Default: none (a no-op provider).
	MeterProvider metric.MeterProvider
}

func (c *PublisherConfig) setDefaults() {
	if c.Client == nil && c.AWSConfig != nil {
		c.Client = awskinesis.NewFromConfig(*c.AWSConfig, c.KinesisOptions...)
	}
	c.setValueDefaults()
}

// setValueDefaults fills in every default but the client, so that Validate judges a config as
// NewPublisher will use it.
func (c *PublisherConfig) setValueDefaults() {
	if c.Marshaler == nil {
		c.Marshaler = EnvelopeMarshaler{}
	}
	if c.PartitionKey == nil {
		c.PartitionKey = PartitionKeyFromUUID
	}
	setDefault(&c.CreateStreamShards, 1)
	setDefault(&c.MaxInFlightRequests, 8)
	setDefault(&c.MaxRetries, 10)
	setDefault(&c.RetryBackoff, 100*time.Millisecond)
	setDefault(&c.MaxRetryBackoff, 5*time.Second)
	setDefault(&c.RequestTimeout, defaultRequestTimeout)
}

// defaultRequestTimeout bounds one call to Kinesis or the lease store unless the config says
// otherwise. The SDK's default HTTP client has no timeout: a connection that hangs would stall
// its shard, or the coordinator, for good.
const defaultRequestTimeout = 10 * time.Second

// Validate reports every problem of the config at once. Fields left at zero are judged at
// their defaults, as NewPublisher uses them.
func (c PublisherConfig) Validate() error {
	c.setValueDefaults()
	var errs []error
	if c.Client == nil && c.AWSConfig == nil {
		errs = append(errs, errors.New("kinesis: PublisherConfig.Client and AWSConfig are both nil; pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log as Client, or an aws.Config (config.LoadDefaultConfig) as AWSConfig"))
	} else if c.Client != nil && isNil(c.Client) {
		errs = append(errs, fmt.Errorf("kinesis: PublisherConfig.Client is a nil %T; pass an aws-sdk-go-v2 client (kinesis.NewFromConfig) or memlog.New(...), or leave Client nil and set AWSConfig", c.Client))
	} else if err := checkEndpoint("PublisherConfig", c.Client, c.AWSConfig, c.KinesisOptions); err != nil {
		errs = append(errs, err)
	}
	if c.CreateStreamShards < 0 {
		errs = append(errs, fmt.Errorf("kinesis: PublisherConfig.CreateStreamShards is %d; it must be at least 1", c.CreateStreamShards))
	}
	if c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("kinesis: PublisherConfig.MaxRetries is %d; it must not be negative", c.MaxRetries))
	}
	if c.MaxInFlightRequests < 0 {
		errs = append(errs, fmt.Errorf("kinesis: PublisherConfig.MaxInFlightRequests is %d; it must be at least 1", c.MaxInFlightRequests))
	}
	if c.Linger < 0 {
		errs = append(errs, fmt.Errorf("kinesis: PublisherConfig.Linger is %s; it must not be negative", c.Linger))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("kinesis: PublisherConfig.RequestTimeout is %s; it must be positive", c.RequestTimeout))
	}
	switch {
	case c.RetryBackoff < 0:
		errs = append(errs, fmt.Errorf("kinesis: PublisherConfig.RetryBackoff is %s; it must be positive", c.RetryBackoff))
	case c.MaxRetryBackoff < 0:
		errs = append(errs, fmt.Errorf("kinesis: PublisherConfig.MaxRetryBackoff is %s; it must be positive", c.MaxRetryBackoff))
	case c.MaxRetryBackoff < c.RetryBackoff:
		errs = append(errs, fmt.Errorf("kinesis: PublisherConfig.RetryBackoff (%s) must be at most MaxRetryBackoff (%s)", c.RetryBackoff, c.MaxRetryBackoff))
	}
	return errors.Join(errs...)
}
