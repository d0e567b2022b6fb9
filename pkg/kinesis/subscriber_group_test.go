package kinesis_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// A group checkpoints what was acked; Close releases the lease; the group's next subscriber
// resumes right after the checkpoint.
func TestSubscriber_CheckpointAndResume(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 1, nil)
		e.publish(subMsgs(1, 10)...)

		s1 := e.subscriber(e.config(subGroup))
		ch := e.subscribe(s1, context.Background())
		acked := subRecvAck(t, ch, 5)
		subWantPayloads(t, acked, subRange(1, 5)...)
		// msg-6 is sent only once msg-5's ack was seen (one message in flight per shard), so
		// receiving it makes "acked 5, then Close" deterministic. It stays unacked.
		sixth := subRecv(t, ch)
		if err := s1.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		subClosedNow(t, ch)
		subDone(t, sixth.Context(), "unacked message after Close")

		l := e.lease(subGroup, subShard(0))
		if want := subSeq(t, acked[4]); l.Checkpoint != want {
			t.Errorf("checkpoint after Close = %q, want the sequence number of msg-5 %q", l.Checkpoint, want)
		}
		if l.Owner != "" {
			t.Errorf("lease owner after Close = %q, want free", l.Owner)
		}

		s2 := e.subscriber(e.config(subGroup))
		ch = e.subscribe(s2, context.Background())
		rest := subRecvAck(t, ch, 5)
		subWantPayloads(t, rest, subRange(6, 10)...)
		if rest[0].UUID != sixth.UUID {
			t.Errorf("redelivered msg-6 has UUID %s, want %s", rest[0].UUID, sixth.UUID)
		}
		subNone(t, ch, subQuiet)
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
		l = e.lease(subGroup, subShard(0))
		if want := subSeq(t, rest[4]); l.Checkpoint != want || l.Owner != "" {
			t.Errorf("after the second Close: checkpoint %q owner %q, want %q and free", l.Checkpoint, l.Owner, want)
		}
	})
}

// An Ack that happens before the subscription stops is acked progress and must be in the
// final checkpoint, even when the reader had not looked at it yet when it was told to stop.
//
// The reader is held inside a lease renewal (a store hook that blocks) while the test acks
// and cancels the Subscribe context, so the reader sees the cancellation before the Ack.
func TestSubscriber_AckBeforeStopIsCheckpointed(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 1, nil)
	e.publish(subMsgs(1, 3)...)
	cfg := e.config(subGroup)
	cfg.Group.LeaseDuration = 10 * time.Second
	cfg.Group.LeaseRenewInterval = 200 * time.Millisecond
	s := e.subscriber(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := e.subscribe(s, ctx)

	first := subRecv(t, ch)
	first.Ack()
	second := subRecv(t, ch) // msg-1's ack was seen

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.store.SetFault(func(_ context.Context, op string, _ lease.Key) error {
		if op != lease.OpRenew {
			return nil
		}
		block := false
		once.Do(func() { block = true })
		if block {
			close(entered)
			<-release
		}
		return nil
	})
	select {
	case <-entered:
	case <-time.After(subWait):
		t.Fatal("the reader never renewed its lease")
	}
	second.Ack() // acked before the stop...
	cancel()     // ...which the reader learns first
	close(release)
	subClosed(t, ch)

	l := e.lease(subGroup, subShard(0))
	if want := subSeq(t, second); l.Checkpoint != want {
		t.Errorf("final checkpoint = %q (msg-1), want %q (msg-2, acked before the subscription stopped); "+
			"the next reader redelivers an acked message", l.Checkpoint, want)
	}
}

// With MaxInFlight 3, three messages are unacked at once and a fourth waits; acks behind the
// oldest make room at once, but the checkpoint is the watermark, so they do not move it.
func TestSubscriber_MaxInFlightWatermark(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 1, nil)
		e.publish(subMsgs(1, 5)...)
		cfg := e.config(subGroup)
		cfg.MaxInFlight = 3

		// Round one: msg-2 and msg-3 acked, msg-1 not; Close writes no checkpoint.
		s1 := e.subscriber(cfg)
		ch := e.subscribe(s1, context.Background())
		out := subRecvN(t, ch, 3)
		subWantPayloads(t, out, subRange(1, 3)...)
		subNone(t, ch, subQuiet) // three unacked: MaxInFlight
		out[1].Ack()
		out[2].Ack()
		more := subRecvN(t, ch, 2) // two acked: room for two more
		subWantPayloads(t, more, subRange(4, 5)...)
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		if l := e.lease(subGroup, subShard(0)); l.Checkpoint != "" || l.Owner != "" {
			t.Fatalf("after acking msg-2 and msg-3 only (msg-1 never): checkpoint %q owner %q, want no checkpoint and free", l.Checkpoint, l.Owner)
		}

		// Round two: all three come again; acking msg-1 last moves the watermark to msg-3.
		s2 := e.subscriber(cfg)
		ch = e.subscribe(s2, context.Background())
		again := subRecvN(t, ch, 3)
		subWantPayloads(t, again, subRange(1, 3)...)
		for i := range again {
			if again[i].UUID != out[i].UUID {
				t.Errorf("redelivery %d has UUID %s, want %s", i, again[i].UUID, out[i].UUID)
			}
		}
		again[1].Ack()
		again[2].Ack()
		next := subRecvN(t, ch, 2) // room for two: msg-4 and msg-5
		again[0].Ack()
		subWantPayloads(t, next, subRange(4, 5)...)
		want := subSeq(t, again[2])
		e.waitLease(subGroup, subShard(0), "checkpoint at msg-3", func(l lease.Lease) bool { return l.Checkpoint == want })
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
		if l := e.lease(subGroup, subShard(0)); l.Checkpoint != want {
			t.Errorf("checkpoint after Close = %q, want msg-3's %q", l.Checkpoint, want)
		}
	})
}

// stealLease takes the shard's lease for "thief", as another worker would.
func (e *subEnv) stealLease(shardID string) lease.Lease {
	e.t.Helper()
	for {
		l := e.lease(subGroup, shardID)
		taken, err := e.store.Take(context.Background(), l, "thief")
		if err == nil {
			return taken
		}
		if !errors.Is(err, lease.ErrLeaseChanged) {
			e.t.Fatalf("Take: %v", err)
		}
	}
}

// A lease taken by another worker stops its reader at once: the message in flight is given
// up, nothing more is delivered from the shard, and nothing this worker does afterwards
// (an Ack, Close) writes over the new owner's checkpoint.
func TestSubscriber_LeaseLostFencesReader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// ackFirst acks the in-flight message before the lease is stolen (so the reader
		// has progress it would like to write); closeAtOnce closes before the coordinator
		// can notice the theft, so the reader learns it from the store.
		ackFirst, closeAtOnce bool
	}{
		{name: "coordinator notices"},
		{name: "acked progress, Close at once", ackFirst: true, closeAtOnce: true},
		{name: "Close at once", closeAtOnce: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newSubEnv(t, 1, nil)
			e.publish(subMsgs(1, 3)...)
			cfg := e.config(subGroup)
			cfg.Group.LeaseDuration = time.Minute // the thief stays alive to this worker
			s := e.subscriber(cfg)
			ch := e.subscribe(s, context.Background())

			inFlight := subRecv(t, ch)
			if tc.ackFirst {
				inFlight.Ack()
				inFlight = subRecv(t, ch)
			}
			thief := e.stealLease(subShard(0))
			// The thief has processed everything: its checkpoint is msg-3.
			seq3 := subSeqOfIndex(t, e, 2)
			thief, err := e.store.Checkpoint(context.Background(), thief, seq3)
			if err != nil {
				t.Fatalf("thief's checkpoint: %v", err)
			}

			if tc.closeAtOnce {
				if err := s.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				subDone(t, inFlight.Context(), "after Close")
				inFlight.Ack()
			} else {
				watch := watchSubStore(e.store)
				subDone(t, inFlight.Context(), "after the lease was taken")
				inFlight.Ack()
				// Several lease syncs and checkpoint ticks later nothing came and nothing
				// was written.
				target := watch.n(lease.OpList) + 5
				timeout := time.After(subWait)
				for watch.n(lease.OpList) < target {
					select {
					case m, ok := <-ch:
						if ok {
							t.Fatalf("message %q delivered from a shard whose lease was lost", m.Payload)
						}
						t.Fatal("the channel closed")
					case <-watch.ch:
					case <-timeout:
						t.Fatal("the coordinator stopped syncing leases")
					}
				}
				if err := s.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			subClosedNow(t, ch)
			l := e.lease(subGroup, subShard(0))
			if l.Owner != "thief" || l.Generation != thief.Generation || l.Checkpoint != seq3 || l.Counter != thief.Counter {
				t.Errorf("lease after the loser acked and closed = %+v, want the thief's %+v untouched", l, thief)
			}
		})
	}
}

// subSeqOfIndex reads the sequence number of the i-th record (0-based) of shard 0 with a
// throw-away subscriber outside any group.
func subSeqOfIndex(t *testing.T, e *subEnv, i int) string {
	t.Helper()
	s := e.subscriber(e.config(""))
	ch := e.subscribe(s, context.Background())
	var m *message.Message
	for range i + 1 {
		m = subRecv(t, ch)
		m.Ack()
	}
	seq := subSeq(t, m)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return seq
}

// A lease store that stays down longer than the lease duration makes the owner pause the shard
// before anyone could take the lease, cancelling the contexts of the messages in flight; once
// the store is back and nobody took the lease, the reader resumes where it was and sends the
// message in flight again.
func TestSubscriber_LeaseStoreDown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// fails reports which store operations fail while the store is down.
		fails func(op string) bool
		// quiet: nothing is delivered while the store is down.
		quiet bool
	}{
		{"unreachable", func(string) bool { return true }, true},
		{"renew and checkpoint fail", func(op string) bool { return op == lease.OpRenew || op == lease.OpCheckpoint }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				e := newSubEnv(t, 1, nil)
				e.publish(subMsgs(1, 2)...)
				cfg := e.config(subGroup)
				cfg.Group.LeaseDuration = 400 * time.Millisecond
				cfg.Group.LeaseRenewInterval = 100 * time.Millisecond
				s := e.subscriber(cfg)
				ch := e.subscribe(s, context.Background())
				first := subRecv(t, ch)
				before := e.lease(subGroup, subShard(0))

				down := errors.New("lease table unreachable")
				e.store.SetFault(func(_ context.Context, op string, _ lease.Key) error {
					if tc.fails(op) {
						return down
					}
					return nil
				})
				downAt := time.Now()
				subDone(t, first.Context(), "lease store down")
				stopped := time.Since(downAt)
				t.Logf("reader paused %s after the store went down (LeaseDuration %s)", stopped, cfg.Group.LeaseDuration)
				// It must stop before LeaseDuration has passed since its last successful
				// renewal, which was before downAt; the slack only absorbs scheduling delays of
				// a loaded machine.
				if stopped > cfg.Group.LeaseDuration+time.Second {
					t.Errorf("reader kept the shard for %s with no renewal, LeaseDuration is %s", stopped, cfg.Group.LeaseDuration)
				}
				if tc.quiet {
					subNone(t, ch, subQuiet)
				}

				e.store.SetFault(nil)
				// msg-1 comes again (its first delivery was cancelled at the pause); msg-2 comes
				// only once msg-1's Ack has been taken.
				var second *message.Message
				for second == nil {
					m := subRecv(t, ch)
					switch {
					case m.UUID == first.UUID && string(m.Payload) == "msg-1":
						m.Ack()
					case string(m.Payload) == "msg-2":
						second = m
					default:
						t.Fatalf("got %s %q, want msg-1 again or msg-2", m.UUID, m.Payload)
					}
				}
				second.Ack()
				want := subSeq(t, second)
				e.waitLease(subGroup, subShard(0), "checkpoint at msg-2", func(l lease.Lease) bool { return l.Checkpoint == want })
				// Nobody took the lease while the store was down, so the paused reader resumed on it:
				// the same owner and generation, no new take.
				if l := e.lease(subGroup, subShard(0)); l.Owner != before.Owner || l.Generation != before.Generation {
					t.Errorf("lease after recovery = %+v; want the same owner %q and generation %d", l, before.Owner, before.Generation)
				}
				subNone(t, ch, subQuiet)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// A reader that got its lease but cannot get its first iterator gives the lease back at its
// stop point (the lease's clock started when Take was sent, and it renews nothing before it
// reads), so that Subscribe does not wait on a hung GetShardIterator, and the lease is free for
// the group instead of expiring under a reader that delivers nothing. A later lease sync takes
// it again with a fresh generation, and that reader delivers.
func TestSubscriber_SlowStartDoesNotOutliveLease(t *testing.T) {
	t.Parallel()
	for i := 0; i < 6 && !t.Failed(); i++ {
		subSlowStart(t)
	}
}

// subBlockFirst makes the first call op of a memlog wait until release is closed; entered is
// closed when it starts waiting.
type subBlockFirst struct {
	entered, release chan struct{}
	once             sync.Once
}

func newSubBlockFirst() *subBlockFirst {
	return &subBlockFirst{entered: make(chan struct{}), release: make(chan struct{})}
}

func (b *subBlockFirst) hook(ctx context.Context) error {
	block := false
	b.once.Do(func() { block = true })
	if !block {
		return nil
	}
	close(b.entered)
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *subBlockFirst) waitEntered(t *testing.T, what string) {
	t.Helper()
	select {
	case <-b.entered:
	case <-time.After(subWait):
		t.Fatalf("no %s call", what)
	}
}

func subSlowStart(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	e.publish(subMsgs(1, 2)...)
	iter := newSubBlockFirst()
	e.log.SetFault(func(ctx context.Context, call memlog.Call) error {
		if call.Op == "GetShardIterator" {
			return iter.hook(ctx)
		}
		return nil
	})
	defer close(iter.release)
	cfg := e.config(subGroup)
	cfg.Group.LeaseDuration = 400 * time.Millisecond
	cfg.Group.LeaseRenewInterval = 100 * time.Millisecond
	s := e.subscriber(cfg)
	type result struct {
		ch  <-chan *message.Message
		err error
	}
	subscribed := make(chan result, 1)
	go func() {
		ch, err := s.Subscribe(context.Background(), e.stream)
		subscribed <- result{ch, err}
	}()
	iter.waitEntered(t, "GetShardIterator")
	seen := e.lease(subGroup, subShard(0))
	if seen.Owner == "" {
		t.Fatalf("lease not taken before the first iterator: %+v", seen)
	}

	// The first GetShardIterator never answers: Subscribe returns all the same, once the
	// reader's stop point has passed.
	var res result
	select {
	case res = <-subscribed:
	case <-time.After(subWait):
		t.Fatal("Subscribe waited on a hung GetShardIterator past the lease's stop point")
	}
	if res.err != nil {
		t.Fatalf("Subscribe: %v", res.err)
	}
	defer func() { _ = s.Close() }()
	for i := 0; i < 2; i++ {
		select {
		case m := <-res.ch:
			m.Ack()
		case <-time.After(subWait):
			t.Fatalf("message %d not delivered by the reader of a later lease sync", i)
		}
	}
	// The lease was given back (one generation), then taken again (another): never renewed
	// by the reader that had no iterator.
	if now := e.lease(subGroup, subShard(0)); now.Generation < seen.Generation+2 {
		t.Fatalf("the lease was not given back and taken again: %+v, then %+v", seen, now)
	}
}

// Two subscribers of one group on four shards: every message reaches one of them, and no
// shard is read by both while both run. When one leaves, the other takes its shards at once.
func TestSubscriber_GroupSharesShards(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 4, nil)
		// Worker B owned shards 0 and 1 before a restart; A comes first and takes its fair share
		// of the rest, then B comes back under the same WorkerID and takes its own leases again.
		for i := 0; i < 4; i++ {
			l, err := e.store.Create(context.Background(), lease.Lease{Group: subGroup, Stream: e.stream, ShardID: subShard(i)})
			if err != nil {
				t.Fatal(err)
			}
			if i < 2 {
				if _, err := e.store.Take(context.Background(), l, "worker-b"); err != nil {
					t.Fatal(err)
				}
			}
		}
		cfgA, cfgB := e.config(subGroup), e.config(subGroup)
		cfgA.Group.WorkerID, cfgB.Group.WorkerID = "worker-a", "worker-b"
		a, b := e.subscriber(cfgA), e.subscriber(cfgB)
		chA := e.subscribe(a, context.Background())
		chB := e.subscribe(b, context.Background())

		const n = 80
		e.publish(subMsgs(0, n)...)
		shardsOf := map[string]map[string]bool{"a": {}, "b": {}}
		lastSeq := map[string]string{} // shard -> last sequence number acked
		seen := map[string]string{}
		for len(seen) < n {
			var m *message.Message
			var who string
			select {
			case m = <-chA:
				who = "a"
			case m = <-chB:
				who = "b"
			case <-time.After(subWait):
				t.Fatalf("only %d of %d messages arrived", len(seen), n)
			}
			if m == nil {
				t.Fatal("a channel closed")
			}
			if prev, dup := seen[m.UUID]; dup {
				t.Fatalf("%s delivered twice (to %s, then %s)", m.UUID, prev, who)
			}
			seen[m.UUID] = who
			shard, _ := subShardOf(m)
			shardsOf[who][shard] = true
			lastSeq[shard] = subSeq(t, m)
			m.Ack()
		}
		for shard := range shardsOf["a"] {
			if shardsOf["b"][shard] {
				t.Errorf("shard %s was read by both subscribers at once", shard)
			}
		}
		if got := subKeys(shardsOf["b"]); len(got) != 2 || got[0] != subShard(0) || got[1] != subShard(1) {
			t.Errorf("worker b read %v, want its own shards 0 and 1", got)
		}
		if got := subKeys(shardsOf["a"]); len(got) != 2 || got[0] != subShard(2) || got[1] != subShard(3) {
			t.Errorf("worker a read %v, want shards 2 and 3", got)
		}

		// B leaves: its leases are released and A takes them at its next lease sync. (Close
		// waits for B's last acks to be checkpointed first, so that this test does not depend
		// on how Close treats an Ack it races with; TestSubscriber_AckBeforeStopIsCheckpointed
		// covers that.)
		for _, shard := range subKeys(shardsOf["b"]) {
			e.waitLease(subGroup, shard, "B's last ack", func(l lease.Lease) bool { return l.Checkpoint == lastSeq[shard] })
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		e.publish(subMsgs(n, n)...)
		got := map[string]bool{}
		for len(got) < n {
			m := subRecv(t, chA)
			if got[m.UUID] || seen[m.UUID] != "" {
				t.Fatalf("%s delivered twice", m.UUID)
			}
			got[m.UUID] = true
			m.Ack()
		}
		subNone(t, chA, subQuiet)
	})
}

// Subscribers of one group that subscribe at the same moment split the shards between them
// somehow; whatever the split, no shard is read twice and nothing is lost.
func TestSubscriber_GroupConcurrentSubscribe(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 4, nil)
	const subs, n = 3, 60
	chans := make([]<-chan *message.Message, subs)
	var wg sync.WaitGroup
	errs := make([]error, subs)
	for i := range chans {
		s := e.subscriber(e.config(subGroup))
		wg.Add(1)
		go func() {
			defer wg.Done()
			chans[i], errs[i] = s.Subscribe(context.Background(), e.stream)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
	}
	e.publish(subMsgs(0, n)...)
	owner := map[string]int{} // shard -> subscriber
	seen := map[string]bool{}
	merged := make(chan subTagged)
	stop := make(chan struct{})
	defer close(stop)
	for i, ch := range chans {
		go func() {
			for m := range ch {
				select {
				case merged <- subTagged{i, m}:
				case <-stop:
					return
				}
			}
		}()
	}
	for len(seen) < n {
		var tm subTagged
		select {
		case tm = <-merged:
		case <-time.After(subWait):
			t.Fatalf("only %d of %d messages arrived", len(seen), n)
		}
		if seen[tm.m.UUID] {
			t.Fatalf("%s delivered twice", tm.m.UUID)
		}
		seen[tm.m.UUID] = true
		shard, _ := subShardOf(tm.m)
		if o, ok := owner[shard]; ok && o != tm.i {
			t.Errorf("shard %s read by subscribers %d and %d", shard, o, tm.i)
		}
		owner[shard] = tm.i
		tm.m.Ack()
	}
	t.Logf("shard owners: %v", owner)
}

type subTagged struct {
	i int
	m *message.Message
}

func subShardOf(m *message.Message) (string, bool) { return kinesis.ShardIDFromContext(m.Context()) }

func subKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A handler slower than LeaseDuration keeps its shard: the reader renews while it waits for
// the ack, so the message's context stays live, the lease keeps its owner and generation, and
// the next message follows the ack.
func TestSubscriber_SlowHandlerKeepsLease(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 1, nil)
	e.publish(subMsgs(0, 2)...)
	cfg := e.config(subGroup)
	cfg.Group.LeaseDuration = 300 * time.Millisecond
	cfg.Group.LeaseRenewInterval = 50 * time.Millisecond
	cfg.Group.CheckpointInterval = time.Hour // renewals alone must keep the lease
	watch := watchSubStore(e.store)
	s := e.subscriber(cfg)
	ch := e.subscribe(s, context.Background())
	first := subRecv(t, ch)
	held := e.lease(subGroup, subShard(0))

	// Hold the message until the owner has renewed enough times to span three lease
	// durations: counted renewals, not a timer, say when that is.
	renewsNeeded := 3 * int(cfg.Group.LeaseDuration/cfg.Group.LeaseRenewInterval)
	start := watch.n(lease.OpRenew)
	deadline := time.After(subWait)
	for watch.n(lease.OpRenew)-start < renewsNeeded {
		select {
		case <-watch.ch:
		case <-deadline:
			t.Fatalf("only %d renewals while the handler was slow", watch.n(lease.OpRenew)-start)
		}
	}
	subNotDone(t, first.Context(), "the slow message's context")
	now := e.lease(subGroup, subShard(0))
	if now.Owner != held.Owner || now.Generation != held.Generation || now.Counter <= held.Counter {
		t.Fatalf("lease moved while the handler was slow: %+v, was %+v", now, held)
	}
	first.Ack()
	second := subRecv(t, ch)
	subWantPayloads(t, []*message.Message{first, second}, "msg-0", "msg-1")
	second.Ack()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
