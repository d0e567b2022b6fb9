// Router: a Watermill router on Kinesis with the usual middleware (CorrelationID, PoisonQueue
// with a dead-letter stream, Retry, Recoverer) and a handler that publishes to another stream.
// On the in-memory Kinesis (memlog) by default; on Kinesis with -aws, or with
// AWS_ENDPOINT_URL_KINESIS naming a local server (backend.go):
//
//	go run ./_examples/router
//
// Four payments go to stream "payments". Handler "charge" turns each into a receipt on stream
// "receipts": payment-1 at once, payment-2 after a failed attempt, payment-3 after a panic
// that Recoverer turns into an error, and payment-4, declined on every attempt, goes to
// stream "payments-dead-letters" once Retry gives up. Handler "print-receipts" prints the
// receipts with their correlation ids, "read-dead-letters" the dead letter and why it died.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	wmkinesis "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

const (
	payments    = "payments"
	receipts    = "receipts"
	deadLetters = "payments-dead-letters"
)

// The payments, and how charging each of them goes.
var kinds = []string{"ok", "fails once", "panics once", "declined"}

func main() {
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// Warnings and errors only: what happens is printed to stdout.
	logger := wmkinesis.NewSlogLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	backend, err := newBackend(ctx) // memlog, or AWS: backend.go
	if err != nil {
		log.Fatal(err)
	}
	publisher, err := wmkinesis.NewPublisher(backend.publisher(wmkinesis.PublisherConfig{CreateStream: true}), logger)
	if err != nil {
		log.Fatal(err)
	}
	subscriber := func(group string) message.Subscriber {
		sub, err := wmkinesis.NewSubscriber(backend.subscriber(wmkinesis.SubscriberConfig{
			Group: wmkinesis.GroupConfig{Name: group}, CreateStream: true,
		}), logger)
		if err != nil {
			log.Fatal(err)
		}
		return sub
	}

	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		log.Fatal(err)
	}
	poisonQueue, err := middleware.PoisonQueue(publisher, deadLetters)
	if err != nil {
		log.Fatal(err)
	}
	// The first is the outermost.
	router.AddMiddleware(
		middleware.CorrelationID, // what a handler produces gets the correlation id of what it handles
		poisonQueue,              // a message that still fails goes to the dead letters, and is acked
		middleware.Retry{MaxRetries: 2, InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second, Multiplier: 2}.Middleware,
		printFailure,         // (only to show each failed attempt)
		middleware.Recoverer, // a panic becomes an error, which Retry retries
	)

	var receiptsSeen, deadSeen atomic.Int32
	allSeen := func() {
		if receiptsSeen.Load() == 3 && deadSeen.Load() == 1 {
			stop() // every payment got a receipt or a dead letter: shut down
		}
	}
	router.AddHandler("charge", payments, subscriber("charge"), receipts, publisher, charge)
	router.AddConsumerHandler("print-receipts", receipts, subscriber("print-receipts"), func(msg *message.Message) error {
		fmt.Printf("receipt      %s  correlation_id=%s\n", msg.Payload, middleware.MessageCorrelationID(msg))
		receiptsSeen.Add(1)
		allSeen()
		return nil
	})
	router.AddConsumerHandler("read-dead-letters", deadLetters, subscriber("read-dead-letters"), func(msg *message.Message) error {
		fmt.Printf("dead letter  %s  reason=%q  topic=%s  handler=%s  correlation_id=%s\n", msg.Payload,
			msg.Metadata.Get(middleware.ReasonForPoisonedKey), msg.Metadata.Get(middleware.PoisonedTopicKey),
			msg.Metadata.Get(middleware.PoisonedHandlerKey), middleware.MessageCorrelationID(msg))
		deadSeen.Add(1)
		allSeen()
		return nil
	})

	go func() {
		<-router.Running()
		for i, kind := range kinds {
			msg := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "payment-%d", i+1))
			msg.Metadata.Set("kind", kind)
			middleware.SetCorrelationID(fmt.Sprintf("checkout-%d", 100+i+1), msg) // as a request would
			if err := publisher.Publish(payments, msg); err != nil {
				log.Fatal(err)
			}
		}
	}()
	if err := router.Run(ctx); err != nil {
		log.Fatal(err)
	}
	_ = publisher.Close()
}

var (
	attemptsMu sync.Mutex
	attempts   = map[string]int{} // message UUID → attempts so far
)

// charge charges a payment and produces its receipt, failing as the payment's kind says.
func charge(msg *message.Message) ([]*message.Message, error) {
	attemptsMu.Lock()
	attempts[msg.UUID]++
	attempt := attempts[msg.UUID]
	attemptsMu.Unlock()
	kind := msg.Metadata.Get("kind")
	fmt.Printf("charge       %s (%s), attempt %d\n", msg.Payload, kind, attempt)
	switch {
	case kind == "fails once" && attempt == 1:
		return nil, errors.New("card network timeout")
	case kind == "panics once" && attempt == 1:
		panic("card reader on fire")
	case kind == "declined":
		return nil, errors.New("card declined")
	}
	return []*message.Message{message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "receipt-for-%s", msg.Payload))}, nil
}

// printFailure prints each failed attempt of a handler; a panic is shown by its value, without
// the stack trace that Recoverer adds to the error.
func printFailure(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		produced, err := h(msg)
		var panicked middleware.RecoveredPanicError
		switch {
		case errors.As(err, &panicked):
			fmt.Printf("  recovered panic: %v\n", panicked.V)
		case err != nil:
			fmt.Printf("  failed: %v\n", err)
		}
		return produced, err
	}
}
