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
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// Publisher writes Watermill messages to Kinesis streams; the topic is the stream name.
// It is safe for concurrent use.
type Publisher struct {
	config PublisherConfig
	logger watermill.LoggerAdapter

	// closed is closed by the first Close (closeOnce guards it); Publish checks it.
	closeOnce sync.Once
	closed    chan struct{}

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
	return &Publisher{config: config, logger: logger, metrics: metrics, closed: make(chan struct{})}, nil
}

// Publish writes the messages to the stream named topic. Validation of every message happens
// before any call: if any is invalid, none is written, and the error joins one *MessageError
// (matching ErrInvalidMessage) per invalid message. With no messages, Publish does nothing.
// Messages that share a partition key are written in the order given, even when some are
// retried: the call is split into rounds, and a round holds at most one message per key and
// starts only when the previous round is written. Within a round, records go out in PutRecords
// batches of up to 500 records and 5 MiB; rejected entries are retried with jittered backoff.
// The context of the first message of a batch is the batch's call context.
//
// Publish is not atomic: on error, a *PublishError lists the messages that were not written.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) (err error) {
	if len(msgs) > 0 {
		start := time.Now()
		defer func() { p.measure(topic, len(msgs), time.Since(start), err) }()
	}
	select {
	case <-p.closed:
		return fmt.Errorf("%w: not publishing %d message(s) to stream %q", ErrPublisherClosed, len(msgs), topic)
	default:
	}
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
	if err := p.ensureStream(msgs[0].Context(), topic); err != nil {
		return err
	}
	for _, round := range rounds(records) {
		if err := p.writeRound(topic, round); err != nil {
			return p.publishError(topic, records, err)
		}
	}
	return nil
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

// writeRound writes every record of a round, retrying rejected entries. On failure, the
// records not written carry their error in err.
func (p *Publisher) writeRound(stream string, round []*pendingRecord) error {
	for _, batch := range batches(round) {
		if err := p.writeBatch(stream, batch); err != nil {
			return err
		}
	}
	return nil
}

func (p *Publisher) writeBatch(stream string, batch []*pendingRecord) error {
	ctx := batch[0].msg.Context()
	entries := make([]types.PutRecordsRequestEntry, 0, len(batch))
	permanent := 0 // records rejected with an entry error that no retry can fix
	for attempt := 0; ; attempt++ {
		entries = entries[:0]
		for _, r := range batch {
			entries = append(entries, r.entry)
		}
		out, err := p.putRecords(ctx, stream, entries)
		p.metrics.batches.Add(context.Background(), 1, p.streamAttrs(stream))
		var retry []*pendingRecord
		switch {
		case err != nil && (awscall.Classify(ctx, err) == awscall.Throttled || awscall.Classify(ctx, err) == awscall.Transient):
			retry = batch
			markFailed(batch, err)
		case err != nil:
			markFailed(batch, p.callError(stream, err))
			return err
		default:
			var n, written int
			retry, n, written = p.failedEntries(batch, out)
			permanent += n
			p.metrics.sent.Add(context.Background(), int64(written), p.streamAttrs(stream))
		}
		if len(retry) == 0 {
			if permanent > 0 {
				return fmt.Errorf("kinesis: %d record(s) rejected with an entry error that a retry cannot fix", permanent)
			}
			return nil
		}
		if attempt >= p.config.MaxRetries {
			return fmt.Errorf("kinesis: %d record(s) still rejected after %d retries", len(retry), attempt)
		}
		p.logger.Debug("Retrying rejected records", watermill.LogFields{"stream": stream, "records": len(retry), "attempt": attempt + 1})
		p.metrics.retries.Add(context.Background(), int64(len(retry)), p.streamAttrs(stream))
		if err := awscall.Sleep(ctx, awscall.Backoff(attempt, p.config.RetryBackoff, p.config.MaxRetryBackoff)); err != nil {
			for _, r := range retry {
				r.err = fmt.Errorf("%w while waiting to retry (last attempt: %w)", err, r.err)
			}
			return err
		}
		batch = retry
	}
}

// failedEntries returns the records whose entries failed with an error a retry may fix, and
// counts those that failed for good and the messages written; each failed record keeps its
// error.
func (p *Publisher) failedEntries(batch []*pendingRecord, out *awskinesis.PutRecordsOutput) (retry []*pendingRecord, permanent, written int) {
	for i, r := range batch {
		if i >= len(out.Records) {
			r.err = errors.New("kinesis: PutRecords returned fewer results than records sent")
			retry = append(retry, r)
			continue
		}
		res := out.Records[i]
		if res.ErrorCode == nil {
			r.written, r.err = true, nil
			written += len(r.messages())
			continue
		}
		r.err = fmt.Errorf("kinesis: entry rejected with %s: %s", *res.ErrorCode, deref(res.ErrorMessage))
		if !awscall.RetryableEntryCode(*res.ErrorCode) {
			permanent++
			continue
		}
		retry = append(retry, r)
	}
	return retry, permanent, written
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

// putRecords makes one PutRecords call, bounded by RequestTimeout.
func (p *Publisher) putRecords(ctx context.Context, stream string, entries []types.PutRecordsRequestEntry) (*awskinesis.PutRecordsOutput, error) {
	callCtx, cancel := context.WithTimeout(ctx, p.config.RequestTimeout)
	defer cancel()
	return p.config.Client.PutRecords(callCtx, &awskinesis.PutRecordsInput{StreamName: &stream, Records: entries})
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

// Close makes later Publish calls fail with an error matching ErrPublisherClosed. Publish calls
// in progress finish. Close is idempotent.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	return nil
}
