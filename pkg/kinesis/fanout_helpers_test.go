package kinesis_test

// Helpers of the enhanced fan-out tests (fanout_test.go): the test clients forward the stream
// consumer calls and SubscribeToShard to memlog, so that every group and fault scenario can
// run with FanOut on.

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

var (
	_ kinesis.FanOutAPI = (*grpClient)(nil)
	_ kinesis.FanOutAPI = (*fltClient)(nil)
)

// fanOutOf is the FanOutAPI of a test client's inner client (memlog, or another wrapper).
func fanOutOf(api kinesis.KinesisAPI) kinesis.FanOutAPI { return api.(kinesis.FanOutAPI) }

func (c *grpClient) RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, opts ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error) {
	return fanOutOf(c.KinesisAPI).RegisterStreamConsumer(ctx, in, opts...)
}

func (c *grpClient) DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, opts ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error) {
	return fanOutOf(c.KinesisAPI).DescribeStreamConsumer(ctx, in, opts...)
}

func (c *grpClient) DeregisterStreamConsumer(ctx context.Context, in *awskinesis.DeregisterStreamConsumerInput, opts ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error) {
	return fanOutOf(c.KinesisAPI).DeregisterStreamConsumer(ctx, in, opts...)
}

// SubscribeToShard fails as the other reads do while the instance's client is dead.
func (c *grpClient) SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, opts ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error) {
	if c.dead.Load() {
		return nil, c.down()
	}
	return fanOutOf(c.KinesisAPI).SubscribeToShard(ctx, in, opts...)
}

func (c *fltClient) RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, opts ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error) {
	return fanOutOf(c.KinesisAPI).RegisterStreamConsumer(ctx, in, opts...)
}

func (c *fltClient) DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, opts ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error) {
	return fanOutOf(c.KinesisAPI).DescribeStreamConsumer(ctx, in, opts...)
}

func (c *fltClient) DeregisterStreamConsumer(ctx context.Context, in *awskinesis.DeregisterStreamConsumerInput, opts ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error) {
	return fanOutOf(c.KinesisAPI).DeregisterStreamConsumer(ctx, in, opts...)
}

// SubscribeToShard records the outcome of the subscription call, with its starting position.
func (c *fltClient) SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, opts ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error) {
	out, err := fanOutOf(c.KinesisAPI).SubscribeToShard(ctx, in, opts...)
	o := fltOutcome{worker: c.worker, op: "SubscribeToShard", shard: aws.ToString(in.ShardId), err: err}
	if in.StartingPosition != nil {
		o.iterType, o.after = in.StartingPosition.Type, aws.ToString(in.StartingPosition.SequenceNumber)
	}
	c.k.outcome(o)
	return out, err
}

// fanOutOn is a start tweak that reads with enhanced fan-out.
func fanOutOn(cfg *kinesis.SubscriberConfig) { cfg.FanOut.Enabled = true }
