package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fired(c <-chan time.Time) (time.Time, bool) {
	select {
	case at := <-c:
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresAtDeadline(t *testing.T) {
	f := clock.NewFake(t0)
	tm := f.NewTimer(10 * time.Second)
	f.Advance(9 * time.Second)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("fired before its deadline")
	}
	f.Advance(time.Second)
	at, ok := fired(tm.C())
	if !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("fired=%v at %v", ok, at)
	}
	if f.Waiters() != 0 {
		t.Fatal("a fired timer stays armed")
	}
}

func TestFakeTimerResetAndStop(t *testing.T) {
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second)
	tm.Reset(5 * time.Second) // drops the unreceived value
	if _, ok := fired(tm.C()); ok {
		t.Fatal("Reset kept a stale value")
	}
	f.Advance(4 * time.Second)
	tm.Stop()
	f.Advance(time.Hour)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	tm.Reset(0)
	if _, ok := fired(tm.C()); !ok {
		t.Fatal("Reset(0) must fire at once")
	}
}

func TestFakeTickerDropsTicksLikeTheRuntime(t *testing.T) {
	f := clock.NewFake(t0)
	tk := f.NewTicker(time.Second)
	f.Advance(3500 * time.Millisecond)
	at, ok := fired(tk.C())
	if !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("first tick %v %v; later ticks of a full channel are dropped", ok, at)
	}
	if _, ok := fired(tk.C()); ok {
		t.Fatal("more than one tick buffered")
	}
	f.Advance(500 * time.Millisecond)
	if at, ok := fired(tk.C()); !ok || !at.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("tick at 4s: %v %v", ok, at)
	}
	tk.Stop()
	if f.Waiters() != 0 {
		t.Fatal("a stopped ticker stays armed")
	}
}

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	f := clock.NewFake(t0)
	late := f.NewTimer(2 * time.Second)
	early := f.NewTimer(time.Second)
	f.Advance(time.Minute)
	a, _ := fired(early.C())
	b, _ := fired(late.C())
	if !a.Before(b) || !f.Now().Equal(t0.Add(time.Minute)) {
		t.Fatalf("early %v late %v now %v", a, b, f.Now())
	}
}

func TestFakeChangedSignalsNewTimers(t *testing.T) {
	f := clock.NewFake(t0)
	changed := f.Changed()
	go f.NewTimer(time.Second)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed not signalled")
	}
}

func TestWithTimeoutOnFakeClock(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	ctx, cancel := clock.WithTimeout(context.Background(), f, time.Second)
	defer cancel()
	derived, cancelDerived := context.WithCancel(ctx)
	defer cancelDerived()
	f.Advance(999 * time.Millisecond)
	select {
	case <-ctx.Done():
		t.Fatal("cancelled before its deadline")
	default:
	}
	f.Advance(time.Millisecond)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("cause = %v, want context.DeadlineExceeded", context.Cause(ctx))
	}
	if ctx.Err() != context.DeadlineExceeded {
		t.Fatalf("Err = %v, want context.DeadlineExceeded, as context.WithTimeout reports", ctx.Err())
	}
	<-derived.Done()
	if context.Cause(derived) != context.DeadlineExceeded {
		t.Fatalf("a derived context's cause = %v, want context.DeadlineExceeded", context.Cause(derived))
	}
}

func TestWithTimeoutCancelEndsTheWait(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := clock.NewFake(time.Unix(0, 0))
	ctx, cancel := clock.WithTimeout(context.Background(), f, time.Hour)
	cancel()
	<-ctx.Done()
	if ctx.Err() != context.Canceled {
		t.Fatalf("Err = %v, want context.Canceled", ctx.Err())
	}
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("cause = %v, want context.Canceled", context.Cause(ctx))
	}
}
