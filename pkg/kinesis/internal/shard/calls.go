package shard

import (
	"context"
	"errors"
)

// callContext bounds one Kinesis call of the reader by RequestTimeout. A call that outlasts it
// fails with a context error while r.ctx is live, which classify counts as transient.
//
// After calls that timed out, the next one may take longer: RequestTimeout doubles with each
// timeout in a row, up to MaxTimeoutDoublings times, and is back to RequestTimeout after a
// call that did not time out. A hung connection is still cut at RequestTimeout; a server that
// is only slow (an overloaded emulator took over 10 s for reads that Watermill's concurrent
// subscribe test makes by the hundred) gets its answers through instead of being asked the
// same thing again and again, each abandoned call adding to its load.
func (r *Reader) callContext() (context.Context, context.CancelFunc) {
	d := r.cfg.RequestTimeout << min(r.timeouts, MaxTimeoutDoublings)
	return context.WithTimeout(r.ctx, d)
}

// MaxTimeoutDoublings caps how far callContext stretches RequestTimeout after timeouts.
const MaxTimeoutDoublings = 3

// noteCall counts the reader's Kinesis calls that timed out in a row, for callContext.
func (r *Reader) noteCall(callCtx context.Context, err error) {
	switch {
	case err == nil:
		r.timeouts = 0
	case r.ctx.Err() == nil && context.Cause(callCtx) == context.DeadlineExceeded:
		r.timeouts++
	}
}

// kinesisCall makes one Kinesis call, bounded by callContext, and returns its error, or, as
// stop, what ended the reader while the call was out (the lease was lost or handed over, or
// the reader's context ended); the call is then cancelled and its error dropped.
//
// Under a lease the call runs on a goroutine of its own while the reader goroutine goes on
// carrying out decide's steps, reading excepted: it renews, checkpoints what is acked,
// pauses at the stop point, hands the lease over, and resends nacked messages. Renewing only
// between calls, a read slower than the stop point (0.8 × LeaseDuration after the last
// renewal) paused the shard, or, cut short at the stop point instead, never completed on a
// slow server; and a slow read followed by a slow iterator replacement held back the
// checkpoint and the handoff until the asking worker took the lease, which redelivered what
// was acked meanwhile (found by the simulation's slow reads). The goroutine touches nothing
// of the reader's: call writes only what the caller reads after done is closed.
func (r *Reader) kinesisCall(call func(ctx context.Context) error) (err, stop error) {
	ctx, cancel := r.callContext()
	defer cancel()
	err, stop = r.callOut(ctx, cancel, call)
	if stop == nil {
		r.noteCall(ctx, err)
	}
	return err, stop
}

// callOut is kinesisCall with the call's context (and its cancel) made by the caller: the
// wait for a pushed event (awaitEvent) is bounded otherwise than by RequestTimeout.
func (r *Reader) callOut(ctx context.Context, cancel context.CancelFunc, call func(ctx context.Context) error) (err, stop error) {
	if r.held == nil || r.renewAt.IsZero() { // no lease, or not reading yet (initIterator)
		return call(ctx), nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err = call(ctx)
	}()
	for {
		select {
		case <-done:
			return err, nil
		default:
		}
		if _, stepErr := r.turn(done); stepErr != nil || r.handedTo != "" {
			cancel()
			<-done
			if stepErr == nil {
				stepErr = errHandedOver
			}
			return nil, stepErr
		}
	}
}

// errHandedOver ends a Kinesis call whose reader handed its lease over meanwhile.
var errHandedOver = errors.New("the lease was handed over")
