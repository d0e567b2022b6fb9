//go:build unix

package tests_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// The rolling-update test: what a Kubernetes Deployment's default rolling update does to a
// consumer group. Three tests/worker processes ("pods") consume a 6-shard kinesalite stream as
// one group, with their leases in dynalite, under the failover test's keyed load and short
// lease settings; then each is replaced in turn by a process with a new WorkerID (a new pod
// name):
//
//   - surge_on (maxSurge 25 %, the default): start the new one, wait until it holds a lease,
//     then SIGTERM the old one (its subscriber closes) and wait for it to exit;
//   - surge_off (maxSurge 0): SIGTERM the old one, wait for its exit, then start the new one;
//   - sigkill_mid_rollout: as surge_on, but the second old process is SIGKILLed (a pod that
//     overran its grace period, or a node lost): crash rules apply to its shards.
//
// Helpers here are prefixed "lr"; most of the work is done by the failover test's "lf" helpers.
const (
	lrInstances = 3
	// lrGapLimit is the longest a shard may go without a reader while an instance is replaced
	// gracefully (from the revoked hook of one tenure to the acquired hook of the next).
	lrGapLimit = 2 * time.Second
	// lrCrashGapLimit is that limit for the shards of a SIGKILLed instance.
	lrCrashGapLimit = lfLeaseDuration + 2*lfLeaseSyncInterval
	// lrEvenWithin: the leases are spread evenly over the new instances this long after the
	// last of them joined.
	lrEvenWithin = 3 * lfLeaseSyncInterval
)

// lrMode is one way of rolling.
type lrMode struct {
	name  string
	surge bool // start the new instance before stopping the old one
	kill  int  // the old instance (1-based) that gets SIGKILL instead of SIGTERM; 0: none
}

// TestLiveRollout replaces the three instances of a consumer group one by one, as a
// Deployment's rolling update does, under keyed load, and checks in each mode that nothing is
// lost, per-key order holds within each tenure, nothing acked comes twice (but what a killed
// instance acked after its last checkpoint), no shard goes without a reader for long, the old
// member records leave the lease table, and the leases end evenly spread over the new
// instances.
func TestLiveRollout(t *testing.T) {
	// In parallel with the other tests of processes (TestLiveFailover_KillPauseClose,
	// TestLiveRollout, TestLiveExamplesRun), which mostly wait on timers and on their
	// processes, once the package's sequential tests are done: each costs the package's run
	// less than its own length.
	t.Parallel()
	env := newLiveEnv(t)
	bin := lfBuildWorker(t)
	store, table := env.leaseTable(t, newCallCounter())
	lfReport(t, "settings: LeaseDuration %s, LeaseRenewInterval %s, LeaseSyncInterval %s, CheckpointInterval %s, PollInterval %s, HandoffTimeout %s, MaxInFlight %d; %d instances, %d shards, %d keys, %d records/s",
		lfLeaseDuration, lfLeaseRenewInterval, lfLeaseSyncInterval, lfCheckpointInterval, lfPollInterval, lfHandoffTimeout, lfMaxInFlight,
		lrInstances, lfShards, lfShards*lfKeysPerShard, int(float64(lfShards*lfKeysPerShard)*float64(time.Second)/float64(lfProduceEvery)))
	for _, mode := range []lrMode{
		{name: "surge_on", surge: true},
		{name: "surge_off"},
		{name: "sigkill_mid_rollout", surge: true, kill: 2},
	} {
		t.Run(mode.name, func(t *testing.T) { lrRollout(t, env, bin, store, table, mode) })
	}
}

// lrGroup is one consumer group of worker processes, with its stream, load and observers, and
// what happened to it.
type lrGroup struct {
	store         *lease.DynamoDBStore
	bin           string
	stream, group string
	keyShard      map[string]string
	args          []string
	rec           *lfRecord
	mon           *lfMonitor
	prod          *lfProducer

	old, new []*lfWorker
	newNames []string
	steps    []lrStep
	crash    *lrCrash // the SIGKILL, if the mode has one
	// tRoll: the rollout starts; lastJoin: the last new instance holds a lease; evenBy: the
	// spread must be even by then; tRolled: it was seen even; tDrain: the new ones are closed.
	tRoll, lastJoin, evenBy, tRolled, tDrain time.Time
}

// lrStep is one replacement, as it happened.
type lrStep struct {
	old, new       string
	sig            syscall.Signal
	started        time.Time // the new process
	ready, joined  time.Time // its "ready" event (Subscribe returned), its first "acquired"
	signalled      time.Time // the old process
	exited         time.Time // the old process's exit was seen
	memberLeftWith bool      // the old member record was still there right after the exit
}

// lrCrash is the SIGKILL of a rollout: who, when, and the lease table read after its exit
// (its last checkpoints).
type lrCrash struct {
	worker string
	at     time.Time
	atKill lfSnap
	shards []string
}

func lrRollout(t *testing.T, env *liveEnv, bin string, store *lease.DynamoDBStore, table string, mode lrMode) {
	testStart := time.Now()
	g := lrNewGroup(t, env, bin, store, table, "rollout-"+mode.name)
	g.startOld(t)
	g.roll(t, mode)
	g.drain(t)
	g.check(t)
	lfReport(t, "wall time: the rollout %s (from the first replacement to the even spread), the subtest %s",
		lfMS(g.tRolled.Sub(g.tRoll)), time.Since(testStart).Round(time.Millisecond))
}

// startOld starts three instances together and waits until they hold 2/2/2 and the group has
// caught up with the load.
func (g *lrGroup) startOld(t *testing.T) {
	t.Helper()
	want := map[string]int{}
	for i := range lrInstances {
		w := lfStartWorker(t, g.bin, fmt.Sprintf("old%d", i+1), g.args, g.rec)
		g.old = append(g.old, w)
		want[w.name] = lfShards / lrInstances
	}
	even := g.mon.waitFor(t, "the leases to spread 2/2/2 over the old instances", func(s lfSnap) bool { return s.spread(want) })
	lfReport(t, "start: 2/2/2 over the old instances %s after they started", lfMS(even.at.Sub(g.old[0].started)))
	lfCaughtUp(t, g.prod, g.rec, g.mon, "before the rollout")
}

// roll replaces the old instances one by one, then waits until the leases are spread evenly
// over the new ones.
func (g *lrGroup) roll(t *testing.T, mode lrMode) {
	t.Helper()
	g.tRoll = time.Now()
	for i, old := range g.old {
		sig := syscall.SIGTERM
		if mode.kill == i+1 {
			sig = syscall.SIGKILL
		}
		st, w := g.replace(t, old, fmt.Sprintf("new%d", i+1), mode.surge, sig)
		g.steps = append(g.steps, st)
		g.new = append(g.new, w)
		g.newNames = append(g.newNames, w.name)
		if sig == syscall.SIGKILL {
			atKill := g.mon.readNow(t) // its last checkpoints: the new owners start after them
			g.crash = &lrCrash{worker: old.name, at: st.signalled, atKill: atKill, shards: atKill.shardsOf(old.name)}
		}
	}
	g.lastJoin = g.steps[len(g.steps)-1].joined
	g.evenBy = g.lastJoin.Add(lrEvenWithin)
	if g.crash != nil && g.crash.at.Add(lrCrashGapLimit).After(g.evenBy) {
		g.evenBy = g.crash.at.Add(lrCrashGapLimit)
	}
	g.mon.waitFor(t, "the leases to spread evenly over the new instances", func(s lfSnap) bool { return lrEven(s, g.newNames) })
	g.tRolled = time.Now()
}

// drain stops publishing, waits until everything is delivered and checkpointed, and closes the
// new instances.
func (g *lrGroup) drain(t *testing.T) {
	t.Helper()
	g.prod.stop()
	if g.prod.err != nil {
		t.Fatal(g.prod.err)
	}
	lfCaughtUp(t, g.prod, g.rec, g.mon, "after the rollout")
	g.tDrain = time.Now()
	for _, w := range g.new {
		w.signal(t, syscall.SIGTERM)
	}
	for _, w := range g.new {
		if code := w.waitExit(t); code != 0 {
			t.Errorf("%s exit status after SIGTERM: %d, want 0", w.name, code)
		}
	}
	g.mon.readNow(t)
	g.mon.stop()
}

// check runs the checks over every line of the workers and every read of the lease table.
func (g *lrGroup) check(t *testing.T) {
	t.Helper()
	deliveries, events, bad := g.rec.snapshot()
	for _, b := range bad {
		t.Errorf("unparsable worker output: %s", b)
	}
	snaps := g.mon.all()
	lrReportSteps(t, g.steps, events)
	tenures, acquired := lfTenures(deliveries, events)
	lfCheckAtLeastOnce(t, g.prod, deliveries, g.keyShard)
	lfCheckTenures(t, tenures, acquired, lfHolds(snaps), time.Time{})
	lfCheckCheckpoints(t, snaps)
	closed := append([]string(nil), g.newNames...)
	for _, st := range g.steps {
		if st.sig == syscall.SIGTERM {
			closed = append(closed, st.old)
		}
	}
	sort.Strings(closed)
	lfCheckCloses(t, events, closed)
	lrCheckGaps(t, events, deliveries, g.crash, g.tRoll, g.tDrain)
	lrCheckDuplicates(t, deliveries, g.crash)
	lrCheckEven(t, snaps, g.newNames, g.lastJoin, g.evenBy, g.tDrain)
	if g.crash != nil {
		names := g.memberNames(t)
		lfReport(t, "members: the killed %s's record is %s the lease table %s after the kill (stale records are removed after 6 x LeaseDuration = %s); members now: %s",
			g.crash.worker, map[bool]string{true: "still in", false: "gone from"}[lrContains(names, g.crash.worker)],
			lfMS(time.Since(g.crash.at)), 6*lfLeaseDuration, strings.Join(names, ", "))
	}
	lfReport(t, "totals: %d records published, %d deliveries, %d lease reads (%d failed), %d tenures",
		g.prod.total(), len(deliveries), len(snaps), g.mon.failures(), len(tenures))
}

// lrNewGroup creates a stream, picks its keys, and starts the lease monitor and the producer;
// store is the lease table named table.
func lrNewGroup(t *testing.T, env *liveEnv, bin string, store *lease.DynamoDBStore, table, group string) *lrGroup {
	stream, shards := lfCreateStream(t, env, lfShards)
	g := &lrGroup{store: store, bin: bin, stream: stream, group: group, keyShard: lfKeys(t, shards, lfKeysPerShard)}
	keys := make([]string, 0, len(g.keyShard))
	for k := range g.keyShard {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	g.args = lfWorkerArgs(env, table, stream, group)
	g.rec = newLfRecord()
	g.mon = startLfMonitor(t, store, group, stream)
	g.prod = startLfProducer(t, env, stream, keys)
	return g
}

// replace replaces old by a new process named name: start it and wait until it holds a lease,
// then signal old and wait for its exit (surge), or the other way round.
func (g *lrGroup) replace(t *testing.T, old *lfWorker, name string, surge bool, sig syscall.Signal) (lrStep, *lfWorker) {
	t.Helper()
	st := lrStep{old: old.name, new: name, sig: sig}
	var w *lfWorker
	start := func() {
		w = lfStartWorker(t, g.bin, name, g.args, g.rec)
		st.started = w.started
		g.rec.waitFor(t, name+" to be ready and hold a lease", func(r *lfRecord) bool {
			ready, ok1 := r.event(name, "ready", "", time.Time{})
			joined, ok2 := r.event(name, "acquired", "", time.Time{})
			st.ready, st.joined = ready.t, joined.t
			return ok1 && ok2
		})
	}
	stop := func() {
		st.signalled = old.signal(t, sig)
		code := old.waitExit(t)
		st.exited = time.Now()
		want := 0
		if sig == syscall.SIGKILL {
			want = -1
		}
		if code != want {
			t.Errorf("%s exit status after %s: %d, want %d", old.name, sig, code, want)
		}
		st.memberLeftWith = lrContains(g.memberNames(t), old.name)
		if st.memberLeftWith && sig == syscall.SIGTERM {
			t.Errorf("%s's member record is still in the lease table after it closed and exited", old.name)
		}
	}
	if surge {
		start()
		stop()
	} else {
		stop()
		start()
	}
	return st, w
}

// memberNames lists the group's member records in the lease table.
func (g *lrGroup) memberNames(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	members, err := g.store.Members(ctx, g.group, g.stream)
	if err != nil {
		t.Fatalf("reading the member records: %v", err)
	}
	names := make([]string, 0, len(members))
	for _, m := range members {
		names = append(names, m.Worker)
	}
	return names
}

func lrContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// lrReportSteps logs each replacement: when the new instance was ready and held a lease, how
// long the old one took to exit (and its Close), and whether its member record was gone.
func lrReportSteps(t *testing.T, steps []lrStep, events []lfEvent) {
	t.Helper()
	for i, st := range steps {
		closeMS := "-"
		for _, e := range events {
			if e.worker == st.old && e.event == "closed" {
				closeMS = fmt.Sprintf("%d ms", e.closeMS)
			}
		}
		lfReport(t, "step %d: %s ready %s and holding a lease %s after its start; %s exited %s after %s (Close %s); its member record %s right after the exit",
			i+1, st.new, lfMS(st.ready.Sub(st.started)), lfMS(st.joined.Sub(st.started)), st.old, lfMS(st.exited.Sub(st.signalled)), st.sig, closeMS,
			map[bool]string{true: "was still there", false: "was gone"}[st.memberLeftWith])
	}
}

// ---------------------------------------------------------------------------------------------
// The checks.

// lrEven: every lease is held by one of live, and their counts differ by at most one.
func lrEven(s lfSnap, live []string) bool {
	if len(s.leases) != lfShards {
		return false
	}
	c := s.counts()
	total := 0
	for w, n := range c {
		if !lrContains(live, w) {
			return false
		}
		total += n
	}
	lo, hi := lfShards, 0
	for _, w := range live {
		lo, hi = min(lo, c[w]), max(hi, c[w])
	}
	return total == lfShards && hi-lo <= 1
}

// lrCheckEven: the leases were spread evenly over live by the deadline, and stayed so until the
// drain. It judges from every read of the lease table after the last join: the first of the
// reads from which every read until the drain is even.
func lrCheckEven(t *testing.T, snaps []lfSnap, live []string, lastJoin, deadline, until time.Time) {
	t.Helper()
	var settled *lfSnap
	flips := 0
	for i, s := range snaps {
		if s.before.Before(lastJoin) || !s.at.Before(until) {
			continue
		}
		switch even := lrEven(s, live); {
		case even && settled == nil:
			settled = &snaps[i]
		case !even && settled != nil:
			settled = nil
			flips++
		}
	}
	if settled == nil {
		t.Errorf("the leases were not spread evenly over %s before the drain", strings.Join(live, ", "))
		return
	}
	lfReport(t, "even spread: %s %s after the last instance joined (goal <= %s after it: %s); %d times uneven again after being even; %s",
		strings.Join(live, ", "), lfMS(settled.at.Sub(lastJoin)), lfMS(deadline.Sub(lastJoin)), lfVerdict(!settled.at.After(deadline)), flips, *settled)
	if settled.at.After(deadline) {
		t.Errorf("the leases were spread evenly over the new instances %s after the last join, later than %s", settled.at.Sub(lastJoin), deadline.Sub(lastJoin))
	}
}

// lrGap is a span in which a shard had no reader, from the hooks: from the end of a tenure
// (revoked, lost, or the SIGKILL of its process) to the next acquired.
type lrGap struct {
	shard, from, to, how string
	end, start           time.Time // start is zero if no reader followed
}

// lrGaps walks each shard's hook events in time order. It also returns the acquisitions made
// while another worker's tenure of the shard was still open (two readers, by the hooks).
func lrGaps(events []lfEvent, crash *lrCrash) (gaps []lrGap, overlaps []string) {
	perShard := map[string][]lfEvent{}
	for _, e := range events {
		if e.shard != "" && (e.event == "acquired" || e.event == "revoked" || e.event == "lost") {
			perShard[e.shard] = append(perShard[e.shard], e)
		}
	}
	for shard, es := range perShard {
		if crash != nil {
			es = append(es, lfEvent{worker: crash.worker, event: "killed", shard: shard, t: crash.at})
		}
		// In time order; within a millisecond an end goes before an acquisition.
		sort.SliceStable(es, func(i, j int) bool {
			if !es[i].t.Equal(es[j].t) {
				return es[i].t.Before(es[j].t)
			}
			return es[i].event != "acquired" && es[j].event == "acquired"
		})
		holders := map[string]bool{}
		var open *lrGap
		for _, e := range es {
			if e.event != "acquired" {
				if holders[e.worker] {
					delete(holders, e.worker)
					if len(holders) == 0 {
						open = &lrGap{shard: shard, from: e.worker, how: e.event, end: e.t}
					}
				}
				continue
			}
			for h := range holders {
				if h != e.worker {
					overlaps = append(overlaps, fmt.Sprintf("%s acquired %s at %s while %s held it", e.worker, shard, e.t.Format("15:04:05.000"), h))
				}
			}
			holders[e.worker] = true
			if open != nil {
				open.to, open.start = e.worker, e.t
				gaps = append(gaps, *open)
				open = nil
			}
		}
		if open != nil {
			gaps = append(gaps, *open)
		}
	}
	sort.Slice(gaps, func(i, j int) bool {
		if gaps[i].shard != gaps[j].shard {
			return gaps[i].shard < gaps[j].shard
		}
		return gaps[i].end.Before(gaps[j].end)
	})
	return gaps, overlaps
}

// lrCheckGaps: during the rollout (from its start to the drain), no shard went without a
// reader for more than lrGapLimit, or lrCrashGapLimit after the SIGKILL of its owner. It also
// logs, per shard, the longest pause between two deliveries, which is what a handler sees.
func lrCheckGaps(t *testing.T, events []lfEvent, deliveries []lfDelivery, crash *lrCrash, from, until time.Time) {
	t.Helper()
	// The workers stamp their lines in whole milliseconds (truncated).
	from, until = from.Truncate(time.Millisecond), until.Truncate(time.Millisecond)
	gaps, overlaps := lrGaps(events, crash)
	for _, o := range overlaps {
		t.Errorf("two readers of one shard, by the hooks: %s", o)
	}
	perShard := map[string][]string{}
	var worst, worstCrash time.Duration
	for _, g := range gaps {
		if g.end.Before(from) || !g.end.Before(until) {
			continue
		}
		if g.start.IsZero() {
			t.Errorf("%s had no reader from %s (%s of %s) to the end of the rollout", g.shard, g.end.Format("15:04:05.000"), g.how, g.from)
			continue
		}
		d := g.start.Sub(g.end)
		limit := lrGapLimit
		if g.how == "killed" {
			limit, worstCrash = lrCrashGapLimit, max(worstCrash, d)
		} else {
			worst = max(worst, d)
		}
		perShard[g.shard] = append(perShard[g.shard], fmt.Sprintf("%s (%s %s -> %s)", lfMS(d), g.how, g.from, g.to))
		if d > limit {
			t.Errorf("%s had no reader for %s, from %s (%s of %s) to %s (acquired by %s); the limit is %s",
				g.shard, d, g.end.Format("15:04:05.000"), g.how, g.from, g.start.Format("15:04:05.000"), g.to, limit)
		}
	}
	stalls := lrDeliveryStalls(deliveries, from, until)
	shards := make([]string, 0, len(stalls))
	for s := range stalls {
		shards = append(shards, s)
	}
	sort.Strings(shards)
	for _, s := range shards {
		lfReport(t, "gaps: %s without a reader: %s; longest pause between deliveries %s", s, strings.Join(perShard[s], ", "), lfMS(stalls[s]))
	}
	msg := fmt.Sprintf("gaps: longest graceful gap %s (limit %s: %s)", lfMS(worst), lfMS(lrGapLimit), lfVerdict(worst <= lrGapLimit))
	if crash != nil {
		msg += fmt.Sprintf("; longest gap after the SIGKILL of %s %s (limit LeaseDuration + 2 LeaseSyncIntervals = %s: %s)",
			crash.worker, lfMS(worstCrash), lfMS(lrCrashGapLimit), lfVerdict(worstCrash <= lrCrashGapLimit))
	}
	lfReport(t, "%s", msg)
}

// lrDeliveryStalls returns, per shard, the longest time between two deliveries (by any worker)
// that overlaps the span from..until.
func lrDeliveryStalls(deliveries []lfDelivery, from, until time.Time) map[string]time.Duration {
	at := map[string][]time.Time{}
	for _, d := range deliveries {
		at[d.shard] = append(at[d.shard], d.t)
	}
	stalls := map[string]time.Duration{}
	for s, ts := range at {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		for i := 1; i < len(ts); i++ {
			if ts[i].After(from) && ts[i-1].Before(until) {
				stalls[s] = max(stalls[s], ts[i].Sub(ts[i-1]))
			}
		}
	}
	return stalls
}

// lrCheckDuplicates: no record was delivered twice, but (with a crash) one that the killed
// worker delivered, on a shard it held, after its last checkpoint, and that another worker
// delivered once more after the kill.
func lrCheckDuplicates(t *testing.T, deliveries []lfDelivery, crash *lrCrash) {
	t.Helper()
	byRec := map[lfRec][]lfDelivery{}
	for _, d := range deliveries {
		byRec[lfRec{d.key, d.n}] = append(byRec[lfRec{d.key, d.n}], d)
	}
	explained, unexplained := 0, 0
	for r, ds := range byRec {
		if len(ds) < 2 {
			continue
		}
		if crash != nil && len(ds) == 2 && lrCrashExplains(crash, ds) {
			explained++
			continue
		}
		if unexplained < 10 {
			parts := make([]string, 0, len(ds))
			for _, d := range ds {
				parts = append(parts, fmt.Sprintf("%s at %s (%s seq %s)", d.worker, d.t.Format("15:04:05.000"), d.shard, d.seq))
			}
			t.Errorf("%s:%d was delivered %d times: %s", r.key, r.n, len(ds), strings.Join(parts, "; "))
		}
		unexplained++
	}
	if crash == nil {
		lfReport(t, "duplicates: %d records delivered more than once (goal 0: %s)", unexplained, lfVerdict(unexplained == 0))
		return
	}
	crashDup := lfDuplicates(deliveries, crash.worker, crash.shards, crash.at, time.Now())
	crashSince := lfAfterCheckpoint(deliveries, crash.worker, crash.atKill, crash.shards, crash.at)
	crashLast := lfDeliveredWithin(deliveries, crash.worker, crash.shards, crash.at.Add(-lfCheckpointInterval), crash.at)
	lfReport(t, "duplicates: %d records of the killed %s (on its %d shards) delivered again by the new owners; it had delivered %d after its last checkpoint (per the lease table at the kill) and %d in the last CheckpointInterval (%s) before the kill; %d other duplicates (goal 0: %s)",
		crashDup, crash.worker, len(crash.shards), crashSince, crashLast, lfCheckpointInterval, unexplained, lfVerdict(unexplained == 0))
	if crashDup > crashSince {
		t.Errorf("the new owners redelivered %d records of the killed worker, more than the %d it delivered after its last checkpoint", crashDup, crashSince)
	}
	if explained != crashDup {
		t.Errorf("%d duplicates fit the crash rule, but %d records of the killed worker were delivered again", explained, crashDup)
	}
}

// lrCrashExplains: of the two deliveries of a record, one is the killed worker's, on one of its
// shards, after the checkpoint it left, before the kill; the other is another worker's after it.
func lrCrashExplains(crash *lrCrash, ds []lfDelivery) bool {
	a, b := ds[0], ds[1]
	if b.worker == crash.worker {
		a, b = b, a
	}
	cp := ""
	for _, l := range crash.atKill.leases {
		if l.ShardID == a.shard {
			cp = l.Checkpoint
		}
	}
	return a.worker == crash.worker && b.worker != crash.worker && lrContains(crash.shards, a.shard) &&
		lfSeqLess(cp, a.seq) && a.t.Before(crash.at.Add(lfTolerance)) && !b.t.Before(crash.at)
}
