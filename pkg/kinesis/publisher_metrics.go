package kinesis

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// streamAttrs is the metric attributes of a publish to stream, built once per stream.
func (p *Publisher) streamAttrs(stream string) metric.MeasurementOption {
	if validateStreamName(stream) != nil {
		stream = "(invalid)" // one series for every bad name: no unbounded cache of them
	}
	if o, ok := p.attrs.Load(stream); ok {
		return o.(metric.MeasurementOption)
	}
	o, _ := p.attrs.LoadOrStore(stream, streamAttrs(stream))
	return o.(metric.MeasurementOption)
}

// measure records a Publish call of n messages: its duration, and the messages not written
// if it failed (all of them, unless the error lists which). A failed call's measurements carry
// error.type, as the messaging conventions ask: a low-cardinality class of the error.
func (p *Publisher) measure(stream string, n int, took time.Duration, err error) {
	if err == nil {
		p.metrics.duration.Record(context.Background(), took.Seconds(), p.streamAttrs(stream))
		return
	}
	name := stream
	if validateStreamName(stream) != nil {
		name = "(invalid)"
	}
	attrs := metric.WithAttributes(attrSystem.String(systemName), attrDestination.String(name),
		attrOperation.String("send"), attrErrorType.String(publishErrorType(err)))
	p.metrics.duration.Record(context.Background(), took.Seconds(), attrs)
	failed := n
	var pe *PublishError
	if errors.As(err, &pe) {
		failed = len(pe.Failed)
	}
	p.metrics.failures.Add(context.Background(), int64(failed), attrs)
}

// publishErrorType classes a Publish error for the error.type attribute.
func publishErrorType(err error) string {
	switch {
	case errors.Is(err, ErrPublisherClosed):
		return "publisher_closed"
	case errors.Is(err, ErrInvalidStreamName):
		return "invalid_stream_name"
	case errors.Is(err, ErrInvalidMessage):
		return "invalid_message"
	case errors.Is(err, ErrStreamNotFound):
		return "stream_not_found"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "_OTHER" // the conventions' value for an error of no known class
}
