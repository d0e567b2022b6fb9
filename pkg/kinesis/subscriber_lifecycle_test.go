package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func TestSubscriber_Closed(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 1, nil)
	s := e.subscriber(e.config(""))
	if err := s.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Subscribe(context.Background(), e.stream); !errors.Is(err, kinesis.ErrSubscriberClosed) {
		t.Errorf("Subscribe after Close: err = %v, want ErrSubscriberClosed", err)
	}
	if err := s.SubscribeInitialize(e.stream); !errors.Is(err, kinesis.ErrSubscriberClosed) {
		t.Errorf("SubscribeInitialize after Close: err = %v, want ErrSubscriberClosed", err)
	}
}

func TestSubscriber_CloseWhileSubscribed(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 2, nil)
	s := e.subscriber(e.config(subGroup))
	ch := e.subscribe(s, context.Background())
	if err := s.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	subClosedNow(t, ch)
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Subscribe(context.Background(), e.stream); !errors.Is(err, kinesis.ErrSubscriberClosed) {
		t.Errorf("Subscribe after Close: err = %v, want ErrSubscriberClosed", err)
	}
}

func TestSubscriber_MissingStream(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"", subGroup} {
		t.Run("group="+group, func(t *testing.T) {
			e := newSubEnv(t, 0, nil)
			s := e.subscriber(e.config(group))
			_, err := s.Subscribe(context.Background(), "no-such-stream")
			if !errors.Is(err, kinesis.ErrStreamNotFound) {
				t.Fatalf("Subscribe to a missing stream: err = %v, want ErrStreamNotFound", err)
			}
			if !strings.Contains(err.Error(), `"no-such-stream"`) {
				t.Errorf("error %q does not name the stream", err)
			}
			err = s.SubscribeInitialize("no-such-stream")
			if !errors.Is(err, kinesis.ErrStreamNotFound) || !strings.Contains(err.Error(), `"no-such-stream"`) {
				t.Errorf("SubscribeInitialize of a missing stream: err = %v, want ErrStreamNotFound naming it", err)
			}
			// The failed Subscribe left the Subscriber usable.
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestSubscriber_CreateStream(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 0, nil)
	cfg := e.config("")
	cfg.CreateStream = true
	cfg.CreateStreamShards = 3
	s := e.subscriber(cfg)
	if err := s.SubscribeInitialize("created-by-init"); err != nil {
		t.Fatalf("SubscribeInitialize: %v", err)
	}
	out, err := e.log.ListShards(context.Background(), &awskinesis.ListShardsInput{StreamName: aws.String("created-by-init")})
	if err != nil {
		t.Fatalf("ListShards of the created stream: %v", err)
	}
	if len(out.Shards) != 3 {
		t.Errorf("created stream has %d shards, want CreateStreamShards = 3", len(out.Shards))
	}
	// Again, on an existing stream: no error.
	if err := s.SubscribeInitialize("created-by-init"); err != nil {
		t.Errorf("second SubscribeInitialize: %v", err)
	}

	// Subscribe creates a missing stream too, and reads it.
	e.stream = "created-by-subscribe"
	ch := e.subscribe(s, context.Background())
	e.publish(subMsgs(0, 1)...)
	m := subRecv(t, ch)
	m.Ack()
	subWantPayloads(t, []*message.Message{m}, "msg-0")
	out, err = e.log.ListShards(context.Background(), &awskinesis.ListShardsInput{StreamName: aws.String("created-by-subscribe")})
	if err != nil || len(out.Shards) != 3 {
		t.Errorf("stream created by Subscribe: %v, %d shards; want 3", err, len(out.Shards))
	}
}

func TestSubscriber_BadStreamName(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 1, nil)
	cfg := e.config("")
	cfg.CreateStream = true
	s := e.subscriber(cfg)
	for _, tc := range []struct{ name, want string }{
		{"", "empty"},
		{"bad name!", `"bad name!"`},
		{strings.Repeat("a", 129), "128"},
		{"orders/eu", `'/'`},
	} {
		_, err := s.Subscribe(context.Background(), tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "stream name") {
			t.Errorf("Subscribe(%q): err = %v, want one about the stream name mentioning %s", tc.name, err, tc.want)
		}
		if !errors.Is(err, kinesis.ErrInvalidStreamName) {
			t.Errorf("Subscribe(%q): err = %v, want it to match ErrInvalidStreamName", tc.name, err)
		}
		if errors.Is(err, kinesis.ErrStreamNotFound) {
			t.Errorf("Subscribe(%q): a bad name is not a missing stream: %v", tc.name, err)
		}
		err = s.SubscribeInitialize(tc.name)
		if !errors.Is(err, kinesis.ErrInvalidStreamName) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SubscribeInitialize(%q): err = %v, want one mentioning %s", tc.name, err, tc.want)
		}
	}
	// Nothing was created under a bad name, and the Subscriber still works.
	ch := e.subscribe(s, context.Background())
	e.publish(subMsgs(0, 1)...)
	subRecv(t, ch).Ack()
}

// Nack redelivers the same message; every settled message has its context done; Close ends
// the contexts of unsettled ones and closes the channel before it returns.
func TestSubscriber_NackAckAndContexts(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"", subGroup} {
		t.Run("group="+group, func(t *testing.T) {
			e := newSubEnv(t, 1, nil)
			s := e.subscriber(e.config(group))
			ch := e.subscribe(s, context.Background())
			msgs := subMsgs(0, 3)
			msgs[0].Metadata.Set("test", "value")
			e.publish(msgs...)

			first := subRecv(t, ch)
			subNotDone(t, first.Context(), "delivered")
			if !first.Nack() {
				t.Fatal("Nack returned false")
			}
			subDone(t, first.Context(), "after Nack")

			again := subRecv(t, ch)
			if again == first {
				t.Fatal("the redelivery is the nacked *Message itself; it cannot be acked")
			}
			if again.UUID != first.UUID || string(again.Payload) != string(first.Payload) ||
				!maps.Equal(again.Metadata, first.Metadata) || again.Metadata.Get("test") != "value" {
				t.Fatalf("redelivery differs: got %s %q %v, want %s %q %v",
					again.UUID, again.Payload, again.Metadata, first.UUID, first.Payload, first.Metadata)
			}
			if subSeq(t, again) != subSeq(t, first) {
				t.Errorf("redelivery has sequence number %s, want %s", subSeq(t, again), subSeq(t, first))
			}
			subNotDone(t, again.Context(), "redelivered")
			if !again.Ack() {
				t.Fatal("Ack of the redelivery returned false")
			}
			subDone(t, again.Context(), "after Ack")

			second := subRecv(t, ch)
			subWantPayloads(t, []*message.Message{second}, "msg-1")
			second.Ack()
			subDone(t, second.Context(), "after Ack")

			unacked := subRecv(t, ch)
			subWantPayloads(t, []*message.Message{unacked}, "msg-2")
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			subClosedNow(t, ch)
			subDone(t, unacked.Context(), "after Close")
		})
	}
}

// Cancelling Subscribe's context closes the channel; a new Subscribe on the same Subscriber
// gets everything not acked, and a nil logger is fine throughout.
func TestSubscriber_SubscribeContextCancel(t *testing.T) {
	t.Parallel()
	t.Run("group", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newSubEnv(t, 1, nil)
			s, err := kinesis.NewSubscriber(e.config(subGroup), nil)
			if err != nil {
				t.Fatalf("NewSubscriber with a nil logger: %v", err)
			}
			defer s.Close()
			e.publish(subMsgs(0, 10)...)

			ctx, cancel := context.WithCancel(context.Background())
			ch := e.subscribe(s, ctx)
			for i := 0; i < 4; i++ {
				subRecv(t, ch).Ack()
			}
			held := subRecv(t, ch) // msg-4: proves msg-3's ack was seen
			cancel()
			subClosed(t, ch)
			subDone(t, held.Context(), "after the Subscribe context was cancelled")
			l := e.lease(subGroup, subShard(0))
			if l.Owner != "" {
				t.Errorf("lease owner after the subscription ended = %q, want it released", l.Owner)
			}

			ch = e.subscribe(s, context.Background())
			got := subRecvAck(t, ch, 6)
			subWantPayloads(t, got, subRange(4, 9)...)
			subNone(t, ch, subQuiet)
		})
	})
	t.Run("no group", func(t *testing.T) {
		e := newSubEnv(t, 2, nil)
		s := e.subscriber(e.config(""))
		e.publish(subMsgs(0, 20)...)
		ctx, cancel := context.WithCancel(context.Background())
		ch := e.subscribe(s, ctx)
		subRecv(t, ch).Nack()
		cancel()
		subClosed(t, ch)

		// Without a group every subscription reads every shard from the start.
		ch = e.subscribe(s, context.Background())
		seen := map[string]bool{}
		for len(seen) < 20 {
			m := subRecv(t, ch)
			if seen[m.UUID] {
				t.Fatalf("duplicate %s", m.UUID)
			}
			seen[m.UUID] = true
			m.Ack()
		}
	})
}

// A Subscribe context that ends by its deadline is a stop like a cancel: the subscription
// ends, the lease is released, and nothing is logged at ERROR (each shard's reader used to log
// "Shard reader stopped: context deadline exceeded").
func TestSubscriber_SubscribeContextDeadlineIsAStop(t *testing.T) {
	t.Parallel()
	for _, group := range []string{subGroup, ""} {
		t.Run("group="+group, func(t *testing.T) {
			e := newSubEnv(t, 2, nil)
			logs := watermill.NewCaptureLogger()
			s, err := kinesis.NewSubscriber(e.config(group), logs)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close after the Subscribe context's deadline: %v", err)
				}
			}()
			e.publish(subMsgs(0, 4)...)
			// Long enough for the join wait of a grouped Subscribe that finds free leases
			// (375 ms: heartbeats are at least 250 ms apart) and the 4 messages.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			ch := e.subscribe(s, ctx)
			subRecvAck(t, ch, 4)
			subClosed(t, ch) // the deadline ends the subscription
			if errs := logs.Captured()[watermill.ErrorLogLevel]; len(errs) != 0 {
				t.Errorf("a Subscribe deadline logged %d ERROR lines, e.g. %q: %v", len(errs), errs[0].Msg, errs[0].Err)
			}
			if group != "" {
				for sh := range 2 {
					if l := e.lease(group, subShard(sh)); l.Owner != "" {
						t.Errorf("shard %s still owned by %q after the subscription ended", subShard(sh), l.Owner)
					}
				}
			}
		})
	}
}

// No goroutine outlives Close: with and without a group, several shards, messages in flight,
// and after the Subscribe context was cancelled. Not parallel: goleak sees every goroutine.
func TestSubscriber_NoGoroutineLeak(t *testing.T) {
	for _, group := range []string{"", subGroup} {
		t.Run("group="+group, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			e := newSubEnv(t, 4, nil)
			s, err := kinesis.NewSubscriber(e.config(group), nil)
			if err != nil {
				t.Fatal(err)
			}
			e.publish(subMsgs(0, 40)...)
			ch := e.subscribe(s, context.Background())
			for i := 0; i < 10; i++ {
				subRecv(t, ch).Ack()
			}
			subRecv(t, ch) // in flight, never acked
			ctx, cancel := context.WithCancel(context.Background())
			ch2 := e.subscribe(s, ctx) // a second subscription, ended by its context
			cancel()
			subClosed(t, ch2)
			if _, err := s.Subscribe(context.Background(), "missing"); err == nil {
				t.Fatal("Subscribe to a missing stream succeeded")
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			subClosedNow(t, ch)
			_ = e.pub.Close()
			goleak.VerifyNone(t, ignore)
		})
	}
	t.Run("context cancelled, then Close", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		e := newSubEnv(t, 2, nil)
		s, err := kinesis.NewSubscriber(e.config(subGroup), nil)
		if err != nil {
			t.Fatal(err)
		}
		e.publish(subMsgs(0, 4)...)
		ctx, cancel := context.WithCancel(context.Background())
		ch := e.subscribe(s, ctx)
		subRecv(t, ch).Ack()
		cancel()
		subClosed(t, ch)
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		_ = e.pub.Close()
		goleak.VerifyNone(t, ignore)
	})
}

// Close is bounded by CloseTimeout even when the lease store hangs while readers write their
// last checkpoint and release their leases.
func TestSubscriber_CloseBoundedWhenStoreHangs(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 2, nil)
	e.publish(subMsgs(0, 6)...)
	cfg := e.config(subGroup)
	cfg.CloseTimeout = 300 * time.Millisecond
	s := e.subscriber(cfg)
	ch := e.subscribe(s, context.Background())
	subRecvAck(t, ch, 3)
	subRecv(t, ch)
	e.store.SetFault(func(ctx context.Context, _ string, _ lease.Key) error {
		<-ctx.Done() // a store that never answers
		return ctx.Err()
	})
	start := time.Now()
	err := s.Close()
	took := time.Since(start)
	t.Logf("Close took %s (CloseTimeout %s), err = %v", took, cfg.CloseTimeout, err)
	if took > cfg.CloseTimeout+2*time.Second {
		t.Errorf("Close took %s with CloseTimeout %s", took, cfg.CloseTimeout)
	}
	// The final checkpoint and release get half of CloseTimeout, so even with the store
	// hung the readers stop in time and the channel is closed when Close returns.
	if err != nil {
		t.Errorf("Close: %v", err)
	}
	subClosedNow(t, ch)
}

// A lease listing that times out during Subscribe (a slow store for a moment) delays Subscribe
// instead of failing it: the first sync is tried again, and the subscription reads.
func TestSubscriber_SubscribeRetriesASlowFirstListing(t *testing.T) {
	e := newSubEnv(t, 2, nil)
	var lists atomic.Int32
	e.store.SetFault(func(ctx context.Context, op string, _ lease.Key) error {
		if op == lease.OpList && lists.Add(1) == 1 {
			return fmt.Errorf("operation error DynamoDB: Query: %w", context.DeadlineExceeded)
		}
		return nil
	})
	sub := e.subscriber(e.config(subGroup))
	msgs := e.subscribe(sub, context.Background())
	e.publish(message.NewMessage("after-retry", []byte("x")))
	select {
	case m := <-msgs:
		m.Ack()
		if m.UUID != "after-retry" {
			t.Fatalf("got %s", m.UUID)
		}
	case <-time.After(subWait):
		t.Fatal("no message after Subscribe's first listing timed out once")
	}
	if n := lists.Load(); n < 2 {
		t.Fatalf("%d listings: the first sync was not tried again", n)
	}
}
