package awscall

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// sdkCallOptions goes with every Kinesis call of the driver: no SDK retries (the driver
// retries by itself, and two layers multiplied the attempts and stretched the waits past the
// caps the driver's docs state), and errors of a call that never left the process (no region,
// no credentials) explained (SetupError).
func sdkCallOptions(o *awskinesis.Options) {
	o.Retryer = aws.NopRetryer{}
	o.APIOptions = append(o.APIOptions, ExplainSetup)
}

// withSDKCallOptions appends sdkCallOptions to a call's options, after the caller's, so that
// it wins; it never writes into the caller's slice.
func withSDKCallOptions(optFns []func(*awskinesis.Options)) []func(*awskinesis.Options) {
	return append(optFns[:len(optFns):len(optFns)], sdkCallOptions)
}

// Kinesis is pkg/kinesis's KinesisAPI (the same methods), and FanOut its FanOutAPI.
type Kinesis interface {
	PutRecord(ctx context.Context, in *awskinesis.PutRecordInput, optFns ...func(*awskinesis.Options)) (*awskinesis.PutRecordOutput, error)
	PutRecords(ctx context.Context, in *awskinesis.PutRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error)
	ListShards(ctx context.Context, in *awskinesis.ListShardsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error)
	DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error)
	CreateStream(ctx context.Context, in *awskinesis.CreateStreamInput, optFns ...func(*awskinesis.Options)) (*awskinesis.CreateStreamOutput, error)
}

// FanOut is pkg/kinesis's FanOutAPI.
type FanOut interface {
	RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error)
	DeregisterStreamConsumer(ctx context.Context, in *awskinesis.DeregisterStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error)
	SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, optFns ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error)
}

// sdkCalls is the client the driver calls: the one the config names, each call with
// sdkCallOptions. Clients that are not the SDK's (memlog, a test double) ignore the options.
type sdkCalls struct{ api Kinesis }

// sdkFanOutCalls is sdkCalls for a client that also reads with enhanced fan-out.
type sdkFanOutCalls struct {
	sdkCalls
	fan FanOut
}

var (
	_ Kinesis = sdkCalls{}
	_ FanOut  = sdkFanOutCalls{}
)

// OneRetryLayer wraps api so that each of its calls goes out with the SDK's retries off and
// setup errors explained; the result has FanOut's methods when api has them.
func OneRetryLayer(api Kinesis) Kinesis {
	switch c := api.(type) {
	case sdkCalls, sdkFanOutCalls:
		return api
	case FanOut:
		return sdkFanOutCalls{sdkCalls{api}, c}
	}
	return sdkCalls{api}
}

// Unwrap returns the client OneRetryLayer wrapped (api itself if it wrapped nothing).
func Unwrap(api Kinesis) Kinesis {
	switch c := api.(type) {
	case sdkCalls:
		return c.api
	case sdkFanOutCalls:
		return c.api
	}
	return api
}

func (c sdkCalls) PutRecord(ctx context.Context, in *awskinesis.PutRecordInput, optFns ...func(*awskinesis.Options)) (*awskinesis.PutRecordOutput, error) {
	return c.api.PutRecord(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkCalls) PutRecords(ctx context.Context, in *awskinesis.PutRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	return c.api.PutRecords(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkCalls) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	return c.api.ListShards(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkCalls) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	return c.api.GetShardIterator(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkCalls) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	return c.api.GetRecords(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkCalls) DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	return c.api.DescribeStreamSummary(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkCalls) CreateStream(ctx context.Context, in *awskinesis.CreateStreamInput, optFns ...func(*awskinesis.Options)) (*awskinesis.CreateStreamOutput, error) {
	return c.api.CreateStream(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkFanOutCalls) RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error) {
	return c.fan.RegisterStreamConsumer(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkFanOutCalls) DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error) {
	return c.fan.DescribeStreamConsumer(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkFanOutCalls) DeregisterStreamConsumer(ctx context.Context, in *awskinesis.DeregisterStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error) {
	return c.fan.DeregisterStreamConsumer(ctx, in, withSDKCallOptions(optFns)...)
}

func (c sdkFanOutCalls) SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, optFns ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error) {
	return c.fan.SubscribeToShard(ctx, in, withSDKCallOptions(optFns)...)
}
