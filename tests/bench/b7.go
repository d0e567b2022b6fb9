package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// B7 measures the subscriber's live heap while a consumer group on 16 memlog shards drains a
// backlog of 200,000 records, against the same drain of 10,000: the heap after publishing (a
// GC, then HeapAlloc: memlog holding the records) is the baseline, and the subscriber's heap is
// the largest HeapAlloc after a GC at n/4, n/2 and 3n/4 messages received, minus that baseline.
// The subscriber runs at the defaults (its memory budget included) but for PollInterval 1 ms
// and MinReadInterval 1 µs, so that the drain is quick. The goal is a heap that does not grow
// with the backlog (200k/10k <= 1.2x) and no loss of drain speed against the unbounded,
// pre-budget behaviour (MaxBufferedRecords 1<<30, MaxBufferedBytes 1<<40): >= 0.9x.

const (
	b7Shards = 16
	b7Large  = 200000
	b7Small  = 10000
)

type drainHeap struct {
	heap float64 // bytes
	rate float64 // msgs/s, the time of the forced GCs left out
}

func unbounded(cfg *kinesis.SubscriberConfig) {
	cfg.MaxBufferedRecords, cfg.MaxBufferedBytes = 1<<30, 1<<40
}

func init() {
	register(rowSpec{"B7", "subscriber heap, 16 shards, 200k vs 10k backlog", 3 * time.Minute, runB7})
}

func runB7(ctx context.Context, e *env) (result, error) {
	runs := e.runsOr(5)
	// As many 10k drains as 200k ones at the default budget: a single one moved the ratio by
	// a third from run to run (what is in flight at the three samples).
	small, err := b7Drains(ctx, b7Small, make([]func(*kinesis.SubscriberConfig), runs))
	if err != nil {
		return result{}, fmt.Errorf("10k backlog: %w", err)
	}
	var smallHeaps, smallRates []float64
	for _, d := range small {
		smallHeaps, smallRates = append(smallHeaps, d.heap), append(smallRates, d.rate)
	}
	configs := make([]func(*kinesis.SubscriberConfig), 0, 2*runs)
	for range runs {
		configs = append(configs, nil, unbounded) // alternate, so that drift hits both alike
	}
	large, err := b7Drains(ctx, b7Large, configs)
	if err != nil {
		return result{}, fmt.Errorf("200k backlog: %w", err)
	}
	var boundedRates, unboundedRates, boundedHeaps, unboundedHeaps []float64
	var rates []string
	for i, d := range large {
		if i%2 == 0 {
			boundedRates, boundedHeaps = append(boundedRates, d.rate), append(boundedHeaps, d.heap)
		} else {
			unboundedRates, unboundedHeaps = append(unboundedRates, d.rate), append(unboundedHeaps, d.heap)
			rates = append(rates, fmtRatio(large[i-1].rate/d.rate))
		}
	}
	heapLarge, heapSmall := median(boundedHeaps), median(smallHeaps)
	heapRatio := heapLarge / heapSmall
	speed := median(boundedRates) / median(unboundedRates)
	return result{
		lines: []line{
			{"B7", "subscriber heap, 16 shards memlog, group, 200k vs 10k backlog (defaults)", fmtMiB(heapLarge) + " (200k)", fmtMiB(heapSmall) + " (10k)",
				fmtRatio(heapRatio), "<= 1.2x", met(heapRatio <= 1.2)},
			{"B7", "drain rate of those backlogs", fmtRate(median(boundedRates)) + " (200k)", fmtRate(median(smallRates)) + " (10k)",
				fmtRatio(median(boundedRates) / median(smallRates)), "-", "-"},
			{"B7", "200k drain rate, budget (default) vs unbounded (pre-budget); median of " + count(runs, "run") + " each",
				fmtRate(median(boundedRates)), fmtRate(median(unboundedRates)) + " (unbounded)",
				fmt.Sprintf("%s (%s)", fmtRatio(speed), strings.Join(rates, ", ")), ">= 0.9x (no loss of drain speed)", met(speed >= 0.9)},
		},
		notes: []string{
			"heap: HeapAlloc after runtime.GC() at n/4, n/2 and 3n/4 messages received (the max of the three) minus HeapAlloc after runtime.GC() once the backlog is in memlog; each heap is the median of its default-budget runs (as many 10k as 200k).",
			fmt.Sprintf("unbounded (MaxBufferedRecords 1<<30, MaxBufferedBytes 1<<40) 200k heap: %s (median); drain rates run from the first message received (not from Subscribe, whose wait for instances joining with it, 1.5 s at the defaults, is not drain speed) and leave out the time of the forced GCs.", fmtMiB(median(unboundedHeaps))),
			"subscriber: a Group with lease.NewMemoryStore(), PollInterval 1 ms and MinReadInterval 1 µs (lowered to keep the row fast), all else default (MaxInFlight 1, MaxBufferedRecords 10000, MaxBufferedBytes 64 MiB, GetRecordsLimit 10000).",
		},
	}, nil
}

// b7Drains publishes n messages into a 16-shard memlog stream once, then drains it with one
// subscriber per config (each its own consumer group, so each reads from TRIM_HORIZON).
func b7Drains(ctx context.Context, n int, configs []func(*kinesis.SubscriberConfig)) ([]drainHeap, error) {
	log := memlog.New(memlog.Config{})
	stream := streamName("b7")
	if err := backlog(ctx, log, stream, b7Shards, n, kinesis.PublisherConfig{}); err != nil {
		return nil, err
	}
	out := make([]drainHeap, 0, len(configs))
	for i, tweak := range configs {
		cfg := memlogSubscriberConfig(log, fmt.Sprintf("b7-%d", i))
		if tweak != nil {
			tweak(&cfg)
		}
		d, err := b7Drain(ctx, cfg, stream, n)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func b7Drain(ctx context.Context, cfg kinesis.SubscriberConfig, stream string, n int) (d drainHeap, err error) {
	sub, err := kinesis.NewSubscriber(cfg, nil)
	if err != nil {
		return d, err
	}
	defer func() { err = errors.Join(err, sub.Close()) }()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	base := liveHeap()
	var peak uint64
	var paused time.Duration
	start := time.Now()
	msgs, err := sub.Subscribe(ctx, stream)
	if err != nil {
		return d, err
	}
	err = receive(ctx, msgs, n, func(_ *message.Message, received int) {
		if received == 1 {
			// The rate is the drain's, from the first message: Subscribe's wait for
			// instances joining with it (1.5 s at the defaults) is not drain speed.
			start = time.Now()
		}
		if received == n/4 || received == n/2 || received == 3*n/4 {
			t := time.Now()
			peak = max(peak, liveHeap())
			paused += time.Since(t)
		}
	})
	if err != nil {
		return d, err
	}
	elapsed := time.Since(start) - paused
	return drainHeap{heap: float64(peak) - float64(base), rate: rate(n, elapsed)}, nil
}

// liveHeap is HeapAlloc right after a GC.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
