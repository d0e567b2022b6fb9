package shard

// A reader's lease may rely on two things at once: its own renewals (the stop point
// LeaseStopAfter after the last one) and, when the reader wrote the member's incarnation into
// it (lease.Lease.Incarnation), the member's heartbeats (Links.Vouch). Others may take the
// lease by either clock, so the reader stops at the earlier.

import (
	"errors"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// stopAt is when deliveries must stop unless a renewal succeeds first: the stop point, counted
// from when the last successful owner write was sent, or earlier where that write (or one that
// got no answer since) let the member's heartbeats vouch for the lease and they stop doing so
// first (Links.Vouch): the others may take the lease at whichever comes first.
func (r *Reader) stopAt() time.Time {
	at := r.renewed.Add(LeaseStopAfter(r.cfg))
	if r.links.Vouch == nil {
		return at
	}
	heed := func(inc int64) {
		if hb := r.links.Vouch.StopOf(inc); inc != 0 && hb.Before(at) {
			at = hb
		}
	}
	heed(r.heldIncarnation())
	for _, u := range r.unanswered {
		heed(u.incarnation)
	}
	return at
}

// sentIncarnation is an incarnation an owner write carried that got no answer, and when it was
// sent.
type sentIncarnation struct {
	incarnation int64
	sent        time.Time
}

// heldIncarnation is the incarnation the lease carries as the reader last wrote it.
func (r *Reader) heldIncarnation() int64 {
	if r.held == nil {
		return 0
	}
	return r.held.Incarnation
}

// vouched is the lease to send in an owner write sent at sentAt: held, carrying the member's
// current incarnation if its heartbeats vouch for the lease until at least half of
// LeaseStopAfter from now, 0 otherwise. A member whose heartbeats fail (a hot member
// partition, a hung call) so leaves them out of its next renewals and goes on delivering
// on the lease's own counter, as long as the renewals succeed.
func (r *Reader) vouched(sentAt time.Time) lease.Lease {
	l := *r.held
	l.Incarnation = 0
	if r.links.Vouch != nil {
		if inc, stop := r.links.Vouch.Current(); inc != 0 && stop.Sub(sentAt) >= LeaseStopAfter(r.cfg)/2 {
			l.Incarnation = inc
		}
	}
	return l
}

// mayHaveLanded notes the incarnation of an owner write sent at sentAt that failed in a way
// that leaves open whether it was applied (any failure but a refused condition, or a write not
// sent at all): the stop point heeds that incarnation's heartbeats too, until
// settleUnanswered drops it. Every such incarnation is kept, not only the last: a later write
// with another one does not undo an earlier write that landed.
func (r *Reader) mayHaveLanded(sent lease.Lease, sentAt time.Time, err error) {
	var ce *lease.ConditionError
	if sent.Incarnation == 0 || errors.As(err, &ce) || errors.Is(err, errNotSent) {
		return
	}
	for i, u := range r.unanswered {
		if u.incarnation == sent.Incarnation {
			r.unanswered[i].sent = sentAt
			return
		}
	}
	r.unanswered = append(r.unanswered, sentIncarnation{incarnation: sent.Incarnation, sent: sentAt})
}

// settleUnanswered drops the unanswered writes that a write sent at sentAt, and answered,
// came late enough after to have superseded: sent at least a store call's time limit
// (storeTimeout) after them. The assumption: a write abandoned at its time limit is applied,
// if at all, within another such limit, so a write answered after that was applied after it
// and the lease carries what that write carried. (Those sent closer are kept: the answered
// write may have been applied before them.)
func (r *Reader) settleUnanswered(sentAt time.Time) {
	kept := r.unanswered[:0]
	for _, u := range r.unanswered {
		if sentAt.Sub(u.sent) < r.storeTimeout() {
			kept = append(kept, u)
		}
	}
	r.unanswered = kept
}

// errNotSent: an owner write was not sent at all (its turn came after the stop point).
var errNotSent = errors.New("not sent")
