package kinesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// readerExit is what a shard reader reports to its coordinator when it stops.
type readerExit struct {
	shardID string
	// shardEnded: the shard is closed and every record of it was acked (and, in a group,
	// checkpointed SHARD_END).
	shardEnded bool
	// handedOff: the lease went to the worker that asked for it.
	handedOff bool
	// children are the shards that replaced this one, from the GetRecords response that
	// reached its end: the coordinator creates their leases from them at once, without
	// waiting for a shard listing that shows them.
	children []types.ChildShard
	// lastAcked is the sequence number of the last record acked in order ("" if none), where
	// a no-group subscription resumes the shard if it starts it again.
	lastAcked string
	err       error
}

// shardReader reads one shard and delivers its records in sequence order.
//
// Ownership: everything in a shardReader belongs to its run goroutine, except ready (written
// once by run, read by the coordinator) and the fields set before run starts. The coordinator
// stops a reader by cancelling ctx; a reader that lost its lease learns it from the store, or
// from lost being closed by the coordinator.
type shardReader struct {
	sub     *subscription
	shardID string
	ctx     context.Context
	cancel  context.CancelFunc
	lost    chan struct{} // closed by the coordinator when the lease moved to another owner
	ready   chan error    // gets one value: nil once the iterator is held, or why not

	start      position     // where reading starts
	held       *lease.Lease // nil without a consumer group
	leased     bool         // started with a lease; read by the coordinator
	generation int64        // held.Generation when taken; read by the coordinator
	lostOnce   sync.Once
	// handoff gets a value from the coordinator at each lease sync that finds another
	// worker waiting for this lease (buffered 1; a signal already pending is enough).
	handoff chan struct{}

	iterator string
	askedAt  time.Time    // when the first iterator was asked for, by this machine's clock
	lastRead string       // sequence number of the last record fetched
	records  []userRecord // the current batch, KPL aggregates expanded
	next     int          // index in records of the next record to deliver
	// skipSeq and skipThrough: the reader resumes inside the KPL aggregate skipSeq, whose user
	// records up to skipThrough are done; cleared once that aggregate has been read.
	skipSeq     string
	skipThrough int
	behind      int64              // MillisBehindLatest of the current batch
	ended       bool               // the shard is closed and read to its end
	children    []types.ChildShard // the ChildShards of the read that reached the end
	window      []*delivery        // delivered and not yet done, in sequence order
	prepared    *delivery          // the next record, decoded, waiting to be sent
	acked       string             // watermark: last sequence number acked in order
	saved       string             // last checkpoint written
	fetchAt     time.Time          // the earliest time the next GetRecords may be sent
	failures    int                // consecutive failed reads, for backoff
	renewed     time.Time          // when the last successful renewal (at first: the take) was sent
	// handingOff: another worker asked for the lease; nothing more is sent, and once the
	// messages in flight are settled (or at handoffBy) the lease is handed over.
	handingOff bool
	handoffBy  time.Time
	// handoffRetry: after a failed Handoff call, the next one is not sent before this.
	handoffRetry time.Time
	handedOff    bool // the lease went to the worker that asked for it
	// paused: past the stop point with no renewal since; nothing is sent or read until a
	// renewal succeeds (pauseIfStale).
	paused  bool
	revoked bool // OnShardRevoked was called
	timers  readerTimers
}

// position is where a reader starts: after a sequence number, or at an initial position.
type position struct {
	after   string // AFTER_SEQUENCE_NUMBER; "" means use initial
	initial Position
}

// now reads the subscription's clock.
func (r *shardReader) now() time.Time { return r.sub.cfg.Clock.Now() }

// requestHandoff tells the reader, from the coordinator, that another worker asked for its
// lease. It never blocks.
func (r *shardReader) requestHandoff() {
	select {
	case r.handoff <- struct{}{}:
	default:
	}
}

// markLost tells the reader, from the coordinator, that the lease moved to another owner.
func (r *shardReader) markLost() { r.lostOnce.Do(func() { close(r.lost) }) }

func (r *shardReader) logFields() watermill.LogFields {
	return watermill.LogFields{"stream": r.sub.stream, "shard": r.shardID, "worker": r.sub.cfg.WorkerID}
}

// run is the reader goroutine. It reports its exit to the coordinator, always exactly once.
//
// Shutdown order: stop delivering; cancel the contexts of messages in flight (they will be
// redelivered to the shard's next reader); if the lease is still ours, write the last
// checkpoint and release the lease so another instance takes it at once; report the exit.
func (r *shardReader) run() {
	exit := readerExit{shardID: r.shardID}
	defer func() {
		r.settleWindow(r.now()) // acks that came before the stop are progress too
		r.cancelWindow()
		exit.lastAcked = r.acked
		if r.held != nil && !errors.Is(exit.err, ErrLeaseLost) {
			r.giveUp(exit.shardEnded)
		}
		r.timers.stop()
		r.cancel()
		r.sub.exits <- exit
	}()
	if err := r.initIterator(); err != nil {
		r.ready <- err
		exit.err = err
		return
	}
	r.ready <- nil
	r.timers.start(r.sub.cfg, r.held != nil, r.renewed)
	exit.shardEnded, exit.err = r.loop()
	exit.handedOff = r.handedOff
	if exit.shardEnded {
		exit.children = r.children
	}
	switch {
	case errors.Is(exit.err, ErrLeaseLost):
		r.sub.logger.Error("Shard reader stopped", exit.err, r.logFields())
		r.cancelWindow() // the hook runs once nothing of this shard is live any more
		if !r.paused {   // a pause has told the application already
			r.sub.hook(r.sub.cfg.OnShardLost, r.shardID)
		}
	case exit.err != nil && !errors.Is(exit.err, context.Canceled):
		r.sub.logger.Error("Shard reader stopped", exit.err, r.logFields())
	}
}

// loop delivers until the shard is done, the lease is lost, or ctx ends.
func (r *shardReader) loop() (shardEnded bool, err error) {
	cfg := r.sub.cfg
	for {
		now := r.now()
		if r.held != nil {
			// Checked here as well as by the deadline timer: a select with the timer and a
			// send both ready picks either, and must not pick the send.
			r.pauseIfStale(now)
		}
		r.settleWindow(now)
		if r.ended && r.prepared == nil && r.next >= len(r.records) && len(r.window) == 0 {
			return true, nil
		}
		if r.handingOff && !r.paused && !now.Before(r.handoffRetry) && (oldestUnsettled(r.window) == nil || !now.Before(r.handoffBy)) {
			if err := r.handOver(); err != nil || r.handedOff {
				return false, err
			}
			continue
		}
		if r.prepared == nil && r.next < len(r.records) {
			r.prepare()
		}
		if r.prepared == nil && r.next >= len(r.records) && !r.ended && !r.paused && !now.Before(r.fetchAt) {
			if err := r.fetch(); err != nil {
				return false, err
			}
			continue
		}

		var send chan<- *message.Message
		var toSend *delivery
		switch d := nextResend(r.window); {
		case r.handingOff, r.paused:
			// Nothing more goes out: the next owner continues from the checkpoint, or, once
			// a renewal succeeds, this one goes on.
		case d != nil && !now.Before(d.resendAt):
			toSend = d
		case r.prepared != nil && len(r.window) < cfg.MaxInFlight:
			toSend = r.prepared
		}
		if toSend != nil {
			send = r.sub.out
		}
		var acked, nacked <-chan struct{}
		if d := oldestUnsettled(r.window); d != nil {
			acked, nacked = d.msg.Acked(), d.msg.Nacked()
		}
		wakeAt := r.wakeTime(now, toSend != nil)
		handoff := r.handoff
		if r.handingOff {
			handoff, wakeAt = nil, r.handoffBy
			if oldestUnsettled(r.window) == nil || r.handoffRetry.After(wakeAt) {
				wakeAt = r.handoffRetry
			}
		}
		if r.paused {
			wakeAt = time.Time{} // nothing to read or resend: the renewal timer wakes the loop
		}
		wake := r.timers.wakeAt(r.sub.cfg.Clock, now, wakeAt)

		select {
		case send <- msgOf(toSend):
			r.sent(toSend)
		case <-acked:
		case <-nacked:
		case <-wake:
		case <-r.timers.renew:
			if err := r.renew(); err != nil {
				return false, err
			}
		case <-r.timers.checkpoint:
			if err := r.checkpoint(r.ctx); err != nil {
				return false, err
			}
		case <-r.timers.leaseDeadline:
			// The top of the loop pauses the reader.
		case <-handoff:
			// now is when this select started, which may be long ago: the wait for the
			// messages in flight counts from the request.
			r.handingOff = true
			r.handoffBy = r.now().Add(cfg.HandoffTimeout / 2)
		case <-r.lost:
			return false, fmt.Errorf("%w: another worker owns the lease now", ErrLeaseLost)
		case <-r.ctx.Done():
			return false, r.ctx.Err()
		}
	}
}

// pauseIfStale pauses deliveries once no renewal has succeeded for too long (lease.MustStop),
// and resumes them after one has.
//
// Paused, the reader sends and reads nothing, so it delivers nothing once another worker may
// take the lease, and keeps trying to renew. A renewal is a write conditioned on this owner
// and generation, so one that succeeds proves nobody took the lease in between: the reader
// goes on where it was (the messages in flight at the pause, whose contexts it cancelled, are
// sent again with the same UUIDs), and a lease store outage that ends before anyone takes over
// rewinds nothing. One that fails with ErrLeaseLost stops the reader, and the new owner
// redelivers from the checkpoint.
func (r *shardReader) pauseIfStale(now time.Time) {
	cfg := r.sub.cfg
	stale := lease.MustStop(r.renewed, now, cfg.LeaseDuration, leaseStopMargin(cfg))
	switch {
	case stale && !r.paused:
		r.paused = true
		r.sub.logger.Error("Lease not renewed in time; deliveries paused until a renewal succeeds (another worker may take the shard)",
			fmt.Errorf("%w: no renewal succeeded for %s", errLeaseStale, now.Sub(r.renewed).Round(time.Millisecond)), r.logFields())
		r.suspendWindow(now)
		// For the application the shard is lost: another worker may take it from here on.
		// If a renewal succeeds first, it is acquired again; no revoke follows a loss.
		r.revoked = true
		r.sub.hook(cfg.OnShardLost, r.shardID)
		r.timers.retrySoon(now, cfg.LeaseRenewInterval)
	case !stale && r.paused:
		r.paused, r.revoked = false, false
		r.sub.logger.Info("Lease renewed; deliveries resumed", r.logFields())
		r.sub.hook(cfg.OnShardAcquired, r.shardID)
	}
}

// suspendWindow, at a pause, cancels the contexts of the messages in flight, as a stop does,
// and queues them to be sent again (same UUID, fresh message) if the reader resumes; acks that
// came before count.
func (r *shardReader) suspendWindow(now time.Time) {
	r.settleWindow(now)
	for _, d := range r.window {
		if d.state != stateSent {
			continue
		}
		d.cancel()
		fresh := r.newDelivery(d.msg.Copy(), d.info, d.seq)
		d.msg, d.cancel = fresh.msg, fresh.cancel
		d.state, d.resendAt = stateNacked, now
	}
}

// errLeaseStale: the owner could not renew its lease in time and may be taken over.
var errLeaseStale = errors.New("lease not renewed in time")

func msgOf(d *delivery) *message.Message {
	if d == nil {
		return nil
	}
	return d.msg
}

// wakeTime is when the loop must look again without any channel event: the next read, or
// the next nacked message due for resending.
func (r *shardReader) wakeTime(now time.Time, sending bool) time.Time {
	var at time.Time
	if r.prepared == nil && r.next >= len(r.records) && !r.ended {
		at = r.fetchAt
	}
	if d := nextResend(r.window); d != nil && !sending && (at.IsZero() || d.resendAt.Before(at)) {
		at = d.resendAt
	}
	// The select waits on the Ack and Nack of the oldest unsettled message only; those of
	// the messages behind it are noticed by looking again soon.
	if unsettled(r.window) > 1 {
		if poll := now.Add(settlePollInterval); at.IsZero() || poll.Before(at) {
			at = poll
		}
	}
	return at
}

// prepare decodes the next record into a message with its own context.
func (r *shardReader) prepare() {
	u := &r.records[r.next]
	r.next++
	rec := &u.rec
	info := RecordInfo{
		Stream:             r.sub.stream,
		ShardID:            r.shardID,
		SequenceNumber:     u.seq,
		Aggregated:         u.aggregated,
		SubSequenceNumber:  u.sub,
		PartitionKey:       deref(rec.PartitionKey),
		MillisBehindLatest: r.behind,
	}
	if rec.ApproximateArrivalTimestamp != nil {
		info.ArrivalTime = *rec.ApproximateArrivalTimestamp
	}
	fields := watermill.LogFields{"stream": r.sub.stream, "shard": r.shardID, "sequence_number": info.SequenceNumber}
	if u.aggregated {
		fields["sub_sequence_number"] = u.sub
	}
	if u.notAggregate != nil {
		r.sub.logger.Info("Record starts like a KPL aggregate but is not one; delivering it whole, as the KCL does",
			fields.Add(watermill.LogFields{"reason": u.notAggregate.Error()}))
	}
	msg, err := r.sub.cfg.Unmarshaler.Unmarshal(r.sub.stream, r.shardID, rec)
	if err != nil || msg == nil {
		if err == nil {
			err = errors.New("unmarshaler returned no message")
		}
		info.DecodeError = err
		msg = r.poison(PoisonRecord{Info: info, Data: rec.Data, Err: err, Decoded: msg}, fields)
		if msg == nil {
			// Skipped: done as if delivered and acked, so the checkpoint passes it in order.
			r.window = append(r.window, &delivery{seq: u.position(), state: stateAcked, cancel: func() {}, info: info})
			return
		}
	}
	r.prepared = r.newDelivery(msg, info, u.position())
}

// poison hands a record the Unmarshaler rejected to the PoisonHandler and returns what to
// deliver, or nil to skip the record. Nothing leaves without a log line, and a failing handler
// cannot stall the shard: its record is delivered raw, as by default.
func (r *shardReader) poison(p PoisonRecord, fields watermill.LogFields) *message.Message {
	msg, herr := r.sub.cfg.PoisonHandler(p)
	switch {
	case herr != nil:
		r.sub.logger.Error("Record could not be decoded, and the PoisonHandler failed; delivering its data as a raw payload",
			errors.Join(p.Err, herr), fields)
		raw, _ := DeliverPoisonRaw(p)
		return raw
	case msg == nil:
		r.sub.logger.Error("Record could not be decoded; the PoisonHandler skipped it", p.Err, fields)
		return nil
	}
	r.sub.logger.Error("Record could not be decoded; delivering what the PoisonHandler made of it (the decode error is in its context)", p.Err, fields)
	return msg
}

func (r *shardReader) newDelivery(msg *message.Message, info RecordInfo, position string) *delivery {
	ctx, cancel := context.WithCancel(r.ctx)
	d := &delivery{seq: position, msg: msg, cancel: cancel, info: info}
	msg.SetContext(&messageContext{Context: ctx, info: info})
	return d
}

// sent records that d went out: a new record joins the window; a resent one is live again.
func (r *shardReader) sent(d *delivery) {
	if d == r.prepared {
		r.prepared = nil
		r.window = append(r.window, d)
	}
	d.state = stateSent
}

// settleWindow notes acks and nacks, prepares resends, and moves the watermark.
func (r *shardReader) settleWindow(now time.Time) {
	for _, d := range r.window {
		if d.settle(now, r.sub.cfg.NackResendSleep) && d.state == stateNacked {
			// A nacked message goes out again as a fresh message with the same UUID,
			// metadata and payload; Watermill messages cannot be acked twice.
			msg := d.msg.Copy()
			fresh := r.newDelivery(msg, d.info, d.seq)
			d.msg, d.cancel = fresh.msg, fresh.cancel
		}
	}
	done, seq := watermark(r.window)
	if done > 0 {
		clear(r.window[:done])
		r.window = r.window[done:]
		r.acked = seq
	}
}

// cancelWindow cancels every message context still open; acks that arrive later are ignored.
func (r *shardReader) cancelWindow() {
	for _, d := range r.window {
		d.cancel()
	}
	if r.prepared != nil {
		r.prepared.cancel()
	}
}

// initIterator gets the first iterator, retrying what may pass.
func (r *shardReader) initIterator() error {
	for attempt := 0; ; attempt++ {
		askedAt := r.now()
		it, err := r.getIterator(r.start)
		if err == nil {
			r.iterator, r.askedAt = it, askedAt
			return nil
		}
		switch classify(r.ctx, err) {
		case classThrottled, classTransient:
			if attempt+1 >= readFailuresBeforeError {
				// As for reads: a blip is INFO, an outage is an ERROR someone should see.
				r.sub.logger.Error("Getting a shard iterator keeps failing; retrying", err,
					r.logFields().Add(watermill.LogFields{"failures": attempt + 1}))
			} else {
				r.sub.logger.Info("Getting shard iterator failed; retrying", r.logFields().Add(watermill.LogFields{"err": err}))
			}
			if err := sleepOn(r.ctx, r.sub.cfg.Clock, backoff(attempt, 100*time.Millisecond, 5*time.Second)); err != nil {
				return err
			}
		case classFatal:
			if !r.fallBackFromTrimmed(r.start.after, err) {
				return &ShardError{Stream: r.sub.stream, ShardID: r.shardID, Err: fmt.Errorf("getting a shard iterator: %w", err)}
			}
			r.start = position{initial: Position{Type: TrimHorizon}}
		default:
			return &ShardError{Stream: r.sub.stream, ShardID: r.shardID, Err: fmt.Errorf("getting a shard iterator: %w", err)}
		}
	}
}

// fallBackFromTrimmed reports whether a refused AFTER_SEQUENCE_NUMBER iterator should be
// replaced by TRIM_HORIZON, and says so in the log. Kinesis refuses a sequence number older
// than the shard's trim horizon with InvalidArgumentException: the records after it aged out of
// the stream's retention period before this group read them (the group was stopped, or too far
// behind, for longer than the retention), or the stream was deleted and created again under
// the same name. Either way nothing before the trim horizon can be read any more, and waiting
// would stall the shard for good; the oldest record left is where reading can go on.
func (r *shardReader) fallBackFromTrimmed(after string, err error) bool {
	var invalid *types.InvalidArgumentException
	if after == "" || !errors.As(err, &invalid) {
		return false
	}
	r.sub.logger.Error("Checkpoint is older than the shard's trim horizon (its records aged out of the "+
		"stream's retention period, or the stream was re-created); resuming at the oldest record "+
		"(TRIM_HORIZON). Records between the checkpoint and the trim horizon were never delivered "+
		"to this group", err, r.logFields().Add(watermill.LogFields{"sequence_number": after}))
	return true
}

func (r *shardReader) getIterator(pos position) (string, error) {
	in := &awskinesis.GetShardIteratorInput{StreamName: &r.sub.stream, ShardId: &r.shardID}
	seq, sub, inside := parsePosition(pos.after)
	r.skipSeq, r.skipThrough = "", 0
	switch {
	case inside:
		// Inside a KPL aggregate: read it again and skip the user records already done.
		in.ShardIteratorType = types.ShardIteratorTypeAtSequenceNumber
		in.StartingSequenceNumber = &seq
		r.skipSeq, r.skipThrough = seq, sub
	case pos.after != "":
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.StartingSequenceNumber = &seq
	case pos.initial.Type == Latest:
		in.ShardIteratorType = types.ShardIteratorTypeLatest
	case pos.initial.Type == AtTimestamp:
		in.ShardIteratorType = types.ShardIteratorTypeAtTimestamp
		ts := pos.initial.Timestamp
		in.Timestamp = &ts
	default:
		in.ShardIteratorType = types.ShardIteratorTypeTrimHorizon
	}
	ctx, cancel := r.callContext()
	defer cancel()
	out, err := r.sub.cfg.Client.GetShardIterator(ctx, in)
	if err != nil {
		return "", err
	}
	if out.ShardIterator == nil {
		return "", errors.New("GetShardIterator returned no iterator")
	}
	return *out.ShardIterator, nil
}
