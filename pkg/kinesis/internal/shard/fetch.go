package shard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/getrecords"
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
	// backlogged: the last read returned as many records as it asked for and the shard said
	// more wait (MillisBehindLatest > 0), so the next read asks for all the budget leaves room
	// for rather than the ramp's next step (readLimit).
	backlogged bool
	// readsWithRecords counts the reads that returned records, for the read ramp (readRamp).
	readsWithRecords int
	ended            bool               // the shard is closed and read to its end
	children         []types.ChildShard // the ChildShards of the read that reached the end
	fetchAt          time.Time          // the earliest time the next GetRecords may be sent
	failures         int                // consecutive failed reads, for backoff
	tipWait          time.Duration      // the wait after a read that reached the tip; see pollWait
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
		// WithFastDecode: the SDK's own decoding of the answer cost more per record than
		// the rest of the reader (package getrecords); clients other than the SDK's ignore it.
		out, err = cfg.Client.GetRecords(ctx, in, getrecords.WithFastDecode)
		return err
	})
	if stop != nil {
		return stop
	}
	if err != nil {
		return r.fetchFailed(err)
	}
	r.backlogged = len(out.Records) >= int(limit) && aws.ToInt64(out.MillisBehindLatest) > 0
	r.took(out.Records, out.MillisBehindLatest)
	if out.NextShardIterator == nil {
		r.ended, r.iterator, r.children = true, "", out.ChildShards
		return nil
	}
	r.iterator = *out.NextShardIterator
	switch {
	case len(out.Records) < int(limit) && r.behind == 0:
		// At the tip of the shard, records or not: what the next read finds is what arrives
		// meanwhile, so it waits the poll interval. Reading again after MinReadInterval
		// whenever a read returned records, a group at the tip of a busy shard took all of
		// its five reads a second, and two other groups polling it fell 30 and 45 s behind.
		r.fetchAt = started.Add(r.pollWait())
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
	r.batch, r.next = wire.DropDone(records, r.skipSeq), 0
	r.records = wire.Expand(r.batch, r.cfg.KeepKPLAggregates, r.skipSeq, r.skipThrough)
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
			if r.fallBackFromTrimmed(pos.sequence(), gerr) {
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
		r.slowDown()
		// Capped at 1 s: a shard's read limits (5 reads/s, 2 MB/s) refill within a second.
		// With a 5 s cap, reads throttled at random half the time in the fault suite waited
		// up to 21 s (runs of failures double the wait); only a 10 MB read earns a 5 s
		// penalty, which this cap meets with a few more throttled calls.
		r.fetchAt = r.now().Add(awscall.Backoff(r.failures-1, 250*time.Millisecond, readThrottleMaxBackoff))
		return true
	case awscall.Transient:
		// A blip is routine and logged at INFO. Reads that keep failing are an outage that
		// someone should see: the fault suite's 30 s GetRecords outage logged nothing above
		// INFO. From the awscall.FailuresBeforeError-th failure in a row (6 to 13 s into an
		// outage, by the backoff below) each retry logs at ERROR, at most one line per shard
		// every 5 to 10 s.
		if r.failures >= awscall.FailuresBeforeError {
			r.cfg.Logger.Error("Reads keep failing; retrying", err, fields)
		} else {
			r.cfg.Logger.Info("Read failed; retrying", fields)
		}
		r.fetchAt = r.now().Add(awscall.Backoff(r.failures-1, 100*time.Millisecond, 10*time.Second))
		return true
	}
	return false
}

// pollWait is the wait after a read that reached the tip of the shard: PollInterval, longer
// after throttled reads (slowDown), an eighth more or less at random (so that it averages
// PollInterval: two groups at the default stay within the shard's five reads a second), never
// under MinReadInterval; each call brings the pace an eighth of PollInterval back toward it.
//
// A shard's five reads a second are shared by every group that polls it, and PollInterval's
// default (2.5 reads a second) leaves room for two. With three, the two that happen to read
// first in each cycle took every read and the third was refused for as long as they kept
// step (on fake time, for ever); a pace a little random keeps no two groups in step, and a
// pace that slows where reads are refused brings the groups' reads down to what the shard
// answers, each group slowing as often as it is refused. Three groups polling one shard
// written at 500 records/s: each group's longest time from PutRecords to delivery 0.6 to
// 3.4 s (median 1.0 s in 75 group runs), 11 to 15 % of reads refused
// (TestQuotaThreePollingGroups in tests/quota).
func (r *Reader) pollWait() time.Duration {
	poll := r.cfg.PollInterval
	w := max(r.tipWait, poll)
	r.tipWait = max(w-poll/8, poll)
	return max(w-w/8+rand.N(w/4+1), r.cfg.MinReadInterval)
}

// slowDown makes the reader poll the tip half as slowly again after a throttled read, up to
// 2.5 × PollInterval (1 s at the default, the pause AWS's GetRecords reference advises).
func (r *Reader) slowDown() {
	poll := r.cfg.PollInterval
	r.tipWait = min(max(r.tipWait, poll)*3/2, poll*5/2)
}

// readThrottleMaxBackoff caps the wait after throttled reads.
const readThrottleMaxBackoff = time.Second
