package kinesis_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// BenchmarkDeliverAck is the subscriber's cost of one message: records already stored on
// memlog (one shard, no group) are delivered and acked; b.N is the message count, so the
// reported allocs/op and B/op are per message, the Message included. make bench's B2 row
// measures the same against GoChannel.
func BenchmarkDeliverAck(b *testing.B) {
	log := memlog.New(memlog.Config{})
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: log, CreateStream: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	payload := make([]byte, 100)
	batch := make([]*message.Message, 0, 500)
	for i := 0; i < b.N; i++ {
		batch = append(batch, message.NewMessage(watermill.NewUUID(), payload))
		if len(batch) == cap(batch) || i == b.N-1 {
			if err := pub.Publish("deliver", batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: log, PollInterval: time.Millisecond, MinReadInterval: time.Microsecond,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	msgs, err := sub.Subscribe(ctx, "deliver")
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		(<-msgs).Ack()
	}
	b.StopTimer()
}

// BenchmarkWatermillFloor is what Watermill's subscriber contract itself costs a message, with
// no driver at all: message.NewMessage, a send on an unbuffered channel to a goroutine that
// acks, and the wait for that Ack, as a reader at MaxInFlight 1 waits. BenchmarkDeliverAck
// over this is the driver's own share of a message's delivery.
func BenchmarkWatermillFloor(b *testing.B) {
	out := make(chan *message.Message)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			select {
			case m := <-out:
				m.Ack()
			case <-ctx.Done():
				return
			}
		}
	}()
	payload := make([]byte, 100)
	b.ReportAllocs()
	for b.Loop() {
		m := message.NewMessage("4b0c7b1e-7c1f-4f8e-9a55-0a1b2c3d4e5f", payload)
		out <- m
		select {
		case <-m.Acked():
		case <-m.Nacked():
		}
	}
}
