package shard

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	next := &delivery{ord: 1}
	nacked := &delivery{ord: 2, state: stateNacked, resendAt: at(50 * time.Millisecond)}
	dueNack := &delivery{ord: 3, state: stateNacked, resendAt: at(-time.Millisecond)}
	// leased is a reader in good standing: renewed recently, nothing due before 1 s.
	leased := func(change func(v *readerView)) readerView {
		v := readerView{
			now: t0, leased: true, maxInFlight: 1, holdLimit: 100,
			stopAt: at(8 * time.Second), renewAt: at(time.Second), checkpointAt: at(5 * time.Second),
			fetchAt: at(200 * time.Millisecond),
		}
		if change != nil {
			change(&v)
		}
		return v
	}
	unleased := func(change func(v *readerView)) readerView {
		v := readerView{now: t0, maxInFlight: 1, holdLimit: 100, fetchAt: at(200 * time.Millisecond)}
		if change != nil {
			change(&v)
		}
		return v
	}
	tests := []struct {
		name  string
		view  readerView
		do    action
		offer *delivery
		until time.Time
	}{
		// Lease safety comes first.
		{"past the stop point: pause", leased(func(v *readerView) { v.stopAt, v.next, v.waiting, v.window = t0, next, 1, 1 }), actPause, nil, time.Time{}},
		{"paused, renewed since: resume", leased(func(v *readerView) { v.paused = true }), actResume, nil, time.Time{}},
		{"paused and still stale: wait for the renewal, send nothing", leased(func(v *readerView) {
			v.paused, v.stopAt, v.next, v.waiting, v.window, v.renewAt = true, at(-time.Second), next, 1, 1, at(250*time.Millisecond)
		}), actWait, nil, at(250 * time.Millisecond)},
		{"renewal due", leased(func(v *readerView) { v.renewAt = t0 }), actRenew, nil, time.Time{}},
		{"renewal due before a pending send", leased(func(v *readerView) { v.renewAt, v.next, v.waiting, v.window = t0, next, 1, 1 }), actRenew, nil, time.Time{}},
		{"checkpoint due", leased(func(v *readerView) { v.checkpointAt = at(-time.Millisecond) }), actCheckpoint, nil, time.Time{}},
		{"no lease: no renewal, no checkpoint", unleased(func(v *readerView) { v.fetchAt = t0 }), actFetch, nil, time.Time{}},

		// The end of a shard.
		{"ended, all acked, leased: write SHARD_END", leased(func(v *readerView) { v.ended = true }), actFinish, nil, time.Time{}},
		{"ended, SHARD_END failed: wait for the retry", leased(func(v *readerView) { v.ended, v.finishRetry = true, at(300*time.Millisecond) }),
			actWait, nil, at(300 * time.Millisecond)},
		{"ended, SHARD_END written: end", leased(func(v *readerView) { v.ended, v.endWritten = true, true }), actEnd, nil, time.Time{}},
		{"ended without a lease: end", unleased(func(v *readerView) { v.ended = true }), actEnd, nil, time.Time{}},
		{"ended with a message in flight: wait for its ack", leased(func(v *readerView) { v.ended, v.window, v.out, v.unsettled = true, 1, 1, 1 }),
			actWait, nil, at(time.Second)},
		{"ended with records still fetched: prepare them first", leased(func(v *readerView) { v.ended, v.buffered = true, 3 }), actPrepare, nil, time.Time{}},

		// Handing over.
		{"handoff asked, nothing in flight: hand over", leased(func(v *readerView) { v.handingOff, v.handoffBy = true, at(5*time.Second) }),
			actHandOver, nil, time.Time{}},
		{"handoff asked, one in flight: wait for it until handoffBy, send nothing", leased(func(v *readerView) {
			v.handingOff, v.handoffBy, v.window, v.out, v.unsettled, v.next, v.waiting = true, at(500*time.Millisecond), 2, 1, 1, next, 1
		}), actWait, nil, at(500 * time.Millisecond)},
		{"handoff asked, in flight past handoffBy: hand over anyway", leased(func(v *readerView) {
			v.handingOff, v.handoffBy, v.window, v.out, v.unsettled = true, t0, 1, 1, 1
		}), actHandOver, nil, time.Time{}},
		{"handoff failed: wait for handoffRetry", leased(func(v *readerView) {
			v.handingOff, v.handoffBy, v.handoffRetry = true, t0, at(700*time.Millisecond)
		}), actWait, nil, at(700 * time.Millisecond)},
		{"handoff retry time passed, a message still in flight: wait for it, not a busy loop", leased(func(v *readerView) {
			v.handingOff, v.handoffBy, v.handoffRetry, v.window, v.out, v.unsettled = true, at(400*time.Millisecond), at(-time.Second), 1, 1, 1
		}), actWait, nil, at(400 * time.Millisecond)},
		{"handoff while paused: wait for the renewal", leased(func(v *readerView) {
			v.handingOff, v.paused, v.stopAt, v.renewAt = true, true, t0, at(250*time.Millisecond)
		}), actWait, nil, at(250 * time.Millisecond)},
		{"handing off: no reads", leased(func(v *readerView) {
			v.handingOff, v.handoffBy, v.window, v.out, v.unsettled, v.fetchAt = true, at(500*time.Millisecond), 1, 1, 1, t0
		}), actWait, nil, at(500 * time.Millisecond)},

		// Reading and sending.
		{"records fetched, none prepared: prepare", unleased(func(v *readerView) { v.buffered = 2 }), actPrepare, nil, time.Time{}},
		{"nothing buffered, read due: fetch", unleased(func(v *readerView) { v.fetchAt = t0 }), actFetch, nil, time.Time{}},
		{"nothing buffered, read not due: wait for it", unleased(nil), actWait, nil, at(200 * time.Millisecond)},
		{"a call is out: no second read, however due", unleased(func(v *readerView) { v.fetchAt, v.calling = t0, true }), actWait, nil, time.Time{}},
		{"a call is out: lease steps go on", leased(func(v *readerView) { v.renewAt, v.calling = t0, true }), actRenew, nil, time.Time{}},
		{"a call is out: a nacked message due is resent", unleased(func(v *readerView) {
			v.calling, v.window, v.out, v.resend = true, 1, 1, dueNack
		}), actWait, dueNack, time.Time{}},
		{"a call is out and a handoff is asked: hand over", leased(func(v *readerView) { v.calling, v.handingOff, v.handoffBy = true, true, at(time.Second) }),
			actHandOver, nil, time.Time{}},
		{"paused: no reads", leased(func(v *readerView) { v.paused, v.stopAt, v.fetchAt = true, t0, t0 }), actWait, nil, at(time.Second)},
		{"prepared, room out: offer it", unleased(func(v *readerView) { v.next, v.waiting, v.window = next, 1, 1 }), actWait, next, at(200 * time.Millisecond)},
		{"prepared, MaxInFlight out: wait for an ack", unleased(func(v *readerView) { v.next, v.waiting, v.window, v.out, v.unsettled = next, 1, 2, 1, 1 }),
			actWait, nil, at(200 * time.Millisecond)},
		{"prepared, MaxInFlight out, leased: wake to read ahead", leased(func(v *readerView) {
			v.next, v.waiting, v.window, v.out, v.unsettled = next, 1, 2, 1, 1
		}), actWait, nil, at(200 * time.Millisecond)},
		{"a nacked message due goes before the next record", unleased(func(v *readerView) {
			v.next, v.waiting, v.window, v.out, v.resend, v.maxInFlight = next, 1, 2, 1, dueNack, 2
		}), actWait, dueNack, at(200 * time.Millisecond)},
		{"a nacked message not due yet, MaxInFlight out: wake when it is due", unleased(func(v *readerView) {
			v.next, v.waiting, v.window, v.out, v.resend = next, 1, 2, 1, nacked
		}), actWait, nil, at(50 * time.Millisecond)},
		{"a nacked message counts as out", unleased(func(v *readerView) {
			v.next, v.waiting, v.window, v.out, v.unsettled, v.resend, v.maxInFlight = next, 1, 3, 2, 1, nacked, 2
		}), actWait, nil, at(50 * time.Millisecond)},
		{"several out, room for more: offer the next, no polling for their acks", unleased(func(v *readerView) {
			v.maxInFlight, v.window, v.out, v.unsettled, v.next, v.waiting = 4, 4, 3, 3, next, 1
		}), actWait, next, at(200 * time.Millisecond)},
		{"one out, one prepared behind it: prepare nothing more", unleased(func(v *readerView) {
			v.buffered, v.window, v.out, v.unsettled, v.waiting = 5, 2, 1, 1, 1
		}), actWait, nil, time.Time{}},
		{"one out, nothing prepared: prepare ahead", unleased(func(v *readerView) {
			v.buffered, v.window, v.out, v.unsettled = 5, 1, 1, 1
		}), actPrepare, nil, time.Time{}},
		{"all prepared held back by their keys, room out: prepare further", unleased(func(v *readerView) {
			v.maxInFlight, v.buffered, v.window, v.out, v.unsettled, v.waiting = 4, 5, 3, 1, 1, 2
		}), actPrepare, nil, time.Time{}},
		{"held back by their keys at the hold limit: prepare nothing more", unleased(func(v *readerView) {
			v.maxInFlight, v.buffered, v.window, v.out, v.unsettled, v.waiting, v.holdLimit = 4, 5, 3, 1, 1, 2, 3
		}), actWait, nil, time.Time{}},
		{"window over half the hold limit: no read yet", unleased(func(v *readerView) {
			v.fetchAt, v.window, v.out, v.unsettled, v.holdLimit = t0, 6, 1, 1, 10
		}), actWait, nil, time.Time{}},
		{"window at half the hold limit: read", unleased(func(v *readerView) {
			v.fetchAt, v.window, v.out, v.unsettled, v.holdLimit = t0, 5, 1, 1, 10
		}), actFetch, nil, time.Time{}},
		{"a batch prepared, its last record waiting: the next read goes out", unleased(func(v *readerView) {
			v.next, v.waiting, v.window, v.out, v.unsettled, v.fetchAt = next, 1, 2, 1, 1, t0
		}), actFetch, nil, time.Time{}},
		{"the stop point wakes a reader with nothing else due", leased(func(v *readerView) {
			v.stopAt, v.renewAt, v.checkpointAt, v.window, v.out, v.unsettled = at(100*time.Millisecond), at(time.Second), at(time.Second), 1, 1, 1
		}), actWait, nil, at(100 * time.Millisecond)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.view)
			if got.do != tt.do || got.offer != tt.offer || !got.until.Equal(tt.until) {
				t.Errorf("decide = {%s offer %v until %v}, want {%s offer %v until %v}",
					got.do, seqOf(got.offer), rel(t0, got.until), tt.do, seqOf(tt.offer), rel(t0, tt.until))
			}
		})
	}
}

func seqOf(d *delivery) string {
	if d == nil {
		return "none"
	}
	return strconv.FormatUint(d.ord, 10)
}

func rel(t0, at time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Sub(t0).String()
}

func TestNextTick(t *testing.T) {
	t0 := time.Unix(0, 0)
	for _, tt := range []struct {
		last, now, want time.Duration
	}{
		{0, 0, time.Second},                                  // the next tick
		{0, 999 * time.Millisecond, time.Second},             // still the next one
		{0, time.Second, 2 * time.Second},                    // due now: the one after
		{0, 3500 * time.Millisecond, 4 * time.Second},        // missed ticks are not caught up
		{500 * time.Millisecond, 0, 1500 * time.Millisecond}, // a grid that starts later
	} {
		if got := nextTick(t0.Add(tt.last), t0.Add(tt.now), time.Second); !got.Equal(t0.Add(tt.want)) {
			t.Errorf("nextTick(last %s, now %s) = %s, want %s", tt.last, tt.now, got.Sub(t0), tt.want)
		}
	}
}

// Over random views: a wait never ends at a time already past (that would spin the reader),
// a paused or handing-off reader offers nothing and reads nothing, and nothing is offered past
// the in-flight limit.
func TestDecideProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(1000, 0)
	when := func() time.Time {
		switch rng.IntN(4) {
		case 0:
			return time.Time{}
		case 1:
			return t0.Add(-time.Duration(rng.IntN(1000)) * time.Millisecond)
		}
		return t0.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
	}
	for i := range 20000 {
		v := readerView{
			now: t0, leased: rng.IntN(2) == 0, paused: rng.IntN(3) == 0,
			stopAt: when(), renewAt: when(), checkpointAt: when(),
			ended: rng.IntN(4) == 0, endWritten: rng.IntN(2) == 0, finishRetry: when(),
			handingOff: rng.IntN(3) == 0, handoffBy: when(), handoffRetry: when(),
			buffered: rng.IntN(3), fetchAt: when(), maxInFlight: 1 + rng.IntN(3), calling: rng.IntN(3) == 0,
			holdLimit: 1 + rng.IntN(6),
		}
		v.out = rng.IntN(v.maxInFlight + 1)
		v.unsettled = rng.IntN(v.out + 1)
		v.waiting = rng.IntN(3)
		v.window = v.out + v.waiting + rng.IntN(2)
		if v.waiting > 0 && rng.IntN(2) == 0 {
			v.next = &delivery{ord: 1}
		}
		if v.out > v.unsettled {
			v.resend = &delivery{ord: 2, state: stateNacked, resendAt: when()}
		}
		if !v.leased {
			v.paused, v.handingOff = false, false // only a lease can pause or be handed over
		}
		if v.leased && v.paused {
			v.stopAt = t0.Add(-time.Second) // a paused reader is past its stop point, or resumes
		}
		s := decide(v)
		if s.do == actPrepare && v.window >= v.holdLimit {
			t.Fatalf("view %d: %+v\nprepares past the hold limit", i, v)
		}
		if v.calling && (s.do == actFetch || s.do == actPrepare) && v.buffered == 0 {
			t.Fatalf("view %d: %+v\nreads while a call is out", i, v)
		}
		if s.do != actWait {
			continue
		}
		if !s.until.IsZero() && !s.until.After(t0) {
			t.Fatalf("view %d: %+v\nwaits until %v, which is not after now", i, v, s.until.Sub(t0))
		}
		if s.offer != nil && (v.paused || v.handingOff) {
			t.Fatalf("view %d: %+v\noffers a message while paused or handing off", i, v)
		}
		if s.offer != nil && s.offer == v.next && v.out >= v.maxInFlight {
			t.Fatalf("view %d: %+v\noffers a new record with MaxInFlight out", i, v)
		}
	}
}
