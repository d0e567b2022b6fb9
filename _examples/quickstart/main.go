// Quickstart: a publisher and a Watermill router handler on a 2-shard stream, with a consumer
// group. On the in-memory Kinesis (memlog) by default, with no AWS account, credentials or
// network:
//
//	go run ./_examples/quickstart
//
// With -aws it runs on Amazon Kinesis and DynamoDB instead, and on local servers when the SDK's
// AWS_ENDPOINT_URL_KINESIS and AWS_ENDPOINT_URL_DYNAMODB name them (backend.go; README.md).
// AWS_REGION alone does not leave memlog.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	wmkinesis "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

const (
	stream   = "orders"
	messages = 10
)

// The customers: a partition key's MD5 picks its shard, and these three land on both shards of
// a 2-shard stream (alice on shard 0, bob and carol on shard 1).
var customers = []string{"alice", "bob", "carol"}

func main() {
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logger := watermill.NewStdLogger(false, false)
	backend, err := newBackend(ctx) // memlog, or AWS: backend.go
	if err != nil {
		log.Fatal(err)
	}

	publisher, err := wmkinesis.NewPublisher(backend.publisher(wmkinesis.PublisherConfig{
		CreateStream:       true,
		CreateStreamShards: 2,
		// Orders of one customer stay in order: they share a partition key, hence a shard.
		PartitionKey: wmkinesis.PartitionKeyFromMetadata("customer"),
	}), logger)
	if err != nil {
		log.Fatal(err)
	}
	subscriber, err := wmkinesis.NewSubscriber(backend.subscriber(wmkinesis.SubscriberConfig{
		Group: wmkinesis.GroupConfig{
			Name: "billing", // checkpoints its progress: a second run resumes
		},
		CreateStream:       true,
		CreateStreamShards: 2,
	}), logger)
	if err != nil {
		log.Fatal(err)
	}

	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		log.Fatal(err)
	}
	var handled atomic.Int32
	router.AddConsumerHandler("bill", stream, subscriber, func(msg *message.Message) error {
		shard, _ := wmkinesis.ShardIDFromContext(msg.Context())
		seq, _ := wmkinesis.SequenceNumberFromContext(msg.Context())
		fmt.Printf("handled %-8s  customer=%-5s  shard=%s  seq=...%s\n",
			msg.Payload, msg.Metadata.Get("customer"), shard, seq[len(seq)-6:])
		if handled.Add(1) == messages {
			stop() // everything arrived: shut down
		}
		return nil
	})

	go func() {
		<-router.Running()
		for i := 1; i <= messages; i++ {
			msg := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "order-%d", i))
			msg.Metadata.Set("customer", customers[(i-1)%len(customers)])
			if err := publisher.Publish(stream, msg); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("published %s\n", msg.Payload)
		}
	}()

	if err := router.Run(ctx); err != nil {
		log.Fatal(err)
	}
	_ = publisher.Close()
	fmt.Printf("done: %d messages published and handled\n", handled.Load())
}
