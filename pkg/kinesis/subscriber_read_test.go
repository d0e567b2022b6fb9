package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// subSpy is a KinesisAPI that records what the reader asked for and which reads failed.
type subSpy struct {
	*memlog.Log
	mu        sync.Mutex
	iterators []awskinesis.GetShardIteratorInput
	readErrs  []error
}

func (c *subSpy) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, opts ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	out, err := c.Log.GetShardIterator(ctx, in, opts...)
	if err == nil {
		c.mu.Lock()
		c.iterators = append(c.iterators, *in)
		c.mu.Unlock()
	}
	return out, err
}

func (c *subSpy) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, opts ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	out, err := c.Log.GetRecords(ctx, in, opts...)
	if err != nil {
		c.mu.Lock()
		c.readErrs = append(c.readErrs, err)
		c.mu.Unlock()
	}
	return out, err
}

func (c *subSpy) expiredReads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, err := range c.readErrs {
		var expired *types.ExpiredIteratorException
		if errors.As(err, &expired) {
			n++
		}
	}
	return n
}

func (c *subSpy) iteratorRequests() []awskinesis.GetShardIteratorInput {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]awskinesis.GetShardIteratorInput(nil), c.iterators...)
}

// An iterator that expires mid-stream (five minutes on memlog's clock) is replaced by one
// right after the last record read: nothing is skipped, nothing comes twice.
func TestSubscriber_IteratorExpiry(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"", subGroup} {
		t.Run("group="+group, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				clock := subFixedClock()
				e := newSubEnv(t, 1, clock)
				spy := &subSpy{Log: e.log}
				cfg := e.config(group)
				cfg.Client = spy
				s := e.subscriber(cfg)
				ch := e.subscribe(s, context.Background())

				e.publish(subMsgs(1, 3)...)
				first := subRecvAck(t, ch, 3)
				subWantPayloads(t, first, subRange(1, 3)...)

				clock.Advance(6 * time.Minute)
				e.publish(subMsgs(4, 3)...)
				rest := subRecvAck(t, ch, 3)
				subWantPayloads(t, rest, subRange(4, 6)...)
				subNone(t, ch, subQuiet)

				if spy.expiredReads() == 0 {
					t.Fatal("no read met an expired iterator; the test did not test expiry")
				}
				var resumed bool
				for _, in := range spy.iteratorRequests() {
					switch in.ShardIteratorType {
					case types.ShardIteratorTypeAfterSequenceNumber:
						if aws.ToString(in.StartingSequenceNumber) == subSeq(t, first[2]) {
							resumed = true
						}
					case types.ShardIteratorTypeLatest:
						t.Errorf("the expired iterator was replaced by a LATEST one, which skips records")
					}
				}
				if !resumed {
					t.Errorf("no iterator AFTER_SEQUENCE_NUMBER %s (the last record read); requests: %s",
						subSeq(t, first[2]), subDescribe(spy.iteratorRequests()))
				}
			})
		})
	}
}

// A LATEST reader whose first iterator expires before it read anything must not take a new
// LATEST iterator: that skips what was published after Subscribe returned.
//
// The reader's first GetRecords is held (a fault hook that blocks) while a record is
// published and the clock moves past the iterator's lifetime.
func TestSubscriber_LatestIteratorExpiryBeforeFirstRecord(t *testing.T) {
	t.Parallel()
	clock := subRealClock()
	e := newSubEnv(t, 1, clock)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.log.SetFault(func(ctx context.Context, call memlog.Call) error {
		if call.Op != "GetRecords" {
			return nil
		}
		block := false
		once.Do(func() { block = true })
		if block {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	cfg := e.config("")
	cfg.InitialPosition = kinesis.Position{Type: kinesis.Latest}
	s := e.subscriber(cfg)
	ch := e.subscribe(s, context.Background())
	select {
	case <-entered:
	case <-time.After(subWait):
		t.Fatal("the reader never read")
	}
	e.publish(subMsgs(1, 1)...) // after Subscribe returned: the subscription must read it
	clock.Advance(6 * time.Minute)
	close(release)

	m := subRecv(t, ch)
	subWantPayloads(t, []*message.Message{m}, "msg-1")
	m.Ack()
}

// Throttled reads are retried with the same iterator: every message arrives exactly once, in
// order per shard, and the handler never sees an error.
func TestSubscriber_Throttling(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 4, nil)
		var mu sync.Mutex
		calls := map[string]int{}
		throttled := 0
		e.log.SetFault(func(_ context.Context, call memlog.Call) error {
			if call.Op != "GetRecords" {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			calls[call.ShardID]++
			if calls[call.ShardID]%2 == 1 { // every other read of each shard
				throttled++
				return &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard " + call.ShardID)}
			}
			return nil
		})
		const n = 200
		e.publish(subMsgs(0, n)...)
		cfg := e.config("")
		cfg.GetRecordsLimit = 20 // many reads, so many throttles
		s := e.subscriber(cfg)
		ch := e.subscribe(s, context.Background())

		seen := map[string]bool{}
		lastIndex := map[string]int{}
		lastSeq := map[string]string{}
		for len(seen) < n {
			m := subRecv(t, ch)
			if seen[m.UUID] {
				t.Fatalf("%s delivered twice", m.UUID)
			}
			seen[m.UUID] = true
			if err := kinesis.DecodeErrorFromContext(m.Context()); err != nil {
				t.Fatalf("message %s carries an error: %v", m.UUID, err)
			}
			info := subInfo(t, m)
			idx, err := strconv.Atoi(m.Metadata.Get("index"))
			if err != nil {
				t.Fatalf("message %s has no index: %v", m.UUID, err)
			}
			if prev, ok := lastIndex[info.ShardID]; ok && idx <= prev {
				t.Fatalf("shard %s: message %d after %d, out of publish order", info.ShardID, idx, prev)
			}
			if prev, ok := lastSeq[info.ShardID]; ok && !subSeqLess(t, prev, info.SequenceNumber) {
				t.Fatalf("shard %s: sequence number %s after %s", info.ShardID, info.SequenceNumber, prev)
			}
			lastIndex[info.ShardID], lastSeq[info.ShardID] = idx, info.SequenceNumber
			m.Ack()
		}
		subNone(t, ch, subQuiet)
		mu.Lock()
		defer mu.Unlock()
		if throttled < 8 {
			t.Errorf("only %d reads were throttled; the test did not test throttling", throttled)
		}
		t.Logf("%d reads throttled, %d shards read", throttled, len(lastIndex))
	})
}

// InitialPosition Latest skips what came before Subscribe and reads what comes after it;
// Subscribe returns with the iterator held, so a record published right after is read.
func TestSubscriber_InitialPositionLatest(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"", subGroup} {
		t.Run("group="+group, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				e := newSubEnv(t, 2, nil)
				e.publish(subMsgs(0, 10)...)
				cfg := e.config(group)
				cfg.InitialPosition = kinesis.Position{Type: kinesis.Latest}
				s := e.subscriber(cfg)
				ch := e.subscribe(s, context.Background())
				e.publish(subMsgs(10, 1)...)
				m := subRecv(t, ch)
				subWantPayloads(t, []*message.Message{m}, "msg-10")
				m.Ack()
				subNone(t, ch, subQuiet)
			})
		})
	}
}

// InitialPosition AtTimestamp starts at the first record that arrived at or after the
// timestamp, by memlog's clock.
func TestSubscriber_InitialPositionAtTimestamp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := subFixedClock()
		e := newSubEnv(t, 1, clock)
		e.publish(subMsgs(0, 3)...)
		clock.Advance(time.Minute)
		from := clock.Now()
		e.publish(subMsgs(3, 3)...)
		clock.Advance(time.Minute)

		cfg := e.config("")
		cfg.InitialPosition = kinesis.Position{Type: kinesis.AtTimestamp, Timestamp: from}
		s := e.subscriber(cfg)
		ch := e.subscribe(s, context.Background())
		got := subRecvAck(t, ch, 3)
		subWantPayloads(t, got, subRange(3, 5)...)
		for _, m := range got {
			if at := subInfo(t, m).ArrivalTime; !at.Equal(from) {
				t.Errorf("%s arrived at %s, want %s", m.Payload, at, from)
			}
		}
		subNone(t, ch, subQuiet)
	})
}

// With MaxInFlight > 1, an Ack or Nack of a message behind an unsettled one takes effect at
// once: its context is done, an acked one makes room for the next record, and a nacked one is
// sent again, while the oldest stays unacked. In a synctest bubble, "at once" is exact: the
// contexts are done before any fake time passes.
func TestSubscriber_MaxInFlightSettlesOutOfOrder(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"", subGroup} {
		t.Run("group="+group, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				e := newSubEnv(t, 1, nil)
				// A fourth record waits for room, so the reader does not poll the shard (which
				// would let it notice settlements by chance).
				e.publish(subMsgs(1, 4)...)
				cfg := e.config(group)
				cfg.MaxInFlight = 3
				cfg.Group.CheckpointInterval = time.Minute // no periodic wake-up hides the problem
				cfg.Group.LeaseDuration = 3 * time.Minute
				s := e.subscriber(cfg)
				ch := e.subscribe(s, context.Background())
				out := subRecvN(t, ch, 3)
				subWantPayloads(t, out, subRange(1, 3)...)
				synctest.Wait() // the reader is parked, with nothing left to do

				start := time.Now()
				out[2].Ack()
				out[1].Nack()
				synctest.Wait()
				for i, m := range out[1:] {
					if m.Context().Err() == nil {
						t.Errorf("msg-%d settled behind the unacked msg-1: context still live once everything blocked", i+2)
					}
				}
				if waited := time.Since(start); waited != 0 {
					t.Errorf("the settlements took %s of fake time, want none", waited)
				}
				// msg-3's Ack makes room for msg-4; msg-2 goes out again after NackResendSleep.
				next := subRecvN(t, ch, 2)
				if next[0].UUID != "uuid-4" || next[1].UUID != out[1].UUID {
					t.Errorf("after msg-3's Ack and msg-2's Nack got %s, %s; want msg-4, then msg-2 again", next[0].Payload, next[1].Payload)
				}
				subNotDone(t, out[0].Context(), "msg-1, never settled")
			})
		})
	}
}

// subDescribe lists iterator requests for failure messages.
func subDescribe(ins []awskinesis.GetShardIteratorInput) string {
	var b strings.Builder
	for _, in := range ins {
		fmt.Fprintf(&b, "%s(%s) ", in.ShardIteratorType, aws.ToString(in.StartingSequenceNumber))
	}
	return b.String()
}
