package awscall

import (
	"context"
	"math/rand/v2"
	"time"
)

// FailuresBeforeError is how many calls in a row may fail in a way that passes (throttled or
// transient) before the next failure is logged at ERROR rather than INFO or WARN: a shard's
// reads, a coordinator step, a member heartbeat. Eight backed-off tries are 6 to 13 s of a
// dependency that does not answer.
const FailuresBeforeError = 8

// Backoff is capped exponential backoff with full jitter: a random wait in [d/2, d] where d
// doubles from base up to max, so that many readers retrying at once spread out.
func Backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + rand.N(half+1)
}

// QuotaBackoff is the wait before retrying a call that a per-second rate quota of the account
// or the stream refused (Kinesis's LimitExceededException on DescribeStreamSummary, 20 calls a
// second per account): a random wait in [0, d], d doubling from 1 s up to 8 s. Calls refused
// together are most often a fleet starting at once; Backoff's waits from 50 ms brought them
// back together before the quota had refilled (50 instances starting at once with
// CreateStream: 132 refused DescribeStreamSummary calls, against 30 that 20 a second must
// refuse), and a window of the quota's own second, drawn from its whole width, spreads them
// over the seconds the quota needs.
func QuotaBackoff(attempt int) time.Duration {
	d := time.Second << min(max(attempt, 0), 3)
	return rand.N(d + 1)
}

// Sleep waits d or until ctx is done, whichever comes first, and returns ctx's error if ctx
// ended first. (In a testing/synctest bubble the timer runs on the bubble's fake time.)
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
