package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// B9 measures a 1 ms handler (time.Sleep(time.Millisecond)) under a Watermill message.Router
// on 4 memlog shards: 40,000 messages over 64 partition keys (PartitionKeyFromMetadata) are
// published first, then the rate from the first handler's start until all are handled is taken, with a
// consumer group (in-memory lease store) and Ordering OrderByKey (MaxInFlight at its default,
// 32). The handler checks each key's order: a per-key counter in metadata must increase from
// one handled message of the key to the next; a message that does not is a violation. The
// baseline is the same run at the default ordering (OrderByShard, MaxInFlight 1: one message
// of a shard at a time). The goal is at least 40,000 msgs/s with no violation.

const (
	b9Messages = 40000
	b9Keys     = 64
	b9Shards   = 4
	b9KeyField = "bench_key"
	b9SeqField = "bench_key_seq"
)

func init() {
	register(rowSpec{"B9", "1 ms handler under a Router, 4 shards, 64 keys, OrderByKey", 3 * time.Minute, runB9})
}

func runB9(ctx context.Context, e *env) (result, error) {
	base, err := b9Run(ctx, kinesis.OrderDefault)
	if err != nil {
		return result{}, fmt.Errorf("default ordering: %w", err)
	}
	ours, err := b9Run(ctx, kinesis.OrderByKey)
	if err != nil {
		return result{}, fmt.Errorf("OrderByKey: %w", err)
	}
	ok := ours.rate >= 40000 && ours.violations == 0
	return result{
		lines: []line{
			{"B9", "1 ms handler under a Router, memlog 4 shards, 64 keys, 40k msgs: OrderByKey vs default (1 in flight per shard)",
				fmtRate(ours.rate) + ", " + thousands(ours.violations) + " order violations",
				fmtRate(base.rate) + ", " + thousands(base.violations) + " order violations",
				fmtRatio(ours.rate / base.rate), ">= 40,000 msgs/s, 0 violations", met(ok)},
		},
		notes: []string{
			"OrderByKey violations: " + ours.detail + "; default ordering: " + base.detail + ".",
			fmt.Sprintf("OrderByKey, where a key's time went: %s in the handler (time.Sleep(1 ms) as the runtime's timers made it under this load), %s from a handler's return to the start of its key's next message (Ack, the driver, the router); %d keys / %s = %s is what that handler time allows a key-ordered consumer with no turnaround at all.",
				ours.inHandler.Round(time.Microsecond), ours.turnaround.Round(time.Microsecond), b9Keys, ours.inHandler.Round(time.Microsecond),
				fmtRate(float64(b9Keys)/ours.inHandler.Seconds())),
			"the rate is 40,000 over the time from the first handler's start to the last handler's return (Subscribe's wait for instances joining with it, 1.5 s at the defaults, is not throughput); a violation is a message whose handler started while the previous message of its key was still in the handler (not yet acked), or whose per-key counter is not above the last one started for its key (a redelivery counts too); subscriber: a Group with lease.NewMemoryStore(), PollInterval 1 ms, MinReadInterval 1 µs; publisher: PartitionKeyFromMetadata(\"" + b9KeyField + "\").",
		},
	}, nil
}

type b9Result struct {
	rate       float64
	violations int64
	detail     string
	inHandler  time.Duration // mean time in the handler
	turnaround time.Duration // mean time from a handler's return to its key's next start
}

// keyOrder checks each key's order: a message of a key may start only once the key's message
// before it has returned from the handler, and its counter must be above that message's.
type keyOrder struct {
	mu         sync.Mutex
	last       map[string]int
	running    map[string]int
	overlaps   int64 // started while a message of its key was still in the handler
	backwards  int64 // started with a counter not above the last one started for its key
	unreadable int64 // a counter missing or not a number

	// Where a key's time goes: in the handler (the 1 ms sleep, as the runtime's timers make
	// it), and from a handler's return to the start of its key's next message (the driver's
	// and the router's turnaround). keys / (inHandler + turnaround) bounds any key-ordered
	// consumer's rate.
	ended      map[string]time.Time
	inHandler  time.Duration
	handled    int64
	turnaround time.Duration
	turns      int64
}

func (k *keyOrder) start(msg *message.Message, now time.Time) (key string) {
	key = msg.Metadata.Get(b9KeyField)
	seq, err := strconv.Atoi(msg.Metadata.Get(b9SeqField))
	k.mu.Lock()
	defer k.mu.Unlock()
	if ended, ok := k.ended[key]; ok {
		k.turnaround += now.Sub(ended)
		k.turns++
	}
	switch last, seen := k.last[key]; {
	case err != nil:
		k.unreadable++
	case k.running[key] > 0:
		k.overlaps++
	case seen && seq <= last:
		k.backwards++
	}
	if err == nil {
		k.last[key] = seq
	}
	k.running[key]++
	return key
}

func (k *keyOrder) end(key string, started, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running[key]--
	k.ended[key] = now
	k.inHandler += now.Sub(started)
	k.handled++
}

// timing is the mean time in the handler and the mean turnaround between messages of a key.
func (k *keyOrder) timing() (inHandler, turnaround time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.handled > 0 {
		inHandler = k.inHandler / time.Duration(k.handled)
	}
	if k.turns > 0 {
		turnaround = k.turnaround / time.Duration(k.turns)
	}
	return inHandler, turnaround
}

func (k *keyOrder) violations() (total int64, detail string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.overlaps + k.backwards + k.unreadable,
		fmt.Sprintf("%d with the key's previous message still in the handler, %d with a counter not above the key's last, %d unreadable", k.overlaps, k.backwards, k.unreadable)
}

func b9Run(ctx context.Context, ordering kinesis.Ordering) (res b9Result, err error) {
	log := memlog.New(memlog.Config{})
	stream := streamName("b9")
	pubCfg := kinesis.PublisherConfig{PartitionKey: kinesis.PartitionKeyFromMetadata(b9KeyField)}
	msgs := newMessages(b9Messages, func(i int, m message.Metadata) {
		m.Set(b9KeyField, fmt.Sprintf("key-%02d", i%b9Keys))
		m.Set(b9SeqField, strconv.Itoa(i/b9Keys))
	})
	pubCfg.Client, pubCfg.CreateStream, pubCfg.CreateStreamShards = log, true, b9Shards
	pub, err := kinesis.NewPublisher(pubCfg, nil)
	if err != nil {
		return res, err
	}
	if err := errors.Join(publishAll(ctx, pub, stream, msgs, 500), pub.Close()); err != nil {
		return res, err
	}

	// The label lets a profile of the run (-cpuprofile) be cut to one ordering's drain: every
	// goroutine started from here on (subscriber, router, handlers) inherits it.
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("b9", ordering.String())))
	defer pprof.SetGoroutineLabels(ctx)
	cfg := memlogSubscriberConfig(log, "b9")
	cfg.Ordering = ordering
	sub, err := kinesis.NewSubscriber(cfg, nil)
	if err != nil {
		return res, err
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 30 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return res, errors.Join(err, sub.Close())
	}
	order := &keyOrder{last: map[string]int{}, running: map[string]int{}, ended: map[string]time.Time{}}
	var handled atomic.Int64
	var firstStart time.Time // set by the first handler to start, before handled moves
	var firstOnce sync.Once
	done := make(chan struct{})
	router.AddConsumerHandler("b9", stream, sub, func(msg *message.Message) error {
		started := time.Now()
		firstOnce.Do(func() { firstStart = started })
		key := order.start(msg, started)
		time.Sleep(time.Millisecond)
		order.end(key, started, time.Now())
		if handled.Add(1) == b9Messages {
			close(done)
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	ran := make(chan error, 1)
	go func() { ran <- router.Run(ctx) }()
	select {
	case <-done:
	case err = <-ran:
		ran <- err
		err = fmt.Errorf("the router stopped after %d of %d messages: %v", handled.Load(), b9Messages, err)
	case <-ctx.Done():
		err = fmt.Errorf("handled %d of %d messages: %w", handled.Load(), b9Messages, ctx.Err())
	}
	end := time.Now()
	elapsed := end.Sub(start)
	if !firstStart.IsZero() { // read after done: the first handler set it before counting
		elapsed = end.Sub(firstStart)
	}
	closeErr := closeAll(router, sub)
	if runErr := <-ran; runErr != nil && err == nil {
		err = runErr
	}
	if err = errors.Join(err, closeErr); err != nil {
		return res, err
	}
	res.violations, res.detail = order.violations()
	res.inHandler, res.turnaround = order.timing()
	res.rate = rate(b9Messages, elapsed)
	return res, nil
}
