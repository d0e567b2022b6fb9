package memlog

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/eventstream"
)

// The limits and times of a subscription, as AWS documents them.
const (
	subscriptionLifetime = 5 * time.Minute // a subscription ends cleanly after this
	heartbeatInterval    = 5 * time.Second // the longest a subscription goes without an event
	takeoverAfter        = 5 * time.Second // a second subscription sooner than this is refused
	maxEventRecords      = 10000           // records per event
	maxEventBytes        = 1 << 20         // data + keys per event, but always at least one record
)

// SubscribeToShard subscribes the ACTIVE consumer ConsumerARN names to ShardId from
// StartingPosition, and returns the SDK's own output: read GetStream().Events() as against AWS.
// The request is validated first and its errors returned directly, as GetShardIterator's are,
// with the same rules for the starting position (a trimmed checkpoint, a sequence number of
// another shard or stream, a timestamp in the future are InvalidArgumentExceptions; their
// messages name GetShardIterator, whose checks they are).
//
// The stream then carries, as AWS's does:
//   - an event at once, with whatever records there are from the starting position (possibly
//     none), then an event whenever records are stored, each with at most 10,000 records and
//     1 MiB of data and keys (at least one record);
//   - an event with no records after 5 s of the Log's clock without an event (a heartbeat);
//   - in every event ContinuationSequenceNumber, the sequence number to resubscribe
//     AFTER_SEQUENCE_NUMBER with to resume at the first record not yet sent: that of the last
//     record sent, or, before any was, the number just before the starting position (for the
//     shard's first record, the shard's StartingSequenceNumber, which memlog accepts there);
//     and MillisBehindLatest as GetRecords computes it;
//   - at the end of a closed shard, an event with its last records and ChildShards and no
//     ContinuationSequenceNumber, then the end of the stream (Events closes, Err is nil);
//   - after 5 minutes of the Log's clock, the end of the stream (Events closes, Err is nil).
//
// A second SubscribeToShard for the same consumer and shard within 5 s of the last successful
// one is a ResourceInUseException; 5 s or more after it, it takes over, and the earlier stream
// ends with a ResourceInUseException. Deregistering the consumer ends its streams with a
// ResourceNotFoundException, and so does deleting the stream, at the subscription's next event
// or heartbeat. Records trimmed by ExpireRecords before they were sent are skipped, as a reader
// there skips to the trim horizon.
//
// The fault hook runs before the call (Op "SubscribeToShard") and before each event (Op
// "SubscribeToShardEvent"); see Call. Ending ctx, or closing the SDK's stream, stops the
// subscription's goroutine at once; ending ctx makes Err report ctx's error, as a broken
// connection would. Timed waits use Config.After.
func (l *Log) SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, _ ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error) {
	if in == nil {
		in = &awskinesis.SubscribeToShardInput{}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	call := Call{Op: "SubscribeToShard", Stream: consumerStream(in.ConsumerARN), ShardID: deref(in.ShardId)}
	if err := l.before(ctx, call); err != nil {
		return nil, err
	}
	var c checks
	c.required(top("consumerARN"), in.ConsumerARN)
	r := l.parseConsumerRef(&c, in.ConsumerARN, nil, nil)
	if c.required(top("shardId"), in.ShardId) {
		c.name(top("shardId"), *in.ShardId)
	}
	if in.StartingPosition == nil {
		c.fail(nil, top("startingPosition"), "not be null")
	} else {
		checkIteratorType(&c, "startingPosition.type", in.StartingPosition.Type)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	now := l.now()
	st, cons, err := l.activeConsumer(r, now)
	if err != nil {
		return nil, err
	}
	set := st.shards.Load()
	sh := set.byID(*in.ShardId)
	if sh == nil || set.state[sh.index].expired {
		return nil, l.errShardNotFound(*in.ShardId, st.name)
	}
	quota, err := l.admitSubscribe(st, cons, sh, now)
	if err != nil {
		return nil, err
	}
	sp := in.StartingPosition
	pos, err := l.startPosition(st, sh, &awskinesis.GetShardIteratorInput{
		ShardIteratorType: sp.Type, StartingSequenceNumber: sp.SequenceNumber, Timestamp: sp.Timestamp,
	}, now)
	if err != nil {
		return nil, err
	}
	if isTrue(in.DryRun) {
		return nil, errDryRun()
	}
	sub := newSubscription(ctx, l, st, sh, cons, max(pos, 1), now)
	sub.quota = quota
	if err := l.install(sub); err != nil {
		sub.cancel(err)
		return nil, err
	}
	go sub.run()
	out, err := l.sdk().SubscribeToShard(context.WithValue(ctx, subscriptionKey{}, sub), in, ownProtocol)
	if err != nil {
		// Only a context ended meanwhile gets here: the doer always answers.
		_ = sub.body.Close()
		<-sub.done
		return nil, err
	}
	return out, nil
}

// activeConsumer finds the consumer r names and requires it ACTIVE.
func (l *Log) activeConsumer(r consumerRef, now time.Time) (*stream, *consumer, error) {
	l.fanout.mu.Lock()
	defer l.fanout.mu.Unlock()
	st, cons, err := l.findConsumerLocked(r)
	if err != nil {
		return nil, nil, err
	}
	if s := l.status(cons, now); s != types.ConsumerStatusActive {
		return nil, nil, errInUse("Consumer %s under account %s is in the %s state. The consumer must be in the ACTIVE state to subscribe to a shard.",
			cons.arn, l.account, s)
	}
	return st, cons, nil
}

// install makes sub its consumer's subscription to its shard, under the 5-second rule, and ends
// the one it takes over from.
func (l *Log) install(sub *subscription) error {
	l.fanout.mu.Lock()
	defer l.fanout.mu.Unlock()
	if l.fanout.consumers[sub.st][sub.cons.name] != sub.cons {
		return l.errConsumerNotFound(sub.cons.arn) // deregistered since it was found
	}
	old := sub.cons.subs[sub.sh.index]
	if old != nil && sub.made.Sub(old.made) < takeoverAfter {
		return errInUse("Another active subscription exists for this consumer: %s:%s:%s:%s",
			l.account, sub.st.name, sub.sh.id, sub.cons.name)
	}
	if old != nil {
		old.end(errInUse("Another subscription has taken over from this one for this consumer: %s:%s:%s:%s",
			l.account, sub.st.name, sub.sh.id, sub.cons.name))
	}
	sub.cons.subs[sub.sh.index] = sub
	return nil
}

// wakeClosed wakes the subscriptions waiting on the shards a reshard closed, so they send each
// shard's last records and ChildShards at once. Shards the plan created cannot have any.
func (p *plan) wakeClosed() {
	for _, c := range p.closes {
		if c.sh.index < len(p.old.all) {
			c.sh.mu.Lock()
			c.sh.wakeLocked()
			c.sh.mu.Unlock()
		}
	}
}

// subscription is one SubscribeToShard: a pump goroutine (run) that writes the stream's
// messages into a pipe whose read end is the SDK's response body.
type subscription struct {
	l    *Log
	st   *stream
	sh   *shard
	cons *consumer
	made time.Time // when SubscribeToShard accepted it, on the Log's clock
	pos  uint64    // ordinal of the next record to send; only the pump uses it once it runs
	// quota paces the pushes to Config.Quotas.FanOutBytes; nil without Config.Quotas.
	quota *fanOutQuota

	parent context.Context // the caller's
	ctx    context.Context // parent's child, also cancelled when the body is closed
	cancel context.CancelCauseFunc
	pw     *io.PipeWriter
	body   subscriptionBody
	enc    *eventstream.Encoder // the pump's alone

	endOnce sync.Once
	ended   chan struct{} // closed by end, after endErr is set
	endErr  error         // the exception the stream ends with

	done chan struct{} // closed when the pump returns
}

func newSubscription(ctx context.Context, l *Log, st *stream, sh *shard, cons *consumer, pos uint64, now time.Time) *subscription {
	sctx, cancel := context.WithCancelCause(ctx)
	pr, pw := io.Pipe()
	return &subscription{
		l: l, st: st, sh: sh, cons: cons, made: now, pos: pos,
		parent: ctx, ctx: sctx, cancel: cancel,
		pw: pw, body: subscriptionBody{PipeReader: pr, cancel: cancel},
		enc:   eventstream.NewEncoder(),
		ended: make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// end asks the pump to end the stream with err (an in-stream exception) as soon as it is between
// events. It does not block; only the first call counts.
func (s *subscription) end(err error) {
	s.endOnce.Do(func() {
		s.endErr = err
		close(s.ended)
	})
}

// writeError is a failed write into the pipe: the reader is gone, or the context ended. Nothing
// more can be sent.
type writeError struct{ error }

func (s *subscription) write(m eventstream.Message) error {
	if err := s.enc.Encode(s.pw, m); err != nil {
		return writeError{err}
	}
	return nil
}

// abort breaks the pipe when the subscription's context ends, so a pump blocked writing to a
// reader that does not read returns. The reader sees the caller's context error, as it would
// see a broken connection's.
func (s *subscription) abort() {
	err := s.parent.Err()
	if err == nil {
		err = io.ErrClosedPipe // the reader closed the body
	}
	_ = s.pw.CloseWithError(err)
}

// run is the pump. It keeps two timers at most: the subscription's end, and the next heartbeat,
// which is armed again only when it fires (for the rest of the 5 s if an event went out since),
// so a busy stream creates no timer per event. A timer is armed before the event it may cause,
// so a test that reads that event and then moves its clock finds the next timer there.
func (s *subscription) run() {
	defer close(s.done)
	stop := context.AfterFunc(s.ctx, s.abort)
	defer func() {
		stop()
		s.cancel(nil)
	}()
	l := s.l
	endAt := s.made.Add(subscriptionLifetime)
	endC := l.after(endAt.Sub(l.now()))
	beatC := l.after(heartbeatInterval)
	if err := s.write(initialResponse()); err != nil {
		s.finish(err)
		return
	}
	var lastSent time.Time
	first, beat := true, false
	for {
		select {
		case <-s.ended:
			s.finish(s.endErr)
			return
		default:
		}
		if s.ctx.Err() != nil {
			s.finish(s.ctx.Err())
			return
		}
		if !l.now().Before(endAt) {
			s.finish(nil)
			return
		}
		if l.lookup(s.st.name) != s.st {
			s.finish(l.errStreamNotFound(s.st.name))
			return
		}
		var wake <-chan struct{}
		if !first && !beat {
			wake = s.sh.waitFrom(s.pos)
		}
		if first || beat || wake == nil {
			final, at, err := s.send()
			if err != nil {
				s.finish(err)
				return
			}
			if final {
				s.finish(nil)
				return
			}
			first, beat, lastSent = false, false, at
			continue
		}
		select {
		case <-wake:
		case <-beatC:
			if rest := lastSent.Add(heartbeatInterval).Sub(l.now()); rest > 0 {
				beatC = l.after(rest)
			} else {
				beatC = l.after(heartbeatInterval)
				beat = true
			}
		case <-endC:
			if rest := endAt.Sub(l.now()); rest > 0 {
				endC = l.after(rest)
			}
		case <-s.ended:
		case <-s.ctx.Done():
		}
	}
}

// finish ends the stream: cleanly (EOF) for nil; by breaking the pipe for a write or context
// error, which the reader reports as such; otherwise with an in-stream exception.
func (s *subscription) finish(err error) {
	var we writeError
	switch {
	case err == nil:
		_ = s.pw.Close()
	case errors.As(err, &we), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if s.parent.Err() != nil {
			err = s.parent.Err()
		}
		_ = s.pw.CloseWithError(err)
	default:
		if werr := s.write(exceptionMessage(exceptionOf(err))); werr != nil {
			_ = s.pw.CloseWithError(werr)
			return
		}
		_ = s.pw.Close()
	}
}

// send runs the fault hook, waits for the consumer's push budget (pace), then writes one event
// with the records from s.pos on that fit in it, and moves s.pos past them. It reports whether
// the event ended a closed shard, and when (on the Log's clock) it was made. A hook that blocks
// delays the event, which then carries what was stored meanwhile.
func (s *subscription) send() (final bool, at time.Time, err error) {
	if err := s.l.before(s.ctx, Call{Op: "SubscribeToShardEvent", Stream: s.st.name, ShardID: s.sh.id}); err != nil {
		return false, time.Time{}, err
	}
	if err := s.pace(); err != nil {
		return false, time.Time{}, err
	}
	now := s.l.now()
	v := s.sh.read(s.pos, maxEventRecords)
	ev := eventJSON{Records: make([]recordJSON, 0, v.count)}
	size := 0
	nextArrival := v.nextArrival
fill:
	for _, seg := range v.segs {
		for j := range seg {
			r := &seg[j]
			if len(ev.Records) > 0 && size+len(r.data)+len(r.key) > maxEventBytes {
				nextArrival = r.arrival
				break fill
			}
			size += len(r.data) + len(r.key)
			ev.Records = append(ev.Records, recordJSON{
				SequenceNumber:              r.seq,
				ApproximateArrivalTimestamp: epochSeconds(r.arrival),
				Data:                        r.data,
				PartitionKey:                r.key,
			})
		}
	}
	next := v.from + uint64(len(ev.Records))
	if next <= v.last {
		ev.MillisBehindLatest = max(now.UnixMilli()-nextArrival, 1)
	}
	final = v.closed && next > v.last
	if final {
		ev.ChildShards = childrenJSON(v.children)
	} else {
		ev.ContinuationSequenceNumber = ptr(formatSeq(s.st.incarnation, uint64(s.sh.index), next-1))
	}
	payload, err := json.Marshal(&ev)
	if err != nil {
		return false, time.Time{}, err // cannot happen: strings, numbers and bytes
	}
	if err := s.write(eventMessage(payload)); err != nil {
		return false, time.Time{}, err
	}
	s.pushed(size)
	s.pos = next
	return final, now, nil
}
