package kinesis

import (
	"context"
	"errors"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// windowState is a reader's in-flight window: what it delivered and has not seen settled,
// the next record waiting to go out, and the watermark. The reader goroutine owns it.
type windowState struct {
	window   []*delivery // delivered and not yet done, in sequence order
	prepared *delivery   // the next record, decoded, waiting to be sent
	acked    string      // watermark: last sequence number acked in order
}

// deliveryState is where one delivered message stands.
type deliveryState int

const (
	stateSent   deliveryState = iota // handed to the subscriber's channel, not settled yet
	stateAcked                       // acked: done
	stateNacked                      // nacked: to be delivered again at resendAt
)

// delivery is one record in a shard's in-flight window. The shard's reader goroutine owns it.
type delivery struct {
	seq    string
	msg    *message.Message
	cancel context.CancelFunc // cancels msg's context
	info   RecordInfo

	state    deliveryState
	resendAt time.Time
}

// settle moves d to acked or nacked if its message was settled, cancelling its context; it
// reports whether the state changed. It never blocks.
func (d *delivery) settle(now time.Time, nackSleep time.Duration) bool {
	if d.state != stateSent {
		return false
	}
	select {
	case <-d.msg.Acked():
		d.state = stateAcked
	case <-d.msg.Nacked():
		d.state = stateNacked
		d.resendAt = now
		if nackSleep > 0 {
			d.resendAt = now.Add(nackSleep)
		}
	default:
		return false
	}
	d.cancel()
	return true
}

// watermark returns how many deliveries at the front of the window are acked and the sequence
// number of the last of them: the checkpoint may move there, since every record up to it is
// done. A record acked behind an unacked one does not move it.
func watermark(window []*delivery) (done int, seq string) {
	for done < len(window) && window[done].state == stateAcked {
		seq = window[done].seq
		done++
	}
	return done, seq
}

// oldestUnsettled is the delivery whose Ack or Nack the reader waits on.
func oldestUnsettled(window []*delivery) *delivery {
	for _, d := range window {
		if d.state == stateSent {
			return d
		}
	}
	return nil
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
		LeaseGeneration:    r.generation,
	}
	if rec.ApproximateArrivalTimestamp != nil {
		info.ArrivalTime = *rec.ApproximateArrivalTimestamp
	}
	fields := func() watermill.LogFields {
		f := r.logFields().Add(watermill.LogFields{"sequence_number": info.SequenceNumber})
		if u.aggregated {
			f["sub_sequence_number"] = u.sub
		}
		return f
	}
	if u.notAggregate != nil {
		r.sub.logger.Info("Record starts like a KPL aggregate but is not one; delivering it whole, as the KCL does",
			fields().Add(watermill.LogFields{"reason": u.notAggregate.Error()}))
	}
	msg, err := r.sub.cfg.Unmarshaler.Unmarshal(r.sub.stream, r.shardID, rec)
	if err != nil || msg == nil {
		if err == nil {
			err = errors.New("unmarshaler returned no message")
		}
		info.DecodeError = err
		msg = r.poison(PoisonRecord{Info: info, Data: rec.Data, Err: err, Decoded: msg}, fields())
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
			r.refresh(d)
		}
	}
	done, seq := watermark(r.window)
	if done > 0 {
		clear(r.window[:done])
		r.window = r.window[done:]
		r.acked = seq
	}
}

// refresh gives d a fresh message (same UUID, metadata and payload) with a new context.
func (r *shardReader) refresh(d *delivery) {
	fresh := r.newDelivery(d.msg.Copy(), d.info, d.seq)
	d.msg, d.cancel = fresh.msg, fresh.cancel
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
		r.refresh(d)
		d.state, d.resendAt = stateNacked, now
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
