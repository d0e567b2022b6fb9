// Replay: a new consumer group that starts at a point in time (InitialPosition AtTimestamp) on
// a stream that already holds records. On the in-memory Kinesis (memlog) by default; on
// Kinesis with -aws, or with AWS_ENDPOINT_URL_KINESIS naming a local server (backend.go):
//
//	go run ./_examples/replay
//
// It publishes two batches of events a little over a second apart, then starts a group at a
// moment between them: the group reads the second batch only.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	wmkinesis "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

const (
	stream    = "events"
	batchSize = 4
	gap       = 1100 * time.Millisecond // between the batches; the replay starts in its middle
)

// The events' partition keys: one lands on each shard of the 2-shard stream.
var devices = []string{"device-1", "device-2"}

func main() {
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logger := watermill.NopLogger{}
	backend, err := newBackend(ctx) // memlog, or AWS: backend.go
	if err != nil {
		log.Fatal(err)
	}
	publisher, err := wmkinesis.NewPublisher(backend.publisher(wmkinesis.PublisherConfig{
		CreateStream: true, CreateStreamShards: 2,
		PartitionKey: wmkinesis.PartitionKeyFromMetadata("device"),
	}), logger)
	if err != nil {
		log.Fatal(err)
	}
	defer publisher.Close()

	publishBatch(publisher, 1)
	time.Sleep(gap / 2)
	from := time.Now()
	fmt.Printf("replay from %s\n", from.Format(time.TimeOnly+".000"))
	time.Sleep(gap / 2)
	publishBatch(publisher, batchSize+1)

	subscriber, err := wmkinesis.NewSubscriber(backend.subscriber(wmkinesis.SubscriberConfig{
		Group: wmkinesis.GroupConfig{
			// A group's checkpoints win over InitialPosition, so the replay needs a group of its own:
			// a new name each run.
			Name: fmt.Sprintf("replay-%d", from.UnixMilli()),
		},
		InitialPosition: wmkinesis.Position{Type: wmkinesis.AtTimestamp, Timestamp: from},
	}), logger)
	if err != nil {
		log.Fatal(err)
	}
	defer subscriber.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	messages, err := subscriber.Subscribe(ctx, stream)
	if err != nil {
		log.Fatal(err)
	}
	// Each shard's records come in order, and both batches are on both shards: an event of the
	// first batch, had the group read it, would come before the second batch's last.
	replayed := 0
	for msg := range messages {
		shard, _ := wmkinesis.ShardIDFromContext(msg.Context())
		arrived, _ := wmkinesis.ArrivalTimeFromContext(msg.Context())
		fmt.Printf("replayed  %s  device=%s  arrived %s  %s\n",
			msg.Payload, msg.Metadata.Get("device"), arrived.Format(time.TimeOnly+".000"), shard)
		msg.Ack()
		if replayed++; replayed == batchSize {
			cancel() // the whole second batch, and nothing else: done
		}
	}
	if replayed < batchSize {
		log.Fatalf("%d events replayed, %d expected", replayed, batchSize)
	}
	fmt.Printf("done: %d events replayed\n", replayed)
}

// publishBatch publishes events first..first+batchSize-1 in one call.
func publishBatch(publisher message.Publisher, first int) {
	var batch []*message.Message
	for i := first; i < first+batchSize; i++ {
		msg := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "event-%d", i))
		msg.Metadata.Set("device", devices[i%len(devices)])
		batch = append(batch, msg)
	}
	if err := publisher.Publish(stream, batch...); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("published event-%d..%d at %s\n", first, first+batchSize-1, time.Now().Format(time.TimeOnly+".000"))
}
