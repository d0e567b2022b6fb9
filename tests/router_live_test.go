package tests_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// A Watermill Router on kinesalite + dynalite with the middleware people combine, checking
// what each needs of the driver: Retry holds a message unacked for longer than LeaseDuration
// (the lease must stay renewed, and with the same owner and generation), PoisonQueue
// republishes a consumed message to a dead-letter stream (with all its metadata),
// CorrelationID reads and writes metadata across two streams, and Recoverer turns a panic into
// an error; and a Close in the middle of Retry's backoff must neither poison nor lose the
// message. Helpers here are prefixed "rt".

const (
	// rtLeaseDuration is short, so that Retry's hold on the flaky message outlasts it.
	rtLeaseDuration = 3 * time.Second
	// rtFlakyFailures is how often the flaky message fails before it succeeds: with Retry's
	// backoff of 0.5 s, 1 s, 1 s, ... its retries take 5.5 s, almost twice rtLeaseDuration.
	rtFlakyFailures = 6
	// rtMaxRetries lets the flaky message through and sends the poisoned one (8 attempts,
	// 6.5 s) to the dead-letter stream.
	rtMaxRetries = 7
	// rtWait bounds every wait; the emulators answer in milliseconds.
	rtWait = 30 * time.Second

	rtHandlerName = "process-orders"
	rtKindKey     = "kind"     // what the handler does with a message
	rtOrderKey    = "order_id" // a custom metadata key that must reach the dead-letter stream
	rtSourceKey   = "source_uuid"
)

var (
	errRtTransient     = errors.New("inventory service unavailable")
	errRtUnprocessable = errors.New("order cannot be processed")
)

// rtSignal is a mutex and a "something changed" signal: waits are on the signal with a
// deadline, never on a sleep.
type rtSignal struct {
	mu      sync.Mutex
	changed chan struct{}
}

func newRtSignal() rtSignal { return rtSignal{changed: make(chan struct{}, 1)} }

func (s *rtSignal) update(f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// waitUntil waits until cond, called locked, holds; summary (locked too) says how far it got.
func (s *rtSignal) waitUntil(t *testing.T, what string, cond func() bool, summary func() string) {
	t.Helper()
	deadline := time.NewTimer(rtWait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, sum := cond(), summary()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.changed:
		case <-deadline.C:
			t.Fatalf("%s: not within %s (%s)", what, rtWait, sum)
		}
	}
}

// rtJournal records what the router did with each input message, by UUID.
type rtJournal struct {
	rtSignal
	// deliveries are the messages the router handed to the middleware chain: one per
	// delivery by the subscriber (a redelivery is a new *message.Message with the same UUID),
	// however often Retry runs the handler on it.
	deliveries map[string][]*message.Message
	infos      map[string][]kinesis.RecordInfo
	// results is what the whole chain returned to the router, per delivery: nil is an Ack.
	results map[string][]error
	// attempts are the handler's calls (Retry calls it again on the same delivery), with the
	// correlation id each saw.
	attempts    map[string][]time.Time
	attemptCorr map[string][]string
	panics      map[string]int
	successes   map[string][]time.Time
	// succeeded lists the UUIDs in the order the handler succeeded with them.
	succeeded []string
	// failStuck makes the handler fail every attempt on "stuck" messages (set before the
	// router starts).
	failStuck bool
}

func newRtJournal() *rtJournal {
	return &rtJournal{
		rtSignal:   newRtSignal(),
		deliveries: map[string][]*message.Message{}, infos: map[string][]kinesis.RecordInfo{},
		results: map[string][]error{}, attempts: map[string][]time.Time{},
		attemptCorr: map[string][]string{}, panics: map[string]int{}, successes: map[string][]time.Time{},
	}
}

// observe is the outermost middleware, test instrumentation only: it sees each delivery as
// the router makes it and what the chain below it returns.
func (j *rtJournal) observe(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		info, _ := kinesis.RecordFromContext(msg.Context())
		j.update(func() {
			j.deliveries[msg.UUID] = append(j.deliveries[msg.UUID], msg)
			j.infos[msg.UUID] = append(j.infos[msg.UUID], info)
		})
		out, err := h(msg)
		j.update(func() { j.results[msg.UUID] = append(j.results[msg.UUID], err) })
		return out, err
	}
}

// handler is the application: it fails the flaky message rtFlakyFailures times, always fails
// the poisoned one, panics once on the panicking one, and otherwise publishes one message to
// the output stream (through the router's publisher).
func (j *rtJournal) handler(msg *message.Message) ([]*message.Message, error) {
	var attempt int
	j.update(func() {
		j.attempts[msg.UUID] = append(j.attempts[msg.UUID], time.Now())
		j.attemptCorr[msg.UUID] = append(j.attemptCorr[msg.UUID], middleware.MessageCorrelationID(msg))
		attempt = len(j.attempts[msg.UUID])
	})
	order := msg.Metadata.Get(rtOrderKey)
	switch msg.Metadata.Get(rtKindKey) {
	case "flaky":
		if attempt <= rtFlakyFailures {
			return nil, fmt.Errorf("order %s, attempt %d: %w", order, attempt, errRtTransient)
		}
	case "poison":
		return nil, fmt.Errorf("order %s: %w", order, errRtUnprocessable)
	case "stuck":
		if j.failStuck {
			return nil, fmt.Errorf("order %s, attempt %d: %w", order, attempt, errRtTransient)
		}
	case "panic":
		if attempt == 1 {
			j.update(func() { j.panics[msg.UUID]++ })
			panic("order " + order + ": nil map in the pricing code")
		}
	}
	out := message.NewMessage(watermill.NewUUID(), append([]byte("processed "), msg.Payload...))
	out.Metadata.Set(rtSourceKey, msg.UUID)
	j.update(func() {
		j.successes[msg.UUID] = append(j.successes[msg.UUID], time.Now())
		j.succeeded = append(j.succeeded, msg.UUID)
	})
	return []*message.Message{out}, nil
}

func (j *rtJournal) summaryLocked() string {
	settled := 0
	for _, r := range j.results {
		settled += len(r)
	}
	return fmt.Sprintf("%d messages delivered, %d deliveries settled by the chain, %d handler successes",
		len(j.deliveries), settled, len(j.succeeded))
}

// rtReceived is a message as a plain reader of a stream got it.
type rtReceived struct {
	UUID     string
	Metadata message.Metadata
	Payload  string
	Info     kinesis.RecordInfo
}

// rtInbox reads one subscription in a goroutine of its own, acking and recording everything.
type rtInbox struct {
	rtSignal
	msgs []rtReceived
	done chan struct{}
}

func rtRead(ch <-chan *message.Message) *rtInbox {
	in := &rtInbox{rtSignal: newRtSignal(), done: make(chan struct{})}
	go func() {
		defer close(in.done)
		for msg := range ch {
			info, _ := kinesis.RecordFromContext(msg.Context())
			r := rtReceived{UUID: msg.UUID, Metadata: msg.Metadata, Payload: string(msg.Payload), Info: info}
			msg.Ack()
			in.update(func() { in.msgs = append(in.msgs, r) })
		}
	}()
	return in
}

func (in *rtInbox) waitFor(t *testing.T, what string, match func(rtReceived) bool) rtReceived {
	t.Helper()
	var found rtReceived
	in.waitUntil(t, what, func() bool {
		for _, m := range in.msgs {
			if match(m) {
				found = m
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("%d messages received", len(in.msgs)) })
	return found
}

func (in *rtInbox) all() []rtReceived {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]rtReceived(nil), in.msgs...)
}

// rtLeaseObs is one look at the input shard's lease in the table, with the subscriber's
// Health taken at the same moment.
type rtLeaseObs struct {
	at     time.Time
	leases []lease.Lease
	err    error
	health kinesis.Health
}

// rtMonitorLeases lists the group's leases of the stream through the store every 100 ms
// until stop is called. This only observes; nothing waits on it.
func rtMonitorLeases(store lease.Store, group, stream string, sub *kinesis.Subscriber) (stop func() []rtLeaseObs) {
	var (
		mu   sync.Mutex
		obs  []rtLeaseObs
		quit = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			list, err := store.List(ctx, group, stream)
			cancel()
			o := rtLeaseObs{at: time.Now(), leases: list, err: err, health: sub.Health()}
			mu.Lock()
			obs = append(obs, o)
			mu.Unlock()
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() []rtLeaseObs {
		close(quit)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return obs
	}
}

// rtShardEvents records the router subscriber's lease hooks.
type rtShardEvents struct {
	mu       sync.Mutex
	events   []string
	acquired chan struct{}
}

func newRtShardEvents() *rtShardEvents { return &rtShardEvents{acquired: make(chan struct{}, 1)} }

func (e *rtShardEvents) record(what string) func(kinesis.ShardEvent) {
	return func(ev kinesis.ShardEvent) {
		e.mu.Lock()
		e.events = append(e.events, fmt.Sprintf("%s %s by %s", what, ev.ShardID, ev.WorkerID))
		e.mu.Unlock()
		if what == "acquired" {
			select {
			case e.acquired <- struct{}{}:
			default:
			}
		}
	}
}

func (e *rtShardEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

// TestLiveRouter_Middleware runs one Router scenario per ordering mode (in parallel: each has
// its own streams, lease table and group). Goroutines started by them must all be gone once
// both are closed.
func TestLiveRouter_Middleware(t *testing.T) {
	newLiveEnv(t) // skips without the emulators
	// The SDK clients' idle keep-alive connections belong to their HTTP transports, which
	// nobody closes; they are not the driver's goroutines.
	opts := []goleak.Option{goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop")}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
	for _, mode := range []struct {
		name string
		cfg  func(*kinesis.SubscriberConfig)
	}{
		// The default: one message of the shard out at a time, so Retry holds the shard back.
		{"OrderByShard", func(*kinesis.SubscriberConfig) {}},
		// Several out at once, one per partition key (here every message has its own key):
		// the others flow while one is retried.
		{"OrderByKey", func(c *kinesis.SubscriberConfig) { c.Ordering, c.MaxInFlight = kinesis.OrderByKey, 8 }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			rtRunScenario(t, mode.name, mode.cfg)
		})
	}
	t.Run("CloseDuringRetry", func(t *testing.T) {
		t.Parallel()
		rtRunCloseDuringRetry(t)
	})
}

// rtRig is what a scenario runs on: its own streams (one shard each), lease table and group,
// publishers, and a logger whose lines are printed if the test fails.
type rtRig struct {
	env                            liveEnv
	logger                         *watermill.CaptureLoggerAdapter
	inStream, outStream, dlqStream string
	shardID                        string
	store                          *lease.DynamoDBStore
	group                          string
	// inputPub is the test's, dlqPub PoisonQueue's. (Each router gets its own publisher for
	// the handler: a Router closes its handlers' publishers when it closes.)
	inputPub, dlqPub *kinesis.Publisher
}

func rtNewRig(t *testing.T) *rtRig {
	// Every client of the scenario goes through one HTTP transport, whose idle connections
	// are closed at the end (registered first, so it runs after every other cleanup).
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	r := &rtRig{env: *newLiveEnv(t), logger: watermill.NewCaptureLogger(), group: itName("router-group")}
	r.env.awsConfig.HTTPClient = &http.Client{Transport: transport}
	t.Cleanup(func() {
		if t.Failed() {
			r.logger.PrintCaptured(t)
		}
	})
	var inShards []types.Shard
	r.inStream, inShards = itCreateStream(t, &r.env, 1)
	r.shardID = *inShards[0].ShardId
	r.outStream, _ = itCreateStream(t, &r.env, 1)
	r.dlqStream, _ = itCreateStream(t, &r.env, 1)
	var err error
	r.store, err = lease.NewDynamoDBStore(context.Background(), lease.DynamoDBConfig{
		Client:      dynamodb.NewFromConfig(r.env.awsConfig, r.env.dynamoDBOptions),
		TableName:   itName("router-leases"),
		CreateTable: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.inputPub, r.dlqPub = r.publisher(t), r.publisher(t)
	return r
}

func (r *rtRig) publisher(t *testing.T) *kinesis.Publisher {
	t.Helper()
	p, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: r.env.kinesisClient(), RetryBackoff: 10 * time.Millisecond}, r.logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// subscriber is a member of the rig's group with the tests' short intervals and
// rtLeaseDuration (renewed every second), its lease hooks recorded in events.
func (r *rtRig) subscriber(t *testing.T, worker string, events *rtShardEvents, configure func(*kinesis.SubscriberConfig)) *kinesis.Subscriber {
	t.Helper()
	cfg := itSubscriberConfig(r.env.kinesisClient(), r.store, r.group, worker)
	cfg.Group.LeaseDuration = rtLeaseDuration
	cfg.Group.Hooks.OnAcquired = events.record("acquired")
	cfg.Group.Hooks.OnRevoked = events.record("revoked")
	cfg.Group.Hooks.OnLost = events.record("lost")
	configure(&cfg)
	sub, err := kinesis.NewSubscriber(cfg, r.logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// reader is a plain Subscriber (no group) reading the output and dead-letter streams.
func (r *rtRig) reader(t *testing.T) (sub *kinesis.Subscriber, out, dlq *rtInbox) {
	t.Helper()
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: r.env.kinesisClient(), PollInterval: 50 * time.Millisecond, MinReadInterval: 10 * time.Millisecond,
	}, r.logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	outCh, err := sub.Subscribe(context.Background(), r.outStream)
	if err != nil {
		t.Fatal(err)
	}
	dlqCh, err := sub.Subscribe(context.Background(), r.dlqStream)
	if err != nil {
		t.Fatal(err)
	}
	return sub, rtRead(outCh), rtRead(dlqCh)
}

// message is an input of the given kind, with a custom metadata key and a correlation id.
func (r *rtRig) message(kind, payload string) *message.Message {
	m := message.NewMessage(watermill.NewUUID(), []byte(payload))
	m.Metadata.Set(rtKindKey, kind)
	m.Metadata.Set(rtOrderKey, "o-"+watermill.NewShortUUID())
	middleware.SetCorrelationID("corr-"+watermill.NewShortUUID(), m)
	return m
}

// publish publishes copies of msgs to the input stream in one call (one shard: in this
// order), so that the test keeps the originals to compare with.
func (r *rtRig) publish(t *testing.T, msgs ...*message.Message) {
	t.Helper()
	copies := make([]*message.Message, len(msgs))
	for i, m := range msgs {
		copies[i] = m.Copy()
	}
	if err := r.inputPub.Publish(r.inStream, copies...); err != nil {
		t.Fatalf("publishing %d messages: %v", len(msgs), err)
	}
}

// rtStartRouter runs a Router with the middleware chain under test and one handler, from the
// rig's input stream to its output stream through sub, and waits until sub holds the lease.
// The returned close closes the router and waits for Run to return; it runs at cleanup too.
func rtStartRouter(t *testing.T, r *rtRig, sub *kinesis.Subscriber, events *rtShardEvents, journal *rtJournal) (*message.Router, <-chan error, func()) {
	t.Helper()
	poisonQueue, err := middleware.PoisonQueue(r.dlqPub, r.dlqStream)
	if err != nil {
		t.Fatal(err)
	}
	retry := middleware.Retry{
		MaxRetries:      rtMaxRetries,
		InitialInterval: 500 * time.Millisecond,
		MaxInterval:     time.Second,
		Multiplier:      2,
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: rtWait}, r.logger)
	if err != nil {
		t.Fatal(err)
	}
	// The order, outermost first (the first added runs first):
	//   - CorrelationID outermost: every message the handler produces gets the consumed
	//     message's correlation id, whatever happens below.
	//   - PoisonQueue outside Retry: a message goes to the dead-letter stream only once its
	//     retries are used up, and the chain then returns nil, so the router acks it and the
	//     shard moves on. On Kinesis this matters more than on a queue: a shard is delivered in
	//     order, so a message nacked forever holds back everything behind it (its whole shard
	//     with MaxInFlight 1, its partition key with OrderByKey) for good.
	//   - Retry inside PoisonQueue: it re-runs the handler on the same, unacked delivery; the
	//     driver renews the lease meanwhile, and Retry stops when the message's context is
	//     cancelled (the lease lost, or Close).
	//   - Recoverer innermost: a panic becomes an error right at the handler, so Retry retries
	//     it and, if it keeps panicking, PoisonQueue moves it aside. Outside Retry a panic would
	//     skip the retries; outside PoisonQueue it would come out as an error (a Nack) on every
	//     redelivery, and stall the shard as above.
	router.AddMiddleware(
		journal.observe, // test instrumentation
		middleware.CorrelationID,
		poisonQueue,
		retry.Middleware,
		middleware.Recoverer,
	)
	router.AddHandler(rtHandlerName, r.inStream, sub, r.outStream, r.publisher(t), journal.handler)

	runErr := make(chan error, 1)
	go func() { runErr <- router.Run(context.Background()) }()
	closeRouter := sync.OnceFunc(func() {
		if err := router.Close(); err != nil {
			t.Errorf("router Close: %v", err)
		}
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("router Run: %v", err)
			}
		case <-time.After(rtWait):
			t.Errorf("router Run did not return within %s of Close", rtWait)
		}
	})
	t.Cleanup(closeRouter)
	select {
	case <-router.Running():
	case err := <-runErr:
		t.Fatalf("router stopped before running: %v", err)
	case <-time.After(rtWait):
		t.Fatal("router did not start")
	}
	select {
	case <-events.acquired:
	case <-time.After(rtWait):
		t.Fatalf("the router's subscriber did not take the lease of %s within %s", r.shardID, rtWait)
	}
	return router, runErr, closeRouter
}

func rtRunScenario(t *testing.T, mode string, configure func(*kinesis.SubscriberConfig)) {
	start := time.Now()
	r := rtNewRig(t)
	inStream, outStream, dlqStream, group, store := r.inStream, r.outStream, r.dlqStream, r.group, r.store
	shardID := &r.shardID
	inputPub, dlqPub := r.inputPub, r.dlqPub
	worker, standbyWorker := itName("router-worker"), itName("standby-worker")

	// The router's subscriber, one member of the group.
	events := newRtShardEvents()
	sub := r.subscriber(t, worker, events, configure)
	journal := newRtJournal()
	router, runErr, closeRouter := rtStartRouter(t, r, sub, events, journal)
	stopMonitor := rtMonitorLeases(store, group, inStream, sub)
	monitorStopped := false
	var observations []rtLeaseObs
	t.Cleanup(func() {
		if !monitorStopped {
			stopMonitor()
		}
	})

	// A second member of the group, started once the router's holds the only lease. With one
	// shard it is below its share but the owner holds only one more, so it never asks for a
	// handoff (lease.PlanShare); it takes the lease only if the lease expires, i.e. if the
	// owner stops renewing it for LeaseDuration. Anything it receives is a lease move.
	standbyCfg := itSubscriberConfig(r.env.kinesisClient(), store, group, standbyWorker)
	standbyCfg.Group.LeaseDuration = rtLeaseDuration
	standby, standbyCh := itSubscribe(t, standbyCfg, r.logger, inStream)
	standbyInbox := rtRead(standbyCh)

	// A plain reader (no group) of the output and the dead-letter streams.
	checker, outInbox, dlqInbox := r.reader(t)

	// The known set, in one PutRecords (one shard, so this is the delivery order).
	kinds := []string{"ok", "flaky", "ok", "panic", "ok", "poison", "ok", "ok"}
	inputs := make([]*message.Message, len(kinds))
	byUUID := map[string]*message.Message{}
	uuidOfKind := map[string]string{}
	for i, kind := range kinds {
		inputs[i] = r.message(kind, fmt.Sprintf("order-%d (%s)", i, kind))
		byUUID[inputs[i].UUID] = inputs[i]
		if kind != "ok" {
			uuidOfKind[kind] = inputs[i].UUID
		}
	}
	r.publish(t, inputs...)

	// Wait until the chain has settled every message and the router acked each delivery (the
	// router acks after publishing what the handler produced).
	journal.waitUntil(t, "every message settled by the middleware chain", func() bool {
		for _, m := range inputs {
			if len(journal.results[m.UUID]) == 0 {
				return false
			}
		}
		return true
	}, journal.summaryLocked)
	rtWaitAcked(t, journal, inputs)
	poisoned := dlqInbox.waitFor(t, "the poisoned message on the dead-letter stream", func(x rtReceived) bool {
		return x.UUID == uuidOfKind["poison"]
	})

	// One more message, published after everything above was handled: once its output is on
	// the output stream, so is every output produced before it (one shard, in order).
	last := r.message("ok", "last order")
	r.publish(t, last)
	outInbox.waitFor(t, "the last message's output", func(x rtReceived) bool { return x.Metadata.Get(rtSourceKey) == last.UUID })
	rtWaitAcked(t, journal, []*message.Message{last})
	// Likewise a marker on the dead-letter stream, published by the test after the poisoned
	// message got there: past it, nothing more will come.
	marker := message.NewMessage(watermill.NewUUID(), []byte("dlq marker"))
	if err := inputPub.Publish(dlqStream, marker); err != nil {
		t.Fatal(err)
	}
	dlqInbox.waitFor(t, "the dead-letter marker", func(x rtReceived) bool { return x.UUID == marker.UUID })

	// Everything acked is checkpointed (CheckpointInterval 100 ms), still by the router's
	// member: the checkpoint is the last message's sequence number.
	journal.mu.Lock()
	lastSeq := journal.infos[last.UUID][0].SequenceNumber
	journal.mu.Unlock()
	itWaitLeases(t, store, group, inStream, []string{*shardID}, worker, map[string]string{*shardID: lastSeq})

	if !router.IsRunning() {
		t.Errorf("the router is not running any more")
	}
	select {
	case err := <-runErr:
		t.Fatalf("router Run returned before Close: %v", err)
	default:
	}
	observations = stopMonitor()
	monitorStopped = true
	standbyHealth := standby.Health()

	// Shutdown: the standby first (it would take the lease the router's member releases),
	// then the router (which closes its subscriber and the handler's publisher), then the
	// rest. The router's member checkpoints and releases the lease.
	itClose(t, standby)
	closeRouter()
	if err := sub.Close(); err != nil {
		t.Errorf("subscriber Close after the router's: %v", err)
	}
	itWaitLeases(t, store, group, inStream, []string{*shardID}, "", map[string]string{*shardID: lastSeq})
	if err := checker.Close(); err != nil {
		t.Errorf("checker Close: %v", err)
	}
	for name, inbox := range map[string]*rtInbox{"output": outInbox, "dead-letter": dlqInbox, "standby": standbyInbox} {
		select {
		case <-inbox.done:
		case <-time.After(rtWait):
			t.Errorf("the %s reader's channel was not closed by Close", name)
		}
	}
	for _, p := range []*kinesis.Publisher{inputPub, dlqPub} {
		if err := p.Close(); err != nil {
			t.Errorf("publisher Close: %v", err)
		}
	}
	if ev := events.list(); len(ev) != 2 || !strings.HasPrefix(ev[0], "acquired") || !strings.HasPrefix(ev[1], "revoked") {
		t.Errorf("lease hooks of the router's member: %v, want acquired, then revoked at Close (nothing lost)", ev)
	}

	// Everything is closed: the journal is complete.
	all := append(append([]*message.Message(nil), inputs...), last)
	byUUID[last.UUID] = last
	journal.mu.Lock()
	defer journal.mu.Unlock()

	// --- Retry keeps the lease past LeaseDuration. ---
	flaky := uuidOfKind["flaky"]
	flakyAttempts := journal.attempts[flaky]
	if len(flakyAttempts) != rtFlakyFailures+1 {
		t.Fatalf("flaky message: %d handler attempts, want %d (%d failures, then success)", len(flakyAttempts), rtFlakyFailures+1, rtFlakyFailures)
	}
	windowStart, windowEnd := flakyAttempts[0], flakyAttempts[len(flakyAttempts)-1]
	held := windowEnd.Sub(windowStart)
	if held <= rtLeaseDuration+time.Second {
		t.Errorf("Retry held the flaky message for %s; the test needs well over LeaseDuration (%s)", held, rtLeaseDuration)
	}
	generation, counters, maxStill := rtCheckLeaseObservations(t, observations, *shardID, worker, windowStart, windowEnd)
	if counters < 3 {
		t.Errorf("the lease counter took %d values while the flaky message was retried for %s; renewals every %s should give at least 3",
			counters, held.Round(time.Millisecond), rtLeaseDuration/3)
	}
	if maxStill >= rtLeaseDuration {
		t.Errorf("the lease counter stood still for %s while the flaky message was retried: another member could judge it expired (LeaseDuration %s)",
			maxStill.Round(time.Millisecond), rtLeaseDuration)
	}
	for _, m := range all {
		for _, info := range journal.infos[m.UUID] {
			if info.LeaseGeneration != generation || info.ShardID != *shardID {
				t.Errorf("message %s was delivered from %s under generation %d; the lease's is %d", m.UUID, info.ShardID, info.LeaseGeneration, generation)
			}
		}
	}
	if got := standbyInbox.all(); len(got) != 0 {
		t.Errorf("the standby member received %d messages: the lease moved (first: %s %q)", len(got), got[0].UUID, got[0].Payload)
	}
	if len(standbyHealth.Subscriptions) != 1 || len(standbyHealth.Subscriptions[0].Shards) != 0 ||
		!standbyHealth.Subscriptions[0].LastLeaseSync.After(windowEnd) {
		t.Errorf("the standby member should have been syncing leases, reading nothing, past the flaky message's success (%s): %+v",
			windowEnd.Format(time.RFC3339Nano), standbyHealth.Subscriptions)
	}

	// --- Each message: delivered once, acked once; the handler's attempts as designed. ---
	wantAttempts := map[string]int{"ok": 1, "flaky": rtFlakyFailures + 1, "panic": 2, "poison": rtMaxRetries + 1}
	for _, m := range all {
		kind := m.Metadata.Get(rtKindKey)
		if n := len(journal.deliveries[m.UUID]); n != 1 {
			t.Errorf("%s message %s was delivered %d times, want once (redelivered: a Nack or a lease move)", kind, m.UUID, n)
		}
		if r := journal.results[m.UUID]; len(r) != 1 || r[0] != nil {
			t.Errorf("%s message %s: the chain returned %v to the router, want one nil (an Ack)", kind, m.UUID, r)
		}
		if n := len(journal.attempts[m.UUID]); n != wantAttempts[kind] {
			t.Errorf("%s message %s: %d handler attempts, want %d", kind, m.UUID, n, wantAttempts[kind])
		}
		wantSuccesses := 1
		if kind == "poison" {
			wantSuccesses = 0
		}
		if n := len(journal.successes[m.UUID]); n != wantSuccesses {
			t.Errorf("%s message %s: handled successfully %d times, want %d", kind, m.UUID, n, wantSuccesses)
		}
	}

	// --- A panic is an error that Retry retried on the same delivery; the router went on. ---
	panicked := uuidOfKind["panic"]
	if journal.panics[panicked] != 1 {
		t.Errorf("the panicking message panicked %d times, want 1", journal.panics[panicked])
	}
	// Every message behind the panicking one was handled (checked above): with OrderByShard
	// in publish order, with OrderByKey the plain ones while the flaky one was still retried.
	var wantOrder []string
	for _, m := range all {
		if m.Metadata.Get(rtKindKey) != "poison" {
			wantOrder = append(wantOrder, m.UUID)
		}
	}
	switch mode {
	case "OrderByShard":
		if strings.Join(journal.succeeded, ",") != strings.Join(wantOrder, ",") {
			t.Errorf("OrderByShard: handled in the order %v, want the shard's %v", journal.succeeded, wantOrder)
		}
	case "OrderByKey":
		for _, m := range inputs {
			if s := journal.successes[m.UUID]; m.Metadata.Get(rtKindKey) == "ok" && len(s) > 0 && !s[0].Before(windowEnd) {
				t.Errorf("OrderByKey: plain message %s was handled at %s, not while the flaky one was retried (until %s)",
					m.UUID, s[0].Format(time.RFC3339Nano), windowEnd.Format(time.RFC3339Nano))
			}
		}
	}

	// --- Correlation ids: seen by the handler, carried to the output stream. ---
	for _, m := range all {
		want := middleware.MessageCorrelationID(m)
		for i, got := range journal.attemptCorr[m.UUID] {
			if got != want {
				t.Errorf("message %s, attempt %d: the handler saw correlation id %q, want %q", m.UUID, i+1, got, want)
			}
		}
	}
	outputs := map[string]int{}
	for _, r := range outInbox.all() {
		src := r.Metadata.Get(rtSourceKey)
		in, ok := byUUID[src]
		if !ok {
			t.Errorf("output %s names no input message (%s=%q)", r.UUID, rtSourceKey, src)
			continue
		}
		outputs[src]++
		if got, want := r.Metadata.Get(middleware.CorrelationIDMetadataKey), middleware.MessageCorrelationID(in); got != want {
			t.Errorf("output of %s carries correlation id %q, want the input's %q", src, got, want)
		}
		if want := "processed " + string(in.Payload); r.Payload != want {
			t.Errorf("output of %s has payload %q, want %q", src, r.Payload, want)
		}
		if r.Info.Stream != outStream {
			t.Errorf("output of %s came from stream %q, want %q", src, r.Info.Stream, outStream)
		}
	}
	for _, m := range all {
		want := 1
		if m.Metadata.Get(rtKindKey) == "poison" {
			want = 0
		}
		if outputs[m.UUID] != want {
			t.Errorf("%s message %s: %d outputs on the output stream, want %d", m.Metadata.Get(rtKindKey), m.UUID, outputs[m.UUID], want)
		}
	}

	// --- The poisoned message on the dead-letter stream: once, whole, with the reasons. ---
	if dlq := dlqInbox.all(); len(dlq) != 2 { // the poisoned message and the marker
		t.Errorf("dead-letter stream: %d messages, want the poisoned one and the marker: %+v", len(dlq), dlq)
	}
	poisonIn := byUUID[uuidOfKind["poison"]]
	if poisoned.Payload != string(poisonIn.Payload) {
		t.Errorf("dead-letter payload %q, want %q", poisoned.Payload, poisonIn.Payload)
	}
	wantMeta := maps.Clone(map[string]string(poisonIn.Metadata)) // kind, order_id, correlation_id
	wantMeta[middleware.ReasonForPoisonedKey] = fmt.Sprintf("order %s: %v", poisonIn.Metadata.Get(rtOrderKey), errRtUnprocessable)
	wantMeta[middleware.PoisonedTopicKey] = inStream
	wantMeta[middleware.PoisonedHandlerKey] = rtHandlerName
	// Watermill names the subscriber by its type, without the pointer.
	wantMeta[middleware.PoisonedSubscriberKey] = strings.TrimLeft(fmt.Sprintf("%T", sub), "*")
	if !maps.Equal(map[string]string(poisoned.Metadata), wantMeta) {
		t.Errorf("dead-letter metadata:\n got %v\nwant %v", poisoned.Metadata, wantMeta)
	}
	if poisoned.Info.Stream != dlqStream {
		t.Errorf("the poisoned message came from stream %q, want %q", poisoned.Info.Stream, dlqStream)
	}

	t.Logf("%s: flaky message held by Retry for %s (LeaseDuration %s); lease generation %d throughout, "+
		"its counter took %d values meanwhile, standing still at most %s; %d lease observations; took %s",
		mode, held.Round(time.Millisecond), rtLeaseDuration, generation, counters, maxStill.Round(time.Millisecond),
		len(observations), time.Since(start).Round(time.Millisecond))
}

// rtRunCloseDuringRetry: the router is closed (a deploy) while Retry waits between attempts
// on a message. Close cancels the message's context, so Retry stops at once; PoisonQueue then
// fails to publish it under that context, so it does not reach the dead-letter stream, and
// the router nacks it. The next member of the group gets it again, whole, and handles it.
func rtRunCloseDuringRetry(t *testing.T) {
	start := time.Now()
	r := rtNewRig(t)
	checker, outInbox, dlqInbox := r.reader(t)
	noConfig := func(*kinesis.SubscriberConfig) {}

	events1, journal1 := newRtShardEvents(), newRtJournal()
	journal1.failStuck = true
	worker1 := itName("router-worker-1")
	sub1 := r.subscriber(t, worker1, events1, noConfig)
	_, _, closeRouter1 := rtStartRouter(t, r, sub1, events1, journal1)

	stuck, behind := r.message("stuck", "order held at Close"), r.message("ok", "order behind it")
	r.publish(t, stuck, behind)
	journal1.waitUntil(t, "the stuck message retried", func() bool { return len(journal1.attempts[stuck.UUID]) >= 2 }, journal1.summaryLocked)
	closeStart := time.Now()
	closeRouter1()
	closeTook := time.Since(closeStart)
	if err := sub1.Close(); err != nil {
		t.Errorf("first subscriber Close: %v", err)
	}

	journal1.mu.Lock()
	attempts1 := len(journal1.attempts[stuck.UUID])
	results1 := append([]error(nil), journal1.results[stuck.UUID]...)
	deliveries1 := append([]*message.Message(nil), journal1.deliveries[stuck.UUID]...)
	behindDelivered1 := len(journal1.deliveries[behind.UUID])
	journal1.mu.Unlock()
	if len(deliveries1) != 1 || len(results1) != 1 || results1[0] == nil {
		t.Fatalf("first router: stuck message delivered %d times, chain results %v; want one delivery ending in an error", len(deliveries1), results1)
	}
	select {
	case <-deliveries1[0].Nacked():
	default:
		t.Errorf("first router: the stuck message was not nacked after Close (acked: %v)", rtClosed(deliveries1[0].Acked()))
	}
	if !errors.Is(results1[0], context.Canceled) {
		t.Errorf("first router: the chain ended with %q; want the cancelled message context", results1[0])
	}
	if attempts1 > 3 {
		t.Errorf("first router: %d attempts on the stuck message; Retry should have stopped at Close (after 2 or 3)", attempts1)
	}
	if behindDelivered1 != 0 {
		t.Errorf("first router: the message behind the stuck one was delivered %d times (MaxInFlight 1)", behindDelivered1)
	}
	if ev := events1.list(); len(ev) != 2 || !strings.HasPrefix(ev[1], "revoked") {
		t.Errorf("lease hooks of the first member: %v, want acquired then revoked", ev)
	}
	// Released, with nothing checkpointed.
	itWaitLeases(t, r.store, r.group, r.inStream, []string{r.shardID}, "", map[string]string{r.shardID: ""})

	// The next member of the group (a new instance after the deploy).
	events2, journal2 := newRtShardEvents(), newRtJournal()
	sub2 := r.subscriber(t, itName("router-worker-2"), events2, noConfig)
	_, _, closeRouter2 := rtStartRouter(t, r, sub2, events2, journal2)
	rtWaitAcked(t, journal2, []*message.Message{stuck, behind})
	for _, m := range []*message.Message{stuck, behind} {
		outInbox.waitFor(t, "the output of "+m.UUID, func(x rtReceived) bool { return x.Metadata.Get(rtSourceKey) == m.UUID })
	}
	marker := message.NewMessage(watermill.NewUUID(), []byte("dlq marker"))
	if err := r.inputPub.Publish(r.dlqStream, marker); err != nil {
		t.Fatal(err)
	}
	dlqInbox.waitFor(t, "the dead-letter marker", func(x rtReceived) bool { return x.UUID == marker.UUID })
	closeRouter2()
	if err := checker.Close(); err != nil {
		t.Errorf("checker Close: %v", err)
	}

	if dlq := dlqInbox.all(); len(dlq) != 1 {
		t.Errorf("dead-letter stream: %d messages, want only the marker (a message interrupted by Close is not poisoned): %+v", len(dlq), dlq)
	}
	journal2.mu.Lock()
	defer journal2.mu.Unlock()
	for _, m := range []*message.Message{stuck, behind} {
		d := journal2.deliveries[m.UUID]
		if len(d) != 1 || len(journal2.successes[m.UUID]) != 1 {
			t.Errorf("second router: message %s delivered %d times, handled %d times; want once each", m.UUID, len(d), len(journal2.successes[m.UUID]))
			continue
		}
		if !maps.Equal(d[0].Metadata, m.Metadata) || string(d[0].Payload) != string(m.Payload) {
			t.Errorf("second router: message %s came back as %v %q, published as %v %q", m.UUID, d[0].Metadata, d[0].Payload, m.Metadata, m.Payload)
		}
	}
	outputs := map[string]int{}
	for _, x := range outInbox.all() {
		outputs[x.Metadata.Get(rtSourceKey)]++
		if src := byUUIDOf(x.Metadata.Get(rtSourceKey), stuck, behind); src == nil ||
			x.Metadata.Get(middleware.CorrelationIDMetadataKey) != middleware.MessageCorrelationID(src) {
			t.Errorf("output %s: source %q, correlation id %q", x.UUID, x.Metadata.Get(rtSourceKey), x.Metadata.Get(middleware.CorrelationIDMetadataKey))
		}
	}
	if outputs[stuck.UUID] != 1 || outputs[behind.UUID] != 1 || len(outputs) != 2 {
		t.Errorf("outputs per input: %v, want one each of %s and %s", outputs, stuck.UUID, behind.UUID)
	}
	t.Logf("CloseDuringRetry: router Close took %s with Retry waiting (the chain returned %q after %d attempts); "+
		"the next member handled it; took %s", closeTook.Round(time.Millisecond), results1[0], attempts1, time.Since(start).Round(time.Millisecond))
}

func byUUIDOf(uuid string, msgs ...*message.Message) *message.Message {
	for _, m := range msgs {
		if m.UUID == uuid {
			return m
		}
	}
	return nil
}

func rtClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// rtWaitAcked waits until every delivery of each message is acked.
func rtWaitAcked(t *testing.T, journal *rtJournal, msgs []*message.Message) {
	t.Helper()
	deadline := time.NewTimer(rtWait)
	defer deadline.Stop()
	for _, m := range msgs {
		journal.waitUntil(t, "message "+m.UUID+" delivered", func() bool { return len(journal.deliveries[m.UUID]) > 0 }, journal.summaryLocked)
		journal.mu.Lock()
		delivered := append([]*message.Message(nil), journal.deliveries[m.UUID]...)
		journal.mu.Unlock()
		for _, d := range delivered {
			select {
			case <-d.Acked():
			case <-d.Nacked():
				t.Fatalf("message %s (%s) was nacked", m.UUID, m.Metadata.Get(rtKindKey))
			case <-deadline.C:
				t.Fatalf("message %s (%s) not acked within %s", m.UUID, m.Metadata.Get(rtKindKey), rtWait)
			}
		}
	}
}

// rtCheckLeaseObservations checks every look at the lease table: one lease, of the shard,
// always owned by worker at one generation, with nobody asking for it, and the router's
// member never paused. It returns that generation, how many counter values were seen between
// from and to, and the longest the counter stood still in that window.
func rtCheckLeaseObservations(t *testing.T, obs []rtLeaseObs, shardID, worker string, from, to time.Time) (generation int64, counters int, maxStill time.Duration) {
	t.Helper()
	if len(obs) == 0 {
		t.Fatal("no lease observations")
	}
	var lastCounter int64 = -1
	var lastChange time.Time
	bad := 0
	for _, o := range obs {
		problem := ""
		switch {
		case o.err != nil:
			problem = "List: " + o.err.Error()
		case len(o.leases) != 1 || o.leases[0].ShardID != shardID:
			problem = fmt.Sprintf("leases %+v, want one of %s", o.leases, shardID)
		case o.leases[0].Owner != worker:
			problem = fmt.Sprintf("owner %q, want %q", o.leases[0].Owner, worker)
		case generation != 0 && o.leases[0].Generation != generation:
			problem = fmt.Sprintf("generation %d, was %d", o.leases[0].Generation, generation)
		case o.leases[0].PendingOwner != "":
			problem = fmt.Sprintf("pending owner %q", o.leases[0].PendingOwner)
		}
		for _, s := range o.health.Subscriptions {
			for _, sh := range s.Shards {
				if sh.Paused {
					problem += " router's member paused;"
				}
			}
		}
		if !o.health.Healthy {
			problem += fmt.Sprintf(" router's subscriber unhealthy: %v;", o.health.Problems)
		}
		if problem != "" {
			if bad++; bad <= 5 {
				t.Errorf("lease table at %s: %s", o.at.Format(time.RFC3339Nano), problem)
			}
			continue
		}
		l := o.leases[0]
		generation = l.Generation
		if o.at.Before(from) || o.at.After(to) {
			continue
		}
		if l.Counter != lastCounter {
			if lastCounter != -1 {
				maxStill = max(maxStill, o.at.Sub(lastChange))
			}
			counters++
			lastCounter, lastChange = l.Counter, o.at
		}
	}
	if !lastChange.IsZero() {
		maxStill = max(maxStill, to.Sub(lastChange))
	}
	if bad > 5 {
		t.Errorf("... %d bad lease observations in all, of %d", bad, len(obs))
	}
	return generation, counters, maxStill
}
