package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// B2 measures the allocations and bytes per delivered message of our subscriber on memlog:
// 20,000 messages are published into a 1-shard stream first; then the runtime.MemStats Mallocs
// and TotalAlloc deltas are taken across Subscribe and receiving + acking all of them (the
// *message.Message included, nothing subtracted), after a warm-up drain. The baseline is
// Watermill's GoChannel moving the same number of messages, which it can only do while they
// are published (it stores nothing), so its count includes making and publishing them. The
// goal is at most 8 allocations and 700 bytes per message.

const (
	b2Messages = 20000
	b2WarmUp   = 2000
)

type allocs struct{ perMsg, bytesPerMsg float64 }

func init() {
	register(rowSpec{"B2", "allocs and bytes per delivered message, memlog 1 shard", 2 * time.Minute, runB2})
}

func runB2(ctx context.Context, e *env) (result, error) {
	if _, err := drainAllocs(ctx, b2WarmUp, ""); err != nil {
		return result{}, fmt.Errorf("warm-up: %w", err)
	}
	if _, err := goChannelAllocs(ctx, b2WarmUp); err != nil {
		return result{}, fmt.Errorf("GoChannel warm-up: %w", err)
	}
	ours, err := drainAllocs(ctx, b2Messages, e.memProfile)
	if err != nil {
		return result{}, err
	}
	base, err := goChannelAllocs(ctx, b2Messages)
	if err != nil {
		return result{}, fmt.Errorf("GoChannel: %w", err)
	}
	measure := "per delivered msg (delivery + ack, message included), memlog 1 shard, 20k pre-published"
	return result{
		lines: []line{
			{"B2", "allocs " + measure, fmt.Sprintf("%.2f allocs/msg", ours.perMsg), fmt.Sprintf("%.2f allocs/msg (GoChannel)", base.perMsg),
				fmtRatio(ours.perMsg / base.perMsg), "ours <= 8 allocs/msg", met(ours.perMsg <= 8)},
			{"B2", "bytes " + measure, fmt.Sprintf("%.0f B/msg", ours.bytesPerMsg), fmt.Sprintf("%.0f B/msg (GoChannel)", base.bytesPerMsg),
				fmtRatio(ours.bytesPerMsg / base.bytesPerMsg), "ours <= 700 B/msg", met(ours.bytesPerMsg <= 700)},
		},
		notes: []string{
			"ours counts, in the whole process: Subscribe (stream check, ListShards, iterators, reader start), memlog's GetRecords answers (memlog's own allocations, as the SDK's would be), decoding each envelope into a *message.Message (UUID, metadata, payload, context), delivery and Ack; publishing happened before the window, and the subscriber's Close after it.",
			"GoChannel counts, in the whole process: Subscribe, message.NewMessage with a new UUID for each message, Publish in calls of 100 (GoChannel copies each message and starts goroutines per message), delivery and Ack.",
			fmt.Sprintf("both after a warm-up drain of %s messages; Mallocs and TotalAlloc deltas divided by %s.", thousands(b2WarmUp), thousands(b2Messages)),
		},
	}, nil
}

// drainAllocs pre-publishes n messages into a 1-shard memlog stream and measures the
// allocations of subscribing and receiving + acking them all. With profile set, it writes heap
// profiles (every allocation sampled when -b2memprofile set MemProfileRate to 1) just before
// and just after the measured window, to profile+".before" and profile+".after".
func drainAllocs(ctx context.Context, n int, profile string) (a allocs, err error) {
	log := memlog.New(memlog.Config{})
	stream := streamName("b2")
	if err := backlog(ctx, log, stream, 1, n, kinesis.PublisherConfig{}); err != nil {
		return a, err
	}
	sub, err := kinesis.NewSubscriber(memlogSubscriberConfig(log, ""), nil)
	if err != nil {
		return a, err
	}
	defer func() { err = errors.Join(err, sub.Close()) }()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	if err := writeHeapProfile(profile, ".before"); err != nil {
		return a, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msgs, err := sub.Subscribe(ctx, stream)
	if err != nil {
		return a, err
	}
	if err := receive(ctx, msgs, n, nil); err != nil {
		return a, err
	}
	runtime.ReadMemStats(&after)
	if err := writeHeapProfile(profile, ".after"); err != nil {
		return a, err
	}
	return perMessage(before, after, n), nil
}

// goChannelAllocs measures GoChannel making, publishing (in calls of 100), delivering and
// acking n messages, Subscribe included.
func goChannelAllocs(ctx context.Context, n int) (a allocs, err error) {
	ps := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	defer func() { err = errors.Join(err, ps.Close()) }()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	topic := streamName("b2")
	payload := make([]byte, payloadSize)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msgs, err := ps.Subscribe(ctx, topic)
	if err != nil {
		return a, err
	}
	published := make(chan error, 1)
	go func() {
		batch := make([]*message.Message, 100)
		for i := 0; i < n; i += len(batch) {
			for j := range batch {
				batch[j] = message.NewMessage(watermill.NewUUID(), payload)
			}
			if err := ps.Publish(topic, batch...); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	err = receive(ctx, msgs, n, nil)
	cancel()
	if perr := <-published; err == nil {
		err = perr
	}
	runtime.ReadMemStats(&after)
	if err != nil {
		return a, err
	}
	return perMessage(before, after, n), nil
}

func perMessage(before, after runtime.MemStats, n int) allocs {
	return allocs{
		perMsg:      float64(after.Mallocs-before.Mallocs) / float64(n),
		bytesPerMsg: float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
	}
}

// writeHeapProfile writes the heap profile to prefix+suffix after a GC (a heap profile shows
// the state as of the last GC); it does nothing when prefix is empty.
func writeHeapProfile(prefix, suffix string) error {
	if prefix == "" {
		return nil
	}
	runtime.GC()
	f, err := os.Create(prefix + suffix)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
}
