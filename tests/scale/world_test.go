package scale_test

// The world of one size: one memlog stream of N shards, one lease.MemoryStore (each instance
// reaches it through its own counting, gated wrapper), a producer that writes a trickle of
// numbered records to every shard, the instances of one consumer group, and the log of what
// was published, delivered and acked. Everything runs in one synctest bubble: time is fake and
// advances only when every goroutine of the run waits.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

const (
	scaleStream = "scale"
	scaleGroup  = "scale-group"
)

type instState int

const (
	stateStarting instState = iota // Subscribe has not returned yet
	stateLive
	stateClosed // Close called (gracefully leaving, or at the end of the run)
	stateCrashed
)

type world struct {
	rc    runConfig
	start time.Time
	log   *memlog.Log
	store *lease.MemoryStore
	meter *meter
	// shards and their starting hash keys, in shard id order, for the producer.
	shards   []string
	hashKeys []string

	end     chan struct{} // closed when the run is over: crashed handlers return
	stopPub chan struct{}
	pubDone chan struct{}
	wg      sync.WaitGroup // the harness's goroutines (instance runners and handlers)

	mu         sync.Mutex
	phase      int // index into phases of the phase running now
	insts      []*instance
	recs       map[string]*record
	published  int
	holder     map[string]*instance // shard -> the instance between OnAcquired and OnRevoked/OnLost
	violations []string             // two live instances reading one shard at once
	// crashAt is when crash ran; victims are the shards the crashed instances held then,
	// each with when a live instance first acquired it after (zero until one did).
	crashAt  time.Time
	victims  map[string]time.Time
	problems []string // Subscribe failures, Close errors, publish failures
	logs     map[logKey]*logCount
}

// record is one published record and what became of it.
type record struct {
	phase      int       // the phase it was published in
	at         time.Time // when
	shard      string
	deliveries int
	acked      int       // deliveries acked while the message's context was live
	dupAt      time.Time // the first delivery after an acked one (zero if none)
	dupPhase   int
}

type logKey struct {
	phase   int
	level   string
	msg     string
	crashed bool // logged by an instance that had crashed (its calls hang at the gate)
}

type logCount struct {
	n       int
	example string
}

func newWorld(rc runConfig) (*world, error) {
	w := &world{
		rc: rc, start: time.Now(),
		log:     memlog.New(memlog.Config{}),
		store:   lease.NewMemoryStore(),
		meter:   newMeter(),
		end:     make(chan struct{}),
		stopPub: make(chan struct{}),
		pubDone: make(chan struct{}),
		recs:    map[string]*record{},
		holder:  map[string]*instance{},
		victims: map[string]time.Time{},
		logs:    map[logKey]*logCount{},
	}
	ctx := context.Background()
	if _, err := w.log.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(scaleStream), ShardCount: aws.Int32(int32(rc.shards))}); err != nil {
		return nil, err
	}
	in := &awskinesis.ListShardsInput{StreamName: aws.String(scaleStream)}
	var shards []types.Shard
	for {
		out, err := w.log.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			break
		}
		in = &awskinesis.ListShardsInput{NextToken: out.NextToken}
	}
	sort.Slice(shards, func(i, j int) bool { return *shards[i].ShardId < *shards[j].ShardId })
	for _, s := range shards {
		w.shards = append(w.shards, *s.ShardId)
		w.hashKeys = append(w.hashKeys, *s.HashKeyRange.StartingHashKey)
	}
	if len(w.shards) != rc.shards {
		return nil, fmt.Errorf("memlog made %d shards, want %d", len(w.shards), rc.shards)
	}
	return w, nil
}

func (w *world) since() time.Duration { return time.Since(w.start) }

func (w *world) setPhase(p int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase = p
}

func (w *world) problemf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, fmt.Sprintf("%8.1fs  ", w.since().Seconds())+fmt.Sprintf(format, args...))
}

// produce writes one record to every shard each pubEvery, spread over the seconds in between
// (a slice of the shards each second), until stopPub is closed.
func (w *world) produce() {
	defer close(w.pubDone)
	slices := max(1, int(w.rc.pubEvery/time.Second))
	for tick := 0; ; tick++ {
		select {
		case <-w.stopPub:
			return
		case <-time.After(time.Second):
		}
		var batch []int
		for i := range w.shards {
			if i%slices == tick%slices {
				batch = append(batch, i)
			}
		}
		for len(batch) > 0 {
			n := min(len(batch), 500)
			w.put(batch[:n])
			batch = batch[n:]
		}
	}
}

// put publishes one record to each shard of idx. A record is registered before it is written,
// since a reader may deliver it before PutRecords returns; one that failed is dropped again.
func (w *world) put(idx []int) {
	entries := make([]types.PutRecordsRequestEntry, len(idx))
	ids := make([]string, len(idx))
	w.mu.Lock()
	for j, i := range idx {
		w.published++
		ids[j] = "r" + strconv.Itoa(w.published)
		w.recs[ids[j]] = &record{phase: w.phase, at: time.Now(), shard: w.shards[i]}
		entries[j] = types.PutRecordsRequestEntry{
			Data: []byte(ids[j]), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(w.hashKeys[i]),
		}
	}
	w.mu.Unlock()
	out, err := w.log.PutRecords(context.Background(), &awskinesis.PutRecordsInput{StreamName: aws.String(scaleStream), Records: entries})
	w.mu.Lock()
	defer w.mu.Unlock()
	for j, id := range ids {
		if err != nil || out.Records[j].ErrorCode != nil {
			delete(w.recs, id)
		}
	}
	if err != nil {
		w.problems = append(w.problems, fmt.Sprintf("%8.1fs  PutRecords of %d failed: %v", w.since().Seconds(), len(idx), err))
	}
}

// instance is one member of the group: a Subscriber with one subscription, its gate, and a
// handler goroutine that acks every message at once.
type instance struct {
	w    *world
	idx  int
	name string
	gate *gate
	sub  *kinesis.Subscriber
	halt chan struct{} // closed at a crash: the handler reads nothing more
	// state is guarded by w.mu.
	state instState
}

func (w *world) newInstance() (*instance, error) {
	w.mu.Lock()
	in := &instance{w: w, idx: len(w.insts), gate: newGate(), halt: make(chan struct{})}
	in.name = fmt.Sprintf("w%03d", in.idx)
	w.insts = append(w.insts, in)
	w.mu.Unlock()
	w.meter.register(in.idx)
	hook := func(kind string) func(kinesis.ShardEvent) {
		return func(ev kinesis.ShardEvent) { w.hook(in, kind, ev.ShardID) }
	}
	rc := w.rc
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: &gatedClient{g: in.gate, log: w.log},
		Group: kinesis.GroupConfig{
			Name:       scaleGroup,
			LeaseStore: &countingStore{g: in.gate, m: w.meter, who: in.idx, s: w.store},
			WorkerID:   in.name,
			// LeaseDuration, LeaseRenewInterval, LeaseSyncInterval, HandoffTimeout and
			// CheckpointInterval are left at their defaults (rc.lease* mirror them).
			Hooks: kinesis.ShardHooks{OnAcquired: hook("acquired"), OnRevoked: hook("revoked"), OnLost: hook("lost")},
		},
		// Records are the harness's ids, not envelopes.
		Unmarshaler:     kinesis.RawMarshaler{},
		PollInterval:    rc.pollInterval,
		MinReadInterval: rc.minReadInterval,
	}, &countLogger{w: w, in: in})
	if err != nil {
		return nil, err
	}
	in.sub = sub
	return in, nil
}

// subscribe is the instance's runner: Subscribe (retried while it fails) and the handler.
func (in *instance) subscribe() {
	defer in.w.wg.Done()
	for {
		ch, err := in.sub.Subscribe(context.Background(), scaleStream)
		if err == nil {
			in.w.mu.Lock()
			if in.state == stateStarting {
				in.state = stateLive
			}
			in.w.mu.Unlock()
			in.consume(ch)
			return
		}
		in.w.problemf("%s: Subscribe failed, retrying: %v", in.name, err)
		if in.gone() {
			return
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-in.halt:
			return
		}
	}
}

func (in *instance) gone() bool {
	in.w.mu.Lock()
	defer in.w.mu.Unlock()
	return in.state >= stateClosed
}

// consume acks every message; a crashed instance's handler reads nothing more and waits for
// the end of the run.
func (in *instance) consume(ch <-chan *message.Message) {
	for {
		select {
		case msg, open := <-ch:
			if !open {
				return
			}
			in.w.deliver(in, msg)
			msg.Ack()
		case <-in.halt:
			<-in.w.end
			return
		}
	}
}

// deliver records a delivery and its ack (the handler acks at once). A crashed instance
// delivers nothing anybody sees. An ack that comes after the driver cancelled the message
// settles nothing: such a record is expected back, and its next delivery is no duplicate.
func (w *world) deliver(in *instance, msg *message.Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if in.state == stateCrashed {
		return
	}
	r := w.recs[string(msg.Payload)]
	if r == nil {
		w.problems = append(w.problems, fmt.Sprintf("%8.1fs  %s delivered a record nobody published: %q", w.since().Seconds(), in.name, msg.Payload))
		return
	}
	r.deliveries++
	if r.acked > 0 && r.dupAt.IsZero() {
		r.dupAt, r.dupPhase = time.Now(), w.phase
	}
	if msg.Context().Err() == nil {
		r.acked++
	}
}

// hook follows which instance reads which shard, by the driver's own ShardHooks: a shard
// acquired by one live instance while another live one has not revoked or lost it is read by
// two at once. A crashed instance delivers nothing any more, so its tenures do not count.
func (w *world) hook(in *instance, kind, shard string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch kind {
	case "acquired":
		if at, victim := w.victims[shard]; victim && at.IsZero() && in.state != stateCrashed {
			w.victims[shard] = time.Now()
		}
		if h := w.holder[shard]; h != nil && h != in && h.state != stateCrashed {
			w.violations = append(w.violations, fmt.Sprintf("%8.1fs  %s acquired %s while %s (%s) had not revoked or lost it",
				w.since().Seconds(), in.name, shard, h.name, [...]string{"starting", "live", "closed", "crashed"}[h.state]))
		}
		w.holder[shard] = in
	default:
		if w.holder[shard] == in {
			delete(w.holder, shard)
		}
	}
}

// startInstances makes n instances and starts them all at the same fake instant.
func (w *world) startInstances(n int) error {
	var made []*instance
	for range n {
		in, err := w.newInstance()
		if err != nil {
			return err
		}
		made = append(made, in)
	}
	for _, in := range made {
		w.wg.Add(1)
		go in.subscribe()
	}
	return nil
}

// live are the instances that have not closed or crashed, in index order (starting ones
// count: they are members that hold nothing yet).
func (w *world) live() []*instance {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*instance
	for _, in := range w.insts {
		if in.state <= stateLive {
			out = append(out, in)
		}
	}
	return out
}

// pick chooses n live instances spread over the group (every k-th), so that a leave or a
// crash hits old and new members alike.
func (w *world) pick(n int) []*instance {
	live := w.live()
	if n >= len(live) {
		return live
	}
	var out []*instance
	step := float64(len(live)) / float64(n)
	for i := range n {
		out = append(out, live[int(float64(i)*step)])
	}
	return out
}

// leave closes the instances gracefully, all at once; it does not wait for Close to return.
func (w *world) leave(ins []*instance) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, in := range ins {
		w.mu.Lock()
		in.state = stateClosed
		w.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if err := in.sub.Close(); err != nil {
				w.problemf("%s: Close after %s: %v", in.name, time.Since(start), err)
			}
		}()
	}
	return &wg
}

// crash stops the instances dead: from now on none of their calls reaches memlog or the lease
// store (they hang at the gate), and their handlers read nothing more.
//
// It records the shards they held (failover measures how soon live instances read them).
func (w *world) crash(ins []*instance) {
	w.mu.Lock()
	w.crashAt = time.Now()
	for shard, h := range w.holder {
		if slices.Contains(ins, h) {
			w.victims[shard] = time.Time{}
		}
	}
	w.mu.Unlock()
	for _, in := range ins {
		w.mu.Lock()
		in.state = stateCrashed
		w.mu.Unlock()
		in.gate.set(gateHang)
		close(in.halt)
	}
}

// failover is how long after the crash the last of the crashed instances' shards was acquired
// by a live instance (its reader had its iterator and delivered from then on), and how many
// of them are not read again yet.
func (w *world) failover() (time.Duration, int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Duration
	waiting := 0
	for _, at := range w.victims {
		if at.IsZero() {
			waiting++
			continue
		}
		last = max(last, at.Sub(w.crashAt))
	}
	return last, len(w.victims), waiting
}

// spread is one look at how the shards are spread over the live instances.
//
// A shard counts as held by an instance only when both agree: the lease store names the
// instance as the lease's owner, and the instance's Health shows a reader of the shard at that
// lease generation that is not paused. The store alone would count a lease taken by an instance
// whose reader has not started (or has stopped and not released it yet), or one a crashed
// instance still owns until it expires; Health alone would count a reader that is about to
// learn it lost its lease. Only a shard that is being read by its owner is really held.
type spread struct {
	even     bool
	min, max int
	unheld   int
	held     map[*instance]int
}

func (w *world) spread() spread {
	ls, _ := w.store.List(context.Background(), scaleGroup, scaleStream) // the harness's look: not counted
	live := w.live()
	reading := map[string]map[string]int64{} // worker -> shard -> generation of a reader that is not paused
	byName := map[string]*instance{}
	for _, in := range live {
		byName[in.name] = in
		m := map[string]int64{}
		for _, s := range in.sub.Health().Subscriptions {
			if s.WorkerID != in.name {
				continue
			}
			for _, sh := range s.Shards {
				if !sh.Paused {
					m[sh.ShardID] = sh.Generation
				}
			}
		}
		reading[in.name] = m
	}
	sp := spread{held: map[*instance]int{}}
	for _, in := range live {
		sp.held[in] = 0
	}
	for _, l := range ls {
		if l.Checkpoint == lease.ShardEnd {
			continue // finished: nobody needs to hold it
		}
		in := byName[l.Owner]
		if gen, ok := reading[l.Owner][l.ShardID]; in == nil || !ok || gen != l.Generation {
			sp.unheld++
			continue
		}
		sp.held[in]++
	}
	sp.unheld += len(w.shards) - len(ls) // shards with no lease yet
	sp.min, sp.max = len(w.shards)+1, -1
	for _, n := range sp.held {
		sp.min, sp.max = min(sp.min, n), max(sp.max, n)
	}
	sp.even = len(live) > 0 && sp.unheld == 0 && sp.max-sp.min <= 1
	return sp
}

// allAcked reports whether every published record has an acked delivery.
func (w *world) allAcked() (pending int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.recs {
		if r.acked == 0 {
			pending++
		}
	}
	return pending
}

// shutdown closes the live instances, then ends the run (the crashed instances' calls fail
// from now on, so that their Close returns too) and closes the rest, and waits for every
// goroutine of the harness.
func (w *world) shutdown() {
	w.leave(w.live()).Wait()
	close(w.end)
	var crashed []*instance
	w.mu.Lock()
	for _, in := range w.insts {
		if in.state == stateCrashed {
			crashed = append(crashed, in)
		}
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range crashed {
		in.gate.set(gateRefused)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = in.sub.Close() // a crashed instance's last writes fail; that is the point
		}()
	}
	wg.Wait()
	w.wg.Wait()
}

// countLogger counts the driver's log lines by phase, level and message, and keeps the first
// of each as an example.
type countLogger struct {
	w      *world
	in     *instance
	fields watermill.LogFields
}

var _ kinesis.WarnLogger = (*countLogger)(nil)

func (l *countLogger) log(level, msg string, err error, f watermill.LogFields) {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	if os.Getenv("SCALE_TRACE") != "" {
		fmt.Printf("%7.2fs %s %s %v err=%v\n", l.w.since().Seconds(), level, msg, l.fields.Add(f), err)
	}
	k := logKey{l.w.phase, level, msg, l.in.state == stateCrashed}
	c := l.w.logs[k]
	if c == nil {
		ex := fmt.Sprintf("%.1fs %v", l.w.since().Seconds(), l.fields.Add(f))
		if err != nil {
			ex += fmt.Sprintf(" err=%v", err)
		}
		c = &logCount{example: ex}
		l.w.logs[k] = c
	}
	c.n++
}

func (l *countLogger) Error(msg string, err error, f watermill.LogFields) {
	l.log("ERROR", msg, err, f)
}
func (l *countLogger) Warn(msg string, err error, f watermill.LogFields) { l.log("WARN", msg, err, f) }
func (l *countLogger) Info(msg string, f watermill.LogFields)            { l.log("INFO", msg, nil, f) }
func (l *countLogger) Debug(msg string, f watermill.LogFields)           { l.log("DEBUG", msg, nil, f) }
func (l *countLogger) Trace(string, watermill.LogFields)                 {}
func (l *countLogger) With(f watermill.LogFields) watermill.LoggerAdapter {
	return &countLogger{w: l.w, in: l.in, fields: l.fields.Add(f)}
}
