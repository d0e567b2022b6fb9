package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
)

// pushState is a reader's SubscribeToShard subscription, with enhanced fan-out. The reader
// goroutine owns it: it makes the subscription, takes its events one at a time where polling
// would call GetRecords (fetch), and ends it (endPush) before it subscribes again and when it
// stops. Everything else of the reader (leases, the window, checkpoints, handoff) is the same
// as polling's: a pushed event is a batch like a GetRecords response.
type pushState struct {
	events *awskinesis.SubscribeToShardEventStream // the open subscription; nil when none
	// endStream ends the subscription's HTTP request (its context).
	endStream context.CancelFunc
	// renewAt is when to subscribe again, ahead of the end Kinesis puts to every subscription
	// 5 minutes after it was made, so that the reader never waits on a stream about to end.
	renewAt time.Time
	// continuation is the ContinuationSequenceNumber of the last event: where the next
	// subscription resumes, also after events without records.
	continuation string
	// subscribedAt is when this reader's last subscription was made: Kinesis refuses another
	// of the same consumer and shard for 5 s after it (SubscriptionTakeover).
	subscribedAt time.Time
	// subscribeSentAt is when this reader's last SubscribeToShard call was sent, answered or
	// not: Kinesis may count a subscription the reader never saw (its call cut off by a
	// handover or by its time limit), and the next owner's is refused for 5 s from there.
	subscribeSentAt time.Time
	// consumer is the consumer ARN the last subscription was made through.
	consumer string
}

const (
	// pushRenewAfter is how long a reader keeps a subscription before it subscribes again:
	// Kinesis ends each after 5 minutes.
	pushRenewAfter = 5*time.Minute - 20*time.Second
	// PushSilenceLimit is how long a subscription may send nothing before the reader ends it
	// and subscribes again from where it got to. Kinesis sends an event at least every 5 s,
	// records or not; a connection that went silent for longer is dead without having said so.
	PushSilenceLimit = 30 * time.Second
	// pushInUseBackoff is the first wait after Kinesis refused a subscription because another
	// of the same consumer and shard was made less than 5 s before (the shard's previous
	// reader's); waits double up to pushInUseMaxBackoff, so that the try that succeeds comes
	// soon after those 5 s are up, well before the point where the coordinator gives up a
	// reader that has not started (0.8 × LeaseDuration).
	pushInUseBackoff    = 500 * time.Millisecond
	pushInUseMaxBackoff = 1500 * time.Millisecond
	// SubscriptionTakeover is how long after a subscription Kinesis refuses another of the
	// same consumer and shard (ResourceInUseException), and lets one take over after.
	SubscriptionTakeover = 5 * time.Second
)

// pushed reports whether the reader reads with enhanced fan-out.
func (r *Reader) pushed() bool { return r.cfg.FanOut != nil }

// subscriptionInUse reports Kinesis's refusal of a second subscription of one consumer to one
// shard within 5 s of the first, and the end of a subscription that a newer one took over.
func subscriptionInUse(err error) bool {
	var inUse *types.ResourceInUseException
	return errors.As(err, &inUse)
}

// subscribe makes a SubscribeToShard subscription that starts at pos. err is the call's; stop,
// when not nil, is what ended the reader while the call was out (see kinesisCall).
func (r *Reader) subscribe(pos Start) (err, stop error) {
	api := r.cfg.FanOutAPI // Validate checked it
	start := r.startAt(pos)
	arn := r.cfg.FanOut.ARN()
	in := &awskinesis.SubscribeToShardInput{ConsumerARN: &arn, ShardId: &r.shardID, StartingPosition: &start}
	// The subscription outlives the call: its events come on the response body, read until
	// endPush. So the SDK gets a context of its own, which the call's time limit ends only
	// while Kinesis has not answered yet.
	streamCtx, endStream := context.WithCancel(r.ctx)
	r.push.subscribeSentAt = r.now()
	var events *awskinesis.SubscribeToShardEventStream
	err, stop = r.kinesisCall(func(ctx context.Context) error {
		unbind := context.AfterFunc(ctx, endStream)
		out, err := api.SubscribeToShard(streamCtx, in, ownProtocol)
		if !unbind() { // the time limit passed, or the reader stopped, as the answer came
			if err == nil {
				_ = out.GetStream().Close()
			}
			return ctx.Err()
		}
		if err == nil {
			if events = out.GetStream(); events == nil {
				return errors.New("SubscribeToShard returned no event stream")
			}
		}
		return err
	})
	if err != nil || stop != nil {
		endStream()
		if events != nil {
			_ = events.Close()
		}
		return err, stop
	}
	r.push.events, r.push.endStream, r.push.consumer = events, endStream, arn
	r.push.subscribedAt = r.now()
	r.push.renewAt = r.push.subscribedAt.Add(pushRenewAfter)
	return nil, nil
}

// ownProtocol gives one SubscribeToShard call of the SDK's client a protocol of its own. The
// client's protocol holds one event-stream codec whose scratch state is shared, unsynchronised,
// by every stream of the client (aws/smithy-go#714): a reader's new subscription decoding its
// initial response while other readers' streams decode events is a data race. A protocol per
// subscription keeps each stream's decoding to itself. memlog ignores it.
func ownProtocol(o *awskinesis.Options) {
	o.Protocol = awsjson.New11(schemas.Kinesis_20131202)
}

// endPush ends the open subscription, if any.
func (r *Reader) endPush() {
	if r.push.endStream != nil {
		r.push.endStream() // first, so that Close does not wait on a body still being read
		r.push.endStream = nil
	}
	if r.push.events != nil {
		_ = r.push.events.Close()
		r.push.events = nil
	}
}

// notBeforeTakeover postpones the next subscription until Kinesis takes one again: one within
// 5 s of this reader's last is refused, and each refusal counts against the consumer's one
// call per second per shard.
func (r *Reader) notBeforeTakeover() {
	if next := r.push.subscribedAt.Add(SubscriptionTakeover); r.fetchAt.Before(next) {
		r.fetchAt = next
	}
}

// resumeAt is where the next subscription starts: after the last event's continuation, so
// that nothing is read twice or skipped.
func (r *Reader) resumeAt() Start {
	switch {
	case r.lastRead != "" || (r.push.continuation != "" && r.start.After == ""):
		// Once records were read, or from an initial position (where, from LATEST, a new
		// subscription would skip what arrived meanwhile), the continuation is the place.
		// From a checkpoint with nothing read, the checkpoint is the same place and keeps
		// the skip inside a KPL aggregate.
		if r.push.continuation != "" {
			return Start{After: r.push.continuation}
		}
		return Start{After: r.lastRead}
	case r.start.After == "" && r.start.Initial.Type == Latest:
		// No event yet from a LATEST start: as for an expired iterator (fetchFailed).
		return Start{Initial: Position{Type: AtTimestamp, Timestamp: r.askedAt.Add(-latestSkewMargin)}}
	}
	return r.start
}

// fetchPushed is fetch with enhanced fan-out: the next event of the subscription is the next
// batch. Without an open subscription it subscribes first (and the next fetch takes an event).
func (r *Reader) fetchPushed() error {
	if r.push.events != nil && !r.now().Before(r.push.renewAt) {
		r.cfg.Logger.Debug("Renewing the shard's subscription", r.LogFields())
		r.endPush()
	}
	if r.push.events == nil {
		err, stop := r.subscribe(r.resumeAt())
		switch {
		case stop != nil:
			return stop
		case err != nil:
			r.failures++
			return r.pushFailed(err, false)
		}
		r.fetchAt = r.now()
		return nil
	}
	return r.awaitEvent()
}

// awaitEvent takes the subscription's next event, waiting for it as a call that is out: the
// reader goes on renewing, checkpointing, sending and handing over meanwhile (callOut). A
// reader that pauses meanwhile may take the event, but sends nothing of it while paused.
func (r *Reader) awaitEvent() error {
	events := r.push.events.Events()
	limit := min(PushSilenceLimit, max(r.push.renewAt.Sub(r.now()), 0))
	ctx, cancel := context.WithTimeout(r.ctx, limit)
	defer cancel()
	var ev types.SubscribeToShardEventStream
	var open bool
	// The goroutine takes an event only when it returns it, so an event is never taken and
	// dropped, but when the reader stops (stop), and then the next owner reads from the
	// checkpoint.
	err, stop := r.callOut(ctx, cancel, func(ctx context.Context) error {
		select {
		case ev, open = <-events:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	switch {
	case stop != nil:
		return stop
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	case err != nil:
		if r.now().Before(r.push.renewAt) {
			r.cfg.Logger.Info("The shard's subscription sent nothing for too long; subscribing again",
				r.LogFields().Add(watermill.LogFields{"silent_for": limit}))
		}
		r.endPush()
		r.fetchAt = r.now()
		return nil
	case !open:
		streamErr := r.push.events.Err()
		r.endPush()
		r.fetchAt = r.now()
		if streamErr == nil {
			// Kinesis ended the subscription: its 5 minutes are up, or (the SDK reports a
			// connection cut between events as a clean end too) the connection dropped.
			r.notBeforeTakeover()
			return nil
		}
		r.failures++
		return r.pushFailed(streamErr, true)
	}
	e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
	if !ok { // an event this SDK does not know: nothing to read in it
		r.fetchAt = r.now()
		return nil
	}
	r.took(e.Value.Records, e.Value.MillisBehindLatest)
	r.fetchAt = r.now()
	switch c := e.Value.ContinuationSequenceNumber; {
	case len(e.Value.ChildShards) > 0:
		// The shard is closed and this is its last event: Kinesis names the children, as
		// GetRecords does at the end, and sends no continuation.
		r.ended, r.children = true, e.Value.ChildShards
		r.endPush()
	case c == nil:
		// Neither a continuation nor the children: not an end Kinesis would send, and
		// taking it for one would skip the rest of an open shard. Subscribe again from the
		// last record read.
		logs.Warn(r.cfg.Logger, "The shard's subscription sent an event with no ContinuationSequenceNumber and no ChildShards; subscribing again", nil,
			r.LogFields().Add(watermill.LogFields{"records": len(e.Value.Records)}))
		r.endPush()
		r.notBeforeTakeover()
	default:
		r.push.continuation = *c
	}
	return nil
}

// pushErrorKind sorts the failures of a subscription that pushFailed treats apart from the
// errors that classify sorts, as polling's are.
type pushErrorKind int

const (
	pushOtherError       pushErrorKind = iota // classify decides
	pushInUse                                 // refused: another subscription was made less than 5 s ago
	pushTakenOver                             // ended: a newer subscription took over while the lease is held
	pushConnectionFailed                      // ended by the connection, with no word from Kinesis
)

// pushErrorKindOf is pushFailed's first decision about err, from a SubscribeToShard call
// (inStream false) or an open subscription's stream, of a reader that holds a lease or not.
func pushErrorKindOf(err error, inStream, leased bool) pushErrorKind {
	var apiErr smithy.APIError
	switch {
	case subscriptionInUse(err) && inStream && leased:
		return pushTakenOver
	case subscriptionInUse(err):
		return pushInUse
	case inStream && !errors.As(err, &apiErr) && !errors.Is(err, context.Canceled):
		return pushConnectionFailed
	}
	return pushOtherError
}

// pushFailed is fetchFailed for a subscription that could not be made (inStream false) or
// that ended in error: what may pass postpones the next subscription; only errors no retry can
// fix are returned. r.failures counts the failure already.
func (r *Reader) pushFailed(err error, inStream bool) error {
	what := "subscribing to the shard (SubscribeToShard)"
	if inStream {
		what = "reading the shard's subscription (SubscribeToShard)"
	}
	fields := r.LogFields().Add(watermill.LogFields{"err": err, "failures": r.failures})
	switch pushErrorKindOf(err, inStream, r.held != nil) {
	case pushTakenOver:
		// A newer subscription of the consumer to this shard took this one over while
		// this reader holds the lease: no instance of the group should subscribe to it
		// now, so another group (or program) reads through the same consumer name.
		logs.Warn(r.cfg.Logger, "The shard's subscription was taken over by another; subscribing again shortly", err, fields.Add(watermill.LogFields{
			"consumer": r.cfg.FanOutConsumer,
			"why":      "another consumer group, or another program, subscribes through the same stream consumer: give each group its own FanOut.ConsumerName"}))
		r.fetchAt = r.now().Add(awscall.Backoff(r.failures-1, SubscriptionTakeover, 4*SubscriptionTakeover))
		return nil
	case pushInUse:
		// Another subscription of the consumer to this shard was made less than 5 s ago
		// (the shard's previous reader's). Kinesis lets a new one take over 5 s after it.
		r.cfg.Logger.Info("Subscription to the shard is in use by another; subscribing again shortly", fields)
		r.fetchAt = r.now().Add(awscall.Backoff(r.failures-1, pushInUseBackoff, pushInUseMaxBackoff))
		return nil
	case pushConnectionFailed:
		// The connection failed under the stream (a reset, a GOAWAY, a body cut short): no
		// word from Kinesis, which polling's reads count as passing too.
		r.retryRead(awscall.Transient, err)
		r.notBeforeTakeover()
		return nil
	}
	class := awscall.Classify(r.ctx, err)
	if r.retryRead(class, err) {
		r.notBeforeTakeover()
		return nil
	}
	switch class {
	case awscall.NotFound:
		// The consumer was deregistered (and perhaps registered again by another instance,
		// under a new ARN), or the stream is gone: find or register the consumer again,
		// which says which.
		return r.consumerGone(err, what)
	case awscall.Fatal:
		if r.fallBackFromTrimmed(r.resumeAt().sequence(), err) {
			r.start, r.lastRead, r.push.continuation = Start{Initial: Position{Type: TrimHorizon}}, "", ""
			return nil
		}
	}
	return &awscall.ShardError{Stream: r.cfg.Stream, ShardID: r.shardID, Err: fmt.Errorf("%s: %w", what, err)}
}

// consumerGone finds or registers the stream consumer again after a subscription through the
// one this reader used found it gone, as a call that is out (callOut) so that the reader keeps
// renewing meanwhile. The next subscription uses the consumer's ARN as it is now.
func (r *Reader) consumerGone(cause error, what string) error {
	stale := r.push.consumer
	if stale == "" {
		stale = r.cfg.FanOut.ARN()
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.FanOutRegister+r.cfg.RequestTimeout)
	defer cancel()
	var arn string
	err, stop := r.callOut(ctx, cancel, func(ctx context.Context) (err error) {
		arn, err = r.cfg.FanOut.Refresh(ctx, stale)
		return err
	})
	switch {
	case stop != nil:
		return stop
	case errors.Is(err, awscall.ErrStreamNotFound):
		return &awscall.ShardError{Stream: r.cfg.Stream, ShardID: r.shardID, Err: fmt.Errorf("%s: %w", what, err)}
	case err != nil:
		return &awscall.ShardError{Stream: r.cfg.Stream, ShardID: r.shardID, Err: fmt.Errorf(
			"%s: the stream consumer %q is gone (deregistered?), and finding or registering it again failed: %w (the subscription's error: %w)",
			what, r.cfg.FanOutConsumer, err, cause)}
	}
	if arn == stale {
		// The consumer is there as it was: what Kinesis did not find is the shard.
		return &awscall.ShardError{Stream: r.cfg.Stream, ShardID: r.shardID, Err: fmt.Errorf("%s: %w", what, cause)}
	}
	r.cfg.Logger.Info("The stream consumer was gone; subscribing through it as it is now", r.LogFields().Add(watermill.LogFields{
		"consumer": r.cfg.FanOutConsumer, "consumer_arn": arn, "err": cause}))
	r.fetchAt = r.now()
	return nil
}
