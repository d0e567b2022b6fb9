package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// B11 measures concurrent single-message publishing, as Watermill code publishes: 64
// goroutines, each making 100 Publish calls of one 100-byte message one after another, into a
// 1-shard memlog stream whose every PutRecords call takes 20 ms, as an AWS round trip does.
// Ours is the Publisher at its defaults; the baseline is one PutRecords request per message
// from the same goroutines, which is what the Publisher did before concurrent calls shared
// requests (it batched only within one call). Throughput is bound by callers per round trip
// either way, since each caller waits for its own answer; what sharing saves is requests.

const (
	b11Callers   = 64
	b11PerCaller = 100
	b11RoundTrip = 20 * time.Millisecond
)

func init() {
	register(rowSpec{"B11", "concurrent one-message Publish calls, memlog 1 shard, 20 ms round trip", 2 * time.Minute, runB11})
}

// b11Run is one side's figures.
type b11Run struct {
	calls int64
	took  time.Duration
	p50   time.Duration
}

func runB11(ctx context.Context, _ *env) (result, error) {
	ours, err := b11Side(ctx, b11Ours)
	if err != nil {
		return result{}, fmt.Errorf("ours: %w", err)
	}
	base, err := b11Side(ctx, b11OnePerMessage)
	if err != nil {
		return result{}, fmt.Errorf("baseline: %w", err)
	}
	n := float64(b11Callers * b11PerCaller)
	oursRate, baseRate := n/ours.took.Seconds(), n/base.took.Seconds()
	measure := fmt.Sprintf("%d goroutines x %d one-message calls, 20 ms round trip", b11Callers, b11PerCaller)
	limit := b11RoundTrip + 2*time.Millisecond
	return result{
		lines: []line{
			{"B11", "PutRecords calls per message, " + measure, fmt.Sprintf("%.3f (%s calls)", float64(ours.calls)/n, thousands(ours.calls)),
				fmt.Sprintf("%.3f (%s calls, one per message)", float64(base.calls)/n, thousands(base.calls)),
				fmtRatio(float64(ours.calls) / float64(base.calls)), "<= 0.25x", met(ours.calls*4 <= base.calls)},
			{"B11", "throughput, " + measure, fmtRate(oursRate), fmtRate(baseRate), fmtRatio(oursRate / baseRate), ">= 0.95x", met(oursRate >= 0.95*baseRate)},
			{"B11", "p50 Publish latency, " + measure, fmtDuration(ours.p50), fmtDuration(base.p50), fmtRatio(float64(ours.p50) / float64(base.p50)),
				"ours <= " + fmtDuration(limit), met(ours.p50 <= limit)},
		},
		notes: []string{
			"the round trip is memlog's fault hook holding each PutRecords call 20 ms (real time); calls are counted by memlog.Usage.",
			"baseline: each goroutine sends one PutRecords request of its one message (marshaled as ours) per call, as the Publisher did before issue 35.",
		},
	}, nil
}

// b11Side makes a 1-shard memlog stream with the round trip, runs publish from every caller,
// and returns the calls Kinesis received, the time it all took and the p50 call latency.
func b11Side(ctx context.Context, publish func(ctx context.Context, log *memlog.Log, stream string) (func(*message.Message) error, func() error, error)) (b11Run, error) {
	log := memlog.New(memlog.Config{})
	stream := streamName("b11")
	if _, err := log.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
		return b11Run{}, err
	}
	log.SetFault(putRoundTrip(b11RoundTrip))
	one, closeFn, err := publish(ctx, log, stream)
	if err != nil {
		return b11Run{}, err
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		latencies []time.Duration
		errs      []error
	)
	start := time.Now()
	for range b11Callers {
		wg.Go(func() {
			own := make([]time.Duration, 0, b11PerCaller)
			for _, m := range newMessages(b11PerCaller, nil) {
				t0 := time.Now()
				if err := one(m); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				own = append(own, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, own...)
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(append(errs, closeFn())...); err != nil {
		return b11Run{}, err
	}
	u := log.Usage(stream)
	if u.Records != b11Callers*b11PerCaller {
		return b11Run{}, fmt.Errorf("%d records stored, want %d", u.Records, b11Callers*b11PerCaller)
	}
	return b11Run{calls: u.PutCalls, took: took, p50: percentile(latencies, 50)}, nil
}

// b11Ours publishes through our Publisher at its defaults.
func b11Ours(_ context.Context, log *memlog.Log, stream string) (func(*message.Message) error, func() error, error) {
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: log}, nil)
	if err != nil {
		return nil, nil, err
	}
	return func(m *message.Message) error { return pub.Publish(stream, m) }, pub.Close, nil
}

// b11OnePerMessage sends each message in a PutRecords request of its own, encoded as ours.
func b11OnePerMessage(ctx context.Context, log *memlog.Log, stream string) (func(*message.Message) error, func() error, error) {
	return func(m *message.Message) error {
		data, err := kinesis.EnvelopeMarshaler{}.Marshal(stream, m)
		if err != nil {
			return err
		}
		out, err := log.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String(stream), Records: []types.PutRecordsRequestEntry{{Data: data, PartitionKey: aws.String(m.UUID)}}})
		if err == nil && aws.ToInt32(out.FailedRecordCount) > 0 {
			err = fmt.Errorf("entry rejected: %s", aws.ToString(out.Records[0].ErrorCode))
		}
		return err
	}, func() error { return nil }, nil
}

// putRoundTrip is a memlog fault hook that holds every PutRecords call for d (real time), as
// an AWS round trip does, or until the call's context ends.
func putRoundTrip(d time.Duration) memlog.FaultFunc {
	return func(ctx context.Context, c memlog.Call) error {
		if c.Op != "PutRecords" {
			return nil
		}
		return sleepUntil(ctx, time.Now().Add(d))
	}
}
