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
