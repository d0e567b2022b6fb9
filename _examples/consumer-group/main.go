// Consumer group: instances with the same Group.Name share a stream's shards through leases.
// Start it in two terminals, on the emulators or AWS (README.md), and watch the shards spread,
// and move when one instance stops:
//
//	go build -o /tmp/cg ./_examples/consumer-group   # build once, so that a signal reaches the instance
//	/tmp/cg -worker-id one -publish   # terminal 1: also publishes a click every 200 ms
//	/tmp/cg -worker-id two            # terminal 2; Ctrl-C in either, and the other takes over
//
// (With go run, the instance is a child of go run: kill -9 of go run's process id kills go
// run and leaves the instance running, holding its leases.)
//
// Each instance prints the messages it handles, with the time, its name and their shard, and
// logs the lease changes ("Lease taken", "Lease handed over", "Lease released", with reasons)
// to stderr. Ctrl-C closes it: it checkpoints and releases its leases, so the other takes them
// at once. -publish-only starts a publisher that is no member of the group: with -clicks N it
// publishes N clicks and exits, and each "published" line it prints should come back as a
// "handled" line of some instance.
//
// On memlog (no -aws and no AWS_ENDPOINT_URL_KINESIS; backend.go) one process can only talk to
// itself, so it runs two instances in-process and plays the same story, then exits.
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
	stream      = flag.String("stream", "clicks", "the stream, created with 2 shards if missing")
	group       = flag.String("group", "click-counter", "the consumer group")
	workerID    = flag.String("worker-id", envOr("WORKER_ID", defaultWorkerID()), "this instance's name in the leases (env WORKER_ID)")
	publish     = flag.Bool("publish", false, "also publish a click every 200 ms")
	publishOnly = flag.Bool("publish-only", false, "only publish a click every 200 ms, as no member of the group (not on memlog)")
	clicks      = flag.Int("clicks", 0, "stop publishing after this many clicks; with -publish-only, exit then (0: publish until Ctrl-C; not on memlog)")
	duration    = flag.Duration("duration", 0, "stop after this long, as on Ctrl-C (0: run until Ctrl-C)")
)

// timeFormat starts every line of stdout, so that the lines of several processes can be put in
// order, and how long a message took to come back can be read off.
const timeFormat = "15:04:05.000"

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
	if (*publishOnly || *clicks > 0) && backend.onMemlog() {
		// memlog lives in this process: no other process would ever see what it publishes, and
		// the in-process story needs clicks until its end.
		log.Fatal("-publish-only and -clicks need a Kinesis that other processes share: pass -aws, or set AWS_ENDPOINT_URL_KINESIS to a local server's address")
	}
	if backend.onMemlog() {
		twoInstancesInProcess(ctx, backend, logger)
		return
	}
	if *publishOnly {
		publishClicks(ctx, backend, logger)
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
		fmt.Printf("%s  %s  handled %s  from %s\n", time.Now().Format(timeFormat), workerID, msg.Payload, shard)
		msg.Ack()
		if handled != nil {
			handled(shard)
		}
	}
	return sub.Close()
}

// publishClicks publishes a click every 200 ms until ctx ends or -clicks are published, and
// prints each once Kinesis has it; their random partition keys (the message UUIDs) spread them
// over both shards.
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
	for i := 1; *clicks == 0 || i <= *clicks; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		msg := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "click-%d", i))
		switch err := publisher.Publish(*stream, msg); {
		case err == nil:
			fmt.Printf("%s  published %s\n", time.Now().Format(timeFormat), msg.Payload)
		case ctx.Err() == nil:
			log.Printf("publishing %s: %v", msg.Payload, err)
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
