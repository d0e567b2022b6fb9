package tests_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/streams"
)

// Kinesis records carry no headers, but the envelope carries the message's metadata, so a
// W3C trace context written into the metadata on publish is in the metadata on delivery.
// These tests show it with OpenTelemetry's own propagators: nothing in the driver knows about
// tracing.

// metadataCarrier lets an OpenTelemetry propagator read and write Watermill metadata.
type metadataCarrier message.Metadata

var _ propagation.TextMapCarrier = metadataCarrier{}

func (c metadataCarrier) Get(key string) string { return c[key] }

func (c metadataCarrier) Set(key, value string) { c[key] = value }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// tracingTimeout bounds every wait of these tests.
const tracingTimeout = 15 * time.Second

// testPropagator is W3C trace context plus baggage, kept local (no otel.SetTextMapPropagator)
// so the tests share no global state.
var testPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// endNotifier reports the name of every span that ends, so a test can wait for spans that end
// on the router's goroutines instead of sleeping.
type endNotifier struct{ ended chan string }

func (n endNotifier) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (n endNotifier) OnEnd(s sdktrace.ReadOnlySpan) {
	select {
	case n.ended <- s.Name():
	default: // the buffer is far larger than any test's span count
	}
}
func (n endNotifier) Shutdown(context.Context) error   { return nil }
func (n endNotifier) ForceFlush(context.Context) error { return nil }

func newTestTracer(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder, chan string) {
	t.Helper()
	recorder := tracetest.NewSpanRecorder()
	ended := make(chan string, 256)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(recorder),
		sdktrace.WithSpanProcessor(endNotifier{ended: ended}),
	)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("watermill-kinesis/tests"), recorder, ended
}

func tracingStream(kind string) string {
	return "tracing-" + kind + "-" + watermill.NewUUID()[:8]
}

// TestTracing_ContextCrossesKinesis: each message is published under its own producer span,
// with the span's context injected into its metadata; on the subscriber side (consumer group,
// 2 shards) the context extracted from the received metadata is the producer span's, marked
// remote, and a consumer span started from it is the producer span's child.
func TestTracing_ContextCrossesKinesis(t *testing.T) {
	const messages = 8
	tracer, recorder, _ := newTestTracer(t)
	b := streams.NewMemlogBackend(2)
	pub, sub := b.PubSub(t, "tracing")
	t.Cleanup(func() { _ = pub.Close(); _ = sub.Close() })
	stream := tracingStream("plain")

	producerOf := map[string]trace.SpanContext{} // message UUID -> its producer span
	var batch []*message.Message
	for i := range messages {
		ctx, span := tracer.Start(context.Background(), "publish "+stream,
			trace.WithSpanKind(trace.SpanKindProducer))
		msg := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "order-%d", i))
		testPropagator.Inject(ctx, metadataCarrier(msg.Metadata))
		if msg.Metadata.Get("traceparent") == "" {
			t.Fatalf("inject wrote no traceparent: %v", msg.Metadata)
		}
		producerOf[msg.UUID] = span.SpanContext()
		batch = append(batch, msg)
		span.End()
	}
	if err := pub.Publish(stream, batch...); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), tracingTimeout)
	defer cancel()
	out, err := sub.Subscribe(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}

	consumerOf := map[string]trace.SpanContext{}
	shards := map[string]int{}
	for len(consumerOf) < messages {
		var msg *message.Message
		select {
		case msg = <-out:
		case <-ctx.Done():
			t.Fatalf("received %d of %d messages", len(consumerOf), messages)
		}
		if msg == nil {
			t.Fatalf("channel closed after %d of %d messages", len(consumerOf), messages)
		}
		want, ok := producerOf[msg.UUID]
		if !ok {
			t.Fatalf("unexpected message %s", msg.UUID)
		}
		if shard, ok := kinesis.ShardIDFromContext(msg.Context()); ok {
			shards[shard]++
		}

		remote := testPropagator.Extract(msg.Context(), metadataCarrier(msg.Metadata))
		got := trace.SpanContextFromContext(remote)
		if !got.IsValid() || !got.IsRemote() {
			t.Fatalf("message %s: extracted span context %+v is not a valid remote one", msg.UUID, got)
		}
		if got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() {
			t.Fatalf("message %s: extracted trace %s span %s, published under trace %s span %s",
				msg.UUID, got.TraceID(), got.SpanID(), want.TraceID(), want.SpanID())
		}
		if !got.IsSampled() {
			t.Errorf("message %s: the sampled flag was lost", msg.UUID)
		}

		_, span := tracer.Start(remote, "process "+stream, trace.WithSpanKind(trace.SpanKindConsumer))
		if span.SpanContext().TraceID() != want.TraceID() {
			t.Fatalf("consumer span is in trace %s, want %s", span.SpanContext().TraceID(), want.TraceID())
		}
		if _, dup := consumerOf[msg.UUID]; !dup {
			consumerOf[msg.UUID] = span.SpanContext()
		}
		span.End()
		if !msg.Ack() {
			t.Fatalf("Ack of %s returned false", msg.UUID)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("messages per shard: %v", shards)

	// The recorded spans: one producer root per message, each with exactly the consumer span(s)
	// of that message as children, in the same trace.
	spans := recorder.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	traces := map[trace.TraceID]bool{}
	for id, producer := range producerOf {
		p, ok := byID[producer.SpanID()]
		if !ok || p.SpanKind() != trace.SpanKindProducer || p.Parent().IsValid() {
			t.Fatalf("message %s: producer span missing, or not a root producer span", id)
		}
		traces[producer.TraceID()] = true
		c, ok := byID[consumerOf[id].SpanID()]
		if !ok {
			t.Fatalf("message %s: consumer span not recorded", id)
		}
		if c.SpanKind() != trace.SpanKindConsumer || c.Parent().SpanID() != producer.SpanID() ||
			c.Parent().TraceID() != producer.TraceID() || !c.Parent().IsRemote() {
			t.Fatalf("message %s: consumer span's parent is %+v, want the remote producer span %s",
				id, c.Parent(), producer.SpanID())
		}
	}
	if len(traces) != messages {
		t.Fatalf("%d distinct traces for %d messages", len(traces), messages)
	}
}

// tracingPublisher starts a producer span for each message, as a child of the span in the
// message's context, and injects that span's context into the message's metadata.
type tracingPublisher struct {
	message.Publisher
	tracer trace.Tracer
}

func (p tracingPublisher) Publish(topic string, msgs ...*message.Message) error {
	spans := make([]trace.Span, len(msgs))
	for i, msg := range msgs {
		ctx, span := p.tracer.Start(msg.Context(), "publish "+topic,
			trace.WithSpanKind(trace.SpanKindProducer))
		testPropagator.Inject(ctx, metadataCarrier(msg.Metadata))
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

// tracingMiddleware extracts the context from the consumed message's metadata, starts a
// consumer span from it and hands it to the handler in the message's context. Messages the
// handler produces inherit that context (unless the handler gave them one), so the
// tracingPublisher makes their producer spans children of the consumer span.
func tracingMiddleware(tracer trace.Tracer) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			ctx := testPropagator.Extract(msg.Context(), metadataCarrier(msg.Metadata))
			ctx, span := tracer.Start(ctx, "consume "+message.SubscribeTopicFromCtx(msg.Context()),
				trace.WithSpanKind(trace.SpanKindConsumer))
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
}

type traceSeen struct {
	span    trace.SpanContext
	parent  trace.SpanContext // the remote context extracted by the middleware
	tenant  string            // baggage member
	payload string
}

// TestTracing_RouterTwoHops: a request published under a root span goes stream A -> handler ->
// stream B -> handler through a Watermill router. The publisher decorator injects on every
// publish and a router middleware extracts on every consume, so both handlers run in the root
// span's trace, and the baggage set at the root reaches the second handler.
func TestTracing_RouterTwoHops(t *testing.T) {
	tracer, recorder, ended := newTestTracer(t)
	b := streams.NewMemlogBackend(2)
	streamA, streamB := tracingStream("a"), tracingStream("b")

	pubA, subA := b.PubSub(t, "tracing")
	pubB, subB := b.PubSub(t, "tracing")
	tracedA := tracingPublisher{Publisher: pubA, tracer: tracer}
	tracedB := tracingPublisher{Publisher: pubB, tracer: tracer}
	t.Cleanup(func() { _ = pubA.Close(); _ = pubB.Close(); _ = subA.Close(); _ = subB.Close() })

	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: tracingTimeout}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	router.AddMiddleware(tracingMiddleware(tracer))

	seenA := make(chan traceSeen, 4)
	seenB := make(chan traceSeen, 4)
	seen := func(msg *message.Message, parent trace.SpanContext) traceSeen {
		return traceSeen{
			span:    trace.SpanContextFromContext(msg.Context()),
			parent:  parent,
			tenant:  baggage.FromContext(msg.Context()).Member("tenant").Value(),
			payload: string(msg.Payload),
		}
	}
	remoteParent := func(msg *message.Message) trace.SpanContext {
		return trace.SpanContextFromContext(testPropagator.Extract(context.Background(), metadataCarrier(msg.Metadata)))
	}
	router.AddHandler("enrich", streamA, subA, streamB, tracedB, func(msg *message.Message) ([]*message.Message, error) {
		seenA <- seen(msg, remoteParent(msg))
		// A new message, as a handler usually produces: no metadata copied from msg, so the
		// trace context it carries on stream B can only come from the publisher decorator.
		out := message.NewMessage(watermill.NewUUID(), append([]byte("enriched "), msg.Payload...))
		return []*message.Message{out}, nil
	})
	router.AddConsumerHandler("store", streamB, subB, func(msg *message.Message) error {
		seenB <- seen(msg, remoteParent(msg))
		return nil
	})

	runCtx, stopRouter := context.WithCancel(context.Background())
	defer stopRouter()
	runErr := make(chan error, 1)
	go func() { runErr <- router.Run(runCtx) }()
	closeRouter := sync.OnceFunc(func() {
		if err := router.Close(); err != nil {
			t.Errorf("router Close: %v", err)
		}
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("router Run: %v", err)
			}
		case <-time.After(tracingTimeout):
			t.Errorf("router Run did not return after Close")
		}
	})
	t.Cleanup(closeRouter)
	select {
	case <-router.Running():
	case err := <-runErr:
		t.Fatalf("router stopped before running: %v", err)
	case <-time.After(tracingTimeout):
		t.Fatal("router did not start")
	}

	bag, err := baggage.Parse("tenant=acme")
	if err != nil {
		t.Fatal(err)
	}
	rootCtx, root := tracer.Start(baggage.ContextWithBaggage(context.Background(), bag), "checkout")
	req := message.NewMessage(watermill.NewUUID(), []byte("order-1"))
	req.SetContext(rootCtx)
	if err := tracedA.Publish(streamA, req); err != nil {
		t.Fatal(err)
	}
	root.End()
	traceID := root.SpanContext().TraceID()

	wait := func(ch <-chan traceSeen, what string) traceSeen {
		t.Helper()
		select {
		case s := <-ch:
			return s
		case <-time.After(tracingTimeout):
			t.Fatalf("%s: no message within %v", what, tracingTimeout)
			return traceSeen{}
		}
	}
	a := wait(seenA, "handler enrich")
	bSeen := wait(seenB, "handler store")
	if bSeen.payload != "enriched order-1" {
		t.Fatalf("handler store got %q", bSeen.payload)
	}
	for name, s := range map[string]traceSeen{"enrich": a, "store": bSeen} {
		if s.span.TraceID() != traceID {
			t.Errorf("handler %s ran in trace %s, want %s", name, s.span.TraceID(), traceID)
		}
		if s.parent.TraceID() != traceID || !s.parent.IsRemote() {
			t.Errorf("handler %s: metadata carried %+v, want a remote context of trace %s", name, s.parent, traceID)
		}
		if s.tenant != "acme" {
			t.Errorf("handler %s: baggage tenant = %q, want acme", name, s.tenant)
		}
	}

	// Five spans end: checkout, publish A, consume A, publish B (ends after the Publish call
	// inside the router, before the ack) and consume B (ends when handler store returns).
	const wantSpans = 5
	var names []string
	deadline := time.After(tracingTimeout)
	for len(names) < wantSpans {
		select {
		case n := <-ended:
			names = append(names, n)
		case <-deadline:
			t.Fatalf("%d of %d spans ended: %v", len(names), wantSpans, names)
		}
	}
	closeRouter()

	spans := recorder.Ended()
	if len(spans) != wantSpans {
		t.Fatalf("%d spans recorded, want %d", len(spans), wantSpans)
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %q is in trace %s, want %s", s.Name(), s.SpanContext().TraceID(), traceID)
		}
		byName[s.Name()] = s
	}
	// The tree: checkout -> publish A -> consume A -> publish B -> consume B, where each hop
	// across Kinesis (publish -> consume) has a remote parent and the others a local one.
	chain := []struct {
		name   string
		kind   trace.SpanKind
		remote bool
	}{
		{"checkout", trace.SpanKindInternal, false},
		{"publish " + streamA, trace.SpanKindProducer, false},
		{"consume " + streamA, trace.SpanKindConsumer, true},
		{"publish " + streamB, trace.SpanKindProducer, false},
		{"consume " + streamB, trace.SpanKindConsumer, true},
	}
	var parent trace.SpanContext
	for _, link := range chain {
		s, ok := byName[link.name]
		if !ok {
			got := make([]string, 0, len(byName))
			for n := range byName {
				got = append(got, n)
			}
			sort.Strings(got)
			t.Fatalf("no span %q; recorded %v", link.name, got)
		}
		if s.SpanKind() != link.kind {
			t.Errorf("span %q is of kind %v, want %v", link.name, s.SpanKind(), link.kind)
		}
		if s.Parent().SpanID() != parent.SpanID() || s.Parent().IsRemote() != link.remote {
			t.Errorf("span %q has parent %s (remote %v), want %s (remote %v)",
				link.name, s.Parent().SpanID(), s.Parent().IsRemote(), parent.SpanID(), link.remote)
		}
		parent = s.SpanContext()
	}
	if got, want := a.span.SpanID(), byName["consume "+streamA].SpanContext().SpanID(); got != want {
		t.Errorf("handler enrich ran in span %s, want its consumer span %s", got, want)
	}
	if got, want := bSeen.span.SpanID(), byName["consume "+streamB].SpanContext().SpanID(); got != want {
		t.Errorf("handler store ran in span %s, want its consumer span %s", got, want)
	}
}

// TestTracing_NoContextNoTrace: a message published without a span carries no trace context,
// and extracting from it yields no valid span context (a consumer span would start a new trace).
func TestTracing_NoContextNoTrace(t *testing.T) {
	b := streams.NewMemlogBackend(2)
	pub, sub := b.PubSub(t, "tracing")
	t.Cleanup(func() { _ = pub.Close(); _ = sub.Close() })
	stream := tracingStream("none")

	msg := message.NewMessage(watermill.NewUUID(), []byte("untraced"))
	testPropagator.Inject(context.Background(), metadataCarrier(msg.Metadata))
	if len(msg.Metadata) != 0 {
		t.Fatalf("inject without a span wrote %v", msg.Metadata)
	}
	if err := pub.Publish(stream, msg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingTimeout)
	defer cancel()
	out, err := sub.Subscribe(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-out:
		if got == nil {
			t.Fatal("channel closed")
		}
		if sc := trace.SpanContextFromContext(testPropagator.Extract(got.Context(), metadataCarrier(got.Metadata))); sc.IsValid() {
			t.Fatalf("extracted %+v from an untraced message", sc)
		}
		got.Ack()
	case <-ctx.Done():
		t.Fatal("no message within the timeout")
	}
}
