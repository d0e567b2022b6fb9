package kinesis_test

// Helpers of the Subscriber tests. Every name starts with "sub" so that nothing here collides
// with the helpers of other test files of package kinesis_test.

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

const (
	// subWait bounds every wait for something that must happen: generous, so that a slow
	// machine under -race does not fail a test, and only paid when the test fails anyway.
	subWait = 10 * time.Second
	// subQuiet is how long of a synctest bubble's fake time a test watches for something that
	// must NOT happen (subNone).
	subQuiet = 250 * time.Millisecond

	subStream = "orders"
	subGroup  = "billing"
)

// subShard is the id memlog gives the shard with index i.
func subShard(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// subClock is an injectable clock for memlog, safe for concurrent use. It either stands still
// at a set time (moved only by Advance) or follows the real clock plus an offset.
type subClock struct {
	mu     sync.Mutex
	fixed  time.Time // zero: real time
	offset time.Duration
}

// subFixedClock stands still at a millisecond-precise instant.
func subFixedClock() *subClock {
	return &subClock{fixed: time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)}
}

// subRealClock follows time.Now, moved forward by Advance.
func subRealClock() *subClock { return &subClock{} }

func (c *subClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fixed.IsZero() {
		return time.Now().Add(c.offset)
	}
	return c.fixed.Add(c.offset)
}

func (c *subClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// subEnv is one test's world: a memlog with one stream, a lease store and a publisher.
type subEnv struct {
	t      *testing.T
	log    *memlog.Log
	clock  *subClock // nil: memlog uses time.Now
	store  *lease.MemoryStore
	pub    *kinesis.Publisher
	stream string
}

// newSubEnv creates a memlog (on clock, if not nil) with a stream of the given shard count.
func newSubEnv(t *testing.T, shards int32, clock *subClock) *subEnv {
	t.Helper()
	cfg := memlog.Config{}
	if clock != nil {
		cfg.Now = clock.Now
	}
	e := &subEnv{t: t, log: memlog.New(cfg), clock: clock, store: lease.NewMemoryStore(), stream: subStream}
	if shards > 0 {
		_, err := e.log.CreateStream(context.Background(), &awskinesis.CreateStreamInput{
			StreamName: aws.String(e.stream), ShardCount: aws.Int32(shards),
		})
		if err != nil {
			t.Fatalf("CreateStream: %v", err)
		}
	}
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: e.log}, nil)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	e.pub = pub
	t.Cleanup(func() { _ = pub.Close() })
	return e
}

// config is a SubscriberConfig with the small intervals of these tests; group "" means no
// consumer group.
func (e *subEnv) config(group string) kinesis.SubscriberConfig {
	cfg := kinesis.SubscriberConfig{
		Client:          e.log,
		PollInterval:    10 * time.Millisecond,
		MinReadInterval: time.Millisecond,
		Group: kinesis.GroupConfig{
			LeaseSyncInterval:  50 * time.Millisecond,
			CheckpointInterval: 50 * time.Millisecond,
		},
		NackResendSleep: 5 * time.Millisecond,
		CloseTimeout:    subWait,
	}
	if group != "" {
		cfg.Group.Name = group
		cfg.Group.LeaseStore = e.store
	}
	return cfg
}

// subscriber returns a Subscriber that is closed when the test ends (Close is idempotent).
func (e *subEnv) subscriber(cfg kinesis.SubscriberConfig) *kinesis.Subscriber {
	e.t.Helper()
	s, err := kinesis.NewSubscriber(cfg, nil)
	if err != nil {
		e.t.Fatalf("NewSubscriber: %v", err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

// subscribe subscribes to the env's stream.
func (e *subEnv) subscribe(s *kinesis.Subscriber, ctx context.Context) <-chan *message.Message {
	e.t.Helper()
	ch, err := s.Subscribe(ctx, e.stream)
	if err != nil {
		e.t.Fatalf("Subscribe: %v", err)
	}
	return ch
}

// subMsgs returns n messages with payloads "msg-<first>".."msg-<first+n-1>", each with an
// "index" metadata field.
func subMsgs(first, n int) []*message.Message {
	msgs := make([]*message.Message, n)
	for i := range msgs {
		idx := first + i
		m := message.NewMessage(fmt.Sprintf("uuid-%d", idx), []byte(fmt.Sprintf("msg-%d", idx)))
		m.Metadata.Set("index", strconv.Itoa(idx))
		msgs[i] = m
	}
	return msgs
}

// publish publishes messages in one call.
func (e *subEnv) publish(msgs ...*message.Message) {
	e.t.Helper()
	if err := e.pub.Publish(e.stream, msgs...); err != nil {
		e.t.Fatalf("Publish: %v", err)
	}
}

// putRaw writes one record with PutRecord, as a foreign producer would.
func (e *subEnv) putRaw(key string, data []byte) *awskinesis.PutRecordOutput {
	e.t.Helper()
	out, err := e.log.PutRecord(context.Background(), &awskinesis.PutRecordInput{
		StreamName: aws.String(e.stream), PartitionKey: aws.String(key), Data: data,
	})
	if err != nil {
		e.t.Fatalf("PutRecord: %v", err)
	}
	return out
}

// lease returns the group's lease of a shard.
func (e *subEnv) lease(group, shardID string) lease.Lease {
	e.t.Helper()
	list, err := e.store.List(context.Background(), group, e.stream)
	if err != nil {
		e.t.Fatalf("List leases: %v", err)
	}
	for _, l := range list {
		if l.ShardID == shardID {
			return l
		}
	}
	e.t.Fatalf("no lease for shard %s in group %s (have %+v)", shardID, group, list)
	return lease.Lease{}
}

// waitLease waits until the shard's lease satisfies cond.
func (e *subEnv) waitLease(group, shardID, what string, cond func(lease.Lease) bool) lease.Lease {
	e.t.Helper()
	deadline := time.Now().Add(subWait)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		l := e.lease(group, shardID)
		if cond(l) {
			return l
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("lease of %s never got %s; last seen %+v", shardID, what, l)
		}
		<-tick.C
	}
}

// subRecv receives one message, failing the test if none comes or the channel is closed.
func subRecv(t testing.TB, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("the subscription channel closed while a message was expected")
		}
		return m
	case <-time.After(subWait):
		t.Fatalf("no message within %s", subWait)
	}
	return nil
}

// subRecvN receives n messages.
func subRecvN(t testing.TB, ch <-chan *message.Message, n int) []*message.Message {
	t.Helper()
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = subRecv(t, ch)
	}
	return msgs
}

// subRecvAck receives n messages, acking each before the next is awaited.
func subRecvAck(t testing.TB, ch <-chan *message.Message, n int) []*message.Message {
	t.Helper()
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = subRecv(t, ch)
		msgs[i].Ack()
	}
	return msgs
}

// subNone fails if a message is sent on ch within d of fake time (a closed channel is fine).
// It runs in a synctest bubble: once d has passed and synctest.Wait has returned, every
// goroutine of the bubble is durably blocked, so a reader with a message for ch is blocked
// offering it and the receive below takes it. That nothing came is then a fact, not a bet on
// a quiet machine.
func subNone(t testing.TB, ch <-chan *message.Message, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	synctest.Wait()
	select {
	case m, ok := <-ch:
		if ok {
			t.Fatalf("unexpected message %s (payload %q)", m.UUID, m.Payload)
		}
	default:
	}
}

// subClosed waits until ch is closed, draining (and not acking) what is still in it.
func subClosed(t testing.TB, ch <-chan *message.Message) {
	t.Helper()
	timeout := time.After(subWait)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatalf("the subscription channel was not closed within %s", subWait)
		}
	}
}

// subClosedNow fails unless ch is closed already (a non-blocking read sees it closed).
func subClosedNow(t testing.TB, ch <-chan *message.Message) {
	t.Helper()
	select {
	case m, ok := <-ch:
		if ok {
			t.Fatalf("the channel is open and delivered %s after Close returned", m.UUID)
		}
	default:
		t.Fatal("the channel is still open after Close returned")
	}
}

// subDone waits until ctx is done.
func subDone(t testing.TB, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(subWait):
		t.Fatalf("%s: the message context is not done after %s", what, subWait)
	}
}

// subNotDone fails if ctx is done.
func subNotDone(t testing.TB, ctx context.Context, what string) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("%s: the message context is done (%v), want it live", what, ctx.Err())
	}
}

// subInfo is the record facts of a consumed message.
func subInfo(t testing.TB, m *message.Message) kinesis.RecordInfo {
	t.Helper()
	info, ok := kinesis.RecordFromContext(m.Context())
	if !ok {
		t.Fatalf("message %s carries no record facts in its context", m.UUID)
	}
	return info
}

// subSeq is the sequence number of a consumed message.
func subSeq(t testing.TB, m *message.Message) string { return subInfo(t, m).SequenceNumber }

// subPayloads lists the payloads of msgs.
func subPayloads(msgs []*message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Payload)
	}
	return out
}

// subWantPayloads fails unless msgs carry exactly want, in order.
func subWantPayloads(t testing.TB, msgs []*message.Message, want ...string) {
	t.Helper()
	got := subPayloads(msgs)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("payloads = %q, want %q", got, want)
	}
}

// subRange lists "msg-<first>".."msg-<last>".
func subRange(first, last int) []string {
	var out []string
	for i := first; i <= last; i++ {
		out = append(out, fmt.Sprintf("msg-%d", i))
	}
	return out
}

// subSeqLess compares two Kinesis sequence numbers as the big integers they are.
func subSeqLess(t testing.TB, a, b string) bool {
	t.Helper()
	x, ok1 := new(big.Int).SetString(a, 10)
	y, ok2 := new(big.Int).SetString(b, 10)
	if !ok1 || !ok2 {
		t.Fatalf("sequence numbers %q, %q are not decimal", a, b)
	}
	return x.Cmp(y) < 0
}

// subOpWatch counts lease store operations through the store's fault hook, and ch is signalled
// after each, so that a test waits for "several coordinator cycles passed" as a signal, not a
// sleep: read n, then wait on ch until n has grown enough.
type subOpWatch struct {
	mu    sync.Mutex
	count map[string]int
	ch    chan string
}

func watchSubStore(store *lease.MemoryStore) *subOpWatch {
	w := &subOpWatch{count: map[string]int{}, ch: make(chan string, 1)}
	store.SetFault(func(_ context.Context, op string, _ lease.Key) error {
		w.mu.Lock()
		w.count[op]++
		w.mu.Unlock()
		select {
		case w.ch <- op:
		default:
		}
		return nil
	})
	return w
}

func (w *subOpWatch) n(op string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count[op]
}
