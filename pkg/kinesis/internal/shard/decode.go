package shard

import (
	"errors"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire"
)

// prepareRun prepares up to prepareRunLength records at once, never past the hold limit (decide
// asks for a prepare only below it). decide asks for a prepare only when nothing prepared may
// go out, so one record at a time cost a whole turn of the reader (settle, view, decide) per
// record on top of its send and its Ack, a quarter of a record's cost in the reader.
//
// The run ends early after a record the Unmarshaler rejected, and, under a lease, once a lease
// step comes due: the Unmarshaler and the PoisonHandler are the application's, and one that does
// I/O (a dead-letter publish) must not hold back a renewal for a run's worth of records, nor
// run for records past one it had to handle.
//
// Paused or handing over, nothing prepared goes out, so one record is prepared, as decide asks.
func (r *Reader) prepareRun() {
	room := r.holdLimit() - len(r.window)
	if r.paused || r.handingOff {
		room = min(room, 1)
	}
	var due time.Time
	if r.held != nil {
		stop := r.stopAt()
		if stop.IsZero() { // a stop point of an incarnation this member does not know: now
			stop = r.now()
		}
		due = Earliest(Earliest(r.renewAt, r.checkpointAt), stop)
	}
	for n := min(prepareRunLength, room, r.buffered()); n > 0; n-- {
		if rejected := r.prepare(); rejected {
			return
		}
		if !due.IsZero() && n > 1 && !r.now().Before(due) {
			return
		}
	}
}

// prepareRunLength is how many records prepareRun decodes ahead at most: enough to spread a
// turn over several records, few enough that the messages decoded ahead (about 670 bytes each,
// the payload aside) weigh little beside the records the shard holds. At 32, 16 shards held
// 0.35 MiB more at B7's 200k backlog (3.3 MiB, not 2.9) for no less CPU per record than at 8
// (BenchmarkDeliverAck).
const prepareRunLength = 8

// prepare decodes the next record into a message with its own context, and puts it in the
// window. It reports whether the Unmarshaler rejected the record (the PoisonHandler had it).
func (r *Reader) prepare() (rejected bool) {
	var u *wire.UserRecord
	var rec *types.Record
	if r.records != nil {
		u = &r.records[r.next]
		rec = &u.Rec
	} else {
		rec = &r.batch[r.next]
	}
	r.next++
	d := &delivery{}
	c := &d.first
	d.ctx = c
	c.facts, c.seq, c.key, c.behind = r.facts, aws.ToString(rec.SequenceNumber), aws.ToString(rec.PartitionKey), r.behind
	if u != nil {
		c.seq, c.aggregated, c.sub = u.Seq, u.Aggregated, int32(u.Sub)
	}
	if rec.ApproximateArrivalTimestamp != nil {
		c.arrival = *rec.ApproximateArrivalTimestamp
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
		c.decodeError = err
		msg = r.poison(PoisonRecord{Info: c.info(), Data: rec.Data, Err: err, Decoded: msg}, d)
		if msg == nil {
			// Skipped: done as if delivered and acked, so the checkpoint passes it in order.
			d.state = stateAcked
			c.cancelled = true
		}
	}
	if msg != nil {
		d.msg = msg
		msg.SetContext(d.ctx)
	}
	r.enqueue(d, r.cfg.Ordering, c.key)
	return c.decodeError != nil
}

// recordFields are the log fields of a record: built only on the rare paths that log one.
func (r *Reader) recordFields(d *delivery) watermill.LogFields {
	f := r.LogFields()
	f["sequence_number"] = d.ctx.seq
	if d.ctx.aggregated {
		f["sub_sequence_number"] = int(d.ctx.sub)
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
