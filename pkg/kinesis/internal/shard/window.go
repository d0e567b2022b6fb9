package shard

import (
	"errors"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire"
)

// windowState is a reader's in-flight window: every record prepared (decoded into a message)
// and not yet done, in sequence order, and what may go out next. The reader goroutine owns it.
//
// A delivery is waiting (prepared, not sent), sent, nacked (to be sent again) or acked. Sent
// and nacked ones are "out": MaxInFlight bounds them. Which waiting delivery may go out is
// the ordering's: each delivery belongs to a queue (one per partition key with OrderByKey,
// one for the whole shard with OrderByShard, none with Unordered), and only the oldest not
// yet acked delivery of a queue may be out. sendable holds the waiting deliveries that ordering
// lets out, oldest first. The window's front moves past acked deliveries only: the watermark,
// below which every record is done, is where the checkpoint may go.
type windowState struct {
	window   []*delivery // prepared and not yet done, in sequence order
	waiting  int         // deliveries of window not sent yet
	sendable readyHeap   // waiting deliveries that ordering lets out now, oldest first
	sentOut  []*delivery // deliveries sent and not seen settled (order not kept)
	nacked   []*delivery // deliveries nacked and not sent again yet (order not kept)
	acked    string      // watermark: position of the last record acked in order

	queues  map[string]*keyQueue // OrderByKey: the queue of each partition key in the window
	shardQ  keyQueue             // OrderByShard: the one queue
	freeQ   []*keyQueue          // emptied key queues, for reuse
	nextOrd uint64
}

// deliveryState is where one delivery stands.
type deliveryState uint8

const (
	stateWaiting deliveryState = iota // prepared, not sent yet
	stateSent                         // handed to the subscriber's channel, not settled yet
	stateAcked                        // acked: done
	stateNacked                       // nacked: to be delivered again at resendAt
)

// delivery is one record in a shard's window. The shard's reader goroutine owns it, except
// ctx, which handlers read (see messageContext).
type delivery struct {
	msg      *message.Message
	ctx      *messageContext // msg's context: &first, or a fresh one after a Nack
	queue    *keyQueue       // the ordering queue it is in until acked; nil when Unordered
	ord      uint64          // position in the window's order, for ready
	resendAt time.Time
	slot     int32 // index in sentOut or nacked, by state
	state    deliveryState
	last     bool // the record's last (or only) user record: its position is the plain sequence number
	first    messageContext
}

// position is where the delivery's record sits, as a checkpoint (see userRecord.position).
func (d *delivery) position() string {
	info := &d.ctx.info
	if !info.Aggregated || d.last {
		return info.SequenceNumber
	}
	return info.SequenceNumber + ":" + strconv.Itoa(info.SubSequenceNumber)
}

// keyQueue is the deliveries of one ordering key that are not acked yet, in sequence order;
// only the first may be out.
type keyQueue struct {
	key   string
	items []*delivery
	head  int
}

func (q *keyQueue) front() *delivery {
	if q.head < len(q.items) {
		return q.items[q.head]
	}
	return nil
}

func (q *keyQueue) push(d *delivery) { q.items = append(q.items, d) }

// pop removes the front, and reports whether the queue is empty now. The queue is moved down
// to the front of its array once half of it is popped: a queue that never empties (the shard's
// with OrderByShard, which holds the next record while one is out) grew by one slot per
// message without it.
func (q *keyQueue) pop() bool {
	q.items[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.items):
		if cap(q.items) > maxIdleQueueCap {
			q.items = nil // a burst's array is not kept for good
		}
		q.items, q.head = q.items[:0], 0
		return true
	case q.head >= 16 && 2*q.head >= len(q.items):
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return false
}

// maxIdleQueueCap is the largest array an emptied key queue keeps for reuse.
const maxIdleQueueCap = 64

// readyHeap is a min-heap of deliveries by ord.
type readyHeap []*delivery

func (h readyHeap) peek() *delivery {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

func (h *readyHeap) push(d *delivery) {
	*h = append(*h, d)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].ord <= s[i].ord {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *readyHeap) pop() *delivery {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = nil
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s[l].ord < s[m].ord {
			m = l
		}
		if r := l + 1; r < n && s[r].ord < s[m].ord {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// out is how many deliveries are sent or nacked: what MaxInFlight bounds.
func (w *windowState) out() int { return len(w.sentOut) + len(w.nacked) }

// enqueue adds a prepared delivery to the window and its ordering queue.
func (w *windowState) enqueue(d *delivery, ordering Ordering, key string) {
	d.ord = w.nextOrd
	w.nextOrd++
	w.window = append(w.window, d)
	if d.state == stateAcked { // a skipped record: done at once
		return
	}
	w.waiting++
	switch ordering {
	case Unordered:
		w.sendable.push(d)
		return
	case OrderByShard:
		d.queue = &w.shardQ
	default:
		q := w.queues[key]
		if q == nil {
			if w.queues == nil {
				w.queues = map[string]*keyQueue{}
			}
			if n := len(w.freeQ); n > 0 {
				q, w.freeQ = w.freeQ[n-1], w.freeQ[:n-1]
			} else {
				q = &keyQueue{}
			}
			q.key = key
			w.queues[key] = q
		}
		d.queue = q
	}
	d.queue.push(d)
	if d.queue.front() == d {
		w.sendable.push(d)
	}
}

// release takes an acked delivery out of its ordering queue, and lets the next delivery of
// that queue out.
func (w *windowState) release(d *delivery) {
	q := d.queue
	if q == nil {
		return
	}
	d.queue = nil
	if q.pop() {
		if q != &w.shardQ {
			delete(w.queues, q.key)
			q.key = ""
			w.freeQ = append(w.freeQ, q)
		}
		return
	}
	if next := q.front(); next.state == stateWaiting {
		w.sendable.push(next)
	}
}

// addTo and removeFrom keep sentOut and nacked, which are unordered sets with O(1) removal.
func addTo(set *[]*delivery, d *delivery) {
	d.slot = int32(len(*set))
	*set = append(*set, d)
}

func removeFrom(set *[]*delivery, d *delivery) {
	s := *set
	i, n := int(d.slot), len(s)-1
	s[i] = s[n]
	s[i].slot = int32(i)
	s[n] = nil
	*set = s[:n]
}

// watermark moves the window's front past the acked deliveries there, and returns the
// position of the last of them ("" if none): every record up to it is done. A delivery acked
// behind an unacked one does not move it.
func (w *windowState) watermark() string {
	done := 0
	for done < len(w.window) && w.window[done].state == stateAcked {
		done++
	}
	if done == 0 {
		return ""
	}
	seq := w.window[done-1].position()
	clear(w.window[:done])
	if done == len(w.window) {
		w.window = w.window[:0] // keeps the array: the steady state allocates nothing
	} else {
		w.window = w.window[done:]
	}
	return seq
}

// soleUnsettled is the delivery whose Ack or Nack the reader waits on at MaxInFlight 1 (above,
// the watchers of settleWatch wait on them).
func (w *windowState) soleUnsettled() *delivery {
	if len(w.sentOut) == 0 {
		return nil
	}
	return w.sentOut[0]
}

// dueResend is the nacked delivery to send again first: the one due first.
func (w *windowState) dueResend() *delivery {
	var first *delivery
	for _, d := range w.nacked {
		if first == nil || d.resendAt.Before(first.resendAt) || (d.resendAt.Equal(first.resendAt) && d.ord < first.ord) {
			first = d
		}
	}
	return first
}

// prepare decodes the next record into a message with its own context, and puts it in the
// window.
func (r *Reader) prepare() {
	var u *wire.UserRecord
	var rec *types.Record
	if r.records != nil {
		u = &r.records[r.next]
		rec = &u.Rec
	} else {
		rec = &r.batch[r.next]
	}
	r.next++
	d := &delivery{last: u == nil || !u.Aggregated || u.Last}
	d.ctx = &d.first
	d.first.parent = r.msgParent
	info := &d.first.info
	*info = RecordInfo{
		Stream:             r.cfg.Stream,
		ShardID:            r.shardID,
		SequenceNumber:     aws.ToString(rec.SequenceNumber),
		PartitionKey:       aws.ToString(rec.PartitionKey),
		MillisBehindLatest: r.behind,
		LeaseGeneration:    r.generation,
	}
	if u != nil {
		info.SequenceNumber, info.Aggregated, info.SubSequenceNumber = u.Seq, u.Aggregated, u.Sub
	}
	if rec.ApproximateArrivalTimestamp != nil {
		info.ArrivalTime = *rec.ApproximateArrivalTimestamp
	}
	if u != nil && u.NotAggregate != nil {
		r.cfg.Logger.Info("Record starts like a KPL aggregate but is not one; delivering it whole, as the KCL does",
			r.recordFields(d).Add(watermill.LogFields{"reason": u.NotAggregate.Error()}))
	}
	msg, err := r.cfg.Unmarshaler.Unmarshal(r.cfg.Stream, r.shardID, rec)
	if err != nil || msg == nil {
		if err == nil {
			err = errors.New("unmarshaler returned no message")
		}
		info.DecodeError = err
		msg = r.poison(PoisonRecord{Info: *info, Data: rec.Data, Err: err, Decoded: msg}, d)
		if msg == nil {
			// Skipped: done as if delivered and acked, so the checkpoint passes it in order.
			d.state = stateAcked
			d.first.cancelled = true
		}
	}
	if msg != nil {
		d.msg = msg
		msg.SetContext(d.ctx)
	}
	r.enqueue(d, r.cfg.Ordering, info.PartitionKey)
}

// recordFields are the log fields of a record: built only on the rare paths that log one.
func (r *Reader) recordFields(d *delivery) watermill.LogFields {
	f := r.LogFields()
	f["sequence_number"] = d.ctx.info.SequenceNumber
	if d.ctx.info.Aggregated {
		f["sub_sequence_number"] = d.ctx.info.SubSequenceNumber
	}
	return f
}

// poison hands a record the Unmarshaler rejected to the PoisonHandler and returns what to
// deliver, or nil to skip the record. Nothing leaves without a log line, and a failing handler
// cannot stall the shard: its record is delivered raw, as by default.
func (r *Reader) poison(p PoisonRecord, d *delivery) *message.Message {
	msg, herr := r.cfg.Poison(p)
	switch {
	case herr != nil:
		r.cfg.Logger.Error("Record could not be decoded, and the PoisonHandler failed; delivering its data as a raw payload",
			errors.Join(p.Err, herr), r.recordFields(d))
		return r.cfg.PoisonRaw(p)
	case msg == nil:
		r.cfg.Logger.Error("Record could not be decoded; the PoisonHandler skipped it", p.Err, r.recordFields(d))
		return nil
	}
	r.cfg.Logger.Error("Record could not be decoded; delivering what the PoisonHandler made of it (the decode error is in its context)", p.Err, r.recordFields(d))
	return msg
}

// sent records that d went out: a waiting delivery leaves sendable; a nacked one is live again.
func (w *windowState) sent(d *delivery) {
	switch d.state {
	case stateWaiting:
		w.sendable.pop() // d is sendable's front: decide offers nothing else
		w.waiting--
	case stateNacked:
		removeFrom(&w.nacked, d)
	}
	d.state = stateSent
	addTo(&w.sentOut, d)
}

// ackedOut records that d, out, was acked: its context ends and its key's next may go.
func (w *windowState) ackedOut(d *delivery) {
	removeFrom(&w.sentOut, d)
	d.state = stateAcked
	d.ctx.cancel()
	w.release(d)
}

// requeue takes d, out, back to be sent again at resendAt, as a fresh message (same UUID,
// metadata and payload; Watermill messages cannot be acked twice) with a new context. Its key
// stays busy until it is acked.
func (r *Reader) requeue(d *delivery, resendAt time.Time) {
	removeFrom(&r.sentOut, d)
	d.ctx.cancel()
	r.refresh(d)
	d.state, d.resendAt = stateNacked, resendAt
	addTo(&r.nacked, d)
}

// settleWindow notes the acks and nacks reported since the last turn, prepares resends, and
// moves the watermark. With MaxInFlight 1 it looks at the one message out; above, it applies
// what the watchers reported (settleWatch), without looking at every message out.
func (r *Reader) settleWindow(now time.Time) {
	if r.watch == nil {
		r.settleAll(now)
		return
	}
	r.watch.take()
	for i, m := range r.watch.pending {
		if m.d.state == stateSent && m.d.msg == m.msg { // else a message of d taken back already
			r.settle(m.d, now)
		}
		r.watch.pending[i] = watched{}
	}
	r.watch.pending = r.watch.pending[:0]
	r.moveWatermark()
}

// settleAll looks at every message out for an Ack or Nack, whether reported or not: before a
// checkpoint that has to count every ack so far (handoff, release, stop, pause).
func (r *Reader) settleAll(now time.Time) {
	for i := 0; i < len(r.sentOut); {
		if d := r.sentOut[i]; !r.settle(d, now) {
			i++
		} // else sentOut[i] is another delivery now
	}
	r.moveWatermark()
}

// settle applies d's Ack or Nack, if it has one, and reports whether it had.
func (r *Reader) settle(d *delivery, now time.Time) bool {
	select {
	case <-d.msg.Acked():
		r.progressed = true
		r.metrics.Count(CountAcks, 1)
		r.ackedOut(d)
	case <-d.msg.Nacked():
		r.progressed = true
		r.metrics.Count(CountNacks, 1)
		resendAt := now
		if s := r.cfg.NackResendSleep; s > 0 {
			resendAt = now.Add(s)
		}
		r.requeue(d, resendAt)
	default:
		return false
	}
	return true
}

func (r *Reader) moveWatermark() {
	if seq := r.watermark(); seq != "" {
		r.acked = seq
	}
}

// refresh gives d a fresh message (same UUID, metadata and payload) with a new context.
func (r *Reader) refresh(d *delivery) {
	ctx := &messageContext{parent: r.msgParent, info: d.ctx.info}
	d.msg, d.ctx = d.msg.Copy(), ctx
	d.msg.SetContext(ctx)
}

// suspendWindow, at a pause, cancels the contexts of the messages out, as a stop does, and
// queues them to be sent again (same UUID, fresh message) if the reader resumes; acks that
// came before count.
func (r *Reader) suspendWindow(now time.Time) {
	r.settleAll(now)
	for len(r.sentOut) > 0 {
		r.requeue(r.sentOut[len(r.sentOut)-1], now)
	}
	if r.watch != nil {
		r.watch.takeBack()
	}
}

// cancelWindow cancels every message context still open; acks that arrive later are ignored.
func (r *Reader) cancelWindow() {
	for _, d := range r.window {
		d.ctx.cancel()
	}
}
