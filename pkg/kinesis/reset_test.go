package kinesis_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// The reset tests run a group of two instances under keyed load (a message to every shard
// every step) in fake time, reset it while it runs, and check for each reset:
//   - the first record each moved shard delivers after the reset is the first at the position;
//   - no record before the position is delivered later than one LeaseRenewInterval after
//     ResetGroup returned (a fenced reader stops at its next renewal at the latest);
//   - every record at or after the position is delivered after the reset (nothing lost);
//   - one reader per shard throughout (grpWorld.check, after every step).

// resetRun is one ResetGroup call made while the world steps.
type resetRun struct {
	started, returned time.Time
	report            admin.ResetReport
}

// reset calls ResetGroup on a goroutine of its own and takes steps until it returns, so that
// load and the group go on meanwhile (and fake time moves while it waits).
func (w *grpWorld) reset(cfg admin.ResetConfig) resetRun {
	w.t.Helper()
	cfg.Stream, cfg.ConsumerGroup, cfg.Client, cfg.LeaseStore = w.e.stream, subGroup, w.e.log, w.e.store
	type result struct {
		r   admin.ResetReport
		err error
	}
	done := make(chan result, 1)
	run := resetRun{started: w.now()}
	go func() {
		r, err := admin.ResetGroup(context.Background(), cfg)
		done <- result{r, err}
	}()
	for {
		w.settle()
		select {
		case res := <-done:
			if res.err != nil {
				w.t.Fatalf("ResetGroup: %v", res.err)
			}
			run.returned, run.report = w.now(), res.r
			return run
		default:
			w.step()
		}
	}
}

// arrival is when memlog took the delivered record.
func (d grpDelivery) arrival() time.Time {
	info, _ := kinesis.RecordFromContext(d.msg.Context())
	return info.ArrivalTime
}

// checkReset checks one reset of the shards in moved: at(d) says whether a delivered record is
// at or after the position. It returns, per shard, the first record delivered after the reset.
func (w *grpWorld) checkReset(run resetRun, moved []string, at func(d grpDelivery) bool) map[string]grpDelivery {
	w.t.Helper()
	bound := run.returned.Add(grpRenewInterval)
	// Run until every moved shard has delivered past the bound, plus a margin of load.
	w.steps(grpRenewInterval + grpSyncInterval + time.Second)
	first := map[string]grpDelivery{}
	for _, shard := range moved {
		after := w.deliveriesOf(func(d grpDelivery) bool { return d.shard == shard && d.at.After(bound) })
		if len(after) == 0 {
			w.t.Fatalf("%s: nothing delivered after the reset's bound (fake %s)", shard, grpRel(bound))
		}
		for _, d := range after {
			if !at(d) {
				w.t.Errorf("%s: %s (seq %s, arrived fake %s) is before the position but was delivered at fake %s, later than the bound %s (reset returned at %s)",
					shard, d.uuid, d.seq, grpRel(d.arrival()), grpRel(d.at), grpRel(bound), grpRel(run.returned))
			}
		}
		// The first record delivered by the shard's reader after the reset: the first
		// delivery after the fenced reader's last one, by a take after the reset.
		var firstNew *grpDelivery
		for _, d := range w.deliveriesOf(func(d grpDelivery) bool { return d.shard == shard && d.at.After(run.started) }) {
			if at(d) && (firstNew == nil) && w.takenSince(shard, d.worker, run.started, d.at) {
				firstNew = &d
			}
		}
		if firstNew == nil {
			w.t.Fatalf("%s: no delivery by a reader that took the lease after the reset", shard)
		}
		first[shard] = *firstNew
		// Nothing at or after the position is lost: every published record of the shard that
		// is at it (by what delivered copies say) came again after the bound, or is the
		// first, or came after the reset from the new reader.
		want := w.deliveriesOf(func(d grpDelivery) bool { return d.shard == shard && at(d) })
		seen := map[string]bool{}
		for _, d := range w.deliveriesOf(func(d grpDelivery) bool { return d.shard == shard && !d.at.Before(firstNew.at) }) {
			if w.takenSince(shard, d.worker, run.started, d.at) {
				seen[d.uuid] = true
			}
		}
		for _, d := range want {
			if !seen[d.uuid] && w.published[d.uuid].n >= w.published[firstNew.uuid].n {
				w.t.Errorf("%s: %s is at or after the position but was not delivered by the shard's reader after the reset", shard, d.uuid)
			}
		}
		if got, wantFirst := firstNew.uuid, w.firstAt(shard, at); got != wantFirst {
			w.t.Errorf("%s: first record delivered after the reset is %s, want %s (the first at the position)", shard, got, wantFirst)
		}
		w.t.Logf("%s: first after the reset %s (seq …%s, arrived fake %s) by %s at fake %s", shard, firstNew.uuid, tail(firstNew.seq), grpRel(firstNew.arrival()), firstNew.worker, grpRel(firstNew.at))
	}
	return first
}

// takenSince: worker took shard's lease after 'since' and before 'by' (its reader then reads
// from the reset's position).
func (w *grpWorld) takenSince(shard, worker string, since, by time.Time) bool {
	for _, wk := range w.workerList() {
		if wk.id != worker {
			continue
		}
		for _, op := range wk.store.opsOf(lease.OpTake, shard) {
			if op.err == nil && op.out.Owner == worker && op.at.After(since) && !op.at.After(by) {
				return true
			}
		}
	}
	return false
}

// firstAt is the first published record of shard (by rank) that some delivery shows at the
// position.
func (w *grpWorld) firstAt(shard string, at func(d grpDelivery) bool) string {
	best, bestN := "", -1
	for _, d := range w.deliveriesOf(func(d grpDelivery) bool { return d.shard == shard && at(d) }) {
		if n := w.published[d.uuid].n; bestN < 0 || n < bestN {
			best, bestN = d.uuid, n
		}
	}
	return best
}

func tail(s string) string { return s[max(0, len(s)-6):] }

func allShards(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = subShard(i)
	}
	return out
}

// TestResetRunningGroup resets a running group of two instances to a time, to LATEST, and one
// shard to a sequence number (at it, then after it), and checks each (checkReset).
func TestResetRunningGroup(t *testing.T) {
	for _, settle := range []bool{false, true} {
		t.Run(fmt.Sprintf("settle=%v", settle), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { resetRunningGroup(t, settle) })
		})
	}
}

func resetRunningGroup(t *testing.T, settle bool) {
	ignore := goleak.IgnoreCurrent()
	w := newGrpWorld(t, 4)
	w.resetFenced = true
	w.publishing = true
	w1 := w.start("w1")
	w.steps(grpSyncInterval / 2)
	w2 := w.start("w2")
	w.runUntil("spread over w1 and w2", 4*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
	w.steps(5 * time.Second)

	// To a time 3 s back: the last 3 s are read again.
	to := w.now().Add(-3 * time.Second)
	run := w.reset(admin.ResetConfig{To: admin.ResetPosition{Type: admin.ResetToTimestamp, Timestamp: to}, Settle: settle, Wait: 20 * time.Second})
	for _, s := range run.report.Shards {
		if s.Action != admin.ResetActionMove || s.AppliedBy == "" || settle != s.Settled {
			t.Errorf("to a time: shard %s: action %s, applied by %q (waiting: %s), settled %v; want moved, applied, settled %v",
				s.ShardID, s.Action, s.AppliedBy, s.Waiting, s.Settled, settle)
		}
	}
	t.Logf("to a time: returned after fake %s; %s", run.returned.Sub(run.started), reportLine(run.report))
	w.checkReset(run, allShards(4), func(d grpDelivery) bool { return !d.arrival().Before(to) })

	// To LATEST: what arrived more than 1 s before the reset is skipped.
	w.steps(2 * time.Second)
	run = w.reset(admin.ResetConfig{To: admin.ResetPosition{Type: admin.ResetToLatest}, Settle: settle})
	latest := run.report.At.Add(-time.Second)
	if want := "AT_TIMESTAMP@" + latest.Format("2006-01-02T15:04:05.000Z07:00"); run.report.To != want {
		t.Errorf("LATEST is written as %q, want %q", run.report.To, want)
	}
	w.checkReset(run, allShards(4), func(d grpDelivery) bool { return !d.arrival().Before(latest) })

	// One shard to a sequence number: at it (the record comes again), then after it (stepped
	// over).
	w.steps(2 * time.Second)
	shard := subShard(1)
	old := w.deliveriesOf(func(d grpDelivery) bool { return d.shard == shard && d.at.Before(w.now().Add(-4*time.Second)) })
	target := old[len(old)-1]
	others := map[string]int{}
	for _, id := range allShards(4) {
		others[id] = len(w.deliveriesOf(func(d grpDelivery) bool { return d.shard == id }))
	}
	run = w.reset(admin.ResetConfig{To: admin.ResetPosition{Type: admin.ResetToSequenceNumber, SequenceNumber: target.seq}, ShardID: shard, Settle: settle})
	for _, s := range run.report.Shards {
		if want := map[bool]string{true: admin.ResetActionMove, false: admin.ResetActionNone}[s.ShardID == shard]; s.Action != want {
			t.Errorf("one shard: %s's action is %s, want %s", s.ShardID, s.Action, want)
		}
	}
	rank := w.published[target.uuid].n
	first := w.checkReset(run, []string{shard}, func(d grpDelivery) bool { return w.published[d.uuid].n >= rank })
	if first[shard].uuid != target.uuid {
		t.Errorf("at a sequence number: first record after the reset is %s, want %s", first[shard].uuid, target.uuid)
	}

	w.steps(2 * time.Second)
	run = w.reset(admin.ResetConfig{To: admin.ResetPosition{Type: admin.ResetAfterSequenceNumber, SequenceNumber: target.seq}, ShardID: shard, Settle: settle})
	first = w.checkReset(run, []string{shard}, func(d grpDelivery) bool { return w.published[d.uuid].n > rank })
	if got := w.published[first[shard].uuid].n; got != rank+1 {
		t.Errorf("after a sequence number: first record after the reset has rank %d, want %d", got, rank+1)
	}
	// The other shards were never fenced: each went on without a lost lease.
	for _, wk := range []*grpWorker{w1, w2} {
		for _, id := range allShards(4) {
			if id == shard {
				continue
			}
			for _, ev := range wk.eventsOf("lost", id) {
				if ev.at.After(run.started) {
					t.Errorf("%s lost %s at fake %s, in a reset of %s alone", wk.id, id, grpRel(ev.at), shard)
				}
			}
		}
	}
	w.publishing = false
	w.close(w1)
	w.close(w2)
	goleak.VerifyNone(t, ignore)
}

func reportLine(r admin.ResetReport) string {
	var parts []string
	for _, s := range r.Shards {
		parts = append(parts, fmt.Sprintf("%s %s %s->%s given to %q gen %d applied by %q after %s", s.ShardID, s.Action, tail(s.From), r.To, s.GivenTo, s.Generation, s.AppliedBy, s.AppliedAfter))
	}
	return strings.Join(parts, "; ")
}

// Validate names every problem at once, each with its field and what to write.
func TestResetConfigValidate(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	base := func() admin.ResetConfig {
		return admin.ResetConfig{Stream: e.stream, ConsumerGroup: "g", Client: e.log, LeaseStore: e.store,
			To: admin.ResetPosition{Type: admin.ResetToTrimHorizon}}
	}
	for _, tc := range []struct {
		name string
		edit func(*admin.ResetConfig)
		want []string
	}{
		{"valid", func(*admin.ResetConfig) {}, nil},
		{"nothing", func(c *admin.ResetConfig) { *c = admin.ResetConfig{} }, []string{"Stream", "ConsumerGroup is empty", "Client is nil", "LeaseStore is nil", "To.Type is ResetType(0)"}},
		{"time without a time", func(c *admin.ResetConfig) { c.To.Type = admin.ResetToTimestamp }, []string{"To.Timestamp is zero"}},
		{"sequence number without a shard", func(c *admin.ResetConfig) {
			c.To = admin.ResetPosition{Type: admin.ResetAfterSequenceNumber, SequenceNumber: "12x"}
		}, []string{`To.SequenceNumber "12x" is not a sequence number`, "ShardID is empty"}},
		{"a time in the future", func(c *admin.ResetConfig) {
			c.To = admin.ResetPosition{Type: admin.ResetToTimestamp, Timestamp: time.Now().Add(time.Hour)}
		}, []string{"is in the future", "use ResetToLatest"}},
		{"negative durations", func(c *admin.ResetConfig) { c.Wait, c.SettleTimeout = -1, -1 }, []string{"Wait is -1ns", "SettleTimeout is -1ns"}},
		{"a time on a KCL table", func(c *admin.ResetConfig) {
			c.LeaseStore = kclLike{c.LeaseStore}
			c.To = admin.ResetPosition{Type: admin.ResetToTimestamp, Timestamp: time.Now()}
		}, []string{"KCL application's lease table cannot hold", "reset to TRIM_HORIZON or after a sequence number"}},
		{"TRIM_HORIZON on a KCL table", func(c *admin.ResetConfig) { c.LeaseStore = kclLike{c.LeaseStore} }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.edit(&cfg)
			err := cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate passed, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v\nwant it to say %q", err, w)
				}
			}
			if _, err := admin.ResetGroup(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "invalid ResetConfig") {
				t.Errorf("ResetGroup with that config: %v, want it refused", err)
			}
		})
	}
}

// kclLike is a store that says it shares its table with KCL workers (lease.ForeignTable).
type kclLike struct{ lease.Store }

func (kclLike) ForeignWorkers() string { return "KCL workers" }

// A reset to a time before a split reads the parent again from that time (its lease, deleted
// once its children were read, is created again), then the children from their start, so each
// key's records come in order as on a first read; a reset to TRIM_HORIZON reads everything again
// the same way.
func TestResetAcrossReshard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 1, nil)
		cfg := e.config(subGroup)
		cfg.ShardSyncInterval = 20 * time.Millisecond
		cfg.RequestTimeout = 50 * time.Millisecond // finished leases are deleted 300 ms after their children start
		put := func(phase string, n int) {
			for i := range n {
				for _, k := range []string{"a", "b", "c", "d"} {
					e.putRaw(k, fmt.Appendf(nil, "%s-%s-%d", k, phase, i))
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		put("parent", 3)
		since := time.Now() // the reset's time: the parent's records from here on, then every child's
		put("late", 2)
		sub := e.subscriber(cfg)
		ch := e.subscribe(sub, context.Background())
		subRecvAck(t, ch, 20)
		parent := subShard(0)
		e.subSplit(parent)
		put("child", 2)
		subRecvAck(t, ch, 8)
		for deadline := time.Now().Add(subWait); ; time.Sleep(50 * time.Millisecond) { // polling the store: no signal
			list, err := e.store.List(context.Background(), subGroup, e.stream)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(list, func(l lease.Lease) bool { return l.ShardID == parent }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the parent's lease is still there with both children read: %+v", list)
			}
		}

		for _, to := range []admin.ResetPosition{
			{Type: admin.ResetToTimestamp, Timestamp: since},
			{Type: admin.ResetToTrimHorizon},
		} {
			report, err := admin.ResetGroup(context.Background(), admin.ResetConfig{
				Stream: e.stream, ConsumerGroup: subGroup, Client: e.log, LeaseStore: e.store, To: to,
			})
			if err != nil {
				t.Fatalf("ResetGroup to %v: %v", to.Type, err)
			}
			// The first reset creates the parent's lease again; the second finds it at SHARD_END.
			wantAction := map[admin.ResetType]string{admin.ResetToTimestamp: admin.ResetActionCreate, admin.ResetToTrimHorizon: admin.ResetActionMove}[to.Type]
			if got := report.Shards[0]; got.ShardID != parent || got.Action != wantAction {
				t.Errorf("reset to %v: the parent's entry is %+v, want action %s", to.Type, got, wantAction)
			}
			want := map[string][]string{}
			for _, k := range []string{"a", "b", "c", "d"} {
				if to.Type == admin.ResetToTrimHorizon {
					want[k] = append(want[k], k+"-parent-0", k+"-parent-1", k+"-parent-2")
				}
				want[k] = append(want[k], k+"-late-0", k+"-late-1", k+"-child-0", k+"-child-1")
			}
			n := 0
			for _, w := range want {
				n += len(w)
			}
			got := map[string][]string{}
			for _, m := range subRecvAck(t, ch, n) {
				k, _, _ := strings.Cut(string(m.Payload), "-")
				got[k] = append(got[k], string(m.Payload))
			}
			for k, w := range want {
				if fmt.Sprint(got[k]) != fmt.Sprint(w) {
					t.Errorf("reset to %v: key %s delivered %v, want %v", to.Type, k, got[k], w)
				}
			}
			subNone(t, ch, subQuiet)
		}
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// kclTable is a MemoryStore read as a KCL application's table: leases of kcl-* owners are a
// KCL worker's (Foreign).
type kclTable struct{ lease.Store }

func (kclTable) ForeignWorkers() string { return "KCL workers" }

func (s kclTable) List(ctx context.Context, group, stream string) ([]lease.Lease, error) {
	list, err := s.Store.List(ctx, group, stream)
	for i := range list {
		list[i].Foreign = strings.HasPrefix(list[i].Owner, "kcl-")
	}
	return list, err
}

// On a KCL table a reset is refused while a KCL worker renews a lease, naming it; once its
// counters stood still for KCLFailoverTime, the reset takes its lease and releases it.
func TestResetRefusedWhileKCLWorkerLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSubEnv(t, 1, nil)
		store := kclTable{e.store}
		l, err := e.store.Create(t.Context(), lease.Lease{Group: subGroup, Stream: e.stream, ShardID: subShard(0)})
		if err == nil {
			l, err = e.store.Take(t.Context(), l, "kcl-worker-1")
		}
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		renewed := make(chan struct{})
		go func() { // the KCL worker, renewing every second
			defer close(renewed)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
					l, _ = e.store.Renew(context.Background(), l)
				}
			}
		}()
		cfg := admin.ResetConfig{Stream: e.stream, ConsumerGroup: subGroup, Client: e.log, LeaseStore: store,
			To: admin.ResetPosition{Type: admin.ResetToTrimHorizon}}
		_, err = admin.ResetGroup(t.Context(), cfg)
		if err == nil || !strings.Contains(err.Error(), `KCL worker "kcl-worker-1" is live`) || !strings.Contains(err.Error(), "stop every worker of the KCL application") {
			t.Fatalf("ResetGroup with a live KCL worker: %v, want it refused, naming the worker", err)
		}
		if got, _ := e.store.List(t.Context(), subGroup, e.stream); got[0].Owner != "kcl-worker-1" || got[0].Checkpoint != "" {
			t.Fatalf("a refused reset changed the lease: %+v", got[0])
		}
		close(stop)
		<-renewed
		report, err := admin.ResetGroup(t.Context(), cfg)
		if err != nil {
			t.Fatalf("ResetGroup once the KCL worker stopped: %v", err)
		}
		got, _ := e.store.List(t.Context(), subGroup, e.stream)
		if got[0].Owner != "" || got[0].Checkpoint != lease.TrimHorizon || report.Shards[0].GivenTo != "" {
			t.Fatalf("after the reset the lease is %+v (report %+v), want free at TRIM_HORIZON", got[0], report.Shards[0])
		}
	})
}

// A sequence number of another shard is refused before anything is written, naming the shard:
// the group would otherwise take it for a checkpoint past the trim horizon and read the shard
// again from its start.
func TestResetRefusesAnotherShardsSequenceNumber(t *testing.T) {
	e := newSubEnv(t, 2, nil)
	keys := grpKeys(t, e, 2)
	out := e.putRaw(keys[0], []byte("on shard 0"))
	if got := aws.ToString(out.ShardId); got != subShard(0) {
		t.Fatalf("record went to %s", got)
	}
	_, err := admin.ResetGroup(t.Context(), admin.ResetConfig{Stream: e.stream, ConsumerGroup: subGroup, Client: e.log, LeaseStore: e.store,
		ShardID: subShard(1), To: admin.ResetPosition{Type: admin.ResetAfterSequenceNumber, SequenceNumber: aws.ToString(out.SequenceNumber)}})
	if err == nil || !strings.Contains(err.Error(), `shard "shardId-000000000001"`) || !strings.Contains(err.Error(), "Kinesis refuses sequence number") {
		t.Fatalf("ResetGroup with shard 0's sequence number for shard 1: %v, want it refused, naming the shard", err)
	}
	if list, _ := e.store.List(t.Context(), subGroup, e.stream); len(list) != 0 {
		t.Errorf("a refused reset wrote leases: %+v", list)
	}
}
