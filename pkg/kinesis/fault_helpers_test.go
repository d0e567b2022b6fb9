package kinesis_test

// Helpers of the fault suite (faults_test.go). Every name starts with "flt" so that nothing here
// collides with the helpers of other test files of package kinesis_test.
//
// A fltWorld is a grpWorld (group_helpers_test.go: one memlog stream, one lease.MemoryStore,
// instances that record and ack, all in one synctest bubble, steps of fake time with a settle
// after each) with three additions:
//   - memlog's iterators expire after five minutes of fake time and its arrival timestamps
//     are fake instants (the delay of a delivery is its fake time minus its record's arrival),
//     as in every grpWorld, since memlog reads the bubble's time too;
//   - memlog's fault hook (memlog.Log.SetFault) counts every Kinesis call, stamped with fake
//     time, and applies the scenario's rule, which can fail any call;
//   - every instance logs to a fltLogger, which keeps what the driver logged, with the fake time.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

type fltWorld struct {
	*grpWorld
	kin  *fltKinesis
	logs *fltLogger
	// fanOut starts every instance with enhanced fan-out (SubscriberConfig.FanOut).
	fanOut bool
}

// newFltWorld is newGrpWorld with the counting fault hook installed and a publisher whose
// retries do not wait (a backoff of a nanosecond). Like newGrpWorld, it is called inside a
// synctest bubble.
func newFltWorld(t *testing.T, n int) *fltWorld {
	t.Helper()
	e := &subEnv{t: t, log: memlog.New(memlog.Config{}), store: lease.NewMemoryStore(), stream: subStream}
	if _, err := e.log.CreateStream(context.Background(), &awskinesis.CreateStreamInput{
		StreamName: aws.String(e.stream), ShardCount: aws.Int32(int32(n)),
	}); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client: e.log, PartitionKey: kinesis.PartitionKeyFromMetadata("pk"),
		RetryBackoff: time.Nanosecond, MaxRetryBackoff: time.Nanosecond,
	}, nil)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	e.pub = pub
	w := &grpWorld{
		t: t, e: e, pub: pub, n: n,
		published: map[string]grpMsg{},
		nextN:     make([]int, n),
		tenures:   map[string]map[string]*grpTenure{},
		extraEnds: map[string]int{},
		leaseSeen: map[string]grpSeen{},
	}
	w.keys = grpKeys(t, e, n)
	fw := &fltWorld{grpWorld: w, kin: &fltKinesis{}, logs: &fltLogger{}}
	e.log.SetFault(fw.kin.hook)
	t.Cleanup(func() {
		e.log.SetFault(nil)
		e.log.SetPutRecordsEntryFault(nil)
		e.store.SetFault(nil)
		for _, wk := range w.workerList() {
			wk.store.setMode(grpPass)
			wk.client.dead.Store(false)
			_ = wk.sub.Close()
		}
		_ = pub.Close()
	})
	return fw
}

// start is grpWorld.start with the instance's log going to w.logs and its Kinesis calls'
// outcomes to w.kin; tweak, if not nil, adjusts the config.
func (w *fltWorld) start(id string, tweak func(*kinesis.SubscriberConfig)) *grpWorker {
	w.t.Helper()
	wk, err := w.tryStart(id, tweak)
	if err != nil {
		w.t.Fatalf("Subscribe %s: %v", id, err)
	}
	return wk
}

// tryStart starts an instance and returns Subscribe's error, if any.
func (w *fltWorld) tryStart(id string, tweak func(*kinesis.SubscriberConfig)) (*grpWorker, error) {
	w.t.Helper()
	w.bumpEpoch()
	wk, cfg := w.newWorker(id, &fltClient{KinesisAPI: w.e.log, k: w.kin, worker: id})
	cfg.FanOut.Enabled = w.fanOut
	if tweak != nil {
		tweak(&cfg)
	}
	sub, err := kinesis.NewSubscriber(cfg, w.logs.worker(id))
	if err != nil {
		w.t.Fatalf("NewSubscriber %s: %v", id, err)
	}
	wk.sub = sub
	ch, err := w.subscribe(sub)
	if err != nil {
		_ = sub.Close()
		w.settle()
		return nil, err
	}
	w.mu.Lock()
	w.workers = append(w.workers, wk)
	w.mu.Unlock()
	go wk.consume(ch)
	w.settle()
	return wk, nil
}

// stepsBy lets d of fake time pass, stride at a time, publishing a round before each stride if
// publishing is on and settling after each: a long stretch of fake time at fewer settles than
// steps. stride must stay well under LeaseRenewInterval.
func (w *fltWorld) stepsBy(d, stride time.Duration) {
	w.t.Helper()
	for end := w.now().Add(d); w.now().Before(end); {
		w.mu.Lock()
		publishing := w.publishing
		w.epoch++
		w.mu.Unlock()
		if publishing {
			w.publishRound()
		}
		time.Sleep(stride)
		w.settle()
	}
}

// publishMixed publishes, in one Publish call, perShard messages to every shard, interleaved
// (shard 0, 1, ..., n-1, 0, 1, ...): each call has several records per partition key, so that
// the publisher's rounds and retries decide their order.
func (w *fltWorld) publishMixed(perShard int) {
	w.t.Helper()
	var msgs []*message.Message
	w.mu.Lock()
	for range perShard {
		for idx := range w.n {
			n := w.nextN[idx]
			w.nextN[idx]++
			uuid := fmt.Sprintf("s%02d-%05d", idx, n)
			w.published[uuid] = grpMsg{shard: idx, n: n}
			w.pubOrder = append(w.pubOrder, uuid)
			m := message.NewMessage(uuid, []byte(uuid))
			m.Metadata.Set("pk", w.keys[idx])
			msgs = append(msgs, m)
		}
	}
	w.mu.Unlock()
	if err := w.pub.Publish(w.e.stream, msgs...); err != nil {
		w.t.Fatalf("Publish: %v", err)
	}
}

// ---- accounting ----

// fltStats is what became of the records published: the figures each scenario logs.
type fltStats struct {
	produced    int           // records published
	delivered   int           // distinct records delivered at least once
	deliveries  int           // deliveries, redeliveries included
	redelivered int           // deliveries - delivered
	lost        int           // produced - delivered
	worst       time.Duration // the longest from a record's arrival to its first delivery
	worstUUID   string
	mean        time.Duration
}

func (s fltStats) String() string {
	return fmt.Sprintf("produced=%d delivered=%d redelivered=%d lost=%d worst_delay=%s (%s) mean_delay=%s",
		s.produced, s.delivered, s.redelivered, s.lost, s.worst, s.worstUUID, s.mean.Round(time.Millisecond))
}

// stats counts every record published and its deliveries; the delays are those of records
// whose arrival is in [from, to) (all if both are zero).
func (w *fltWorld) stats(from, to time.Time) fltStats {
	w.t.Helper()
	var s fltStats
	first := map[string]grpDelivery{}
	for _, d := range w.deliveriesOf(func(grpDelivery) bool { return true }) {
		s.deliveries++
		if _, ok := first[d.uuid]; !ok {
			first[d.uuid] = d
		}
	}
	w.mu.Lock()
	s.produced = len(w.pubOrder)
	w.mu.Unlock()
	s.delivered = len(first)
	s.redelivered = s.deliveries - s.delivered
	s.lost = s.produced - s.delivered
	var sum time.Duration
	n := 0
	for _, u := range sortedKeysOf(first) {
		d := first[u]
		info, ok := kinesis.RecordFromContext(d.msg.Context())
		if !ok {
			w.t.Fatalf("delivery of %s has no record facts", u)
		}
		if !from.IsZero() && (info.ArrivalTime.Before(from) || !info.ArrivalTime.Before(to)) {
			continue
		}
		delay := d.at.Sub(info.ArrivalTime)
		sum += delay
		n++
		if delay > s.worst {
			s.worst, s.worstUUID = delay, u
		}
	}
	if n > 0 {
		s.mean = sum / time.Duration(n)
	}
	return s
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// report logs the figures of one scenario in the suite's fixed format:
//
//	FAULT <scenario>: produced=.. delivered=.. redelivered=.. lost=.. worst_delay=.. (uuid) mean_delay=.. | extra
func (w *fltWorld) report(scenario string, s fltStats, extra string) {
	w.t.Helper()
	if extra != "" {
		extra = " | " + extra
	}
	w.t.Logf("FAULT %s: %s%s", scenario, s, extra)
	if os.Getenv("FLT_LOGS") != "" { // FLT_LOGS=1 go test -v -run TestFault...: the driver's log too
		for _, e := range w.logs.of(os.Getenv("FLT_LOGS"), time.Time{}, time.Time{}) {
			w.t.Log(e)
		}
	}
}

// checkAll fails the test unless every record published was delivered, and, if exactly is
// set, delivered exactly once and in per-shard (so per-key) publish order.
func (w *fltWorld) checkAll(s fltStats, exactly bool) {
	w.t.Helper()
	if s.lost != 0 {
		miss := w.missing()
		w.t.Errorf("%d records lost (first %v)", s.lost, miss[:min(5, len(miss))])
	}
	if exactly {
		if s.redelivered != 0 {
			w.t.Errorf("%d redeliveries: %v", s.redelivered, w.duplicates())
		}
		w.inOrderOnce()
	}
}

// closeAll closes the given instances and waits for their consumers.
func (w *fltWorld) closeAll(wks ...*grpWorker) {
	w.t.Helper()
	for _, wk := range wks {
		w.close(wk)
	}
}

// ---- Kinesis calls ----

// fltKinesis is memlog's fault hook: it applies the scenario's rule and records every call.
// Its client wrapper (fltClient) records each call's outcome as the instance saw it.
type fltKinesis struct {
	mu       sync.Mutex
	rule     func(memlog.Call) error
	calls    []fltCall
	outcomes []fltOutcome
}

// fltCall is one call that reached memlog; err is what the rule injected (nil: none).
type fltCall struct {
	op, stream, shard string
	at                time.Time
	err               error
}

// fltOutcome is one call of an instance's driver and its result, as the driver saw it.
type fltOutcome struct {
	worker, op, shard string
	at                time.Time
	err               error
	iterType          types.ShardIteratorType // GetShardIterator
	after             string                  // its StartingSequenceNumber
}

// set installs the rule (nil: no fault). The rule runs under the hook's lock: it may keep
// state without locking.
func (k *fltKinesis) set(rule func(memlog.Call) error) {
	k.mu.Lock()
	k.rule = rule
	k.mu.Unlock()
}

// failAll makes every call of op fail with a server error, the two kinds in turn.
func (k *fltKinesis) failAll(op string) {
	n := 0
	k.set(func(c memlog.Call) error {
		if c.Op != op {
			return nil
		}
		n++
		return fltServerError(n)
	})
}

func (k *fltKinesis) hook(_ context.Context, call memlog.Call) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var err error
	if k.rule != nil {
		err = k.rule(call)
	}
	k.calls = append(k.calls, fltCall{op: call.Op, stream: call.Stream, shard: call.ShardID, at: time.Now(), err: err})
	return err
}

// count is how many calls of op reached memlog in [from, to), and how many of them the rule
// failed.
func (k *fltKinesis) count(op string, from, to time.Time) (calls, injected int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.calls {
		if c.op == op && !c.at.Before(from) && c.at.Before(to) {
			calls++
			if c.err != nil {
				injected++
			}
		}
	}
	return calls, injected
}

// outcomesOf lists the outcomes that match f.
func (k *fltKinesis) outcomesOf(f func(fltOutcome) bool) []fltOutcome {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []fltOutcome
	for _, o := range k.outcomes {
		if f(o) {
			out = append(out, o)
		}
	}
	return out
}

func (k *fltKinesis) outcome(o fltOutcome) {
	o.at = time.Now()
	k.mu.Lock()
	k.outcomes = append(k.outcomes, o)
	k.mu.Unlock()
}

// fltClient records the outcome of an instance's reads, iterator requests and listings.
type fltClient struct {
	kinesis.KinesisAPI
	k      *fltKinesis
	worker string
}

func (c *fltClient) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, opts ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	out, err := c.KinesisAPI.GetRecords(ctx, in, opts...)
	c.k.outcome(fltOutcome{worker: c.worker, op: "GetRecords", err: err})
	return out, err
}

func (c *fltClient) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, opts ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	out, err := c.KinesisAPI.GetShardIterator(ctx, in, opts...)
	c.k.outcome(fltOutcome{worker: c.worker, op: "GetShardIterator", shard: aws.ToString(in.ShardId), err: err,
		iterType: in.ShardIteratorType, after: aws.ToString(in.StartingSequenceNumber)})
	return out, err
}

func (c *fltClient) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, opts ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	out, err := c.KinesisAPI.ListShards(ctx, in, opts...)
	c.k.outcome(fltOutcome{worker: c.worker, op: "ListShards", err: err})
	return out, err
}

// ---- the driver's log ----

// fltLogger keeps every line the driver logs, with the fake time and the instance.
type fltLogger struct {
	mu      sync.Mutex
	entries []fltEntry
}

type fltEntry struct {
	worker, level, msg string
	err                error
	fields             watermill.LogFields
	at                 time.Time
}

func (e fltEntry) String() string {
	s := fmt.Sprintf("[%s %s %s] %s", grpRel(e.at), e.worker, e.level, e.msg)
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

// worker is the LoggerAdapter of one instance.
func (l *fltLogger) worker(id string) watermill.LoggerAdapter {
	return &fltAdapter{l: l, worker: id}
}

// of lists the entries at level ("" for all) in [from, to) (all if both are zero).
func (l *fltLogger) of(level string, from, to time.Time) []fltEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []fltEntry
	for _, e := range l.entries {
		if (level == "" || level == "1" || e.level == level) && (from.IsZero() || (!e.at.Before(from) && e.at.Before(to))) {
			out = append(out, e)
		}
	}
	return out
}

// matching lists the entries for which keep holds, in order.
func (l *fltLogger) matching(keep func(fltEntry) bool) []fltEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []fltEntry
	for _, e := range l.entries {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// countMsg counts the entries at level whose message starts with prefix, in [from, to).
func (l *fltLogger) countMsg(level, prefix string, from, to time.Time) int {
	n := 0
	for _, e := range l.of(level, from, to) {
		if strings.HasPrefix(e.msg, prefix) {
			n++
		}
	}
	return n
}

type fltAdapter struct {
	l      *fltLogger
	worker string
	fields watermill.LogFields
}

func (a *fltAdapter) add(level, msg string, err error, fields watermill.LogFields) {
	e := fltEntry{worker: a.worker, level: level, msg: msg, err: err, fields: a.fields.Add(fields), at: time.Now()}
	if ferr, ok := fields["err"].(error); ok && err == nil {
		e.err = ferr
	}
	a.l.mu.Lock()
	a.l.entries = append(a.l.entries, e)
	a.l.mu.Unlock()
}

func (a *fltAdapter) Error(msg string, err error, fields watermill.LogFields) {
	a.add("ERROR", msg, err, fields)
}

// fltAdapter has the driver's WARN level.
var _ kinesis.WarnLogger = (*fltAdapter)(nil)

func (a *fltAdapter) Warn(msg string, err error, fields watermill.LogFields) {
	a.add("WARN", msg, err, fields)
}
func (a *fltAdapter) Info(msg string, fields watermill.LogFields)  { a.add("INFO", msg, nil, fields) }
func (a *fltAdapter) Debug(msg string, fields watermill.LogFields) { a.add("DEBUG", msg, nil, fields) }
func (a *fltAdapter) Trace(msg string, fields watermill.LogFields) { a.add("TRACE", msg, nil, fields) }
func (a *fltAdapter) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return &fltAdapter{l: a.l, worker: a.worker, fields: a.fields.Add(fields)}
}

// ---- what the scenarios share ----

// fltShards is the shard count of every scenario.
const fltShards = 4

// warm starts the instances one by one, waits until the shards are spread over them, and runs
// a little under load.
func (w *fltWorld) warm(ids ...string) []*grpWorker {
	w.t.Helper()
	w.publishing = true
	var wks []*grpWorker
	for i, id := range ids {
		wks = append(wks, w.start(id, nil))
		w.runUntil("spread over "+strings.Join(ids[:i+1], ", "), 6*grpSyncInterval+grpHandoffTimeout, func() bool {
			return w.spread(ids[:i+1]...)
		})
	}
	w.steps(2 * time.Second)
	return wks
}

// drain stops publishing and waits until everything published was delivered (or limit).
func (w *fltWorld) drain(limit time.Duration) {
	w.t.Helper()
	w.publishing = false
	w.allDelivered(limit)
}

// noErrors fails the test if the driver logged at ERROR in [from, to).
func (w *fltWorld) noErrors(what string, from, to time.Time) {
	w.t.Helper()
	for _, e := range w.logs.of("ERROR", from, to) {
		w.t.Errorf("%s: the driver logged an error: %s", what, e)
	}
}

// noDecodeErrors fails the test if a message reached the handler with an error.
func (w *fltWorld) noDecodeErrors() {
	w.t.Helper()
	for _, d := range w.deliveriesOf(func(grpDelivery) bool { return true }) {
		if err := kinesis.DecodeErrorFromContext(d.msg.Context()); err != nil {
			w.t.Errorf("%s reached the handler with an error: %v", d.uuid, err)
			return
		}
	}
}

// consumersOpen fails the test if an instance's channel closed before the instance was closed.
func (w *fltWorld) consumersOpen(wks ...*grpWorker) {
	w.t.Helper()
	for _, wk := range wks {
		select {
		case <-wk.done:
			w.t.Errorf("%s's channel closed by itself", wk.id)
		default:
		}
	}
}

// finish closes the publisher and fails the test if a goroutine other than ignore's is left.
func (w *fltWorld) finish(ignore goleak.Option) {
	w.t.Helper()
	_ = w.pub.Close()
	goleak.VerifyNone(w.t, ignore)
}

// statsWhere is stats over the first deliveries that match f.
func (w *fltWorld) statsWhere(f func(grpDelivery) bool) fltStats {
	var s fltStats
	seen := map[string]bool{}
	for _, d := range w.deliveriesOf(f) {
		s.deliveries++
		if seen[d.uuid] {
			continue
		}
		seen[d.uuid] = true
		s.delivered++
		info, _ := kinesis.RecordFromContext(d.msg.Context())
		if delay := d.at.Sub(info.ArrivalTime); delay > s.worst {
			s.worst, s.worstUUID = delay, d.uuid
		}
	}
	s.redelivered = s.deliveries - s.delivered
	return s
}

// eventsOfAll lists the worker's hook calls of one kind, every shard.
func (wk *grpWorker) eventsOfAll(hook string) []grpEvent {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	var out []grpEvent
	for _, e := range wk.events {
		if e.hook == hook {
			out = append(out, e)
		}
	}
	return out
}

// mayRepeat lists the records that a change of reader may deliver again: for every lease taken
// at or after since, what was delivered of its shard before the take, after the checkpoint the
// take found.
func (w *fltWorld) mayRepeat(since time.Time) map[string]bool {
	out := map[string]bool{}
	for _, wk := range w.workerList() {
		for _, o := range wk.store.opsOf(lease.OpTake, "") {
			if o.err != nil || o.at.Before(since) {
				continue
			}
			// Before the take's instant: the new reader delivers at that instant already.
			for _, d := range w.deliveriesOf(func(d grpDelivery) bool { return d.shard == o.shard && d.at.Before(o.at) }) {
				if o.in.Checkpoint == "" || subSeqLess(w.t, o.in.Checkpoint, d.seq) {
					out[d.uuid] = true
				}
			}
		}
	}
	return out
}

// fltStoreDown makes every call of the driver to the lease store fail.
func fltStoreDown(w *fltWorld) {
	w.e.store.SetFault(func(ctx context.Context, _ string, _ lease.Key) error {
		if ctx == context.Background() {
			// The test's own look at the table (grpWorld.leases); the driver always calls
			// with a context of its own.
			return nil
		}
		return errors.New("lease table unreachable (injected)")
	})
}

// fltServerError alternates the two shapes of a 5xx: the SDK's typed InternalFailureException
// and a smithy API error with a server fault (what an unmodelled 500 or 503 looks like).
func fltServerError(i int) error {
	if i%2 == 0 {
		return &types.InternalFailureException{Message: aws.String("Internal service failure.")}
	}
	return &smithy.GenericAPIError{Code: "ServiceUnavailable", Message: "Service Unavailable", Fault: smithy.FaultServer}
}
