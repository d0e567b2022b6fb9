package shard

import (
	"errors"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// fakeVouch is a member's heartbeats as a reader sees them: the current incarnation and the
// stop point of each.
type fakeVouch struct {
	current int64
	stops   map[int64]time.Time
}

func (f *fakeVouch) Current() (int64, time.Time) { return f.current, f.stops[f.current] }
func (f *fakeVouch) StopOf(inc int64) time.Time  { return f.stops[inc] }

// The stop point heeds every incarnation a write that got no answer carried, not only the
// last: with the review's schedule (a renewal carrying X lands but its answer is lost, X is
// fenced, the worker joins again as Y, a retry carrying Y fails too), forgetting X let the
// paused reader's stop point move past X's and resume deliveries while the lease, carrying X,
// could be taken. It drops them only once a write sent a store call's time limit later is
// answered.
func TestStopAtHeedsEveryUnansweredIncarnation(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	cfg := &Config{LeaseDuration: 10 * time.Second, LeaseRenewInterval: 10 * time.Second / 3}
	const x, y = 11, 22
	vouch := &fakeVouch{current: x, stops: map[int64]time.Time{x: at(8 * time.Second), y: at(20 * time.Second)}}
	r := &Reader{cfg: cfg, links: &Links{Vouch: vouch}}
	held := lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0", Owner: "w", Generation: 1, Counter: 3}
	r.renewedWith(held, at(3900*time.Millisecond)) // answered, carrying 0
	if got := r.stopAt(); !got.Equal(at(11900 * time.Millisecond)) {
		t.Fatalf("stopAt after a write carrying 0 = %s, want its own stop point 11.9s", got.Sub(t0))
	}
	lost := errors.New("answer lost")
	sent := held
	sent.Incarnation = x
	r.mayHaveLanded(sent, at(4*time.Second), lost)
	if got := r.stopAt(); !got.Equal(at(8 * time.Second)) {
		t.Fatalf("stopAt after an unanswered write carrying X = %s, want X's 8s", got.Sub(t0))
	}
	vouch.current = y // X fenced; the member joined again as Y
	sent.Incarnation = y
	r.mayHaveLanded(sent, at(10500*time.Millisecond), lost)
	if got := r.stopAt(); !got.Equal(at(8 * time.Second)) {
		t.Fatalf("stopAt after a second unanswered write carrying Y = %s, still want X's 8s", got.Sub(t0))
	}
	// A refused condition and a write never sent leave nothing that may have landed.
	sent.Incarnation = 33
	r.mayHaveLanded(sent, at(11*time.Second), &lease.ConditionError{Op: lease.OpRenew, Err: lease.ErrLeaseLost})
	r.mayHaveLanded(sent, at(11*time.Second), errNotSent)
	if len(r.unanswered) != 2 {
		t.Fatalf("unanswered = %+v, want X and Y only", r.unanswered)
	}
	// An answer to a write sent right after does not settle them; one sent a time limit later
	// does.
	r.renewedWith(held, at(11*time.Second))
	if len(r.unanswered) != 1 || r.unanswered[0].incarnation != y {
		t.Fatalf("unanswered after an answer at 11s = %+v, want Y alone (sent 0.5 s before)", r.unanswered)
	}
	r.renewedWith(held, at(14*time.Second))
	if len(r.unanswered) != 0 {
		t.Fatalf("unanswered after an answer at 14s = %+v, want none", r.unanswered)
	}
}
