// Consumer group: instances with the same Group.Name share a stream's shards through leases.
// Start it in two terminals, on the emulators or AWS (README.md), and watch the shards spread,
// and move when one instance stops:
//
//	go run ./_examples/consumer-group -publish   # terminal 1: also publishes a click every 200 ms
//	go run ./_examples/consumer-group            # terminal 2; Ctrl-C in either, and the other takes over
//
// Each instance prints the messages it handles, with their shard, and logs the lease changes
// ("Lease taken", "Lease handed over", "Lease released", with reasons) to stderr. Ctrl-C closes
// it: it checkpoints and releases its leases, so the other takes them at once.
//
// On memlog (no AWS_REGION; backend.go) one process can only talk to itself, so it runs two
// instances in-process and plays the same story, then exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	wmkinesis "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

var (
	stream   = flag.String("stream", "clicks", "the stream, created with 2 shards if missing")
	group    = flag.String("group", "click-counter", "the consumer group")
	workerID = flag.String("worker-id", envOr("WORKER_ID", defaultWorkerID()), "this instance's name in the leases (env WORKER_ID)")
	publish  = flag.Bool("publish", false, "also publish a click every 200 ms")
	duration = flag.Duration("duration", 0, "stop after this long, as on Ctrl-C (0: run until Ctrl-C)")
)

func main() {
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		time.AfterFunc(*duration, stop) // as Ctrl-C does
	}
	// A logger with a WARN level, for the lines about leases.
	logger := wmkinesis.NewSlogLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	backend, err := newBackend(ctx) // memlog, or AWS: backend.go
	if err != nil {
		log.Fatal(err)
	}
	if backend.onMemlog() {
		twoInstancesInProcess(ctx, backend, logger)
		return
	}
	if *publish {
		go publishClicks(ctx, backend, logger)
	}
	if err := runInstance(ctx, backend, logger, *workerID, nil); err != nil {
		log.Fatal(err)
	}
}

// runInstance is one member of the group. It handles messages until ctx ends, then closes,
// which checkpoints what was acked and releases its leases. handled, if not nil, is called
// after each message.
func runInstance(ctx context.Context, backend *backend, logger watermill.LoggerAdapter, workerID string, handled func(shard string)) error {
	sub, err := wmkinesis.NewSubscriber(backend.subscriber(wmkinesis.SubscriberConfig{
		Group: wmkinesis.GroupConfig{
			Name:     *group,
			WorkerID: workerID,
			// Quicker than the defaults (10 s, 2 s, 10 s), so that shards move within seconds.
			LeaseDuration:     3 * time.Second,
			LeaseSyncInterval: 500 * time.Millisecond,
			HandoffTimeout:    3 * time.Second,
		},
		CreateStream:       true,
		CreateStreamShards: 2,
	}), logger)
	if err != nil {
		return err
	}
	defer sub.Close()
	messages, err := sub.Subscribe(ctx, *stream)
	if err != nil {
		return err
	}
	for msg := range messages { // closed once ctx ends and the leases are released
		shard, _ := wmkinesis.ShardIDFromContext(msg.Context())
		fmt.Printf("%s  handled %s  from %s\n", workerID, msg.Payload, shard)
		msg.Ack()
		if handled != nil {
			handled(shard)
		}
	}
	return sub.Close()
}

// publishClicks publishes a click every 200 ms until ctx ends; their random partition keys
// (the message UUIDs) spread them over both shards.
func publishClicks(ctx context.Context, backend *backend, logger watermill.LoggerAdapter) {
	publisher, err := wmkinesis.NewPublisher(backend.publisher(wmkinesis.PublisherConfig{
		CreateStream: true, CreateStreamShards: 2,
	}), logger)
	if err != nil {
		log.Fatal(err)
	}
	defer publisher.Close()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		msg := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "click-%d", i))
		if err := publisher.Publish(*stream, msg); err != nil && ctx.Err() == nil {
			log.Printf("publishing: %v", err)
		}
	}
}

// twoInstancesInProcess plays, in one process, what two terminals show: worker-a starts alone
// and takes both shards; worker-b joins, and worker-a hands one shard over; worker-a stops,
// and worker-b takes its shard too. It returns once worker-b has handled messages of both
// shards, or when ctx ends.
func twoInstancesInProcess(ctx context.Context, backend *backend, logger watermill.LoggerAdapter) {
	go publishClicks(ctx, backend, logger)
	type handled struct{ worker, shard string }
	events := make(chan handled)
	start := func(ctx context.Context, worker string) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- runInstance(ctx, backend, logger, worker, func(shard string) {
				select {
				case events <- handled{worker, shard}:
				case <-ctx.Done():
				}
			})
		}()
		return done
	}
	stopWorker := func(stop context.CancelFunc, done <-chan error) {
		stop()
		if err := <-done; err != nil {
			log.Fatal(err)
		}
	}

	ctxA, stopA := context.WithCancel(ctx)
	defer stopA()
	ctxB, stopB := context.WithCancel(ctx)
	defer stopB()
	fmt.Println("--- worker-a starts")
	doneA, doneB := start(ctxA, "worker-a"), (<-chan error)(nil)
	count := map[string]int{}
	shardsOfBAlone := map[string]bool{} // shards worker-b handled since worker-a stopped
	for {
		var e handled
		select {
		case e = <-events:
		case <-ctx.Done(): // -duration or Ctrl-C
			if doneA != nil {
				stopWorker(stopA, doneA)
			}
			if doneB != nil {
				stopWorker(stopB, doneB)
			}
			return
		}
		count[e.worker]++
		switch {
		case doneB == nil && count["worker-a"] == 5:
			fmt.Println("--- worker-b starts")
			doneB = start(ctxB, "worker-b")
		case doneA != nil && count["worker-b"] == 5:
			fmt.Println("--- worker-a stops")
			stopWorker(stopA, doneA)
			doneA = nil
		case doneA == nil && e.worker == "worker-b":
			if shardsOfBAlone[e.shard] = true; len(shardsOfBAlone) == 2 {
				fmt.Println("--- worker-b stops")
				stopWorker(stopB, doneB)
				return
			}
		}
	}
}

func defaultWorkerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
