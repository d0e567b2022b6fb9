package awscall

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
)

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

// Sleep waits d on the real clock or until ctx is done, whichever comes first.
func Sleep(ctx context.Context, d time.Duration) error {
	return SleepOn(ctx, clock.Real(), d)
}

// SleepOn waits d on clk or until ctx is done, whichever comes first.
func SleepOn(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
