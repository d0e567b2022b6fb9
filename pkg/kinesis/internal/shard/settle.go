package shard

import "time"

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
//
// Two receives, not one select: a select of two channels locks both, while a receive that
// finds its channel open and empty takes no lock, and most looks find the message still out.
func (r *Reader) settle(d *delivery, now time.Time) bool {
	switch {
	case closed(d.msg.Acked()):
		r.progressed = true
		r.metrics.Count(CountAcks, 1)
		r.ackedOut(d)
	case closed(d.msg.Nacked()):
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

// closed reports whether c, which is only ever closed, never sent on, is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (r *Reader) moveWatermark() {
	if seq := r.watermark(); seq != "" {
		r.acked = seq
	}
}

// refresh gives d a fresh message (same UUID, metadata and payload) with a new context.
func (r *Reader) refresh(d *delivery) {
	ctx := &messageContext{}
	ctx.sameRecord(d.ctx)
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
