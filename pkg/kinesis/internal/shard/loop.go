package shard

import (
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// loop carries out decide's steps until the shard is done, the lease is lost or handed over,
// or ctx ends.
func (r *Reader) loop() (shardEnded bool, err error) {
	for {
		var ended bool
		ended, err = r.turn(nil)
		switch {
		case ended:
			return true, nil
		case r.handedTo != "":
			return false, nil
		case err != nil:
			return false, err
		}
	}
}

// turn settles the window, decides, and carries out one step. callDone, when not nil, is
// closed once a Kinesis call that is out comes back (kinesisCall): decide then reads nothing
// more, and a wait also ends when the call does.
func (r *Reader) turn(callDone <-chan struct{}) (ended bool, err error) {
	now := r.now()
	r.settleWindow(now)
	if r.progressed {
		r.progressed = false
		r.health.progress.Store(now.UnixNano())
	}
	if holding := r.buffered() > 0 || len(r.window) > 0; holding != r.holding {
		r.holding = holding
		r.health.holding.Store(holding)
	}
	v := r.view(now)
	v.calling = callDone != nil
	s := decide(v)
	switch s.do {
	case actWait:
		return false, r.wait(s, callDone)
	case actEnd:
		return true, nil
	}
	return false, r.act(s.do, now)
}

// act carries out every step but waiting and ending.
func (r *Reader) act(do action, now time.Time) error {
	switch do {
	case actPause:
		r.pause(now)
	case actResume:
		r.resume()
	case actRenew:
		return r.renew()
	case actCheckpoint:
		r.checkpointAt = nextTick(r.checkpointAt, now, r.cfg.CheckpointInterval)
		return r.checkpoint(r.ctx)
	case actFinish:
		return r.finish()
	case actHandOver:
		return r.handOver()
	case actPrepare:
		r.prepareRun()
	case actFetch:
		return r.fetch()
	}
	return nil
}

// view is decide's picture of the reader at now.
func (r *Reader) view(now time.Time) readerView {
	v := readerView{
		now:          now,
		leased:       r.held != nil,
		paused:       r.paused,
		ended:        r.ended,
		endWritten:   r.saved == lease.ShardEnd,
		finishRetry:  r.finishRetry,
		handingOff:   r.handingOff,
		handoffBy:    r.handoffBy,
		handoffRetry: r.handoffRetry,
		buffered:     r.buffered(),
		next:         r.sendable.peek(),
		waiting:      r.waiting,
		fetchAt:      r.fetchAt,
		window:       len(r.window),
		out:          r.out(),
		unsettled:    len(r.sentOut),
		resend:       r.dueResend(),
		maxInFlight:  r.cfg.MaxInFlight,
		holdLimit:    r.holdLimit(),
	}
	if v.leased {
		v.stopAt, v.renewAt, v.checkpointAt = r.stopAt(), r.renewAt, r.checkpointAt
	}
	return v
}

// wait offers s.offer to the subscriber and waits for the first event: that send, the Ack or
// Nack of a message out, s.until, a handoff request, the lease's loss, the end of the
// subscription, or the return of the call that is out (callDone, nil if none).
func (r *Reader) wait(s step, callDone <-chan struct{}) error {
	var send chan<- *message.Message
	var msg *message.Message
	if s.offer != nil {
		send, msg = r.links.Out, s.offer.msg
	}
	// Without a lease, nobody fences the reader or asks for its shard: a select locks every
	// channel in it, so it has only those that can fire.
	handoff, lost := r.handoff, r.lost
	if r.handingOff || !r.leased {
		handoff = nil
	}
	if !r.leased {
		lost = nil
	}
	wake := r.wakeAt(s.until)
	// One message out at most (MaxInFlight 1): the reader waits on its Ack and Nack itself.
	// With more, the watchers' settled channel stands for all of them.
	var acked, nacked <-chan struct{}
	var settled <-chan watched
	if r.watch != nil {
		settled = r.watch.settled
	} else if d := r.soleUnsettled(); d != nil {
		acked, nacked = d.msg.Acked(), d.msg.Nacked()
	}
	// A loss, a stop or a handoff request already signalled wins over a send: a select picks
	// among ready cases at random, and the send tried alone below won every time (a
	// subscriber that kept up got about twice as many messages after a Stop, found in review;
	// after a loss they are messages of a lease another worker owns). These looks take no lock.
	switch {
	case closed(lost):
		return errLostToOther
	case closed(r.ctx.Done()):
		return r.ctx.Err()
	case len(handoff) > 0:
		<-handoff // the reader is its only receiver
		r.beginHandoff()
		return nil
	}
	if send != nil {
		// Most sends find the subscriber waiting: one channel is cheaper to try than the
		// select below, which locks every channel in it.
		select {
		case send <- msg:
			r.sentOffer(s.offer)
			return nil
		default:
		}
	}
	select {
	case send <- msg:
		r.sentOffer(s.offer)
	case m := <-settled:
		r.watch.pending = append(r.watch.pending, m)
	case <-acked:
	case <-nacked:
	case <-wake:
		r.wakeArmed = time.Time{}
	case <-callDone:
	case <-handoff:
		r.beginHandoff()
	case <-lost:
		return errLostToOther
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	return nil
}

// sentOffer records that d went out and, with several messages allowed out, has its
// settlement watched.
func (r *Reader) sentOffer(d *delivery) {
	r.progressed = true
	r.metrics.Count(CountConsumed, 1)
	if d.state == stateNacked {
		r.metrics.Count(CountRedeliveries, 1)
	} else {
		r.metrics.Count(CountBytes, int64(len(d.msg.Payload)))
	}
	r.sent(d)
	if r.watch != nil {
		r.watch.watch(d)
	}
}

// errLostToOther stops a reader that the coordinator fenced.
var errLostToOther = fmt.Errorf("%w: another worker owns the lease now", lease.ErrLeaseLost)

// atEnd: the shard is closed, read to its end, and every record of it is done.
func (r *Reader) atEnd() bool {
	return r.ended && r.buffered() == 0 && len(r.window) == 0
}

// wakeAt returns a channel that fires at 'at' (nil for the zero time). One timer per reader
// is reused, and left as it is when it is already set for that time: most waits of a busy
// reader wake for the same lease deadline, and re-arming a timer for every message cost more
// than the rest of the wait.
func (r *Reader) wakeAt(at time.Time) <-chan time.Time {
	if at.IsZero() {
		return nil
	}
	switch {
	case r.wake == nil:
		r.wake = time.NewTimer(at.Sub(r.now()))
	case !at.Equal(r.wakeArmed):
		r.wake.Reset(at.Sub(r.now()))
	}
	r.wakeArmed = at
	return r.wake.C
}
