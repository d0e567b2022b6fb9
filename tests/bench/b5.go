package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// B5 measures publish-to-handler latency at 10 messages/s on kinesalite, 1 shard: one message
// every 100 ms for 20 s (200 messages), each carrying its publish time in metadata. Ours is our
// Subscriber with PollInterval 200 ms and MinReadInterval 200 ms; the baseline is a plain
// aws-sdk-go-v2 loop on its own stream with the same pacing (the next GetRecords 200 ms after
// the start of the one before, whether it returned records or not). Both run at the same time.
// The goal is ours within 1.1x of the plain loop at p50 and at p99.

const (
	b5Messages = 200
	b5Every    = 100 * time.Millisecond
	b5Pacing   = 200 * time.Millisecond
	b5SentAt   = "bench_sent_unix_nano"
)

func init() {
	register(rowSpec{"B5", "publish-to-handler latency at 10 msgs/s, kinesalite, 1 shard", 2 * time.Minute, runB5})
}

func runB5(ctx context.Context, e *env) (result, error) {
	if e.kinesisEndpoint == "" {
		return result{}, errNeedsEmulators
	}
	client := kinesaliteClient(e.kinesisEndpoint)
	oursStream, plainStream := streamName("b5-ours"), streamName("b5-plain")
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: client, CreateStream: true, PollInterval: b5Pacing, MinReadInterval: b5Pacing,
	}, nil)
	if err != nil {
		return result{}, err
	}
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: client}, nil)
	if err != nil {
		return result{}, errors.Join(err, sub.Close())
	}
	ours, plain, err := b5Run(ctx, client, sub, pub, oursStream, plainStream)
	if err = errors.Join(err, closeAll(sub, pub)); err != nil {
		return result{}, err
	}
	lines := make([]line, 0, 2)
	for _, p := range []float64{50, 99} {
		o, b := percentile(ours, p), percentile(plain, p)
		r := float64(o) / float64(b)
		lines = append(lines, line{"B5", fmt.Sprintf("p%.0f publish-to-handler latency, 10 msgs/s, kinesalite 1 shard, 200 msgs", p),
			fmtDuration(o), fmtDuration(b) + " (plain SDK loop)", fmtRatio(r), "<= 1.1x (keep)", met(r <= 1.1)})
	}
	return result{lines: lines, notes: []string{
		"latency is from just before Publish to the handler's receive; ours is PollInterval 200 ms, MinReadInterval 200 ms; the plain loop reads its own stream from TRIM_HORIZON, decodes each record with EnvelopeMarshaler for the publish time, and starts a GetRecords every 200 ms; the two streams are fed and read at the same time by one Publisher; percentiles are nearest-rank, so p99 is the 198th of 200 latencies and one late read moves it.",
	}}, nil
}

// b5Run creates both streams, starts both readers, publishes to both, and returns the
// latencies each reader saw.
func b5Run(ctx context.Context, client *awskinesis.Client, sub *kinesis.Subscriber, pub *kinesis.Publisher, oursStream, plainStream string) (ours, plain []time.Duration, err error) {
	for _, s := range []string{oursStream, plainStream} {
		if err := sub.SubscribeInitialize(s); err != nil {
			return nil, nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, b5Messages*b5Every+30*time.Second)
	defer cancel()
	msgs, err := sub.Subscribe(ctx, oursStream)
	if err != nil {
		return nil, nil, err
	}
	iterator, err := firstIterator(ctx, client, plainStream)
	if err != nil {
		return nil, nil, err
	}
	var wg sync.WaitGroup
	var oursErr, plainErr, pubErr error
	wg.Go(func() {
		oursErr = receive(ctx, msgs, b5Messages, func(msg *message.Message, _ int) {
			ours = append(ours, sinceSent(msg))
		})
	})
	wg.Go(func() { plain, plainErr = plainLatencies(ctx, client, plainStream, iterator) })
	wg.Go(func() { pubErr = publishEvery(ctx, pub, oursStream, plainStream) })
	wg.Wait()
	return ours, plain, errors.Join(pubErr, wrapErr("ours", oursErr), wrapErr("plain loop", plainErr))
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// publishEvery publishes one message to each stream every b5Every, b5Messages in all.
func publishEvery(ctx context.Context, pub *kinesis.Publisher, streams ...string) error {
	ticker := time.NewTicker(b5Every)
	defer ticker.Stop()
	payload := make([]byte, payloadSize)
	for i := range b5Messages {
		for _, s := range streams {
			msg := message.NewMessage(watermill.NewUUID(), payload)
			msg.Metadata.Set(b5SentAt, strconv.FormatInt(time.Now().UnixNano(), 10))
			if err := pub.Publish(s, msg); err != nil {
				return fmt.Errorf("publishing message %d to %s: %w", i, s, err)
			}
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func sinceSent(msg *message.Message) time.Duration {
	ns, err := strconv.ParseInt(msg.Metadata.Get(b5SentAt), 10, 64)
	if err != nil {
		return -1
	}
	return time.Since(time.Unix(0, ns))
}

func firstIterator(ctx context.Context, client *awskinesis.Client, stream string) (*string, error) {
	shards, err := client.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return nil, fmt.Errorf("ListShards %s: %w", stream, err)
	}
	if len(shards.Shards) != 1 {
		return nil, fmt.Errorf("stream %s has %d shards, want 1", stream, len(shards.Shards))
	}
	it, err := client.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{
		StreamName: aws.String(stream), ShardId: shards.Shards[0].ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		return nil, fmt.Errorf("GetShardIterator %s: %w", stream, err)
	}
	return it.ShardIterator, nil
}

// plainLatencies reads the stream's one shard until it has b5Messages records, starting a
// GetRecords every b5Pacing, and returns each record's latency.
func plainLatencies(ctx context.Context, client *awskinesis.Client, stream string, iterator *string) ([]time.Duration, error) {
	var out []time.Duration
	var decoder kinesis.EnvelopeMarshaler
	for len(out) < b5Messages {
		if iterator == nil {
			return out, fmt.Errorf("the shard of %s ended after %d records", stream, len(out))
		}
		started := time.Now()
		res, err := client.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iterator, Limit: aws.Int32(10000)})
		if err != nil {
			return out, fmt.Errorf("GetRecords after %d records: %w", len(out), err)
		}
		for i := range res.Records {
			msg, err := decoder.Unmarshal(stream, "", &res.Records[i])
			if err != nil {
				return out, fmt.Errorf("decoding record %d: %w", len(out), err)
			}
			out = append(out, sinceSent(msg))
		}
		iterator = res.NextShardIterator
		if err := sleepUntil(ctx, started.Add(b5Pacing)); err != nil && len(out) < b5Messages {
			return out, fmt.Errorf("after %d records: %w", len(out), err)
		}
	}
	return out, nil
}
