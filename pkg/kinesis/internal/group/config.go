package group

import (
	"context"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
)

// Config is a subscription's configuration: pkg/kinesis builds it for each Subscribe from a
// validated SubscriberConfig with its defaults set, and nothing changes it after New. (The
// readers get a copy of its shard.Config, with the fan-out consumer set in it by start.)
type Config struct {
	// Config is what every reader of the subscription is given (a copy, by pointer,
	// read-only), but FanOut, which must be nil here; its Stream, Group, WorkerID, Logger
	// and lease settings are the subscription's too.
	shard.Config
	Kinesis KinesisClient
	// Kinesis, Consumers and Config.Client, Config.FanOutAPI are one client seen through the
	// calls each layer makes. Consumers registers and describes stream consumers; set with
	// FanOutEnabled, as Config.FanOutAPI is.
	Consumers         ConsumerClient
	FanOutEnabled     bool
	LeaseSyncInterval time.Duration
	ShardSyncInterval time.Duration
	InitialPosition   shard.Position
	Metrics           Metrics
}

// Metrics makes a shard's metrics; pkg/kinesis implements it with OpenTelemetry.
type Metrics interface {
	ForShard(shardID string) shard.Metrics
}

// NoMetrics counts nothing.
type NoMetrics struct{}

// ForShard returns shard.NoMetrics.
func (NoMetrics) ForShard(string) shard.Metrics { return shard.NoMetrics{} }

// KinesisClient is the part of the Kinesis API a coordinator calls.
type KinesisClient interface {
	ListShards(ctx context.Context, in *awskinesis.ListShardsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error)
	DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error)
}

// ConsumerClient is the part of the Kinesis API that finds or registers a stream consumer.
type ConsumerClient interface {
	RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error)
}
