package shard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire"
)

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
			if attempt+1 >= awscall.FailuresBeforeError {
				// As for reads: a blip is INFO, an outage is an ERROR someone should see.
				r.cfg.Logger.Error(r.openingWhat()+" keeps failing; retrying", err,
					r.LogFields().Add(watermill.LogFields{"failures": attempt + 1}))
			} else {
				r.cfg.Logger.Info(r.openingWhat()+" failed; retrying", r.LogFields().Add(watermill.LogFields{"err": err}))
			}
			if err := awscall.Sleep(r.ctx, wait); err != nil {
				return err
			}
		case awscall.Fatal:
			if !r.fallBackFromTrimmed(r.start.sequence(), err) {
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
	case pos.Initial.Type == AtSequenceNumber:
		at := pos.Initial.SequenceNumber
		return types.StartingPosition{Type: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: &at}
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
