package sim_test

// An instance is one incarnation of a group member: a Subscriber with its own clock rate, gate,
// Kinesis client and lease store wrapper, one or two subscriptions to the stream, and a handler
// goroutine per subscription.
//
// Failure models:
//   - crash: the gate hangs (or refuses) every Kinesis and lease-store call from then on and
//     the handlers stop reading, as when the process dies and its connections black-hole. At
//     the end of the run hung calls fail and the Subscriber is closed, so its goroutines exit.
//   - pause: for the pause, every call waits at the gate and the handlers read nothing; timers
//     keep running. This is a network stall of the whole instance (or a handler stuck in a long
//     GC with I/O threads frozen): when it ends, the calls that waited go through as sent,
//     late, and the driver must find out on its own clock that its leases are gone.
//   - cut-off: lease-store calls fail at once for a while; Kinesis calls go through.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// handlerKind is how an instance's handler treats messages.
type handlerKind int

const (
	handlerQuick handlerKind = iota // acks at once
	handlerSlow                     // works up to 300 ms, then acks
	handlerNacky                    // nacks one message in four, acks the rest
)

func (h handlerKind) String() string {
	return [...]string{"quick", "slow", "nacky"}[h]
}

type instance struct {
	w     *world
	id    int
	name  string
	rate  float64
	subs  int
	kind  handlerKind
	maxIF int
	gate  *gate
	sub   *kinesis.Subscriber
	rnd   *rand.Rand // the handler's; used by its goroutines under mu

	mu      sync.Mutex // guards rnd, halt, paused
	halt    chan struct{}
	paused  bool
	crashed bool // guarded by w.mu (deliver reads it)
	closed  bool // guarded by w.mu
	// closedInTrouble: Close began while the lease store failed or answered late for this
	// instance, or while it was paused (its calls hang: a reader that reached a shard's end
	// then could not release the finished lease, and its coordinator was paused too), so its
	// releases may have failed (guarded by w.mu).
	closedInTrouble bool
	startedAt       time.Time // when it was made, in bubble time
	// done is closed once Close returned: a handler whose channel Close failed to close
	// stops reading then, so that the run can end and report it.
	done chan struct{}
}

// newInstance makes (but does not start) an incarnation of slot.
func (w *world) newInstance(slot string, subs int, kind handlerKind, rate float64, maxIF int, byKey, fanOut bool) (*instance, error) {
	w.mu.Lock()
	in := &instance{
		w: w, id: len(w.insts), name: slot, rate: rate, subs: subs, kind: kind, maxIF: maxIF,
		gate: newGate(), halt: make(chan struct{}), done: make(chan struct{}), startedAt: time.Now(),
		rnd: rand.New(rand.NewPCG(w.seed, uint64(len(w.insts)))),
	}
	w.mu.Unlock()
	ordering := kinesis.OrderDefault
	if byKey {
		ordering = kinesis.OrderByKey
	}
	hook := func(kind hookKind) func(kinesis.ShardEvent) {
		return func(ev kinesis.ShardEvent) { w.hook(in, kind, ev) }
	}
	at := func(d time.Duration) time.Duration { return onClock(d, rate) } // its clock's rate
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: &simClient{g: in.gate, log: w.log, w: w, inst: in},
		Group: kinesis.GroupConfig{
			Name:               simGroup,
			LeaseStore:         &simStore{w: w, inst: in, s: w.store},
			WorkerID:           slot,
			CheckpointInterval: at(checkpointInterval),
			LeaseDuration:      at(leaseDuration), // LeaseRenewInterval: the default, a third of it
			LeaseSyncInterval:  at(leaseSyncInterval),
			HandoffTimeout:     at(handoffTimeout),
			Hooks: kinesis.ShardHooks{
				OnAcquired: hook(hookAcquired),
				OnRevoked:  hook(hookRevoked),
				OnLost:     hook(hookLost),
			},
		},
		FanOut:            kinesis.FanOutConfig{Enabled: fanOut},
		GetRecordsLimit:   25,
		PollInterval:      at(pollInterval),
		MinReadInterval:   at(minReadInterval),
		MaxInFlight:       maxIF,
		Ordering:          ordering,
		NackResendSleep:   at(nackResendSleep),
		ShardSyncInterval: at(shardSyncInterval),
		// Short enough that finished shards' leases are deleted within a run (they wait
		// 2 × (2 s + 2 × 2 s) = 12 s), so that the cleanup meets the faults too.
		RequestTimeout: at(requestTimeout),
		CloseTimeout:   at(closeTimeout),
	}, w.logger(in))
	if err != nil {
		return nil, err
	}
	in.sub = sub
	w.mu.Lock()
	w.insts = append(w.insts, in)
	w.live[slot] = in
	w.mu.Unlock()
	return in, nil
}

// logger is nil (silence) unless SIM_TRACE asks for the driver's logs, prefixed with the
// instance and fake time.
func (w *world) logger(in *instance) watermill.LoggerAdapter {
	if !traceNotes {
		return nil
	}
	return traceLogger{w: w, in: in}
}

type traceLogger struct {
	w  *world
	in *instance
}

func (l traceLogger) log(level, msg string, err error, f watermill.LogFields) {
	fmt.Fprintf(os.Stderr, "seed %d: %9s  %s#%d %s %s %v %v\n", l.w.seed, l.w.since().Round(time.Millisecond), l.in.name, l.in.id, level, msg, err, f)
}
func (l traceLogger) Error(msg string, err error, f watermill.LogFields) { l.log("ERROR", msg, err, f) }
func (l traceLogger) Info(msg string, f watermill.LogFields)             { l.log("INFO", msg, nil, f) }
func (l traceLogger) Debug(msg string, f watermill.LogFields)            { l.log("DEBUG", msg, nil, f) }
func (l traceLogger) Trace(string, watermill.LogFields)                  {}
func (l traceLogger) With(watermill.LogFields) watermill.LoggerAdapter   { return l }

// run subscribes (retrying while the group's store or Kinesis refuses) and starts a handler
// per subscription. It returns when the instance is closed or crashed.
func (in *instance) run() {
	defer in.w.wg.Done()
	for k := 0; k < in.subs; k++ {
		for {
			ch, err := in.sub.Subscribe(context.Background(), simStream)
			if err == nil {
				in.w.wg.Add(1)
				go in.consume(k, ch)
				break
			}
			if in.gone() {
				return
			}
			in.w.notef("%s#%d: Subscribe %d failed, retrying: %v", in.name, in.id, k, err)
			select {
			case <-time.After(500 * time.Millisecond):
			case <-in.w.end:
				return
			}
		}
	}
}

func (in *instance) gone() bool {
	in.w.mu.Lock()
	defer in.w.mu.Unlock()
	return in.crashed || in.closed
}

// waitUp blocks while the instance is paused; it returns false once the instance crashed.
func (in *instance) waitUp() (halt chan struct{}, ok bool) {
	for {
		in.mu.Lock()
		halt, paused := in.halt, in.paused
		in.mu.Unlock()
		if in.isCrashed() {
			return nil, false
		}
		if !paused {
			return halt, true
		}
		select {
		case <-halt:
		case <-in.w.end:
		}
	}
}

func (in *instance) isCrashed() bool {
	in.w.mu.Lock()
	defer in.w.mu.Unlock()
	return in.crashed
}

// consume is the handler of subscription k: it reads until the channel closes, and a crashed
// instance's handler reads nothing more and waits for the end of the run.
func (in *instance) consume(k int, ch <-chan *message.Message) {
	defer in.w.wg.Done()
	for {
		halt, ok := in.waitUp()
		if !ok {
			<-in.w.end
			return
		}
		select {
		case msg, open := <-ch:
			if !open {
				return
			}
			in.handle(k, msg)
		case <-halt:
		case <-in.done:
			return
		}
	}
}

func (in *instance) handle(k int, msg *message.Message) {
	d := in.w.deliver(in, k, msg)
	if d == nil {
		return
	}
	in.mu.Lock()
	work := time.Duration(0)
	if in.kind == handlerSlow {
		work = time.Duration(in.rnd.Int64N(int64(300 * time.Millisecond)))
	}
	nack := in.kind == handlerNacky && in.rnd.IntN(4) == 0
	in.mu.Unlock()
	if work > 0 {
		time.Sleep(work)
	}
	if _, ok := in.waitUp(); !ok {
		return // crashed while working: the message is never settled
	}
	if nack {
		msg.Nack()
		return
	}
	// An ack that comes after the driver cancelled the message (the subscription closed or the
	// reader stopped) settles nothing; such a record is expected back, and is no duplicate.
	if msg.Context().Err() == nil {
		in.w.acked(d)
	}
	msg.Ack()
}

// halted closes the handlers' halt channel so that they look at the instance's state again.
func (in *instance) halted(paused bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.paused = paused
	close(in.halt)
	in.halt = make(chan struct{})
}

func (in *instance) pause() {
	in.gate.set(gatePaused)
	in.halted(true)
}

func (in *instance) resume() {
	in.mu.Lock()
	paused := in.paused
	in.mu.Unlock()
	if paused && !in.isCrashed() {
		in.gate.set(gateOpen)
		in.halted(false)
	}
}

func (in *instance) crash(hang bool) {
	in.w.mu.Lock()
	in.crashed = true
	delete(in.w.live, in.name)
	in.w.mu.Unlock()
	if hang {
		in.gate.set(gateHang)
	} else {
		in.gate.set(gateRefused)
	}
	in.halted(false)
}

// close closes the Subscriber; a crashed instance's calls fail from now on, so that its Close
// returns as well (its leases stay behind, as a dead process's do).
func (in *instance) close() {
	in.mu.Lock()
	paused := in.paused
	in.mu.Unlock()
	storeTrouble := in.gate.cutOff() || paused
	in.w.mu.Lock()
	wasClosed := in.closed
	in.closed = true
	if now := time.Now(); !wasClosed {
		in.closedInTrouble = storeTrouble || now.Before(in.w.sf.outageUntil) || now.Before(in.w.sf.slowUntil)
	}
	if in.w.live[in.name] == in {
		delete(in.w.live, in.name)
	}
	in.w.mu.Unlock()
	if wasClosed {
		return
	}
	if in.isCrashed() {
		in.gate.set(gateRefused)
	}
	start := time.Now()
	defer close(in.done)
	if err := in.sub.Close(); err != nil {
		in.w.mu.Lock()
		in.w.closeErrs = append(in.w.closeErrs, fmt.Sprintf("%s#%d: Close after %s: %v", in.name, in.id, time.Since(start), err))
		in.w.mu.Unlock()
	}
}
