package kinesis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	wmkinesis "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// A Publisher on memlog, the in-memory Kinesis. On AWS, set AWSConfig (from the SDK's
// config.LoadDefaultConfig) instead of Client; nothing else changes.
func ExampleNewPublisher() {
	pub, err := wmkinesis.NewPublisher(wmkinesis.PublisherConfig{
		Client:       memlog.New(memlog.Config{}),
		CreateStream: true, // for the example; in production the stream is usually made by IaC
		// Messages with the same partition key go to the same shard, in order.
		PartitionKey: wmkinesis.PartitionKeyFromMetadata("customer"),
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()

	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":1}`))
	msg.Metadata.Set("customer", "c-42")
	if err := pub.Publish("orders", msg); err != nil { // the topic is the stream name
		log.Fatal(err)
	}
	fmt.Println("published")
	// Output: published
}

// A Subscriber without a consumer group reads every shard of the stream; each message is
// acked when handled.
func ExampleNewSubscriber() {
	kin := memlog.New(memlog.Config{})
	pub, err := wmkinesis.NewPublisher(wmkinesis.PublisherConfig{Client: kin, CreateStream: true}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish("orders", message.NewMessage(watermill.NewUUID(), []byte("order-1"))); err != nil {
		log.Fatal(err)
	}

	sub, err := wmkinesis.NewSubscriber(wmkinesis.SubscriberConfig{
		Client:          kin,
		InitialPosition: wmkinesis.Position{Type: wmkinesis.TrimHorizon}, // from the oldest record
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	messages, err := sub.Subscribe(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	msg := <-messages
	shard, _ := wmkinesis.ShardIDFromContext(msg.Context())
	fmt.Printf("%s from %s\n", msg.Payload, shard)
	msg.Ack()
	// Output: order-1 from shardId-000000000000
}

// Instances with the same Group.Name share the stream's shards through leases, and resume
// from the checkpoint of what was acked. In production the leases live in a DynamoDB table
// (LeaseTable, with CreateLeaseTable to make it); lease.NewMemoryStore serves one process.
func ExampleNewSubscriber_consumerGroup() {
	kin := memlog.New(memlog.Config{})
	leases := lease.NewMemoryStore()
	pub, err := wmkinesis.NewPublisher(wmkinesis.PublisherConfig{Client: kin, CreateStream: true}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	for i := 1; i <= 3; i++ {
		if err := pub.Publish("orders", message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "order-%d", i))); err != nil {
			log.Fatal(err)
		}
	}

	consume := func(n int) {
		sub, err := wmkinesis.NewSubscriber(wmkinesis.SubscriberConfig{
			Client: kin,
			Group: wmkinesis.GroupConfig{
				Name:       "billing",
				LeaseStore: leases,
			},
			// A new group starts at TRIM_HORIZON by default: it misses nothing published before.
		}, nil)
		if err != nil {
			log.Fatal(err)
		}
		defer sub.Close() // writes the last checkpoint and releases the leases
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		messages, err := sub.Subscribe(ctx, "orders")
		if err != nil {
			log.Fatal(err)
		}
		for range n {
			msg := <-messages
			fmt.Println(string(msg.Payload))
			msg.Ack()
		}
	}
	consume(2) // an instance handles two, then stops
	consume(1) // the next resumes after the checkpoint: only the third is left
	// Output:
	// order-1
	// order-2
	// order-3
}
