package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// keyOrderRun is what a router's handlers saw of one OrderByKey run.
type keyOrderRun struct {
	mu          sync.Mutex
	running     map[string]int // key -> handlers of it running now
	done        map[string]int // key -> the highest n handled successfully
	violations  []string
	concurrent  int // the most handlers running at once
	now         int
	handled     int
	nacked      int
	acked       int
	allAcked    chan struct{} // closed once every message was acked: the checkpoint may count it
	stop        chan struct{} // closed when the test ends: ack watchers return
	total       int
	closeOnce   sync.Once
	rng         *rand.Rand
	nackPercent int
}

// handle is the router's handler: random delays and, for nackPercent of first attempts, an
// error (the router then Nacks and the subscriber redelivers).
func (k *keyOrderRun) handle(msg *message.Message) error {
	key, n := msg.Metadata.Get("key"), msg.Metadata.Get("n")
	num, _ := strconv.Atoi(n)
	k.mu.Lock()
	k.running[key]++
	k.now++
	k.concurrent = max(k.concurrent, k.now)
	if k.running[key] > 1 {
		k.violations = append(k.violations, fmt.Sprintf("%s/%d handled while another message of %s was", key, num, key))
	}
	if want := k.done[key] + 1; num != want {
		k.violations = append(k.violations, fmt.Sprintf("%s/%d handled after %s/%d; want %s/%d next", key, num, key, k.done[key], key, want))
	}
	delay := time.Duration(k.rng.IntN(1500)) * time.Microsecond
	fail := k.rng.IntN(100) < k.nackPercent
	k.mu.Unlock()

	time.Sleep(delay) // the handler's work, not synchronisation

	k.mu.Lock()
	defer k.mu.Unlock()
	k.running[key]--
	k.now--
	if fail {
		k.nacked++
		return errors.New("handler failed; to be redelivered")
	}
	if num == k.done[key]+1 {
		k.done[key] = num
	}
	k.handled++
	// The router acks after the handler returns: the run is over once the acks are in, not
	// when the last handler returns (a Close in between leaves that Ack uncounted).
	go func() {
		select {
		case <-msg.Acked():
		case <-k.stop:
			return
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.acked++; k.acked == k.total {
			k.closeOnce.Do(func() { close(k.allAcked) })
		}
	}()
	return nil
}

// Under a Watermill router with OrderByKey, messages of different keys of one shard are handled
// concurrently, each key strictly in order, also when handlers fail and messages are
// redelivered; and the checkpoint ends at the shard's last record.
func TestOrderByKey_RouterKeepsPerKeyOrder(t *testing.T) {
	t.Parallel()
	const keys, perKey = 24, 25
	e := newSubEnv(t, 2, nil)
	var msgs []*message.Message
	for n := 1; n <= perKey; n++ {
		for k := range keys {
			m := keyed(watermill.NewUUID(), fmt.Sprintf("key-%02d", k))
			m.Metadata.Set("n", strconv.Itoa(n))
			msgs = append(msgs, m)
		}
	}
	e.publishByKey(msgs...)

	cfg := e.config(subGroup)
	cfg.Ordering = kinesis.OrderByKey
	cfg.MaxInFlight = 8
	s := e.subscriber(cfg)
	run := &keyOrderRun{
		running: map[string]int{}, done: map[string]int{}, allAcked: make(chan struct{}), stop: make(chan struct{}),
		total: len(msgs), rng: rand.New(rand.NewPCG(7, 11)), nackPercent: 10,
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: subWait}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	router.AddConsumerHandler("ordered", e.stream, s, run.handle)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	routerDone := make(chan error, 1)
	defer close(run.stop)
	go func() { routerDone <- router.Run(ctx) }()
	select {
	case <-run.allAcked:
	case <-time.After(30 * time.Second):
		run.mu.Lock()
		t.Fatalf("handled %d and acked %d of %d within 30s", run.handled, run.acked, run.total)
	}
	if err := router.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-routerDone; err != nil {
		t.Fatal(err)
	}

	run.mu.Lock()
	defer run.mu.Unlock()
	for _, v := range run.violations[:min(len(run.violations), 10)] {
		t.Error(v)
	}
	if run.nacked == 0 {
		t.Error("no handler failed: the redelivery path was not exercised")
	}
	if run.concurrent < 4 {
		t.Errorf("at most %d handlers ran at once; OrderByKey should run different keys concurrently (MaxInFlight 8, 2 shards)", run.concurrent)
	}
	for sh := range 2 {
		l := e.lease(subGroup, subShard(sh))
		last := e.lastSeq(subShard(sh))
		if l.Checkpoint != last {
			t.Errorf("shard %s: checkpoint %q after every message was handled, want its last record %q", subShard(sh), l.Checkpoint, last)
		}
	}
}

// With OrderByKey, one slow key holds back only its own messages: the other keys of its shard
// go on, and the checkpoint stays below the slow message until it is acked.
func TestOrderByKey_SlowKeyHoldsOnlyItself(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 1, nil)
		// slow/1, then fast/1..5 and slow/2 interleaved.
		order := []string{"slow", "fast", "fast", "slow", "fast", "fast", "fast"}
		count := map[string]int{}
		var msgs []*message.Message
		for _, k := range order {
			count[k]++
			msgs = append(msgs, keyed(fmt.Sprintf("%s-%d", k, count[k]), k))
		}
		e.publishByKey(msgs...)
		cfg := e.config(subGroup)
		cfg.Ordering = kinesis.OrderByKey
		cfg.MaxInFlight = 4
		s := e.subscriber(cfg)
		ch := e.subscribe(s, context.Background())

		slow1 := subRecv(t, ch)
		if slow1.UUID != "slow-1" {
			t.Fatalf("first message %s, want slow-1", slow1.UUID)
		}
		// Every fast message goes out and is acked while slow-1 is out; slow-2 waits behind it.
		for i := 1; i <= 5; i++ {
			m := subRecv(t, ch)
			if want := fmt.Sprintf("fast-%d", i); m.UUID != want {
				t.Fatalf("got %s while slow-1 is unacked, want %s", m.UUID, want)
			}
			m.Ack()
		}
		subNone(t, ch, subQuiet) // slow-2 is held back by slow-1
		if l := e.lease(subGroup, subShard(0)); l.Checkpoint != "" {
			t.Errorf("checkpoint %q with slow-1 unacked; the watermark must stay below it", l.Checkpoint)
		}
		slow1.Ack()
		slow2 := subRecv(t, ch)
		if slow2.UUID != "slow-2" {
			t.Fatalf("after slow-1's Ack got %s, want slow-2", slow2.UUID)
		}
		slow2.Ack()
		last := e.lastSeq(subShard(0))
		e.waitLease(subGroup, subShard(0), "checkpoint at the last record", func(l lease.Lease) bool { return l.Checkpoint == last })
	})
}

// A Nack with OrderByKey redelivers the message before any later message of its key, while
// other keys go on.
func TestOrderByKey_NackRedeliversBeforeTheKeysNext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 1, nil)
		var msgs []*message.Message
		for i, k := range []string{"a", "a", "b"} {
			msgs = append(msgs, keyed(fmt.Sprintf("%s-%d", k, i), k))
		}
		e.publishByKey(msgs...)
		cfg := e.config("")
		cfg.Ordering = kinesis.OrderByKey
		cfg.MaxInFlight = 4
		cfg.NackResendSleep = 50 * time.Millisecond
		s := e.subscriber(cfg)
		ch := e.subscribe(s, context.Background())
		a0 := subRecv(t, ch)
		b2 := subRecv(t, ch) // a-1 waits behind a-0
		if a0.UUID != "a-0" || b2.UUID != "b-2" {
			t.Fatalf("got %s, %s; want a-0 and b-2 (a-1 held back)", a0.UUID, b2.UUID)
		}
		a0.Nack()
		b2.Ack()
		again := subRecv(t, ch)
		if again.UUID != "a-0" {
			t.Fatalf("after a-0's Nack got %s, want a-0 again before a-1", again.UUID)
		}
		subNone(t, ch, subQuiet) // a-1 still waits for a-0's Ack
		again.Ack()
		if m := subRecv(t, ch); m.UUID != "a-1" {
			t.Fatalf("got %s, want a-1", m.UUID)
		}
	})
}

// Unordered lets MaxInFlight messages out whatever their keys.
func TestUnordered_MaxInFlightAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 1, nil)
		var msgs []*message.Message
		for i := range 6 {
			msgs = append(msgs, message.NewMessage(fmt.Sprintf("m-%d", i), []byte("x")))
		}
		e.publish(msgs...) // one key for all
		cfg := e.config("")
		cfg.Ordering = kinesis.Unordered
		cfg.MaxInFlight = 4
		s := e.subscriber(cfg)
		ch := e.subscribe(s, context.Background())
		out := subRecvN(t, ch, 4)
		subNone(t, ch, subQuiet)
		out[3].Ack() // the newest: room for one more, though the oldest is unacked
		if m := subRecv(t, ch); m.UUID != "m-4" {
			t.Fatalf("got %s, want m-4", m.UUID)
		}
	})
}

// lastSeq is the sequence number of the shard's newest record.
func (e *subEnv) lastSeq(shardID string) string {
	e.t.Helper()
	it, err := e.log.GetShardIterator(context.Background(), &awskinesis.GetShardIteratorInput{
		StreamName: aws.String(e.stream), ShardId: aws.String(shardID), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		e.t.Fatalf("GetShardIterator: %v", err)
	}
	last := ""
	for iter := it.ShardIterator; iter != nil; {
		out, err := e.log.GetRecords(context.Background(), &awskinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			e.t.Fatalf("GetRecords: %v", err)
		}
		if len(out.Records) == 0 {
			break
		}
		last = aws.ToString(out.Records[len(out.Records)-1].SequenceNumber)
		iter = out.NextShardIterator
	}
	return last
}

// keyed is a message whose partition key, for publishByKey, is key.
func keyed(uuid, key string) *message.Message {
	m := message.NewMessage(uuid, []byte(key))
	m.Metadata.Set("key", key)
	return m
}

// publishByKey publishes messages in one call, each under the partition key in its "key"
// metadata field.
func (e *subEnv) publishByKey(msgs ...*message.Message) {
	e.t.Helper()
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client: e.log, PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish(e.stream, msgs...); err != nil {
		e.t.Fatalf("Publish: %v", err)
	}
}
