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
	for _, inc := range [2]int64{r.heldIncarnation(), r.unanswered} {
		if inc != 0 && r.links.Vouch != nil {
			if hb := r.links.Vouch.StopOf(inc); hb.Before(at) {
				at = hb
			}
		}
	}
	return at
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

// mayHaveLanded notes the incarnation of an owner write that failed in a way that leaves open
// whether it was applied (any failure but a refused condition): until a write is answered,
// the stop point heeds that incarnation's heartbeats too. (A write answered later than one
// sent after it is not considered: one item's writes are applied in the order they arrive,
// and a reader sends its next write only once the last has come back or timed out.)
func (r *Reader) mayHaveLanded(sent lease.Lease, err error) {
	var ce *lease.ConditionError
	if sent.Incarnation != 0 && !errors.As(err, &ce) {
		r.unanswered = sent.Incarnation
	}
}
