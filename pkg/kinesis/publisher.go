package kinesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// Publisher writes Watermill messages to Kinesis streams; the topic is the stream name.
// It is safe for concurrent use.
type Publisher struct {
	config PublisherConfig
	logger watermill.LoggerAdapter

	// closed is closed by the first Close (closeOnce guards it), under admit.
	closeOnce sync.Once
	closed    chan struct{}
	// admit orders a Publish call's entry (calls.Add, if not closed) with Close's close(closed),
	// so that Close's calls.Wait counts every call that got in. calls counts the Publish calls
	// in progress; senders the dispatchers' sender goroutines, which Close waits for next (no
	// call is left to start one).
	admit   sync.Mutex
	calls   sync.WaitGroup
	senders sync.WaitGroup
	// stop ends the background work of the publisher (shard map loads) at Close.
	stop       context.Context
	cancelStop context.CancelFunc

	// dispatchers holds each stream's dispatcher, made at its first Publish.
	dispatchers sync.Map // stream name -> *dispatcher

	// ensured remembers streams known to exist, so CreateStream costs one call per stream.
	ensured sync.Map // stream name -> struct{}

	metrics *publisherMetrics
	attrs   sync.Map // stream name -> metric.MeasurementOption, built once per stream
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher checks the config, fills in defaults and returns a Publisher. A nil logger
// logs nothing.
func NewPublisher(config PublisherConfig, logger watermill.LoggerAdapter) (*Publisher, error) {
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, err
	}
	config.Client = oneRetryLayer(config.Client)
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	metrics, err := newPublisherMetrics(config.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("kinesis: creating the publisher's metrics (MeterProvider): %w", err)
	}
	stop, cancel := context.WithCancel(context.Background())
	return &Publisher{config: config, logger: logger, metrics: metrics, closed: make(chan struct{}), stop: stop, cancelStop: cancel}, nil
}

// Publish writes the messages to the stream named topic, and returns once Kinesis stored them
// (or they failed). Validation of every message happens before any call: if any is invalid,
// none is written, and the error joins one *MessageError (matching ErrInvalidMessage) per
// invalid message. With no messages, Publish does nothing.
//
// Concurrent calls share PutRecords requests: the records of every call to a stream that wait
// at the same moment go out together, up to 500 records and 5 MiB a request and
// MaxInFlightRequests requests at once, so that one message per call, from many goroutines,
// does not cost a request per message. Messages that share a partition key are written in the
// order given, even when some are retried: the call is split into rounds, a round holds at most
// one message per key and is submitted only when the previous round is written; calls a
// goroutine makes one after another, each returning nil, are written in that order too (a
// call that returned an error may have had messages written, or written later). Rejected entries are
// retried with jittered backoff. The context of the first message bounds the call: when it
// ends, the call returns, naming the messages not written.
//
// Publish is not atomic: on error, a *PublishError lists the messages that were not written.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) (err error) {
	if len(msgs) > 0 {
		start := time.Now()
		defer func() { p.measure(topic, len(msgs), time.Since(start), err) }()
	}
	if !p.enter() {
		return fmt.Errorf("%w: not publishing %d message(s) to stream %q", ErrPublisherClosed, len(msgs), topic)
	}
	defer p.calls.Done()
	if err := validateStreamName(topic); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil // as Watermill's other publishers: nothing to do, no call
	}
	records, err := p.encode(topic, msgs)
	if err != nil {
		return err
	}
	if p.config.AggregateKPL {
		records = aggregateByKey(records)
	}
	ctx := msgs[0].Context()
	if err := ctx.Err(); err != nil {
		for _, r := range records {
			r.err = fmt.Errorf("not sent: the context of the call's first message ended before publishing: %w", err)
		}
		return p.publishError(topic, records, err)
	}
	if err := p.ensureStream(ctx, topic); err != nil {
		return err
	}
	d := p.dispatcher(topic)
	for _, round := range rounds(records) {
		if err := p.writeRound(ctx, d, round); err != nil {
			return p.publishError(topic, records, err)
		}
	}
	return nil
}

// enter counts a Publish call in progress, unless the publisher is closed.
func (p *Publisher) enter() bool {
	p.admit.Lock()
	defer p.admit.Unlock()
	select {
	case <-p.closed:
		return false
	default:
		p.calls.Add(1)
		return true
	}
}

// dispatcher is the stream's dispatcher, made at its first use.
func (p *Publisher) dispatcher(stream string) *dispatcher {
	if d, ok := p.dispatchers.Load(stream); ok {
		return d.(*dispatcher)
	}
	d, _ := p.dispatchers.LoadOrStore(stream, newDispatcher(p, stream))
	return d.(*dispatcher)
}

// encode validates and marshals every message before anything is sent.
func (p *Publisher) encode(stream string, msgs []*message.Message) ([]*pendingRecord, error) {
	records := make([]*pendingRecord, len(msgs))
	var errs []error
	for i, msg := range msgs {
		rec, err := p.encodeOne(stream, i, msg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		records[i] = rec
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return records, nil
}

func (p *Publisher) encodeOne(stream string, i int, msg *message.Message) (*pendingRecord, error) {
	fail := func(err error) error { return &MessageError{Stream: stream, Index: i, UUID: uuidOf(msg), Err: err} }
	if msg == nil {
		return nil, fail(fmt.Errorf("%w: message is nil", ErrInvalidMessage))
	}
	key, err := p.config.PartitionKey(stream, msg)
	if err != nil {
		return nil, fail(asInvalidMessage("PartitionKeyFunc", err))
	}
	if err := validatePartitionKey(key); err != nil {
		return nil, fail(err)
	}
	data, err := p.config.Marshaler.Marshal(stream, msg)
	if err != nil {
		return nil, fail(asInvalidMessage("marshaling", err))
	}
	size := len(data) + len(key)
	if size > maxRecordSize {
		return nil, fail(fmt.Errorf("%w: record is %d bytes (data %d + partition key %d, payload %d, metadata and envelope the rest); Kinesis allows %d",
			ErrInvalidMessage, size, len(data), len(key), len(msg.Payload), maxRecordSize))
	}
	return &pendingRecord{
		index: i,
		msg:   msg,
		entry: types.PutRecordsRequestEntry{Data: data, PartitionKey: &key},
		size:  size,
	}, nil
}

// asInvalidMessage makes an error of a PartitionKeyFunc or Marshaler match ErrInvalidMessage:
// the message cannot be published as it is.
func asInvalidMessage(what string, err error) error {
	if errors.Is(err, ErrInvalidMessage) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidMessage, what, err)
}

func uuidOf(msg *message.Message) string {
	if msg == nil {
		return ""
	}
	return msg.UUID
}

// writeRound writes every record of a round through the stream's dispatcher, submitting the
// entries Kinesis rejected again after a backoff. On failure, the records not written carry
// their error in err.
func (p *Publisher) writeRound(ctx context.Context, d *dispatcher, round []*pendingRecord) error {
	pending := round
	var failed error // the first error no retry can fix
	failures := 0
	for attempt := 0; ; attempt++ {
		d.submit(ctx, pending)
		var retry []*pendingRecord
		for _, r := range pending {
			switch {
			case r.written:
			case r.retryable:
				retry = append(retry, r)
			default:
				if failures++; failed == nil {
					failed = r.err
				}
			}
		}
		switch {
		case len(retry) == 0 && failures == 1:
			return failed
		case len(retry) == 0 && failures > 1:
			return fmt.Errorf("kinesis: %d record(s) not written (the first: %w)", failures, failed)
		case len(retry) == 0:
			return nil
		case attempt >= p.config.MaxRetries:
			return fmt.Errorf("kinesis: %d record(s) still rejected after %d retries", len(retry), attempt)
		}
		p.logger.Debug("Retrying rejected records", watermill.LogFields{"stream": d.stream, "records": len(retry), "attempt": attempt + 1})
		p.metrics.retries.Add(context.Background(), int64(len(retry)), p.streamAttrs(d.stream))
		if err := awscall.Sleep(ctx, awscall.Backoff(attempt, p.config.RetryBackoff, p.config.MaxRetryBackoff)); err != nil {
			for _, r := range retry {
				r.err = fmt.Errorf("%w while waiting to retry (last attempt: %w)", err, r.err)
			}
			return err
		}
		pending = retry
	}
}

// publishError lists every record not written: those that failed and those never sent.
func (p *Publisher) publishError(stream string, records []*pendingRecord, cause error) error {
	pe := &PublishError{Stream: stream}
	for _, r := range records {
		if r.written {
			continue
		}
		err := r.err
		if err == nil {
			err = fmt.Errorf("not sent: publishing stopped at an earlier failure (%w)", cause)
		}
		for _, m := range r.messages() {
			pe.Failed = append(pe.Failed, &MessageError{Stream: stream, Index: m.index, UUID: m.msg.UUID, Err: err})
		}
	}
	slices.SortFunc(pe.Failed, func(a, b *MessageError) int { return cmp.Compare(a.Index, b.Index) })
	return pe
}

func (p *Publisher) callError(stream string, err error) error {
	if awscall.Classify(context.Background(), err) == awscall.NotFound {
		return fmt.Errorf("%w: %q (create it, or set PublisherConfig.CreateStream): %w", ErrStreamNotFound, stream, err)
	}
	return fmt.Errorf("kinesis: PutRecords to stream %q: %w", stream, err)
}

// ensureStream creates a missing stream once per stream when CreateStream is set. Without it,
// a missing stream shows up as the PutRecords error, with no extra call per Publish.
func (p *Publisher) ensureStream(ctx context.Context, stream string) error {
	if !p.config.CreateStream {
		return nil
	}
	if _, ok := p.ensured.Load(stream); ok {
		return nil
	}
	if err := ensureStream(ctx, p.config.Client, stream, true, p.config.CreateStreamShards, p.config.RequestTimeout); err != nil {
		return err
	}
	p.ensured.Store(stream, struct{}{})
	return nil
}

// Close makes later Publish calls fail with an error matching ErrPublisherClosed, and returns
// once the calls in progress have finished (each is bounded by its retries, RequestTimeout and
// its first message's context). Close is idempotent.
//
// Shutdown order: refuse new calls (closed); wait for the calls in progress (calls), whose
// records the senders still send; end a shard map load still out (stop); then wait for the
// senders and loaders, which exit once the queues they send from are empty.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.admit.Lock()
		close(p.closed)
		p.admit.Unlock()
		p.calls.Wait()
		p.cancelStop() // a shard map load still out
		p.senders.Wait()
	})
	return nil
}
