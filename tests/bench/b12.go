package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// B12 measures what AggregateKPL packing across calls buys on one shard under AWS's write
// quota (memlog with Quotas: 1,000 records/s and 1 MiB/s, and a 10 ms round trip): 256
// goroutines publish 100-byte messages (RawMarshaler: the payload alone, keyed by UUID) one per
// call for 6 s, measured over the last 5, with AggregateKPL against without. The goal is 90 % of the shard's 1 MiB/s
// (about 9,000 messages/s, less each message's key and framing) against at most 1,000
// records/s one message each.
//
// It then publishes 100,000 messages the same way without quotas (20 ms round trip), once one
// PutRecords request per message (what the Publisher did before calls shared requests) and
// once through ours with AggregateKPL, and reports the calls, records and PUT payload units
// (25 KiB each) Kinesis was charged for each.

const (
	b12Callers    = 256
	b12Duration   = 5 * time.Second
	b12Messages   = 100_000
	b12ShardBytes = 1 << 20 // bytes per second per shard
	b12RoundTrip  = 10 * time.Millisecond
)

func init() {
	register(rowSpec{"B12", "AggregateKPL across calls under a shard's write quota, memlog", 3 * time.Minute, runB12})
}

func runB12(ctx context.Context, _ *env) (result, error) {
	packed, err := b12Quota(ctx, true)
	if err != nil {
		return result{}, fmt.Errorf("with AggregateKPL: %w", err)
	}
	plain, err := b12Quota(ctx, false)
	if err != nil {
		return result{}, fmt.Errorf("without AggregateKPL: %w", err)
	}
	after, err := b12Charged(ctx, true)
	if err != nil {
		return result{}, fmt.Errorf("100,000 messages with AggregateKPL: %w", err)
	}
	before, err := b12Charged(ctx, false)
	if err != nil {
		return result{}, fmt.Errorf("100,000 messages one request each: %w", err)
	}
	secs := b12Duration.Seconds()
	share := float64(packed.Bytes) / secs / b12ShardBytes
	measure := fmt.Sprintf("%d goroutines, 100-byte messages, 1 shard at 1,000 records/s and 1 MiB/s, %s", b12Callers, b12Duration)
	charged := func(u memlog.Usage) string {
		return fmt.Sprintf("%s calls, %s records, %s units", thousands(u.PutCalls), thousands(u.Records), thousands(u.PayloadUnits))
	}
	return result{
		lines: []line{
			{"B12", "messages/s stored, " + measure, fmtRate(float64(packed.messages) / secs), fmtRate(float64(plain.messages)/secs) + " (without AggregateKPL)",
				fmtRatio(float64(packed.messages) / float64(max(plain.messages, 1))), "ours >= 90% of 1 MiB/s", met(share >= 0.9)},
			{"B12", "share of the shard's 1 MiB/s written, " + measure, fmt.Sprintf("%.0f%% (%s/s)", 100*share, fmtMiB(float64(packed.Bytes)/secs)),
				fmt.Sprintf("%.0f%% (%s records/s)", 100*float64(plain.Bytes)/secs/b12ShardBytes, thousands(int64(float64(plain.Records)/secs))),
				fmtRatio(float64(packed.Bytes) / float64(max(plain.Bytes, 1))), ">= 90%", met(share >= 0.9)},
			{"B12", "charged for 100,000 messages, 256 goroutines one per call, no quota", charged(after.Usage), charged(before.Usage) + " (one request per message)",
				fmtRatio(float64(after.PayloadUnits) / float64(before.PayloadUnits)), "fewer calls, records, units", met(after.PutCalls < before.PutCalls && after.Records < before.Records)},
		},
		notes: []string{
			"bytes are what Kinesis charges a shard: data plus partition key of each record (memlog.Usage); an aggregate's data holds each message's key once in its table.",
			fmt.Sprintf("under the quota, throttled entries are retried by the Publisher (its defaults); throttled with AggregateKPL: %s records, without: %s.", thousands(packed.ThrottledRecords), thousands(plain.ThrottledRecords)),
		},
	}, nil
}

// b12Result is a side's usage and the messages its Publish calls stored.
type b12Result struct {
	memlog.Usage
	messages int64
}

// b12Log is a memlog Log with a 1-shard stream whose PutRecords calls take roundTrip.
func b12Log(ctx context.Context, quotas *memlog.Quotas, roundTrip time.Duration) (*memlog.Log, string, error) {
	log := memlog.New(memlog.Config{Quotas: quotas})
	stream := streamName("b12")
	if _, err := log.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
		return nil, "", err
	}
	log.SetFault(putRoundTrip(roundTrip))
	return log, stream, nil
}

// b12Quota publishes from b12Callers goroutines for b12Duration on a shard under AWS's quota.
func b12Quota(ctx context.Context, aggregate bool) (b12Result, error) {
	log, stream, err := b12Log(ctx, &memlog.Quotas{}, b12RoundTrip)
	if err != nil {
		return b12Result{}, err
	}
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: log, Marshaler: kinesis.RawMarshaler{}, AggregateKPL: aggregate}, nil)
	if err != nil {
		return b12Result{}, err
	}
	// Measured from one second in, when the shard's bucket, full at the start (a second's
	// worth), is spent, to b12Duration later: the rate the quota holds the shard to.
	var stored atomic.Int64
	begin := time.Now()
	warm, stop := begin.Add(time.Second), begin.Add(time.Second+b12Duration)
	var wg sync.WaitGroup
	for range b12Callers {
		wg.Go(func() {
			for time.Now().Before(stop) && ctx.Err() == nil {
				if pub.Publish(stream, newMessages(1, nil)...) == nil {
					stored.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Until(warm)) // a measuring point, not a synchronisation
	u0, n0 := log.Usage(stream), stored.Load()
	time.Sleep(time.Until(stop))
	u1, n1 := log.Usage(stream), stored.Load()
	wg.Wait()
	if err := pub.Close(); err != nil {
		return b12Result{}, err
	}
	u1.PutCalls, u1.Records, u1.Bytes, u1.PayloadUnits, u1.ThrottledRecords = u1.PutCalls-u0.PutCalls, u1.Records-u0.Records,
		u1.Bytes-u0.Bytes, u1.PayloadUnits-u0.PayloadUnits, u1.ThrottledRecords-u0.ThrottledRecords
	return b12Result{Usage: u1, messages: n1 - n0}, ctx.Err()
}

// b12Charged publishes b12Messages from b12Callers goroutines, one per call, without quotas:
// through ours with AggregateKPL, or one PutRecords request per message.
func b12Charged(ctx context.Context, ours bool) (b12Result, error) {
	log, stream, err := b12Log(ctx, nil, 2*b12RoundTrip)
	if err != nil {
		return b12Result{}, err
	}
	publish, closeFn, err := b11OnePerMessage(ctx, log, stream)
	if ours {
		pub, perr := kinesis.NewPublisher(kinesis.PublisherConfig{Client: log, Marshaler: kinesis.RawMarshaler{}, AggregateKPL: true}, nil)
		if perr != nil {
			return b12Result{}, perr
		}
		publish = func(m *message.Message) error { return pub.Publish(stream, m) }
		closeFn = pub.Close
	}
	if err != nil {
		return b12Result{}, err
	}
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range b12Callers {
		wg.Go(func() {
			for next.Add(1) <= b12Messages && ctx.Err() == nil {
				if err := publish(newMessages(1, nil)[0]); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return b12Result{}, err
	}
	if err := closeFn(); err != nil {
		return b12Result{}, err
	}
	return b12Result{Usage: log.Usage(stream), messages: b12Messages}, ctx.Err()
}
