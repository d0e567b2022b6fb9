package shard

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// testShard is the shard the package's tests read.
const testShard = "shardId-000000000000"

// testReader is a reader of testShard for cfg, as New makes it for a subscription of one shard
// that ends with ctx, sending on out (nil: nowhere), under held (nil: no group) taken at
// takenAt, and counting nothing.
func testReader(ctx context.Context, cfg *Config, out chan<- *message.Message, held *lease.Lease, takenAt time.Time) *Reader {
	return New(cfg, &Links{Out: out, Closing: ctx, Readers: func() int { return 1 }}, nopMetrics{}, testShard, Start{}, held, takenAt)
}

// answerClient answers every GetRecords with the same output.
type answerClient struct{ out *awskinesis.GetRecordsOutput }

func (c answerClient) GetRecords(context.Context, *awskinesis.GetRecordsInput, ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	return c.out, nil
}

func (answerClient) GetShardIterator(context.Context, *awskinesis.GetShardIteratorInput, ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	return &awskinesis.GetShardIteratorOutput{ShardIterator: aws.String("first")}, nil
}

// nopMetrics counts nothing.
type nopMetrics struct{}

func (nopMetrics) Count(Count, int64)   {}
func (nopMetrics) LeaseAcquired(string) {}
