package shard

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Config is what a reader needs of its subscription's configuration: pkg/kinesis builds it once
// per subscription from a validated SubscriberConfig with its defaults set, and no reader
// changes it.
type Config struct {
	Stream   string
	Group    string // "" without a consumer group
	WorkerID string // the subscription's member name; "" without a group

	Client KinesisClient
	// FanOut, when not nil, is the stream consumer readers subscribe through (SubscribeToShard)
	// instead of polling GetRecords.
	FanOut Consumer
	// FanOutAPI is Client as a FanOutAPI; set whenever fan-out is enabled, also when the
	// stream's consumer limit left FanOut nil.
	FanOutAPI          FanOutClient
	FanOutConsumer     string        // the consumer's name, for logs
	FanOutRegister     time.Duration // FanOutConfig.RegisterTimeout, which bounds a re-registration
	Logger             watermill.LoggerAdapter
	RequestTimeout     time.Duration
	CloseTimeout       time.Duration
	GetRecordsLimit    int32
	PollInterval       time.Duration
	MinReadInterval    time.Duration
	MaxBufferedRecords int
	MaxBufferedBytes   int64
	KeepKPLAggregates  bool
	MaxInFlight        int
	Ordering           Ordering
	NackResendSleep    time.Duration
	Unmarshaler        Unmarshaler
	// Poison is the application's PoisonHandler; PoisonRaw the default it falls back on when
	// that one fails.
	Poison    func(PoisonRecord) (*message.Message, error)
	PoisonRaw func(PoisonRecord) *message.Message

	// In a consumer group only.
	LeaseStore         lease.Store
	LeaseDuration      time.Duration
	LeaseRenewInterval time.Duration
	CheckpointInterval time.Duration
	HandoffTimeout     time.Duration
	Hooks              Hooks
}

// LogFields are the fields every line of the subscription carries.
func (c *Config) LogFields() watermill.LogFields {
	return watermill.LogFields{"stream": c.Stream, "group": c.Group, "worker": c.WorkerID}
}

// Hooks are the application's ShardHooks, each given the shard's id; nil ones are skipped.
// They run on the reader's goroutine.
type Hooks struct {
	OnAcquired, OnRevoked, OnLost func(shardID string)
}

// Links are how a reader tells its subscription what happens, all values the subscription
// made and handed down: the reader never names the layer above.
//
// Ownership: the subscription makes them before its first reader starts and closes Quit
// (once it takes no more exit reports) and Out (once every reader has finished); a reader only
// sends on Out and Exits and reads Quit and Closing.
type Links struct {
	Out   chan<- *message.Message // the subscription's output
	Exits chan<- Exit             // a reader's one exit report
	Quit  <-chan struct{}         // closed when nobody takes exit reports any more
	// Closing is the subscription's context: done on Close or the end of Subscribe's context,
	// which a reader tells apart from the coordinator stopping it alone.
	Closing context.Context
	// Readers is how many readers the subscription runs, for the memory budget's share.
	Readers func() int
}

// Ordering says which messages of one shard may be out at once; its values are
// pkg/kinesis.Ordering's, after defaults (never OrderDefault here).
type Ordering int

// The orderings, as pkg/kinesis numbers them.
const (
	OrderDefault Ordering = iota
	OrderByShard
	OrderByKey
	Unordered
)

// PositionType is pkg/kinesis.PositionType, by value.
type PositionType int

// The starting positions, as pkg/kinesis numbers them.
const (
	TrimHorizon PositionType = iota
	Latest
	AtTimestamp
	// AtSequenceNumber comes only from a checkpoint a reset wrote (lease.StartAtSequenceNumber),
	// never from the configuration.
	AtSequenceNumber
)

// Position is where a reader starts when there is no checkpoint, or where a reset put it.
type Position struct {
	Type           PositionType
	Timestamp      time.Time
	SequenceNumber string // of AtSequenceNumber
}

// Start is where a reader starts: after a sequence number (a checkpoint, possibly inside a KPL
// aggregate, or where a restarted reader left off), or at an initial position.
type Start struct {
	After   string // AFTER_SEQUENCE_NUMBER; "" means Initial
	Initial Position
}

// sequence is the sequence number the start reads from, if any: Kinesis refuses one older
// than the shard's trim horizon (fallBackFromTrimmed).
func (s Start) sequence() string {
	if s.After == "" && s.Initial.Type == AtSequenceNumber {
		return s.Initial.SequenceNumber
	}
	return s.After
}

// Unmarshaler turns a record into a message; pkg/kinesis.Unmarshaler is one.
type Unmarshaler interface {
	Unmarshal(stream, shardID string, rec *types.Record) (*message.Message, error)
}

// PoisonRecord is pkg/kinesis.PoisonRecord with this package's RecordInfo.
type PoisonRecord struct {
	Info    RecordInfo
	Data    []byte
	Err     error
	Decoded *message.Message
}

// KinesisClient is the part of the Kinesis API a polling reader calls.
type KinesisClient interface {
	GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error)
}

// FanOutClient is the part of the Kinesis API a fan-out reader calls.
type FanOutClient interface {
	SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, optFns ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error)
}

// Consumer is the stream consumer of enhanced fan-out, shared by a subscription's readers.
type Consumer interface {
	// ARN is the consumer's current ARN.
	ARN() string
	// Refresh registers the consumer again when stale is still its ARN (it was deregistered
	// under the group), once for all readers, and returns the ARN to subscribe with.
	Refresh(ctx context.Context, stale string) (string, error)
}
