package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// B13 measures the publish path's cost against the API itself on kinesalite: 20,000 100-byte
// messages into a 4-shard stream, by our Publisher in Publish calls of 500 (encoding each
// message, the dispatcher, the answer handed back per call) against a plain aws-sdk-go-v2 loop
// of PutRecords calls of 500 entries, encoded before the clock starts. One goroutine each,
// alternating, 3 pairs by default (-runs); the ratio is the median of the pairs'. The goal is
// at least 0.9x the loop's throughput.

const (
	b13Messages = 20000
	b13Batch    = 500
	b13Shards   = 4
)

func init() {
	register(rowSpec{"B13", "publishing 20,000 messages to kinesalite in calls of 500, 4 shards", 3 * time.Minute, runB13})
}

func runB13(ctx context.Context, e *env) (result, error) {
	if e.kinesisEndpoint == "" {
		return result{}, errNeedsEmulators
	}
	client := kinesaliteClient(e.kinesisEndpoint)
	stream := streamName("b13")
	if _, err := client.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(b13Shards)}); err != nil {
		return result{}, err
	}
	if err := awskinesis.NewStreamExistsWaiter(client).Wait(ctx, &awskinesis.DescribeStreamInput{StreamName: aws.String(stream)}, time.Minute); err != nil {
		return result{}, err
	}
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: client}, nil)
	if err != nil {
		return result{}, err
	}
	defer pub.Close()
	var ratios, ours, plain []float64
	for range e.runsOr(3) {
		msgs := newMessages(b13Messages, nil)
		t0 := time.Now()
		if err := publishAll(ctx, pub, stream, msgs, b13Batch); err != nil {
			return result{}, err
		}
		o := rate(b13Messages, time.Since(t0))
		p, err := b13Plain(ctx, client, stream)
		if err != nil {
			return result{}, err
		}
		ours, plain, ratios = append(ours, o), append(plain, p), append(ratios, o/p)
	}
	r := median(ratios)
	return result{
		lines: []line{{"B13", fmt.Sprintf("throughput publishing %s messages in calls of 500, kinesalite %d shards, median of %d pairs", thousands(b13Messages), b13Shards, len(ratios)),
			fmtRate(median(ours)), fmtRate(median(plain)) + " (plain PutRecords loop)", fmtRatio(r), ">= 0.90x", met(r >= 0.9)}},
		notes: []string{"the plain loop sends entries encoded before its clock starts (our envelope, the message UUID as key) and checks FailedRecordCount; ours encodes inside its clock."},
	}, nil
}

// b13Plain sends b13Messages entries in PutRecords calls of b13Batch, one after another, and
// returns the messages per second.
func b13Plain(ctx context.Context, client *awskinesis.Client, stream string) (float64, error) {
	entries := make([]types.PutRecordsRequestEntry, 0, b13Messages)
	for _, m := range newMessages(b13Messages, nil) {
		data, err := kinesis.EnvelopeMarshaler{}.Marshal(stream, m)
		if err != nil {
			return 0, err
		}
		entries = append(entries, types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(m.UUID)})
	}
	t0 := time.Now()
	for i := 0; i < len(entries); i += b13Batch {
		out, err := client.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries[i:min(i+b13Batch, len(entries))]})
		if err != nil {
			return 0, err
		}
		if n := aws.ToInt32(out.FailedRecordCount); n > 0 {
			return 0, fmt.Errorf("plain loop: %d entries rejected", n)
		}
	}
	return rate(b13Messages, time.Since(t0)), nil
}
