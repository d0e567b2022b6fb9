package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/kinesislocal"
)

// B10 measures publish-to-handler latency at 10 messages/s with enhanced fan-out against
// polling: two consumer groups read one 1-shard stream at the same time, one with FanOut (ours),
// one polling at PollInterval = MinReadInterval = 200 ms (the baseline), while one message is
// published every 100 ms for 20 s (200 messages, B5's load). The goal is fan-out's p99 at most
// half of polling's. It runs on kinesis-local, which implements SubscribeToShard, and on memlog,
// where the push is immediate, to show what the driver adds.

func init() {
	register(rowSpec{"B10", "publish-to-handler latency, enhanced fan-out vs polling at 200 ms, 10 msgs/s", 3 * time.Minute, runB10})
}

func runB10(ctx context.Context, e *env) (result, error) {
	type backend struct {
		name   string
		client kinesis.KinesisAPI
	}
	backends := []backend{{"memlog", memlog.New(memlog.Config{})}}
	if e.kinesisLocalEndpoint != "" {
		backends = append(backends, backend{"kinesis-local", awskinesis.New(awskinesis.Options{
			Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""),
			BaseEndpoint: aws.String(e.kinesisLocalEndpoint), HTTPClient: kinesislocal.HTTPClient(nil),
		})})
	}
	var res result
	for _, b := range backends {
		pushed, polled, err := b10Run(ctx, b.client)
		if err != nil {
			return result{}, fmt.Errorf("%s: %w", b.name, err)
		}
		for _, p := range []float64{50, 99} {
			o, base := percentile(pushed, p), percentile(polled, p)
			r := float64(o) / float64(base)
			goal, ok := "(p50: no goal)", "-"
			if p == 99 {
				goal, ok = "<= 0.5x", met(r <= 0.5)
			}
			res.lines = append(res.lines, line{"B10", fmt.Sprintf("p%.0f publish-to-handler latency, enhanced fan-out, 10 msgs/s, %s 1 shard, 200 msgs", p, b.name),
				fmtDuration(o), fmtDuration(base) + " (polling at 200 ms)", fmtRatio(r), goal, ok})
		}
	}
	if e.kinesisLocalEndpoint == "" {
		res.notes = append(res.notes, "B10 on kinesis-local skipped (needs the emulators: make bench); the memlog lines ran.")
	}
	res.notes = append(res.notes, "two consumer groups (in-memory lease stores) read the same stream at the same time, one with FanOut, one polling with PollInterval and MinReadInterval 200 ms; latency is from just before Publish to the handler's receive. kinesis-local (kinesis-mock 0.6.2) pushes a shard's new records once a second rather than as they arrive, so there fan-out's latency is that second's, not the ~70 ms AWS documents; memlog pushes at once.")
	return res, nil
}

// b10Run publishes B5's load to a new 1-shard stream of client and returns the latencies the
// fan-out group and the polling group saw.
func b10Run(ctx context.Context, client kinesis.KinesisAPI) (pushed, polled []time.Duration, err error) {
	stream := streamName("b10")
	newSub := func(group string, fanOut bool) (*kinesis.Subscriber, error) {
		return kinesis.NewSubscriber(kinesis.SubscriberConfig{
			Client: client, CreateStream: true,
			Group:  kinesis.GroupConfig{Name: group, LeaseStore: lease.NewMemoryStore()},
			FanOut: kinesis.FanOutConfig{Enabled: fanOut},
			// Polling's pacing; with FanOut they are unused.
			PollInterval: b5Pacing, MinReadInterval: b5Pacing,
		}, nil)
	}
	pushSub, err := newSub("b10-fanout", true)
	if err != nil {
		return nil, nil, err
	}
	pollSub, err := newSub("b10-polling", false)
	if err != nil {
		return nil, nil, errors.Join(err, pushSub.Close())
	}
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: client}, nil)
	if err != nil {
		return nil, nil, errors.Join(err, closeAll(pushSub, pollSub))
	}
	defer func() { err = errors.Join(err, closeAll(pushSub, pollSub, pub)) }()
	if err := pushSub.SubscribeInitialize(stream); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b5Messages*b5Every+time.Minute)
	defer cancel()
	pushMsgs, err := pushSub.Subscribe(ctx, stream)
	if err != nil {
		return nil, nil, err
	}
	pollMsgs, err := pollSub.Subscribe(ctx, stream)
	if err != nil {
		return nil, nil, err
	}
	var wg sync.WaitGroup
	var pushErr, pollErr, pubErr error
	wg.Go(func() {
		pushErr = receive(ctx, pushMsgs, b5Messages, func(msg *message.Message, _ int) { pushed = append(pushed, sinceSent(msg)) })
	})
	wg.Go(func() {
		pollErr = receive(ctx, pollMsgs, b5Messages, func(msg *message.Message, _ int) { polled = append(polled, sinceSent(msg)) })
	})
	wg.Go(func() { pubErr = publishEvery(ctx, pub, stream) })
	wg.Wait()
	return pushed, polled, errors.Join(pubErr, wrapErr("fan-out group", pushErr), wrapErr("polling group", pollErr))
}
