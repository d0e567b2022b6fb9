package kinesis_test

// Helpers of the consumer-group tests (group_test.go). Every name starts with "grp" so that
// nothing here collides with the helpers of other test files of package kinesis_test.
//
// A grpWorld is one stream in memlog, one lease.MemoryStore and the instances (grpWorker) of
// one consumer group, all made inside one testing/synctest bubble: the test runs in
// synctest.Test, and the driver, memlog and the store read the bubble's fake time. Time moves
// only when the test sleeps (step); after each step the test waits until every goroutine of
// the bubble is durably blocked again (settle, synctest.Wait), so what happened at one fake
// instant is complete before time moves on, however slow the machine. The figures the tests
// log are fake time, and do not depend on the machine either.

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.opentelemetry.io/otel/metric"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

const (
	// grpStep is how far fake time moves per step: the resolution of every figure.
	grpStep = 100 * time.Millisecond
	// The driver's defaults, which these tests keep (a zero field in the config means them).
	grpLeaseDuration   = 10 * time.Second
	grpRenewInterval   = grpLeaseDuration / 3
	grpSyncInterval    = 2 * time.Second
	grpHandoffTimeout  = 10 * time.Second
	grpCheckpointEvery = 5 * time.Second
)

// grpEpochTime is where the fake time of a synctest bubble starts (the testing/synctest
// documentation promises midnight UTC, 2000-01-01): a world made at the start of its bubble
// starts there.
var grpEpochTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// errGrpDown is what a cut-off store or client returns.
var errGrpDown = errors.New("grp: this instance is cut off")

// grpMsg is one published message.
type grpMsg struct {
	shard int // index of the shard its key routes to
	n     int // its rank among the messages published to that shard, from 0
}

// grpDelivery is one message a worker's consumer received.
type grpDelivery struct {
	worker string
	uuid   string
	shard  string
	seq    string
	n      int
	at     time.Time // fake time
	epoch  int
	acked  bool // the consumer acked it (as it received it)
	msg    *message.Message
}

// grpTenure is one worker's time as the reader of one shard: from its successful Take to its
// reader's OnRevoked or OnLost.
type grpTenure struct {
	open        bool
	gen         int64
	closedEpoch int
	closedAt    time.Time
}

type grpWorld struct {
	t    *testing.T
	e    *subEnv
	pub  *kinesis.Publisher
	keys []string // a partition key per shard index
	n    int

	mu         sync.Mutex
	epoch      int
	workers    []*grpWorker
	published  map[string]grpMsg
	pubOrder   []string
	nextN      []int
	deliveries []grpDelivery
	tenures    map[string]map[string]*grpTenure // shard -> worker
	extraEnds  map[string]int                   // "worker shard hook" -> end hooks with no open tenure
	violations []string
	reported   int
	publishing bool
	// meter, when set, is the MeterProvider of every instance started from then on.
	meter metric.MeterProvider
	// foreign, when set, makes every instance's store a lease.ForeignTable with these foreign
	// workers (a KCL application's table): List marks the leases of kcl-* Foreign, and those
	// of foreignAs too (a KCL worker under an instance's id).
	foreign, foreignAs string
	// resetFenced, when set, lets a reader stay open on a lease a reset (admin.ResetGroup)
	// moved from under it: held by the reset, or given back to the same worker in a later
	// generation. Such a reader is fenced and stops at its next renewal; the reset tests bound
	// its deliveries themselves. Two readers of one shard at once stay a violation.
	resetFenced bool
	// leaseSeen tracks, per shard, the lease's (owner, generation, counter) and the fake time
	// the test first saw it at (checked after every step).
	leaseSeen map[string]grpSeen
}

type grpSeen struct {
	owner   string
	gen     int64
	counter int64
	since   time.Time
}

// newGrpWorld makes a stream of n shards and a keyed publisher that can address each shard.
// It is called inside a synctest bubble (synctest.Test), with the bubble's t.
func newGrpWorld(t *testing.T, n int) *grpWorld {
	t.Helper()
	e := newSubEnv(t, int32(n), nil)
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client: e.log, PartitionKey: kinesis.PartitionKeyFromMetadata("pk"),
	}, nil)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	w := &grpWorld{
		t: t, e: e, pub: pub, n: n,
		published: map[string]grpMsg{},
		nextN:     make([]int, n),
		tenures:   map[string]map[string]*grpTenure{},
		extraEnds: map[string]int{},
		leaseSeen: map[string]grpSeen{},
	}
	w.keys = grpKeys(t, e, n)
	t.Cleanup(func() {
		// After a failure: let every instance go, so that Close does not wait on a cut-off
		// store, then close them all.
		for _, wk := range w.workerList() {
			wk.store.setMode(grpPass)
			wk.client.dead.Store(false)
			_ = wk.sub.Close()
		}
		_ = pub.Close()
	})
	return w
}

// grpKeys finds, for each shard, a partition key that memlog routes to it (the MD5 of the key
// read as a 128-bit big-endian number falls in the shard's hash key range).
func grpKeys(t *testing.T, e *subEnv, n int) []string {
	t.Helper()
	out, err := e.log.ListShards(context.Background(), &awskinesis.ListShardsInput{StreamName: aws.String(e.stream)})
	if err != nil {
		t.Fatalf("ListShards: %v", err)
	}
	type rng struct{ lo, hi *big.Int }
	ranges := make([]rng, n)
	for _, s := range out.Shards {
		var idx int
		if _, err := fmt.Sscanf(aws.ToString(s.ShardId), "shardId-%d", &idx); err != nil || idx >= n {
			t.Fatalf("unexpected shard %q", aws.ToString(s.ShardId))
		}
		lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
		hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
		ranges[idx] = rng{lo, hi}
	}
	keys := make([]string, n)
	found := 0
	for i := 0; found < n; i++ {
		key := fmt.Sprintf("key-%d", i)
		sum := md5.Sum([]byte(key))
		h := new(big.Int).SetBytes(sum[:])
		for idx, r := range ranges {
			if keys[idx] == "" && r.lo.Cmp(h) <= 0 && h.Cmp(r.hi) <= 0 {
				keys[idx] = key
				found++
			}
		}
	}
	return keys
}

// now is the bubble's fake time.
func (w *grpWorld) now() time.Time { return time.Now() }

// since is fake time elapsed since at.
func (w *grpWorld) since(at time.Time) time.Duration { return w.now().Sub(at) }

// grpRel is a fake instant as the time since the bubble started, for logs.
func grpRel(at time.Time) time.Duration { return at.Sub(grpEpochTime) }

func (w *grpWorld) workerList() []*grpWorker {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*grpWorker(nil), w.workers...)
}

func (w *grpWorld) bumpEpoch() {
	w.mu.Lock()
	w.epoch++
	w.mu.Unlock()
}

// publishTo publishes count messages to shard idx.
func (w *grpWorld) publishTo(idx, count int) []string {
	w.t.Helper()
	msgs := make([]*message.Message, 0, count)
	w.mu.Lock()
	for range count {
		n := w.nextN[idx]
		w.nextN[idx]++
		uuid := fmt.Sprintf("s%02d-%05d", idx, n)
		m := message.NewMessage(uuid, []byte(uuid))
		m.Metadata.Set("pk", w.keys[idx])
		msgs = append(msgs, m)
		w.published[uuid] = grpMsg{shard: idx, n: n}
		w.pubOrder = append(w.pubOrder, uuid)
	}
	w.mu.Unlock()
	if err := w.pub.Publish(w.e.stream, msgs...); err != nil {
		w.t.Fatalf("Publish: %v", err)
	}
	uuids := make([]string, len(msgs))
	for i, m := range msgs {
		uuids[i] = m.UUID
	}
	return uuids
}

// publishRound publishes one message to every shard.
func (w *grpWorld) publishRound() {
	w.t.Helper()
	for i := range w.n {
		w.publishTo(i, 1)
	}
}

// step publishes a round (if publishing is on), lets grpStep of fake time pass and settles.
// The sleep returns once every timer due within the step has fired and what it woke has run
// to its next durable block, at each timer's own instant.
func (w *grpWorld) step() {
	w.t.Helper()
	w.mu.Lock()
	publishing := w.publishing
	w.epoch++
	w.mu.Unlock()
	if publishing {
		w.publishRound()
	}
	time.Sleep(grpStep)
	w.settle()
}

// steps takes steps for d of fake time.
func (w *grpWorld) steps(d time.Duration) {
	w.t.Helper()
	for end := w.now().Add(d); w.now().Before(end); {
		w.step()
	}
}

// runUntil takes steps until cond holds (checked before the first step too) and returns the
// fake time that took; it fails the test if cond does not hold within limit.
func (w *grpWorld) runUntil(what string, limit time.Duration, cond func() bool) time.Duration {
	w.t.Helper()
	start := w.now()
	for !cond() {
		if w.since(start) >= limit {
			w.t.Fatalf("%s: not reached within %s of fake time; leases: %s", what, limit, w.leaseSummary())
		}
		w.step()
	}
	return w.since(start)
}

// settle waits until every goroutine of the bubble (driver, memlog, consumers) is durably
// blocked, then checks the invariants. A goroutine that never blocks again (a busy loop)
// makes synctest.Wait, and so the test, hang until go test's -timeout prints every stack.
func (w *grpWorld) settle() {
	w.t.Helper()
	synctest.Wait()
	w.check()
}

// violate records a broken invariant; check reports it.
func (w *grpWorld) violateLocked(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf("fake %s: ", grpRel(time.Now()))+fmt.Sprintf(format, args...))
}

// check verifies, at a settled instant: every open tenure is the store's owner of its lease, in
// the generation it took (so no instance reads a shard it lost); at most one open tenure per
// shard. It also tracks when each lease last changed, and reports new violations.
func (w *grpWorld) check() {
	w.t.Helper()
	list := w.leases()
	now := w.now()
	w.mu.Lock()
	byShard := map[string]lease.Lease{}
	for _, l := range list {
		byShard[l.ShardID] = l
		prev, ok := w.leaseSeen[l.ShardID]
		if !ok || prev.owner != l.Owner || prev.gen != l.Generation || prev.counter != l.Counter {
			w.leaseSeen[l.ShardID] = grpSeen{owner: l.Owner, gen: l.Generation, counter: l.Counter, since: now}
		}
	}
	for shard, ts := range w.tenures {
		var open []string
		for worker, tn := range ts {
			if !tn.open {
				continue
			}
			open = append(open, worker)
			l := byShard[shard]
			fenced := w.resetFenced && (strings.HasPrefix(l.Owner, "kinesis-reset/") || l.Owner == worker && l.Generation > tn.gen)
			if (l.Owner != worker || l.Generation != tn.gen) && !fenced {
				w.violateLocked("%s still reads %s (took generation %d, no revoked/lost hook yet) but the lease is owner %q generation %d",
					worker, shard, tn.gen, l.Owner, l.Generation)
			}
		}
		if len(open) > 1 {
			sort.Strings(open)
			w.violateLocked("shard %s read by %v at once", shard, open)
		}
	}
	fresh := w.violations[w.reported:]
	w.reported = len(w.violations)
	w.mu.Unlock()
	for _, v := range fresh {
		w.t.Errorf("invariant broken: %s", v)
	}
}

// leases lists the group's leases straight from the shared store.
func (w *grpWorld) leases() []lease.Lease {
	w.t.Helper()
	list, err := w.e.store.List(context.Background(), subGroup, w.e.stream)
	if err != nil {
		w.t.Fatalf("List leases: %v", err)
	}
	return list
}

func (w *grpWorld) lease(shard string) lease.Lease {
	w.t.Helper()
	for _, l := range w.leases() {
		if l.ShardID == shard {
			return l
		}
	}
	w.t.Fatalf("no lease of %s", shard)
	return lease.Lease{}
}

// owned lists the shards whose lease worker owns, in order.
func (w *grpWorld) owned(worker string) []string {
	var out []string
	for _, l := range w.leases() {
		if l.Owner == worker {
			out = append(out, l.ShardID)
		}
	}
	return out
}

func (w *grpWorld) leaseSummary() string {
	var b strings.Builder
	for _, l := range w.leases() {
		fmt.Fprintf(&b, "[%s owner=%q gen=%d ctr=%d pending=%q] ", l.ShardID, l.Owner, l.Generation, l.Counter, l.PendingOwner)
	}
	return b.String()
}

func (w *grpWorld) opSummary() string {
	var parts []string
	for _, wk := range w.workerList() {
		parts = append(parts, wk.id+": "+wk.store.summary())
	}
	return strings.Join(parts, "; ")
}

// spread reports whether the leases are settled evenly over exactly the given workers: every
// lease owned by one of them and read by it (an open tenure of that generation), no request
// pending, and lease counts that differ by at most one.
func (w *grpWorld) spread(ids ...string) bool {
	list := w.leases()
	counts := map[string]int{}
	for _, id := range ids {
		counts[id] = 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range list {
		if _, ok := counts[l.Owner]; !ok || l.PendingOwner != "" {
			return false
		}
		tn := w.tenures[l.ShardID][l.Owner]
		if tn == nil || !tn.open || tn.gen != l.Generation {
			return false
		}
		counts[l.Owner]++
	}
	lo, hi := len(list), 0
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	return hi-lo <= 1
}

// counts is how many leases each worker owns, for logs.
func (w *grpWorld) counts(ids ...string) string {
	c := map[string]int{}
	for _, l := range w.leases() {
		c[l.Owner]++
	}
	var parts []string
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%s=%d", id, c[id]))
	}
	return strings.Join(parts, " ")
}

// onTake opens worker's tenure of shard; no other tenure of the shard may be open then.
func (w *grpWorld) onTake(worker, shard string, gen int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ts := w.tenures[shard]
	if ts == nil {
		ts = map[string]*grpTenure{}
		w.tenures[shard] = ts
	}
	for other, tn := range ts {
		if tn.open {
			w.violateLocked("%s took %s (generation %d) while %s still reads it (no revoked/lost hook yet)", worker, shard, gen, other)
		}
	}
	ts[worker] = &grpTenure{open: true, gen: gen}
}

// onResume reopens worker's tenure of shard when a paused reader renewed its lease and was
// acquired again without a new take (a take has opened the tenure already); no other tenure
// of the shard may be open then.
func (w *grpWorld) onResume(worker, shard string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tn := w.tenures[shard][worker]
	if tn == nil || tn.open {
		return
	}
	for other, o := range w.tenures[shard] {
		if o.open {
			w.violateLocked("%s resumed %s (generation %d) while %s reads it", worker, shard, tn.gen, other)
		}
	}
	tn.open = true
}

// onEnd closes worker's tenure of shard (OnRevoked or OnLost).
func (w *grpWorld) onEnd(worker, shard, hook string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tn := w.tenures[shard][worker]
	if tn == nil || !tn.open {
		w.extraEnds[worker+" "+shard+" "+hook]++
		return
	}
	tn.open, tn.closedEpoch, tn.closedAt = false, w.epoch, time.Now()
}

// record notes a delivery; a worker may deliver a shard only while it reads it (or in the
// epoch its tenure ended: the message was sent before the end hook ran).
func (w *grpWorld) record(worker string, m *message.Message, acked bool) grpDelivery {
	info, _ := kinesis.RecordFromContext(m.Context())
	w.mu.Lock()
	defer w.mu.Unlock()
	pm, known := w.published[m.UUID]
	d := grpDelivery{
		worker: worker, uuid: m.UUID, shard: info.ShardID, seq: info.SequenceNumber, n: pm.n,
		at: time.Now(), epoch: w.epoch, acked: acked, msg: m,
	}
	if !known {
		w.violateLocked("%s delivered %s, which was never published", worker, m.UUID)
	} else if want := subShard(pm.shard); info.ShardID != want {
		w.violateLocked("%s came from %s, its key routes to %s", m.UUID, info.ShardID, want)
	}
	tn := w.tenures[info.ShardID][worker]
	if tn == nil || (!tn.open && tn.closedEpoch != w.epoch) {
		w.violateLocked("%s delivered %s from %s without reading that shard", worker, m.UUID, info.ShardID)
	}
	w.deliveries = append(w.deliveries, d)
	return d
}

// deliveredSet is which published messages were delivered at least once.
func (w *grpWorld) delivered() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, d := range w.deliveries {
		out[d.uuid]++
	}
	return out
}

// missing lists published messages never delivered.
func (w *grpWorld) missing() []string {
	got := w.delivered()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, u := range w.pubOrder {
		if got[u] == 0 {
			out = append(out, u)
		}
	}
	return out
}

// duplicates lists the messages delivered more than once, with their count.
func (w *grpWorld) duplicates() map[string]int {
	out := map[string]int{}
	for u, c := range w.delivered() {
		if c > 1 {
			out[u] = c
		}
	}
	return out
}

// deliveriesOf lists the deliveries that match f, in the order they were recorded.
func (w *grpWorld) deliveriesOf(f func(grpDelivery) bool) []grpDelivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []grpDelivery
	for _, d := range w.deliveries {
		if f(d) {
			out = append(out, d)
		}
	}
	return out
}

// allDelivered takes steps until every published message was delivered.
func (w *grpWorld) allDelivered(limit time.Duration) {
	w.t.Helper()
	start := w.now()
	for {
		miss := w.missing()
		if len(miss) == 0 {
			return
		}
		if w.since(start) >= limit {
			w.t.Fatalf("%d published messages never delivered (first %v); leases: %s", len(miss), miss[:min(5, len(miss))], w.leaseSummary())
		}
		w.step()
	}
}

// inOrderOnce checks that each shard's messages were delivered exactly once each and in the
// order they were published: per shard, the n of successive deliveries is 0, 1, 2, ...
func (w *grpWorld) inOrderOnce() {
	w.t.Helper()
	next := make(map[string]int)
	for _, d := range w.deliveriesOf(func(grpDelivery) bool { return true }) {
		if d.n != next[d.shard] {
			w.t.Errorf("%s: delivered %s (rank %d) by %s when rank %d was next", d.shard, d.uuid, d.n, d.worker, next[d.shard])
			return
		}
		next[d.shard]++
	}
}

// ---- workers ----

// grpWorker is one instance of the group: a Subscriber with its own WorkerID, lease store
// wrapper and Kinesis client wrapper, and a consumer goroutine that records and acks.
type grpWorker struct {
	w      *grpWorld
	id     string
	store  *grpStore
	client *grpClient
	sub    *kinesis.Subscriber
	logs   *fltLogger // what the instance logged (fault_helpers_test.go)
	done   chan struct{}
	dead   atomic.Bool // the consumer drops what it receives (a crashed process)

	mu     sync.Mutex
	hold   func(shard string) bool // messages of these shards are kept, not acked
	held   []grpDelivery
	events []grpEvent
	closed bool
}

type grpEvent struct {
	hook  string // "acquired", "revoked", "lost"
	shard string
	at    time.Time
}

// newWorker builds an instance reading through client: its view of the lease store, its
// Kinesis client (which a test can make fail) and the SubscriberConfig every instance of
// these tests uses, with its hooks recorded.
func (w *grpWorld) newWorker(id string, client kinesis.KinesisAPI) (*grpWorker, kinesis.SubscriberConfig) {
	wk := &grpWorker{w: w, id: id, done: make(chan struct{}), logs: &fltLogger{}}
	wk.store = &grpStore{inner: w.e.store, w: w, worker: id, gate: make(chan struct{})}
	wk.client = &grpClient{KinesisAPI: client}
	return wk, kinesis.SubscriberConfig{
		Client: wk.client,
		Group: kinesis.GroupConfig{
			Name:       subGroup,
			LeaseStore: wk.store,
			WorkerID:   id,
			Hooks: kinesis.ShardHooks{
				OnAcquired: func(ev kinesis.ShardEvent) { wk.event("acquired", ev) },
				OnRevoked:  func(ev kinesis.ShardEvent) { wk.event("revoked", ev) },
				OnLost:     func(ev kinesis.ShardEvent) { wk.event("lost", ev) },
			},
		},
		// A reader's wait at the tip is PollInterval an eighth more or less at random: at 4/5
		// of a step, every step has a poll of every shard (the wait is at most 0.9 of a step).
		PollInterval:    grpStep * 4 / 5,
		MinReadInterval: grpStep / 2,
		CloseTimeout:    subWait,
		MeterProvider:   w.meter,
	}
}

// start starts an instance: Subscribe takes what leases it should before it returns.
func (w *grpWorld) start(id string) *grpWorker {
	w.t.Helper()
	return w.startWith(id, nil)
}

// startWith is start with the instance's configuration changed by tune (if not nil) first.
func (w *grpWorld) startWith(id string, tune func(*kinesis.SubscriberConfig)) *grpWorker {
	w.t.Helper()
	w.bumpEpoch()
	wk, cfg := w.newWorker(id, w.e.log)
	if tune != nil {
		tune(&cfg)
	}
	sub, err := kinesis.NewSubscriber(cfg, wk.logs.worker(id))
	if err != nil {
		w.t.Fatalf("NewSubscriber %s: %v", id, err)
	}
	wk.sub = sub
	w.mu.Lock()
	w.workers = append(w.workers, wk)
	w.mu.Unlock()
	ch, err := w.subscribe(sub)
	if err != nil {
		w.t.Fatalf("Subscribe %s: %v", id, err)
	}
	go wk.consume(ch)
	w.settle()
	return wk
}

// subscribe calls Subscribe on a goroutine of its own and takes steps of fake time until it
// returns: a Subscribe whose first sync fails (firstSync) tries again after a backoff of fake
// time.
func (w *grpWorld) subscribe(sub *kinesis.Subscriber) (<-chan *message.Message, error) {
	w.t.Helper()
	type result struct {
		ch  <-chan *message.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		ch, err := sub.Subscribe(context.Background(), w.e.stream)
		done <- result{ch, err}
	}()
	for {
		w.settle()
		select {
		case r := <-done:
			return r.ch, r.err
		default:
			w.step()
		}
	}
}

func (wk *grpWorker) event(hook string, ev kinesis.ShardEvent) {
	if ev.WorkerID != wk.id || ev.ConsumerGroup != subGroup || ev.Stream != wk.w.e.stream {
		wk.w.mu.Lock()
		wk.w.violateLocked("%s's %s hook got event %+v", wk.id, hook, ev)
		wk.w.mu.Unlock()
	}
	wk.mu.Lock()
	wk.events = append(wk.events, grpEvent{hook: hook, shard: ev.ShardID, at: time.Now()})
	wk.mu.Unlock()
	if hook == "acquired" {
		wk.w.onResume(wk.id, ev.ShardID)
	} else {
		wk.w.onEnd(wk.id, ev.ShardID, hook)
	}
}

// eventsOf lists the worker's hook calls of one kind for one shard (all shards if "").
func (wk *grpWorker) eventsOf(hook, shard string) []grpEvent {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	var out []grpEvent
	for _, e := range wk.events {
		if e.hook == hook && (shard == "" || e.shard == shard) {
			out = append(out, e)
		}
	}
	return out
}

// consume records and acks every message, except those of held shards (kept unacked) and
// everything once the worker is dead (dropped).
func (wk *grpWorker) consume(ch <-chan *message.Message) {
	defer close(wk.done)
	for m := range ch {
		if wk.dead.Load() {
			continue
		}
		shard, _ := kinesis.ShardIDFromContext(m.Context())
		wk.mu.Lock()
		hold := wk.hold != nil && wk.hold(shard)
		wk.mu.Unlock()
		d := wk.w.record(wk.id, m, !hold)
		if hold {
			wk.mu.Lock()
			wk.held = append(wk.held, d)
			wk.mu.Unlock()
			continue
		}
		m.Ack()
	}
}

// setHold makes the consumer keep (not ack) messages of the shards f selects.
func (wk *grpWorker) setHold(f func(shard string) bool) {
	wk.mu.Lock()
	wk.hold = f
	wk.mu.Unlock()
}

// heldMsgs lists the messages kept unacked.
func (wk *grpWorker) heldMsgs() []grpDelivery {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	return append([]grpDelivery(nil), wk.held...)
}

// close closes the instance's Subscriber and waits for its consumer to finish.
func (w *grpWorld) close(wk *grpWorker) {
	w.t.Helper()
	w.bumpEpoch()
	if err := wk.sub.Close(); err != nil {
		w.t.Errorf("Close %s: %v", wk.id, err)
	}
	select {
	case <-wk.done:
	case <-time.After(subWait):
		w.t.Fatalf("%s's channel was not closed after Close", wk.id)
	}
	wk.mu.Lock()
	wk.closed = true
	wk.mu.Unlock()
	w.settle()
}

// ---- the lease store of one instance ----

const (
	grpPass = iota // calls go to the shared store
	grpFail        // calls fail at once (the store is unreachable)
	grpHang        // calls wait until the mode changes or their context ends (a paused process)
)

// grpStore is one instance's view of the shared lease store. It logs every call with the
// fake time it was made at, and can cut the instance off.
type grpStore struct {
	inner  lease.Store
	w      *grpWorld
	worker string

	mu   sync.Mutex
	mode int
	gate chan struct{} // closed when a grpHang mode ends
	ops  []grpOp
	// beatsDown fails the instance's Heartbeats alone (a throttled member partition): its
	// lease calls go through.
	beatsDown bool
}

// setBeatsDown fails (or lets through again) the instance's Heartbeats alone.
func (s *grpStore) setBeatsDown(down bool) {
	s.mu.Lock()
	s.beatsDown = down
	s.mu.Unlock()
}

// grpOp is one call of an instance to its lease store.
type grpOp struct {
	op      string
	shard   string
	at      time.Time // fake time when the call was made
	end     time.Time // fake time when it returned
	in      lease.Lease
	out     lease.Lease
	list    []lease.Lease
	members []lease.Member // what a member read returned
	member  lease.Member   // what a Heartbeat returned
	err     error
	reached bool // the call got to the shared store (it was not cut off)
}

var _ lease.Store = (*grpStore)(nil)

// ForeignWorkers implements lease.ForeignTable with the world's foreign workers ("" if none),
// whose leases List marks Foreign.
func (s *grpStore) ForeignWorkers() string { return s.w.foreign }

// setMode cuts the instance off (grpFail, grpHang) or lets it through again (grpPass); calls
// waiting in grpHang go on to the shared store when the mode changes.
func (s *grpStore) setMode(mode int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mode == grpHang && mode != grpHang {
		close(s.gate)
		s.gate = make(chan struct{})
	}
	s.mode = mode
}

// enter applies the mode to one call; nil means go on to the shared store.
func (s *grpStore) enter(ctx context.Context) error {
	for {
		s.mu.Lock()
		mode, gate := s.mode, s.gate
		s.mu.Unlock()
		switch mode {
		case grpFail:
			return errGrpDown
		case grpHang:
			select {
			case <-gate:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
}

func (s *grpStore) log(op grpOp) {
	op.end = time.Now()
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.mu.Unlock()
}

// opsOf lists the calls of one operation (all if op is "") on one shard (all if shard is "").
func (s *grpStore) opsOf(op, shard string) []grpOp {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []grpOp
	for _, o := range s.ops {
		if (op == "" || o.op == op) && (shard == "" || o.shard == shard) {
			out = append(out, o)
		}
	}
	return out
}

func (s *grpStore) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, failed := map[string]int{}, map[string]int{}
	for _, o := range s.ops {
		if o.err == nil {
			ok[o.op]++
		} else {
			failed[o.op]++
		}
	}
	var parts []string
	for _, op := range []string{lease.OpList, lease.OpCreate, lease.OpTake, lease.OpRenew, lease.OpCheckpoint, lease.OpRelease, lease.OpRequestHandoff, lease.OpHandoff} {
		if ok[op]+failed[op] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d ok %d failed", op, ok[op], failed[op]))
		}
	}
	return strings.Join(parts, ", ")
}

// call runs one owner- or taker-side call through the mode and the log.
func (s *grpStore) call(ctx context.Context, op string, in lease.Lease, f func() (lease.Lease, error)) (lease.Lease, error) {
	rec := grpOp{op: op, shard: in.ShardID, at: time.Now(), in: in}
	if err := s.enter(ctx); err != nil {
		rec.err = err
		s.log(rec)
		return lease.Lease{}, err
	}
	rec.reached = true
	out, err := f()
	rec.out, rec.err = out, err
	if op == lease.OpTake && err == nil {
		s.w.onTake(s.worker, out.ShardID, out.Generation)
	}
	s.log(rec)
	return out, err
}

func (s *grpStore) Create(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	return s.call(ctx, lease.OpCreate, l, func() (lease.Lease, error) { return s.inner.Create(ctx, l) })
}

func (s *grpStore) List(ctx context.Context, group, stream string) ([]lease.Lease, error) {
	rec := grpOp{op: lease.OpList, at: time.Now()}
	if err := s.enter(ctx); err != nil {
		rec.err = err
		s.log(rec)
		return nil, err
	}
	rec.reached = true
	list, err := s.inner.List(ctx, group, stream)
	if s.w.foreign != "" {
		// As a kcl.Store reads them: a lease a KCL worker (kcl-*) holds is foreign.
		for i := range list {
			list[i].Foreign = strings.HasPrefix(list[i].Owner, "kcl-") || list[i].Owner != "" && list[i].Owner == s.w.foreignAs
		}
	}
	rec.list, rec.err = list, err
	s.log(rec)
	return list, err
}

func (s *grpStore) Take(ctx context.Context, observed lease.Lease, owner string) (lease.Lease, error) {
	return s.call(ctx, lease.OpTake, observed, func() (lease.Lease, error) { return s.inner.Take(ctx, observed, owner) })
}

func (s *grpStore) Renew(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.call(ctx, lease.OpRenew, held, func() (lease.Lease, error) { return s.inner.Renew(ctx, held) })
}

func (s *grpStore) Checkpoint(ctx context.Context, held lease.Lease, checkpoint string) (lease.Lease, error) {
	return s.call(ctx, lease.OpCheckpoint, held, func() (lease.Lease, error) { return s.inner.Checkpoint(ctx, held, checkpoint) })
}

func (s *grpStore) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.call(ctx, lease.OpRelease, held, func() (lease.Lease, error) { return s.inner.Release(ctx, held) })
}

func (s *grpStore) RequestHandoff(ctx context.Context, observed lease.Lease, taker string) (lease.Lease, error) {
	return s.call(ctx, lease.OpRequestHandoff, observed, func() (lease.Lease, error) { return s.inner.RequestHandoff(ctx, observed, taker) })
}

func (s *grpStore) Handoff(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.call(ctx, lease.OpHandoff, held, func() (lease.Lease, error) { return s.inner.Handoff(ctx, held) })
}

func (s *grpStore) DeleteFinished(ctx context.Context, observed lease.Lease) error {
	_, err := s.call(ctx, lease.OpDeleteFinished, observed, func() (lease.Lease, error) {
		return lease.Lease{}, s.inner.DeleteFinished(ctx, observed)
	})
	return err
}

var _ lease.Membership = (*grpStore)(nil)

// Heartbeat implements lease.Membership through the mode and the log; beatsDown fails it alone.
func (s *grpStore) Heartbeat(ctx context.Context, m lease.Member) (lease.Member, error) {
	rec := grpOp{op: lease.OpHeartbeat, at: time.Now()}
	s.mu.Lock()
	beatsDown := s.beatsDown
	s.mu.Unlock()
	if beatsDown {
		rec.err = errGrpDown
		s.log(rec)
		return lease.Member{}, errGrpDown
	}
	if err := s.enter(ctx); err != nil {
		rec.err = err
		s.log(rec)
		return lease.Member{}, err
	}
	rec.reached = true
	out, err := s.inner.(lease.Membership).Heartbeat(ctx, m)
	rec.member, rec.err = out, err
	s.log(rec)
	return out, err
}

func (s *grpStore) NotifyMember(ctx context.Context, m lease.Member) error {
	_, err := s.call(ctx, lease.OpNotifyMember, lease.Lease{}, func() (lease.Lease, error) {
		return lease.Lease{}, s.inner.(lease.Membership).NotifyMember(ctx, m)
	})
	return err
}

func (s *grpStore) Members(ctx context.Context, group, stream string) ([]lease.Member, error) {
	rec := grpOp{op: lease.OpMembers, at: time.Now()}
	if err := s.enter(ctx); err != nil {
		rec.err = err
		s.log(rec)
		return nil, err
	}
	rec.reached = true
	ms, err := s.inner.(lease.Membership).Members(ctx, group, stream)
	rec.members, rec.err = ms, err
	s.log(rec)
	return ms, err
}

func (s *grpStore) RemoveMember(ctx context.Context, observed lease.Member) error {
	_, err := s.call(ctx, lease.OpRemoveMember, lease.Lease{}, func() (lease.Lease, error) {
		return lease.Lease{}, s.inner.(lease.Membership).RemoveMember(ctx, observed)
	})
	return err
}

// lastOwnerWrite is the fake time of the instance's last successful write that proves it
// alive on shard (Take, Renew, Checkpoint), and the lease it returned.
func (s *grpStore) lastOwnerWrite(shard string) (time.Time, lease.Lease) {
	var at time.Time
	var l lease.Lease
	for _, o := range s.opsOf("", shard) {
		switch o.op {
		case lease.OpTake, lease.OpRenew, lease.OpCheckpoint:
			if o.err == nil && !o.at.Before(at) {
				at, l = o.at, o.out
			}
		}
	}
	return at, l
}

// ---- the Kinesis client of one instance ----

// grpClient is one instance's Kinesis client; once dead, its reads fail as a network that is
// gone does (a transient error, retried with backoff).
type grpClient struct {
	kinesis.KinesisAPI
	dead atomic.Bool
}

func (c *grpClient) down() error {
	return &types.InternalFailureException{Message: aws.String(errGrpDown.Error())}
}

func (c *grpClient) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, opts ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	if c.dead.Load() {
		return nil, c.down()
	}
	return c.KinesisAPI.GetRecords(ctx, in, opts...)
}

func (c *grpClient) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, opts ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	if c.dead.Load() {
		return nil, c.down()
	}
	return c.KinesisAPI.GetShardIterator(ctx, in, opts...)
}

func (c *grpClient) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, opts ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	if c.dead.Load() {
		return nil, c.down()
	}
	return c.KinesisAPI.ListShards(ctx, in, opts...)
}
