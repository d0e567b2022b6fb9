package tests_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// BenchmarkEndToEnd moves messages publish -> subscribe -> ack, one message in flight per shard
// (the default), and reports messages per second. The "ratio" run measures memlog with four
// shards and Watermill's GoChannel in the same process, one after the other, and reports
// memlog's rate as a multiple of GoChannel's (row B1 of make bench, BENCHMARKS.md, holds the
// goal); absolute rates on a shared machine say little.
func BenchmarkEndToEnd(b *testing.B) {
	const n = 20000
	b.Run("gochannel", func(b *testing.B) {
		for range b.N {
			b.ReportMetric(measure(b, n, newGoChannel), "msgs/s")
		}
	})
	b.Run("memlog-4-shards", func(b *testing.B) {
		for range b.N {
			b.ReportMetric(measure(b, n, newMemlog(4, "")), "msgs/s")
		}
	})
	b.Run("memlog-4-shards-group", func(b *testing.B) {
		for range b.N {
			b.ReportMetric(measure(b, n, newMemlog(4, "bench")), "msgs/s")
		}
	})
	b.Run("ratio", func(b *testing.B) {
		for range b.N {
			base := measure(b, n, newGoChannel)
			ours := measure(b, n, newMemlog(4, ""))
			b.ReportMetric(ours/base, "x-gochannel")
		}
	})
}

type pubSubFactory func(b *testing.B) (message.Publisher, message.Subscriber)

func newGoChannel(b *testing.B) (message.Publisher, message.Subscriber) {
	ps := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	return ps, ps
}

func newMemlog(shards int32, group string) pubSubFactory {
	return func(b *testing.B) (message.Publisher, message.Subscriber) {
		log := memlog.New(memlog.Config{})
		pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: log, CreateStream: true, CreateStreamShards: shards}, nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg := kinesis.SubscriberConfig{
			Client: log, CreateStream: true, CreateStreamShards: shards,
			PollInterval: time.Millisecond, MinReadInterval: time.Microsecond,
			Group: kinesis.GroupConfig{
				Name: group,
			},
		}
		if group != "" {
			cfg.Group.LeaseStore = lease.NewMemoryStore()
		}
		sub, err := kinesis.NewSubscriber(cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		return pub, sub
	}
}

// measure subscribes, publishes n messages in calls of 100 while they are consumed, and
// returns the end-to-end rate.
func measure(b *testing.B, n int, factory pubSubFactory) float64 {
	pub, sub := factory(b)
	defer func() { _ = pub.Close(); _ = sub.Close() }()
	topic := "bench-" + watermill.NewShortUUID()
	if init, ok := sub.(message.SubscribeInitializer); ok {
		if err := init.SubscribeInitialize(topic); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 100)
	batches := make([][]*message.Message, 0, n/100)
	for i := 0; i < n; i += 100 {
		batch := make([]*message.Message, 100)
		for j := range batch {
			batch[j] = message.NewMessage(watermill.NewUUID(), payload)
		}
		batches = append(batches, batch)
	}
	start := time.Now()
	published := make(chan error, 1)
	go func() {
		for _, batch := range batches {
			if err := pub.Publish(topic, batch...); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	timeout := time.After(2 * time.Minute)
	for received := 0; received < n; received++ {
		select {
		case msg := <-msgs:
			msg.Ack()
		case <-timeout:
			b.Fatal(fmt.Sprintf("received %d of %d", received, n))
		}
	}
	elapsed := time.Since(start)
	if err := <-published; err != nil {
		b.Fatal(err)
	}
	return float64(n) / elapsed.Seconds()
}
