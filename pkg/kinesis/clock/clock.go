// Package clock is the time source of the driver's lease and read timing. Production code uses
// Real; tests inject a *Fake and move time forward themselves, so that lease expiry, renewals,
// handoff timeouts and polling run deterministically and fast, with no sleeping.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers and tickers.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer behind an interface. Reset and Stop have the Go 1.23 semantics: after
// either returns, no value from before can be received.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// Ticker is a time.Ticker behind an interface.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                   { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer   { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time   { return t.t.C }
func (t realTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t realTimer) Stop()                 { t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// Fake is a clock that moves only when told to. Timers and tickers fire, in deadline order,
// when Advance passes their deadline; like the runtime's, their channels hold one value and a
// tick that finds the channel full is dropped. Safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	changed chan struct{} // closed and replaced whenever a timer is added, reset or stopped
}

// NewFake returns a fake clock that reads start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

type fakeWaiter struct {
	clock    *Fake
	ch       chan time.Time
	deadline time.Time
	period   time.Duration // > 0 for tickers
	active   bool
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer makes a timer that fires once Advance passes now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.add(d, 0)
}

// NewTicker makes a ticker that fires every d of fake time.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	return f.add(d, d)
}

func (f *Fake) add(d, period time.Duration) *fakeWaiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{clock: f, ch: make(chan time.Time, 1), deadline: f.now.Add(d), period: period, active: true}
	f.waiters = append(f.waiters, w)
	f.notifyLocked()
	if d <= 0 {
		f.fireLocked()
	}
	return w
}

// Advance moves the clock forward by d, firing every timer and ticker whose deadline it passes,
// in deadline order (a ticker fires once per period passed, as far as its channel has room).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	target := f.now.Add(d)
	for {
		next := f.nextDeadlineLocked(target)
		if next == nil {
			break
		}
		f.now = next.deadline
		f.fireOneLocked(next)
	}
	f.now = target
}

// nextDeadlineLocked is the active waiter due first at or before target, or nil.
func (f *Fake) nextDeadlineLocked(target time.Time) *fakeWaiter {
	var due []*fakeWaiter
	for _, w := range f.waiters {
		if w.active && !w.deadline.After(target) {
			due = append(due, w)
		}
	}
	if len(due) == 0 {
		return nil
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].deadline.Before(due[j].deadline) })
	return due[0]
}

func (f *Fake) fireLocked() {
	for {
		w := f.nextDeadlineLocked(f.now)
		if w == nil {
			return
		}
		f.fireOneLocked(w)
	}
}

func (f *Fake) fireOneLocked(w *fakeWaiter) {
	select {
	case w.ch <- w.deadline:
	default:
	}
	if w.period > 0 {
		w.deadline = w.deadline.Add(w.period)
	} else {
		w.active = false
		f.removeLocked(w)
	}
}

func (f *Fake) removeLocked(w *fakeWaiter) {
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			return
		}
	}
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Waiters is how many timers and tickers are active: a test waits for the code under test to
// have armed its timers before it advances the clock.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.waiters {
		if w.active {
			n++
		}
	}
	return n
}

// Changed returns a channel closed the next time a timer or ticker is made, reset or stopped.
func (f *Fake) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (w *fakeWaiter) C() <-chan time.Time { return w.ch }

// Reset re-arms the timer d from now and drops a value not yet received.
func (w *fakeWaiter) Reset(d time.Duration) {
	f := w.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	drain(w.ch)
	w.deadline = f.now.Add(d)
	if !w.active {
		w.active = true
		f.waiters = append(f.waiters, w)
	}
	f.notifyLocked()
	if d <= 0 {
		f.fireLocked()
	}
}

// Stop disarms the timer or ticker and drops a value not yet received.
func (w *fakeWaiter) Stop() {
	f := w.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	drain(w.ch)
	if w.active {
		w.active = false
		f.removeLocked(w)
		f.notifyLocked()
	}
}

func drain(ch chan time.Time) {
	select {
	case <-ch:
	default:
	}
}

// WithTimeout is context.WithTimeout on clk: the returned context ends, with Err
// context.DeadlineExceeded, once d has passed on clk. On the real clock it is
// context.WithTimeout itself. On any other clock a goroutine waits for the deadline or for the
// context's end, whichever comes first; calling cancel ends it. (Deadline reports none there:
// the deadline is on clk, and callers would read it against the real clock.)
func WithTimeout(parent context.Context, clk Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, real := clk.(realClock); real {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := clk.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
		}
	}()
	return deadlineContext{ctx}, func() { cancel(context.Canceled) }
}

// deadlineContext reports its deadline's passing as context.DeadlineExceeded, as a context of
// context.WithTimeout does, rather than as the context.Canceled of WithCancelCause, so that a
// callee that returns ctx.Err() says the call timed out. A context derived from it before the
// deadline reports context.Canceled; context.Cause tells the truth for every one of them.
type deadlineContext struct{ context.Context }

func (c deadlineContext) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}
