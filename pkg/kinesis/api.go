// Package kinesis is a Watermill Publisher and Subscriber for Amazon Kinesis Data Streams.
//
// A topic is a stream name. The Publisher writes messages with PutRecords; the Subscriber reads
// every shard of the stream, either alone (no consumer group: every subscription reads every
// record) or as one instance of a consumer group that shares the shards with the group's other
// instances through leases and resumes from checkpoints.
//
// Everything talks to Kinesis through KinesisAPI, which the AWS SDK client and the in-memory
// Kinesis in package memlog both satisfy, so the same code paths run in tests and in production.
package kinesis

import (
	"context"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// KinesisAPI is the part of the AWS SDK's Kinesis client that this package calls.
// *awskinesis.Client satisfies it, and so does *memlog.Log.
type KinesisAPI interface {
	PutRecord(ctx context.Context, in *awskinesis.PutRecordInput, optFns ...func(*awskinesis.Options)) (*awskinesis.PutRecordOutput, error)
	PutRecords(ctx context.Context, in *awskinesis.PutRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error)
	ListShards(ctx context.Context, in *awskinesis.ListShardsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error)
	DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error)
	CreateStream(ctx context.Context, in *awskinesis.CreateStreamInput, optFns ...func(*awskinesis.Options)) (*awskinesis.CreateStreamOutput, error)
}

// FanOutAPI is what reading with enhanced fan-out (SubscriberConfig.FanOut) calls besides
// KinesisAPI: the stream consumer's registration and SubscribeToShard. It is a separate
// interface so that a KinesisAPI written for polling (a test double, a wrapper) keeps working;
// SubscriberConfig.Validate refuses FanOut with a Client that lacks it. *awskinesis.Client
// satisfies it, and so does *memlog.Log.
type FanOutAPI interface {
	RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error)
	DeregisterStreamConsumer(ctx context.Context, in *awskinesis.DeregisterStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error)
	SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, optFns ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error)
}

var (
	_ KinesisAPI = (*awskinesis.Client)(nil)
	_ FanOutAPI  = (*awskinesis.Client)(nil)
)
