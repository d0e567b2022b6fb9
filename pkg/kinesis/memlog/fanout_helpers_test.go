package memlog_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

const streamARN = "arn:aws:kinesis:us-east-1:000000000000:stream/s"

// watchdog bounds how long a test waits for something that should happen at once. It is not how
// tests synchronise (they wait on the events and timers themselves); it only turns a hang into a
// failure.
const watchdog = 10 * time.Second

// fakeClock is a clock whose timers fire when the test moves it, the Now and After a Log with
// fan-out needs, so heartbeats and the 5-minute end are tested without sleeping.
type fakeClock struct {
	mu      sync.Mutex
	t       time.Time
	timers  []fakeTimer
	calls   int           // After calls so far
	changed chan struct{} // closed and replaced whenever a timer is armed
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// After is time.After on the fake clock: the channel delivers once Advance has moved the clock
// by d or more.
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.t
		return ch
	}
	c.timers = append(c.timers, fakeTimer{at: c.t.Add(d), c: ch})
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Advance moves the clock by d and fires the timers due by then.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.timers = slices.DeleteFunc(c.timers, func(tm fakeTimer) bool {
		if tm.at.After(c.t) {
			return false
		}
		tm.c <- c.t
		return true
	})
}

// deadlines are the times the pending timers fire at, earliest first.
func (c *fakeClock) deadlines() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ds []time.Time
	for _, tm := range c.timers {
		ds = append(ds, tm.at)
	}
	slices.SortFunc(ds, time.Time.Compare)
	return ds
}

// afterCalls is how many timers were asked for so far.
func (c *fakeClock) afterCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// awaitTimer waits until a timer is pending that fires at at, so a test moves the clock only
// once the subscription is waiting for it.
func (c *fakeClock) awaitTimer(t testing.TB, at time.Time) {
	t.Helper()
	deadline := time.After(watchdog)
	for {
		c.mu.Lock()
		armed := slices.ContainsFunc(c.timers, func(tm fakeTimer) bool { return tm.at.Equal(at) })
		changed := c.changed
		c.mu.Unlock()
		if armed {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no timer for %v; pending: %v", at, c.deadlines())
		}
	}
}

// noLeaks fails the test if it leaves goroutines behind: every subscription's pump and the SDK's
// stream goroutines must be gone when its stream is.
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// fanoutLog returns a Log on a fake clock with a stream "s" of n shards and a consumer "c".
func fanoutLog(t testing.TB, n int32, cfg memlog.Config) (*memlog.Log, *fakeClock, string) {
	t.Helper()
	c := newFakeClock()
	cfg.Now, cfg.After = c.Now, c.After
	l := memlog.New(cfg)
	createStream(t, l, "s", n)
	return l, c, register(t, l, "c")
}

// register registers a consumer with stream "s" and returns its ARN.
func register(t testing.TB, l *memlog.Log, name string) string {
	t.Helper()
	out, err := l.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(streamARN), ConsumerName: aws.String(name),
	})
	if err != nil {
		t.Fatalf("RegisterStreamConsumer(%s): %v", name, err)
	}
	return aws.ToString(out.Consumer.ConsumerARN)
}

func startAt(typ types.ShardIteratorType) *types.StartingPosition {
	return &types.StartingPosition{Type: typ}
}

func afterSeq(seq string) *types.StartingPosition {
	return &types.StartingPosition{Type: types.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String(seq)}
}

// events reads one subscription's event stream.
type events struct {
	t  testing.TB
	es *awskinesis.SubscribeToShardEventStream
}

// subscribe subscribes consumer arn to a shard; the stream is closed when the test ends.
func subscribe(t testing.TB, l *memlog.Log, arn, shard string, pos *types.StartingPosition) *events {
	t.Helper()
	return subscribeCtx(t, ctx, l, arn, shard, pos)
}

func subscribeCtx(t testing.TB, ctx context.Context, l *memlog.Log, arn, shard string, pos *types.StartingPosition) *events {
	t.Helper()
	out, err := l.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(arn), ShardId: aws.String(shard), StartingPosition: pos,
	})
	if err != nil {
		t.Fatalf("SubscribeToShard(%s %s): %v", shard, pos.Type, err)
	}
	es := out.GetStream()
	t.Cleanup(func() { _ = es.Close() })
	return &events{t: t, es: es}
}

// next returns the next event, or false once the stream has ended.
func (e *events) next() (types.SubscribeToShardEvent, bool) {
	e.t.Helper()
	select {
	case ev, ok := <-e.es.Events():
		if !ok {
			return types.SubscribeToShardEvent{}, false
		}
		m, isEvent := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !isEvent {
			e.t.Fatalf("event of type %T", ev)
		}
		return m.Value, true
	case <-time.After(watchdog):
		e.t.Fatal("no event")
	}
	return types.SubscribeToShardEvent{}, false
}

// event returns the next event, failing if the stream has ended.
func (e *events) event() types.SubscribeToShardEvent {
	e.t.Helper()
	ev, ok := e.next()
	if !ok {
		e.t.Fatalf("the stream ended: %v", e.es.Err())
	}
	return ev
}

// records reads events until they have carried n records, and returns those and the last event.
func (e *events) records(n int) ([]types.Record, types.SubscribeToShardEvent) {
	e.t.Helper()
	var recs []types.Record
	var ev types.SubscribeToShardEvent
	for len(recs) < n {
		ev = e.event()
		recs = append(recs, ev.Records...)
	}
	if len(recs) > n {
		e.t.Fatalf("got %d records, want %d: %v", len(recs), n, payloads(recs))
	}
	return recs, ev
}

// end reads the stream to its end and returns the events it still carried and its Err.
func (e *events) end() ([]types.SubscribeToShardEvent, error) {
	e.t.Helper()
	var evs []types.SubscribeToShardEvent
	for {
		ev, ok := e.next()
		if !ok {
			return evs, e.es.Err()
		}
		evs = append(evs, ev)
	}
}
