package shard

import (
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
)

// settleWatch tells a reader that may have several messages out (MaxInFlight above 1) which
// of them were acked or nacked, so that the reader sleeps on one channel whatever the number
// out and learns of each settlement in O(1). A Watermill message signals its Ack or Nack only
// by closing a channel of its own, so something has to wait on each message's two channels:
// a select over all of them (reflect.Select, since their number is known only at run time)
// cost the reader more than the rest of a message's delivery, and every settlement meant
// another such select over every message still out.
//
// Watchers are a pool per reader, not a goroutine per message: a watcher waits for one
// message's settlement, reports it, and then takes the next message to watch. The reader
// starts a new watcher only when none is idle, so watchers number about the most messages the
// reader had out at once (MaxInFlight bounds those; the router runs a handler goroutine per
// message out anyway), plus the few that had just reported and were not idle yet when a
// message went out. A pause takes the messages out back (takeBack): their watchers stop
// watching them and go idle, whether or not the handlers ever settle them.
//
// Ownership: the reader goroutine owns pending and is the only one that sends on work and
// closes stop (in run, before finished is closed, once no more messages will be sent).
// Watchers own nothing: each reads only the watched value it was handed (never the delivery's
// fields, which the reader changes) and the channels.
type settleWatch struct {
	work    chan watched  // unbuffered: a send succeeds only if a watcher is idle
	settled chan watched  // watchers → reader: a message out was acked or nacked
	stop    chan struct{} // closed by the reader when it exits; every watcher then returns
	// back is closed by takeBack when a pause takes the messages out back, and replaced: a
	// watcher of a message sent before then goes idle instead of watching it further.
	back     chan struct{}
	watchers sync.WaitGroup
	// pending are settlements the reader took from settled in wait and has not applied yet
	// (settleWindow applies them).
	pending []watched
	started int // watchers started so far
}

// watched is a message out and its delivery. msg is kept apart from the delivery because a
// Nack gives the delivery a fresh message: a settlement reported for an older message of
// the delivery is stale and is ignored.
type watched struct {
	d    *delivery
	msg  *message.Message
	back <-chan struct{} // settleWatch.back when msg went out
}

func newSettleWatch(maxInFlight int) *settleWatch {
	return &settleWatch{
		work: make(chan watched),
		// Room for every message out: a watcher rarely waits to report. Settlements of
		// messages a pause took back (suspendWindow) may come on top; their watchers wait
		// until the reader takes them, which it does at each wait.
		settled: make(chan watched, maxInFlight),
		stop:    make(chan struct{}),
		back:    make(chan struct{}),
	}
}

// watch has d's current message watched until it is acked or nacked.
func (w *settleWatch) watch(d *delivery) {
	m := watched{d: d, msg: d.msg, back: w.back}
	select {
	case w.work <- m:
	default:
		w.started++
		w.watchers.Add(1)
		go w.watcher(m)
	}
}

// watcher reports the settlement of m, then of each message it is handed next, until stop.
func (w *settleWatch) watcher(m watched) {
	defer w.watchers.Done()
	for {
		reported := true
		select {
		case <-m.msg.Acked():
		case <-m.msg.Nacked():
		case <-m.back:
			reported = false // taken back: the reader does not wait for it any more
		case <-w.stop:
			return
		}
		if reported {
			select {
			case w.settled <- m:
			case <-w.stop:
				return
			}
		}
		m = watched{} // keep no message alive while idle
		select {
		case m = <-w.work:
		case <-w.stop:
			return
		}
	}
}

// take moves the settlements already reported to pending, without blocking.
func (w *settleWatch) take() {
	for {
		select {
		case m := <-w.settled:
			w.pending = append(w.pending, m)
		default:
			return
		}
	}
}

// takeBack ends the watch of every message out: a pause took them back (suspendWindow), and
// a handler may never settle a message whose context it saw cancelled.
func (w *settleWatch) takeBack() {
	close(w.back)
	w.back = make(chan struct{})
}

// close stops every watcher and waits for them to return. Messages still out are no longer
// watched: the reader is done with them.
func (w *settleWatch) close() {
	close(w.stop)
	w.watchers.Wait()
	clear(w.pending)
	w.pending = w.pending[:0]
}
