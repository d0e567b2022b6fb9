// Quickstart: a publisher and a Watermill router handler on the in-memory Kinesis (memlog).
// No AWS account, credentials or network needed:
//
//	go run ./_examples/quickstart
//
// To run against AWS, swap memlog.New for an aws-sdk-go-v2 Kinesis client and the memory
// lease store for a DynamoDB one; nothing else changes.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

const (
	stream   = "orders"
	messages = 10
)

func main() {
	logger := watermill.NewStdLogger(false, false)
	kinesisClient := memlog.New(memlog.Config{}) // or kinesis.NewFromConfig(awsConfig)

	publisher, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client:             kinesisClient,
		CreateStream:       true,
		CreateStreamShards: 2,
		// Orders of one customer stay in order: they share a partition key.
		PartitionKey: kinesis.PartitionKeyFromMetadata("customer"),
	}, logger)
	if err != nil {
		log.Fatal(err)
	}
	subscriber, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client:             kinesisClient,
		ConsumerGroup:      "billing",
		LeaseStore:         lease.NewMemoryStore(), // DynamoDB in production
		CreateStream:       true,
		CreateStreamShards: 2,
		PollInterval:       50 * time.Millisecond,
	}, logger)
	if err != nil {
		log.Fatal(err)
	}

	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var handled atomic.Int32
	router.AddConsumerHandler("bill", stream, subscriber, func(msg *message.Message) error {
		shard, _ := kinesis.ShardIDFromContext(msg.Context())
		seq, _ := kinesis.SequenceNumberFromContext(msg.Context())
		fmt.Printf("handled %s  customer=%s  shard=%s  seq=...%s\n",
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
			msg.Metadata.Set("customer", fmt.Sprintf("customer-%d", i%3))
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
