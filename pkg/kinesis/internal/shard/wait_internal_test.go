package shard

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// TestWaitPutsSignalsBeforeTheSend: a loss, a stop or a handoff request already signalled wins
// over an offer, even with the subscriber waiting on its channel. A select chooses at random
// among ready cases, and the send tried alone first won every time: about twice as many
// messages went out after a Stop, and, after a loss, messages of a lease another worker owns.
func TestWaitPutsSignalsBeforeTheSend(t *testing.T) {
	for _, tc := range []struct {
		name        string
		signal      func(r *Reader)
		wantErr     error
		wantHanding bool
	}{
		{"lease lost", func(r *Reader) { r.MarkLost("other") }, lease.ErrLeaseLost, false},
		{"stopped", func(r *Reader) { r.Stop() }, context.Canceled, false},
		{"handoff asked", func(r *Reader) { r.RequestHandoff() }, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				out := make(chan *message.Message)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cfg := &Config{Stream: "s", MaxInFlight: 1, HandoffTimeout: time.Second}
				r := testReader(ctx, cfg, out, &lease.Lease{ShardID: testShard, Generation: 1}, time.Now())
				d := &delivery{msg: message.NewMessage("u", nil), state: stateWaiting}
				d.ctx = &d.first
				d.first.facts = r.facts
				r.enqueue(d, Unordered, "k")
				received := make(chan *message.Message, 1)
				go func() { // the subscriber, waiting on its channel before the reader offers
					select {
					case m := <-out:
						received <- m
					case <-ctx.Done():
						received <- nil
					}
				}()
				synctest.Wait() // the subscriber is waiting on out
				tc.signal(r)
				err := r.wait(step{do: actWait, offer: d}, nil)
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
					t.Fatalf("wait = %v, want %v", err, tc.wantErr)
				}
				if r.handingOff != tc.wantHanding {
					t.Errorf("handingOff = %v, want %v", r.handingOff, tc.wantHanding)
				}
				cancel()
				if m := <-received; m != nil {
					t.Errorf("the offer went out after the signal")
				}
			})
		})
	}
}

// TestFanOutHandoverWaitsForTheTakeover: with fan-out, a reader asked for its lease hands it
// over no sooner than SubscriptionTakeover after its subscription, since Kinesis refuses the
// next owner's until then; a polling reader hands over as soon as nothing is unsettled.
//
// In a synctest bubble: the reader reads the time with time.Now, which stands still there.
func TestFanOutHandoverWaitsForTheTakeover(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fanOut     bool
		subscribed time.Duration // before the request: the last subscription made
		sent       time.Duration // before the request: the last SubscribeToShard sent; 0: none
		retry      time.Duration // after the request: a retry already set by a failed Handoff call; 0: none
		wantRetry  time.Duration // after the request; 0: none
	}{
		{"polling", false, 0, 0, 0, 0},
		{"fan-out, subscribed 1 s ago", true, time.Second, 0, 0, SubscriptionTakeover - time.Second},
		{"fan-out, subscribed long ago", true, time.Minute, 0, 0, 0},
		{"fan-out, a subscription call out", true, time.Minute, time.Second / 2, 0, SubscriptionTakeover - time.Second/2},
		{"fan-out, a later retry kept", true, time.Second, 0, time.Hour, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testFanOutHandover(t, tc.fanOut, tc.subscribed, tc.sent, tc.retry, tc.wantRetry) })
		})
	}
}

// testFanOutHandover is one case of TestFanOutHandoverWaitsForTheTakeover, at the bubble's
// time. Durations are from the request: subscribed and sent before it, retry and want after
// it (0: none).
func testFanOutHandover(t *testing.T, fanOut bool, subscribed, sent, retry, want time.Duration) {
	start := time.Now()
	after := func(d time.Duration) time.Time { // the zero time for 0
		if d == 0 {
			return time.Time{}
		}
		return start.Add(d)
	}
	cfg := &Config{Stream: "s", MaxInFlight: 1, HandoffTimeout: 10 * time.Second}
	if fanOut {
		cfg.FanOut = fixedConsumer("arn")
	}
	r := &Reader{cfg: cfg}
	r.handoffRetry = after(retry)
	if fanOut {
		r.push.subscribedAt = start.Add(-subscribed)
		if sent > 0 {
			r.push.subscribeSentAt = start.Add(-sent)
		}
	}
	r.beginHandoff()
	wantRetry := after(want)
	if !r.handoffRetry.Equal(wantRetry) {
		t.Errorf("handoffRetry = %v, want %v", r.handoffRetry, wantRetry)
	}
	v := readerView{now: start, leased: true, stopAt: start.Add(time.Hour), renewAt: start.Add(time.Hour),
		checkpointAt: start.Add(time.Hour), handingOff: true, handoffBy: r.handoffBy, handoffRetry: r.handoffRetry,
		holdLimit: 100, maxInFlight: 1}
	s := decide(v)
	if got, want := s.do, map[bool]action{true: actWait, false: actHandOver}[wantRetry.After(start)]; got != want {
		t.Errorf("decide = %v, want %v", got, want)
	}
	if s.do == actWait && !s.until.Equal(wantRetry) {
		t.Errorf("decide wakes at %v, want %v (when the lease may go over)", s.until, wantRetry)
	}
}

// fixedConsumer is a fan-out consumer whose ARN never changes.
type fixedConsumer string

func (c fixedConsumer) ARN() string                                     { return string(c) }
func (c fixedConsumer) Refresh(context.Context, string) (string, error) { return string(c), nil }
