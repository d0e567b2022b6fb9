package shard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire"
)

// fetchState is a reader's position in its shard: the iterator, the batch read last, and when
// the next read may go out. The reader goroutine owns it.
type fetchState struct {
	iterator string
	askedAt  time.Time         // when the first iterator was asked for, by this machine's clock
	lastRead string            // sequence number of the last record fetched
	batch    []types.Record    // the current batch
	records  []wire.UserRecord // the current batch with its KPL aggregates expanded; nil if it has none
	next     int               // index in records (or, if nil, batch) of the next record to deliver
	// skipSeq and skipThrough: the reader resumes inside the KPL aggregate skipSeq, whose user
	// records up to skipThrough are done; cleared once that aggregate has been read.
	skipSeq     string
	skipThrough int
	behind      int64 // MillisBehindLatest of the current batch
	// avgRecordBytes is the average data size of the last read that returned records, which
	// sizes the next read (holdLimit).
	avgRecordBytes int
	// readsWithRecords counts the reads that returned records, for the read ramp (readRamp).
	readsWithRecords int
	ended            bool               // the shard is closed and read to its end
	children         []types.ChildShard // the ChildShards of the read that reached the end
	fetchAt          time.Time          // the earliest time the next GetRecords may be sent
	failures         int                // consecutive failed reads, for backoff
	timeouts         int                // consecutive Kinesis calls that timed out (callContext)
}

// fetch reads the next batch. Throttling and transient failures only postpone the next read
// (same iterator, no rewind, nothing reaches the handler); an expired iterator is replaced
// by one after the last record read. Only errors no retry can fix are returned.
func (r *Reader) fetch() error {
	if r.pushed() {
		return r.fetchPushed()
	}
	cfg := r.cfg
	limit := r.readLimit()
	started := r.now()
	in := &awskinesis.GetRecordsInput{ShardIterator: aws.String(r.iterator), Limit: &limit}
	var out *awskinesis.GetRecordsOutput
	err, stop := r.kinesisCall(func(ctx context.Context) (err error) {
		out, err = cfg.Client.GetRecords(ctx, in)
		return err
	})
	if stop != nil {
		return stop
	}
	if err != nil {
		return r.fetchFailed(err)
	}
	r.took(out.Records, out.MillisBehindLatest)
	if out.NextShardIterator == nil {
		r.ended, r.iterator, r.children = true, "", out.ChildShards
		return nil
	}
	r.iterator = *out.NextShardIterator
	switch {
	case len(out.Records) == 0 && r.behind == 0:
		r.fetchAt = started.Add(cfg.PollInterval)
	default:
		// More may be waiting: read again as soon as Kinesis's per-shard rate allows.
		r.fetchAt = started.Add(cfg.MinReadInterval)
	}
	return nil
}

// took makes records, read by GetRecords or pushed by SubscribeToShard, the current batch.
// The reader reads again only once the batch before is prepared (decide), so none is dropped.
func (r *Reader) took(records []types.Record, behind *int64) {
	r.failures = 0
	r.batch, r.next = records, 0
	r.records = wire.Expand(records, r.cfg.KeepKPLAggregates, r.skipSeq, r.skipThrough)
	if len(records) > 0 {
		r.skipSeq = "" // the aggregate to resume inside is the first record read
	}
	if behind != nil {
		r.behind = *behind
	}
	r.health.lastRead.Store(r.now().UnixNano())
	r.health.behind.Store(r.behind)
	if n := len(records); n > 0 {
		r.lastRead = aws.ToString(records[n-1].SequenceNumber)
		size := 0
		for i := range records {
			size += len(records[i].Data)
		}
		r.avgRecordBytes = max(size/n, 1)
		r.readsWithRecords = min(r.readsWithRecords+1, maxRampDoublings)
	}
}

// buffered is how many records of the current batch are not prepared yet.
func (r *Reader) buffered() int {
	if r.records != nil {
		return len(r.records) - r.next
	}
	return len(r.batch) - r.next
}

func (r *Reader) fetchFailed(err error) error {
	r.failures++
	class := awscall.Classify(r.ctx, err)
	if r.retryRead(class, err) {
		return nil
	}
	fields := r.LogFields().Add(watermill.LogFields{"err": err, "failures": r.failures})
	switch class {
	case awscall.ExpiredIterator:
		// Resume right after the last record read: never LATEST (that skips records), never
		// the checkpoint (that redelivers what is in flight).
		pos := r.start
		switch {
		case r.lastRead != "":
			pos = Start{After: r.lastRead}
		case pos.After == "" && pos.Initial.Type == Latest:
			// Nothing read yet from a LATEST start: a new LATEST iterator would skip what
			// arrived since the first one was taken. Start where that was, by time, less a
			// margin for clock skew: a few older records may come again, none is lost.
			pos = Start{Initial: Position{Type: AtTimestamp, Timestamp: r.askedAt.Add(-latestSkewMargin)}}
		}
		it, gerr, stop := r.getIterator(pos)
		if stop != nil {
			return stop
		}
		if gerr != nil {
			if c := awscall.Classify(r.ctx, gerr); c == awscall.Throttled || c == awscall.Transient {
				r.cfg.Logger.Info("Replacing an expired iterator failed; retrying", r.LogFields().Add(watermill.LogFields{"err": gerr, "failures": r.failures}))
				r.fetchAt = r.now().Add(awscall.Backoff(r.failures-1, 100*time.Millisecond, 5*time.Second))
				return nil
			}
			if r.fallBackFromTrimmed(pos.After, gerr) {
				// The last record read aged out while the iterator sat unused: what came
				// after it may have too, and the oldest record left is next.
				r.start, r.lastRead = Start{Initial: Position{Type: TrimHorizon}}, ""
				r.fetchAt = r.now()
				return nil
			}
			return &awscall.ShardError{Stream: r.cfg.Stream, ShardID: r.shardID, Err: fmt.Errorf("replacing an expired iterator: %w", gerr)}
		}
		r.cfg.Logger.Debug("Iterator expired; replaced after the last record read", fields)
		r.metrics.Count(CountIteratorRenewals, 1)
		r.iterator = it
		return nil
	case awscall.NotFound:
		return &awscall.ShardError{Stream: r.cfg.Stream, ShardID: r.shardID, Err: fmt.Errorf("%w: %w", awscall.ErrStreamNotFound, err)}
	default:
		return &awscall.ShardError{Stream: r.cfg.Stream, ShardID: r.shardID, Err: fmt.Errorf("reading records: %w", err)}
	}
}

// retryRead postpones the next read after a read that was throttled or failed in a way that
// passes (same position, no rewind, nothing reaches the handler), and says so in the log; it
// reports whether the failure was of that kind. r.failures counts it already.
func (r *Reader) retryRead(class awscall.Class, err error) bool {
	fields := r.LogFields().Add(watermill.LogFields{"err": err, "failures": r.failures})
	switch class {
	case awscall.Throttled:
		r.cfg.Logger.Debug("Read throttled; backing off", fields)
		r.metrics.Count(CountThrottles, 1)
		// Capped at 1 s: a shard's read limits (5 reads/s, 2 MB/s) refill within a second.
		// With a 5 s cap, reads throttled at random half the time in the fault suite waited
		// up to 21 s (runs of failures double the wait); only a 10 MB read earns a 5 s
		// penalty, which this cap meets with a few more throttled calls.
		r.fetchAt = r.now().Add(awscall.Backoff(r.failures-1, 250*time.Millisecond, readThrottleMaxBackoff))
		return true
	case awscall.Transient:
		// A blip is routine and logged at INFO. Reads that keep failing are an outage that
		// someone should see: the fault suite's 30 s GetRecords outage logged nothing above
		// INFO. From the ReadFailuresBeforeError-th failure in a row (6 to 13 s into an
		// outage, by the backoff below) each retry logs at ERROR, at most one line per shard
		// every 5 to 10 s.
		if r.failures >= ReadFailuresBeforeError {
			r.cfg.Logger.Error("Reads keep failing; retrying", err, fields)
		} else {
			r.cfg.Logger.Info("Read failed; retrying", fields)
		}
		r.fetchAt = r.now().Add(awscall.Backoff(r.failures-1, 100*time.Millisecond, 10*time.Second))
		return true
	}
	return false
}

// callContext bounds one Kinesis call of the reader by RequestTimeout, on the subscription's
// clock. A call that outlasts it fails with a context error while r.ctx is live, which
// classify counts as transient.
//
// After calls that timed out, the next one may take longer: RequestTimeout doubles with each
// timeout in a row, up to MaxTimeoutDoublings times, and is back to RequestTimeout after a
// call that did not time out. A hung connection is still cut at RequestTimeout; a server that
// is only slow (an overloaded emulator took over 10 s for reads that Watermill's concurrent
// subscribe test makes by the hundred) gets its answers through instead of being asked the
// same thing again and again, each abandoned call adding to its load.
func (r *Reader) callContext() (context.Context, context.CancelFunc) {
	d := r.cfg.RequestTimeout << min(r.timeouts, MaxTimeoutDoublings)
	return clock.WithTimeout(r.ctx, r.cfg.Clock, d)
}

// MaxTimeoutDoublings caps how far callContext stretches RequestTimeout after timeouts.
const MaxTimeoutDoublings = 3

// noteCall counts the reader's Kinesis calls that timed out in a row, for callContext.
func (r *Reader) noteCall(callCtx context.Context, err error) {
	switch {
	case err == nil:
		r.timeouts = 0
	case r.ctx.Err() == nil && context.Cause(callCtx) == context.DeadlineExceeded:
		r.timeouts++
	}
}

// kinesisCall makes one Kinesis call, bounded by callContext, and returns its error, or, as
// stop, what ended the reader while the call was out (the lease was lost or handed over, or
// the reader's context ended); the call is then cancelled and its error dropped.
//
// Under a lease the call runs on a goroutine of its own while the reader goroutine goes on
// carrying out decide's steps, reading excepted: it renews, checkpoints what is acked,
// pauses at the stop point, hands the lease over, and resends nacked messages. Renewing only
// between calls, a read slower than the stop point (0.8 × LeaseDuration after the last
// renewal) paused the shard, or, cut short at the stop point instead, never completed on a
// slow server; and a slow read followed by a slow iterator replacement held back the
// checkpoint and the handoff until the asking worker took the lease, which redelivered what
// was acked meanwhile (found by the simulation's slow reads). The goroutine touches nothing
// of the reader's: call writes only what the caller reads after done is closed.
func (r *Reader) kinesisCall(call func(ctx context.Context) error) (err, stop error) {
	ctx, cancel := r.callContext()
	defer cancel()
	err, stop = r.callOut(ctx, cancel, call)
	if stop == nil {
		r.noteCall(ctx, err)
	}
	return err, stop
}

// callOut is kinesisCall with the call's context (and its cancel) made by the caller: the
// wait for a pushed event (awaitEvent) is bounded otherwise than by RequestTimeout.
func (r *Reader) callOut(ctx context.Context, cancel context.CancelFunc, call func(ctx context.Context) error) (err, stop error) {
	if r.held == nil || r.renewAt.IsZero() { // no lease, or not reading yet (initIterator)
		return call(ctx), nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err = call(ctx)
	}()
	for {
		select {
		case <-done:
			return err, nil
		default:
		}
		if _, stepErr := r.turn(done); stepErr != nil || r.handedOff {
			cancel()
			<-done
			if stepErr == nil {
				stepErr = errHandedOver
			}
			return nil, stepErr
		}
	}
}

// errHandedOver ends a Kinesis call whose reader handed its lease over meanwhile.
var errHandedOver = errors.New("the lease was handed over")

// ReadFailuresBeforeError is how many reads of a shard in a row fail (throttled or transient)
// before a transient failure is logged at ERROR instead of INFO.
const ReadFailuresBeforeError = 8

// readThrottleMaxBackoff caps the wait after throttled reads.
const readThrottleMaxBackoff = time.Second

// latestSkewMargin is how far before its first LATEST iterator a reader that has read nothing
// resumes when that iterator expired: Kinesis stamps arrival times by its own clock.
const latestSkewMargin = time.Second

// initIterator gets the first iterator, or with enhanced fan-out makes the first subscription,
// retrying what may pass.
func (r *Reader) initIterator() error {
	for attempt := 0; ; attempt++ {
		askedAt := r.now()
		var it string
		var err, stop error
		if r.pushed() {
			err, stop = r.subscribe(r.start)
		} else {
			it, err, stop = r.getIterator(r.start)
		}
		if stop != nil {
			return stop
		}
		if err == nil {
			r.iterator, r.askedAt = it, askedAt
			return nil
		}
		class := awscall.Classify(r.ctx, err)
		wait := awscall.Backoff(attempt, 100*time.Millisecond, 5*time.Second)
		if r.pushed() && subscriptionInUse(err) {
			// The shard's previous reader subscribed less than 5 s ago: Kinesis takes this
			// one once those 5 s are up, and counts each refused call against 1 per second.
			class, wait = awscall.Throttled, awscall.Backoff(attempt, pushInUseBackoff, pushInUseMaxBackoff)
		}
		if r.pushed() && class == awscall.NotFound {
			if err := r.consumerGone(err, "subscribing to the shard (SubscribeToShard)"); err != nil {
				return err
			}
			continue
		}
		switch class {
		case awscall.Throttled, awscall.Transient:
			if attempt+1 >= ReadFailuresBeforeError {
				// As for reads: a blip is INFO, an outage is an ERROR someone should see.
				r.cfg.Logger.Error(r.openingWhat()+" keeps failing; retrying", err,
					r.LogFields().Add(watermill.LogFields{"failures": attempt + 1}))
			} else {
				r.cfg.Logger.Info(r.openingWhat()+" failed; retrying", r.LogFields().Add(watermill.LogFields{"err": err}))
			}
			if err := awscall.SleepOn(r.ctx, r.cfg.Clock, wait); err != nil {
				return err
			}
		case awscall.Fatal:
			if !r.fallBackFromTrimmed(r.start.After, err) {
				return &awscall.ShardError{Stream: r.cfg.Stream, ShardID: r.shardID, Err: fmt.Errorf("%s: %w", strings.ToLower(r.openingWhat()), err)}
			}
			r.start = Start{Initial: Position{Type: TrimHorizon}}
		default:
			return &awscall.ShardError{Stream: r.cfg.Stream, ShardID: r.shardID, Err: fmt.Errorf("%s: %w", strings.ToLower(r.openingWhat()), err)}
		}
	}
}

// openingWhat names initIterator's call in its log lines and errors.
func (r *Reader) openingWhat() string {
	if r.pushed() {
		return "Subscribing to the shard (SubscribeToShard)"
	}
	return "Getting a shard iterator"
}

// fallBackFromTrimmed reports whether a refused AFTER_SEQUENCE_NUMBER iterator should be
// replaced by TRIM_HORIZON, and says so in the log. Kinesis refuses a sequence number older
// than the shard's trim horizon with InvalidArgumentException: the records after it aged out of
// the stream's retention period before this group read them (the group was stopped, or too far
// behind, for longer than the retention), or the stream was deleted and created again under
// the same name. Either way nothing before the trim horizon can be read any more, and waiting
// would stall the shard for good; the oldest record left is where reading can go on.
func (r *Reader) fallBackFromTrimmed(after string, err error) bool {
	var invalid *types.InvalidArgumentException
	if after == "" || !errors.As(err, &invalid) {
		return false
	}
	r.cfg.Logger.Error("Checkpoint is older than the shard's trim horizon (its records aged out of the "+
		"stream's retention period, or the stream was re-created); resuming at the oldest record "+
		"(TRIM_HORIZON). Records between the checkpoint and the trim horizon were never delivered "+
		"to this group", err, r.LogFields().Add(watermill.LogFields{"sequence_number": after}))
	return true
}

// startAt is where a read from pos starts, in the terms of GetShardIterator and
// SubscribeToShard. Inside a KPL aggregate it is the aggregate itself, and the reader skips
// the user records of it that are done (skipSeq, skipThrough).
func (r *Reader) startAt(pos Start) types.StartingPosition {
	seq, sub, inside := wire.ParsePosition(pos.After)
	r.skipSeq, r.skipThrough = "", 0
	switch {
	case inside:
		r.skipSeq, r.skipThrough = seq, sub
		return types.StartingPosition{Type: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: &seq}
	case pos.After != "":
		return types.StartingPosition{Type: types.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: &seq}
	case pos.Initial.Type == Latest:
		return types.StartingPosition{Type: types.ShardIteratorTypeLatest}
	case pos.Initial.Type == AtTimestamp:
		ts := pos.Initial.Timestamp
		return types.StartingPosition{Type: types.ShardIteratorTypeAtTimestamp, Timestamp: &ts}
	}
	return types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}
}

// getIterator gets an iterator at pos. err is the call's; stop, when not nil, is what ended
// the reader while the call was out (see kinesisCall).
func (r *Reader) getIterator(pos Start) (it string, err, stop error) {
	at := r.startAt(pos)
	in := &awskinesis.GetShardIteratorInput{
		StreamName: &r.cfg.Stream, ShardId: &r.shardID,
		ShardIteratorType: at.Type, StartingSequenceNumber: at.SequenceNumber, Timestamp: at.Timestamp,
	}
	var out *awskinesis.GetShardIteratorOutput
	err, stop = r.kinesisCall(func(ctx context.Context) (err error) {
		out, err = r.cfg.Client.GetShardIterator(ctx, in)
		return err
	})
	switch {
	case stop != nil || err != nil:
		return "", err, stop
	case out.ShardIterator == nil:
		return "", errors.New("GetShardIterator returned no iterator"), nil
	}
	return *out.ShardIterator, nil, nil
}
