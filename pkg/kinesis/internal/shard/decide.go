package shard

import "time"

// action is the one thing a shard reader does next; see decide.
type action int

const (
	// actWait: nothing is due. The reader offers step.offer (if any) to the subscriber and
	// waits for that send, an Ack or Nack, a coordinator signal, or step.until.
	actWait action = iota
	// actPause: no renewal succeeded in time; stop sending and reading (another worker may
	// take the lease from here on) and keep trying to renew.
	actPause
	// actResume: a renewal succeeded while paused; deliveries go on where they were.
	actResume
	// actRenew: the lease renewal is due.
	actRenew
	// actCheckpoint: the periodic checkpoint of the watermark is due.
	actCheckpoint
	// actFinish: the shard is read to its end and every record acked: write SHARD_END.
	actFinish
	// actEnd: the shard is done (and, with a lease, SHARD_END is written): stop.
	actEnd
	// actHandOver: another worker asked for the lease and the messages in flight are settled
	// (or their time is up): checkpoint and hand the lease over.
	actHandOver
	// actPrepare: decode the next fetched record into a message.
	actPrepare
	// actFetch: read the next batch of records.
	actFetch
)

func (a action) String() string {
	return [...]string{"wait", "pause", "resume", "renew", "checkpoint", "finish", "end", "hand over", "prepare", "fetch"}[a]
}

// step is decide's answer.
type step struct {
	do action
	// offer, with actWait, is the message to hand to the subscriber while waiting: a nacked
	// one due again, or the next record. Nil: none.
	offer *delivery
	// until, with actWait, is when to decide again if nothing else happens first. Zero: only
	// a channel event (a send, an Ack or Nack, a coordinator signal) wakes the reader.
	until time.Time
}

// readerView is everything decide looks at: a reader's state at one instant, as plain values.
// The reader goroutine builds it (view) from its own fields; tests build it by hand.
type readerView struct {
	now    time.Time
	leased bool // reading under a lease (a consumer group)

	// With a lease: when deliveries must stop unless a renewal succeeds first, when the next
	// renewal and checkpoint are due, and whether the reader is paused.
	stopAt, renewAt, checkpointAt time.Time
	paused                        bool

	// The shard is closed and read to its end; with a lease, whether SHARD_END is written,
	// and when a failed SHARD_END write may be tried again.
	ended, endWritten bool
	finishRetry       time.Time

	// Another worker asked for the lease: deliveries stop; the lease is handed over once
	// nothing is unsettled or at handoffBy, and not before handoffRetry after a failed try.
	handingOff              bool
	handoffBy, handoffRetry time.Time

	// calling: a Kinesis call of the reader is out (kinesisCall). Lease steps, sends and
	// resends go on meanwhile; reading waits for the call.
	calling bool

	buffered    int       // records fetched and not yet prepared
	next        *delivery // the oldest prepared delivery that ordering lets out now, if any
	waiting     int       // prepared deliveries not sent yet (next, and those ordering holds back)
	fetchAt     time.Time // the earliest time the next read may be sent
	window      int       // deliveries not done: waiting, sent, nacked, or acked behind one that is not
	out         int       // deliveries sent or nacked: what maxInFlight bounds
	unsettled   int       // deliveries sent and not yet seen acked or nacked
	resend      *delivery // the nacked delivery due first, if any
	maxInFlight int
	holdLimit   int // the most records the shard may hold, fetched and not done (holdLimit)
}

// decide is a shard reader's choice of what to do next: a pure function of its state and the
// time, so that every rule below is table-tested (TestDecide) and the reader goroutine only
// carries the choice out. Lease safety comes first (pause, resume, renew, checkpoint), then
// finishing the shard or handing it over, then reading and sending.
func decide(v readerView) step {
	if do, due := leaseDue(v); due {
		return step{do: do}
	}
	drained := v.buffered == 0
	if v.ended && drained && v.window == 0 {
		if v.leased && !v.endWritten {
			if !v.now.Before(v.finishRetry) {
				return step{do: actFinish}
			}
			return v.wait(nil, v.finishRetry)
		}
		return step{do: actEnd}
	}
	if v.handingOff && !v.paused && !v.now.Before(v.handoffRetry) && (v.unsettled == 0 || !v.now.Before(v.handoffBy)) {
		return step{do: actHandOver}
	}
	// Prepare ahead of what is out (a run of records: prepareRun) once nothing prepared is
	// waiting, and, when ordering holds every prepared one back (OrderByKey: their keys are
	// busy) while there is room out, further, to find one it lets go; never past the shard's
	// hold limit.
	if v.buffered > 0 && v.window < v.holdLimit && (v.waiting == 0 || (v.next == nil && v.out < v.maxInFlight)) {
		return step{do: actPrepare}
	}
	// Read once the last batch is prepared and the window leaves room for a read of a useful
	// size (fetch asks for holdLimit - window records).
	reading := drained && !v.ended && !v.paused && !v.handingOff && !v.calling && (v.window == 0 || 2*v.window <= v.holdLimit)
	if reading && !v.now.Before(v.fetchAt) {
		return step{do: actFetch}
	}

	// Nothing is due now: offer what may go out, and wake for the first thing that comes due.
	var offer *delivery
	var until time.Time
	switch {
	case v.handingOff, v.paused:
		// Nothing more goes out: the next owner continues from the checkpoint, or, once a
		// renewal succeeds, this one goes on.
	case v.resend != nil && !v.now.Before(v.resend.resendAt):
		offer = v.resend
	case v.next != nil && v.out < v.maxInFlight:
		offer = v.next
	}
	if reading {
		until = Earliest(until, v.fetchAt)
	}
	if v.resend != nil && offer == nil && !v.paused && !v.handingOff {
		until = Earliest(until, v.resend.resendAt)
	}
	if v.handingOff {
		if v.unsettled > 0 && v.handoffBy.After(v.now) {
			until = Earliest(until, v.handoffBy)
		}
		if v.handoffRetry.After(v.now) {
			until = Earliest(until, v.handoffRetry)
		}
	}
	return v.wait(offer, until)
}

// leaseDue is the lease step due at v.now, if any: pause past the stop point, resume once a
// renewal succeeded, renew, checkpoint.
func leaseDue(v readerView) (action, bool) {
	if !v.leased {
		return actWait, false
	}
	stale := !v.now.Before(v.stopAt)
	switch {
	case stale && !v.paused:
		return actPause, true
	case !stale && v.paused:
		return actResume, true
	case !v.now.Before(v.renewAt):
		return actRenew, true
	case !v.now.Before(v.checkpointAt):
		return actCheckpoint, true
	}
	return actWait, false
}

// wait is actWait with offer, waking at until or at the next lease deadline, whichever is first.
func (v readerView) wait(offer *delivery, until time.Time) step {
	if v.leased {
		until = Earliest(until, v.renewAt)
		until = Earliest(until, v.checkpointAt)
		if !v.paused {
			until = Earliest(until, v.stopAt)
		}
	}
	return step{do: actWait, offer: offer, until: until}
}

// Earliest is the earlier of two times, where the zero time means "never".
func Earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// nextTick is the first time after now on the grid last + k*interval (k >= 1), as a ticker
// fires: missed ticks are not caught up.
func nextTick(last, now time.Time, interval time.Duration) time.Time {
	next := last.Add(interval)
	if !next.After(now) {
		next = next.Add((now.Sub(next)/interval + 1) * interval)
	}
	return next
}

// LeaseStopAfter is how long after sending its last successful renewal an owner stops
// delivering: 0.8 × LeaseDuration. Another worker may take the lease LeaseDuration after it
// first saw the counter that renewal left; the fifth in between covers clock rates that differ
// and the time the renewal spent in flight, so that no two workers deliver one shard at once.
func LeaseStopAfter(cfg *Config) time.Duration { return cfg.LeaseDuration - cfg.LeaseDuration/5 }

// renewLastTry is how long before its stop point a reader whose renewals failed tries once
// more: time for the call to come back.
func renewLastTry(cfg *Config) time.Duration { return cfg.LeaseRenewInterval / 8 }
