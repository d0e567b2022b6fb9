package shard

import (
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
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
	first    messageContext
}

// position is where the delivery's record sits, as a checkpoint: the sequence number of a
// plain record, or, for a user record of a KPL aggregate, the sequence number, ':' and the
// sub-sequence number, as the KCL checkpoints them (checkpoint and checkpointSubSequenceNumber).
// A restart from inside an aggregate resumes there instead of replaying all of it; after its
// last user record, it reads the aggregate once more and skips all of it. The sub-sequence
// number is kept for the last user record too, so that the checkpoint says exactly which user
// records are done, to a KCL worker that resumes from it as well (wire.ParsePosition reads it).
func (d *delivery) position() string {
	c := d.ctx
	if !c.aggregated {
		return c.seq
	}
	return c.seq + ":" + strconv.Itoa(int(c.sub))
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
