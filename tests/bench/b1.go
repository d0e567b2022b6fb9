package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// B1 measures end to end throughput, publish -> subscribe -> ack, on memlog: 4 shards, a
// consumer group with the in-memory lease store, 20,000 100-byte messages published in Publish
// calls of 100 while they are consumed. The baseline is Watermill's GoChannel doing the same in
// the same process, measured just before ours in each of -runs pairs (tests/bench_test.go's
// BenchmarkEndToEnd/ratio, with a group). The goal is at least 2.5x GoChannel in every pair.

const (
	b1Messages = 20000
	b1WarmUp   = 2000
)

type pubSubFactory func() (message.Publisher, message.Subscriber, error)

func init() {
	register(rowSpec{"B1", "end to end msgs/s, memlog 4 shards, group, vs GoChannel", 3 * time.Minute, runB1})
}

func runB1(ctx context.Context, e *env) (result, error) {
	runs := e.runsOr(5)
	for _, f := range []pubSubFactory{newGoChannel, newMemlogGroup4} {
		if _, err := measureEndToEnd(ctx, b1WarmUp, f); err != nil {
			return result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	var ours, base, ratios []float64
	for i := range runs {
		b, err := measureEndToEnd(ctx, b1Messages, newGoChannel)
		if err != nil {
			return result{}, fmt.Errorf("GoChannel, pair %d: %w", i+1, err)
		}
		var o float64
		// Labelled, so that a profile of the run (-cpuprofile) can be cut to our side.
		pprof.Do(ctx, pprof.Labels("b1", "ours"), func(ctx context.Context) {
			o, err = measureEndToEnd(ctx, b1Messages, newMemlogGroup4)
		})
		if err != nil {
			return result{}, fmt.Errorf("memlog, pair %d: %w", i+1, err)
		}
		ours, base, ratios = append(ours, o), append(base, b), append(ratios, o/b)
	}
	minRatio := ratios[0]
	all := make([]string, len(ratios))
	for i, r := range ratios {
		minRatio = min(minRatio, r)
		all[i] = fmtRatio(r)
	}
	return result{
		lines: []line{{
			Row:      "B1",
			Measure:  "end to end, memlog 4 shards + group vs GoChannel, 20k msgs; median of " + count(runs, "pair"),
			Ours:     fmtRate(median(ours)),
			Baseline: fmtRate(median(base)),
			Ratio:    fmt.Sprintf("min %s (%s)", fmtRatio(minRatio), strings.Join(all, ", ")),
			Goal:     ">= 2.5x in every pair",
			Met:      met(minRatio >= 2.5),
		}},
		notes: []string{"after a warm-up of 2,000 messages each, not counted, each pair runs GoChannel then ours, one after the other in this process; ours is PollInterval 1 ms, MinReadInterval 1 µs, MaxInFlight 1 (the default), consumer group on lease.NewMemoryStore(); the rate is 20,000 over the time from the first Publish to the last Ack."},
	}, nil
}

func newGoChannel() (message.Publisher, message.Subscriber, error) {
	ps := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	return ps, ps, nil
}

func newMemlogGroup4() (message.Publisher, message.Subscriber, error) {
	log := memlog.New(memlog.Config{})
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: log, CreateStream: true, CreateStreamShards: 4}, nil)
	if err != nil {
		return nil, nil, err
	}
	cfg := memlogSubscriberConfig(log, "bench")
	cfg.CreateStream, cfg.CreateStreamShards = true, 4
	sub, err := kinesis.NewSubscriber(cfg, nil)
	if err != nil {
		return nil, nil, errors.Join(err, pub.Close())
	}
	return pub, sub, nil
}

// measureEndToEnd subscribes, publishes n messages in calls of 100 while they are consumed, and
// returns the rate from the first Publish to the last Ack.
func measureEndToEnd(ctx context.Context, n int, factory pubSubFactory) (msgsPerSec float64, err error) {
	pub, sub, err := factory()
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, closeAll(pub, sub)) }()
	topic := streamName("b1")
	if init, ok := sub.(message.SubscribeInitializer); ok {
		if err := init.SubscribeInitialize(topic); err != nil {
			return 0, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		return 0, err
	}
	batch := newMessages(n, nil)
	start := time.Now()
	published := make(chan error, 1)
	go func() { published <- publishAll(ctx, pub, topic, batch, 100) }()
	err = receive(ctx, msgs, n, nil)
	elapsed := time.Since(start)
	cancel() // a publisher still going stops at its next call
	if perr := <-published; perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return 0, err
	}
	return rate(n, elapsed), nil
}
