// Tracing: an OpenTelemetry trace crosses Kinesis in the message metadata, on the in-memory
// Kinesis (memlog). No AWS account, credentials or network needed:
//
//	go run ./_examples/tracing
//
// A "checkout" span publishes an order to stream "orders"; handler "enrich" publishes to
// "orders-enriched"; handler "store" consumes it. A publisher decorator injects the current
// span context into the metadata (traceparent, and baggage), a router middleware extracts it
// and starts a consumer span, so every span printed below shares one trace id.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

const (
	orders   = "orders"
	enriched = "orders-enriched"
)

// metadataCarrier lets an OpenTelemetry propagator read and write Watermill metadata.
type metadataCarrier message.Metadata

func (c metadataCarrier) Get(key string) string { return c[key] }
func (c metadataCarrier) Set(key, value string) { c[key] = value }
func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// tracingPublisher starts a producer span per message, a child of the span in the message's
// context, and injects it into the message's metadata before publishing.
type tracingPublisher struct{ message.Publisher }

func (p tracingPublisher) Publish(topic string, msgs ...*message.Message) error {
	tracer := otel.Tracer("tracing-example")
	spans := make([]trace.Span, len(msgs))
	for i, msg := range msgs {
		ctx, span := tracer.Start(msg.Context(), "publish "+topic, trace.WithSpanKind(trace.SpanKindProducer))
		otel.GetTextMapPropagator().Inject(ctx, metadataCarrier(msg.Metadata))
		spans[i] = span
	}
	err := p.Publisher.Publish(topic, msgs...)
	for _, span := range spans {
		if err != nil {
			span.RecordError(err)
		}
		span.End()
	}
	return err
}

// tracingMiddleware extracts the trace context from the consumed message's metadata and runs
// the handler in a consumer span; messages the handler produces inherit the span's context.
func tracingMiddleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		ctx := otel.GetTextMapPropagator().Extract(msg.Context(), metadataCarrier(msg.Metadata))
		ctx, span := otel.Tracer("tracing-example").Start(ctx,
			"consume "+message.SubscribeTopicFromCtx(msg.Context()), trace.WithSpanKind(trace.SpanKindConsumer))
		defer span.End()
		msg.SetContext(ctx)
		produced, err := h(msg)
		if err != nil {
			span.RecordError(err)
		}
		for _, out := range produced {
			if !trace.SpanContextFromContext(out.Context()).IsValid() {
				out.SetContext(ctx)
			}
		}
		return produced, err
	}
}

// printer is a span exporter that prints each span as it ends.
type printer struct{}

func (printer) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	for _, s := range spans {
		parent := "-"
		if s.Parent().IsValid() {
			parent = s.Parent().SpanID().String()
			if s.Parent().IsRemote() {
				parent += " (remote)"
			}
		}
		fmt.Printf("span  trace=%s  span=%s  parent=%-25s  %s\n",
			s.SpanContext().TraceID(), s.SpanContext().SpanID(), parent, s.Name())
	}
	return nil
}

func (printer) Shutdown(context.Context) error { return nil }

func main() {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(printer{}))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{}))

	logger := watermill.NopLogger{}
	kinesisClient := memlog.New(memlog.Config{}) // on AWS: kinesis.NewFromConfig(awsCfg) of aws-sdk-go-v2/service/kinesis
	leases := lease.NewMemoryStore()             // DynamoDB in production

	newPublisher := func() message.Publisher {
		pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
			Client: kinesisClient, CreateStream: true, CreateStreamShards: 2,
		}, logger)
		if err != nil {
			log.Fatal(err)
		}
		return tracingPublisher{pub}
	}
	newSubscriber := func() message.Subscriber {
		sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
			Client: kinesisClient, Group: kinesis.GroupConfig{Name: "tracing-example", LeaseStore: leases},
			CreateStream: true, CreateStreamShards: 2, PollInterval: 50 * time.Millisecond,
		}, logger)
		if err != nil {
			log.Fatal(err)
		}
		return sub
	}

	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		log.Fatal(err)
	}
	router.AddMiddleware(tracingMiddleware)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	router.AddHandler("enrich", orders, newSubscriber(), enriched, newPublisher(),
		func(msg *message.Message) ([]*message.Message, error) {
			fmt.Printf("enrich  trace=%s  payload=%s\n",
				trace.SpanContextFromContext(msg.Context()).TraceID(), msg.Payload)
			return []*message.Message{
				message.NewMessage(watermill.NewUUID(), append([]byte("enriched "), msg.Payload...)),
			}, nil
		})
	router.AddConsumerHandler("store", enriched, newSubscriber(), func(msg *message.Message) error {
		fmt.Printf("store   trace=%s  payload=%s  tenant=%s\n",
			trace.SpanContextFromContext(msg.Context()).TraceID(), msg.Payload,
			baggage.FromContext(msg.Context()).Member("tenant").Value())
		stop() // the order went all the way: shut down
		return nil
	})

	publisher := newPublisher()
	go func() {
		<-router.Running()
		bag, _ := baggage.Parse("tenant=acme")
		spanCtx, span := otel.Tracer("tracing-example").Start(
			baggage.ContextWithBaggage(context.Background(), bag), "checkout")
		msg := message.NewMessage(watermill.NewUUID(), []byte("order-1"))
		msg.SetContext(spanCtx)
		if err := publisher.Publish(orders, msg); err != nil {
			log.Fatal(err)
		}
		span.End()
		fmt.Printf("published order-1 in trace %s\n", span.SpanContext().TraceID())
	}()

	if err := router.Run(ctx); err != nil {
		log.Fatal(err)
	}
	_ = publisher.Close()
}
