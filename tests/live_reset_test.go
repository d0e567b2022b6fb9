//go:build unix

package tests_test

import (
	"context"
	"maps"
	"math/big"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// TestLiveReset resets a running group of two tests/worker processes on kinesalite and dynalite,
// under keyed load, to a time, to LATEST, and one shard to a sequence number, and checks for
// each: no record before the position is delivered later than one LeaseRenewInterval after
// ResetGroup returned; every record at or after it is delivered again after the reset; one
// reader per shard throughout. It reports the first record each shard delivered after it.
//
// Positions are checked by the producer's numbering: n ≤ before[key] were published (Publish
// returned) before the moment the position is taken at, so they arrived before it; the
// batch that was out at that moment may fall on either side.
//
// A delivery is "after the reset" when the tenure it belongs to (its worker's last acquisition
// of the shard before it, in the worker's output) began after the reset sent the shard's lease
// back to the group (resetRecorder). Counting from the reset's start instead took the tenure of
// a handoff between two workers during the reset for the reset's (CI, once in a dozen runs).
func TestLiveReset(t *testing.T) {
	t.Parallel() // with the other tests of processes, which mostly wait
	env := newLiveEnv(t)
	bin := lfBuildWorker(t)
	dynamo, table := env.leaseTable(t, newCallCounter())
	store := &resetRecorder{DynamoDBStore: dynamo}
	stream, shards := lfCreateStream(t, env, lfShards)
	keyShard := lfKeys(t, shards, lfKeysPerShard)
	keys := make([]string, 0, len(keyShard))
	for k := range keyShard {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	const group = "reset"
	rec := newLfRecord()
	mon := startLfMonitor(t, store, group, stream)
	prod := startLfProducer(t, env, stream, keys)
	args := lfWorkerArgs(env, table, stream, group)
	lfStartWorker(t, bin, "w1", args, rec)
	lfStartWorker(t, bin, "w2", args, rec)
	mon.waitFor(t, "the leases to spread 3/3", func(s lfSnap) bool { return s.spread(map[string]int{"w1": 3, "w2": 3}) })

	reset := func(what string, cfg admin.ResetConfig) (report admin.ResetReport, started, returned time.Time) {
		t.Helper()
		cfg.Stream, cfg.ConsumerGroup, cfg.Client, cfg.LeaseStore = stream, group, env.kinesisClient(), store
		cfg.Wait = lfPhaseTimeout
		ctx, cancel := context.WithTimeout(context.Background(), 2*lfPhaseTimeout)
		defer cancel()
		store.begin()
		started = time.Now()
		report, err := admin.ResetGroup(ctx, cfg)
		returned = time.Now()
		if err != nil {
			t.Fatalf("%s: ResetGroup: %v", what, err)
		}
		for _, s := range report.Shards {
			if s.Action == admin.ResetActionMove && s.AppliedBy == "" {
				t.Errorf("%s: %s not applied within %s: %s", what, s.ShardID, lfPhaseTimeout, s.Waiting)
			}
		}
		lfReport(t, "%s: ResetGroup took %s to %s, every owner applied it within %s", what, lfMS(returned.Sub(started)), report.To, lfMS(maxApplied(report)))
		return report, started, returned
	}
	// settleAfter waits until the new readers caught up with the load.
	settleAfter := func(what string) { lfCaughtUp(t, prod, rec, mon, "after "+what) }

	// check checks one reset of the shards in moved. before(d) says that d is before the
	// position for sure, atOrAfter that it is at or after it for sure.
	check := func(what string, moved map[string]bool, started, returned time.Time, before, atOrAfter func(d lfDelivery) bool) map[string]lfDelivery {
		t.Helper()
		bound := returned.Add(lfLeaseRenewInterval + lfTolerance)
		time.Sleep(time.Until(bound.Add(500 * time.Millisecond))) // load delivered past the bound
		deliveries, events, _ := rec.snapshot()
		given := store.givenBack()
		// tenureAt is when the tenure d belongs to began: its worker's last acquisition of the
		// shard before d in that worker's output.
		tenureAt := func(d lfDelivery) (at time.Time) {
			line := -1
			for _, e := range events {
				if e.event == "acquired" && e.worker == d.worker && e.shard == d.shard && e.line < d.line && e.line > line {
					line, at = e.line, e.t
				}
			}
			return at
		}
		redelivered := map[lfRec]bool{}
		first := map[string]lfDelivery{}
		for _, d := range deliveries {
			if !moved[d.shard] {
				continue
			}
			if d.t.After(bound) && before(d) {
				t.Errorf("%s: %s:%d (shard %s) is before the position but %s delivered it %s after ResetGroup returned (bound: LeaseRenewInterval %s)",
					what, d.key, d.n, d.shard, d.worker, lfMS(d.t.Sub(returned)), lfLeaseRenewInterval)
			}
			// The hook's time is in whole milliseconds, the give-back's is not.
			if g, ok := given[d.shard]; ok && !tenureAt(d).Before(g.Truncate(time.Millisecond)) {
				redelivered[lfRec{d.key, d.n}] = true
				if f, ok := first[d.shard]; !ok || d.seqN.Cmp(f.seqN) < 0 {
					first[d.shard] = d
				}
			}
		}
		lost := 0
		for _, d := range deliveries {
			if moved[d.shard] && d.t.Before(started) && atOrAfter(d) && !redelivered[lfRec{d.key, d.n}] {
				if lost++; lost <= 5 {
					t.Errorf("%s: %s:%d (shard %s) is at or after the position but was not delivered again after the reset", what, d.key, d.n, d.shard)
				}
			}
		}
		for shard := range moved {
			f, ok := first[shard]
			if !ok {
				t.Errorf("%s: shard %s: no reader acquired it after the reset, or it delivered nothing", what, shard)
				continue
			}
			lfReport(t, "%s: %s's first record after the reset: %s:%d (seq …%s), by %s, %s after ResetGroup returned",
				what, shard, f.key, f.n, f.seq[max(0, len(f.seq)-8):], f.worker, lfMS(f.t.Sub(returned)))
			if before(f) {
				t.Errorf("%s: %s's first record after the reset, %s:%d, is before the position", what, shard, f.key, f.n)
			}
		}
		return first
	}
	all := map[string]bool{}
	for _, s := range shards {
		all[*s.ShardId] = true
	}

	// 1. To a time: everything published since a moment 2 s ago is read again.
	lfCaughtUp(t, prod, rec, mon, "before the reset to a time")
	beforeT := prod.published()
	at := time.Now()
	time.Sleep(2 * time.Second)
	_, started, returned := reset("to a time", admin.ResetConfig{To: admin.ResetPosition{Type: admin.ResetToTimestamp, Timestamp: at}})
	settleAfter("the reset to a time")
	first := check("to a time", all, started, returned,
		func(d lfDelivery) bool { return d.n <= beforeT[d.key] },
		func(d lfDelivery) bool { return d.n > beforeT[d.key]+1 })
	for shard, f := range first {
		if f.n > beforeT[f.key]+2 {
			t.Errorf("to a time: %s's first record after the reset is %s:%d; the first at the position is %s:%d or %d", shard, f.key, f.n, f.key, beforeT[f.key]+1, beforeT[f.key]+2)
		}
	}

	// 2. To LATEST: what arrived more than a second before the reset is skipped.
	beforeL := prod.published()
	time.Sleep(1200 * time.Millisecond) // LATEST starts 1 s before the reset
	_, started, returned = reset("to LATEST", admin.ResetConfig{To: admin.ResetPosition{Type: admin.ResetToLatest}, Settle: true})
	afterL := prod.published()
	settleAfter("the reset to LATEST")
	check("to LATEST", all, started, returned,
		func(d lfDelivery) bool { return d.n <= beforeL[d.key] },
		func(d lfDelivery) bool { return d.n > afterL[d.key] })

	// 3. One shard to a sequence number a second back: that record comes again, and all after it.
	deliveries, _, _ := rec.snapshot()
	shard := *shards[2].ShardId
	var target lfDelivery
	for _, d := range deliveries {
		if d.shard == shard && d.t.Before(time.Now().Add(-time.Second)) && (target.seqN == nil || d.seqN.Cmp(target.seqN) > 0) {
			target = d
		}
	}
	report, started, returned := reset("one shard at a sequence number", admin.ResetConfig{
		ShardID: shard, To: admin.ResetPosition{Type: admin.ResetToSequenceNumber, SequenceNumber: target.seq}})
	for _, s := range report.Shards {
		if (s.ShardID == shard) != (s.Action == admin.ResetActionMove) {
			t.Errorf("one shard: %s's action is %s", s.ShardID, s.Action)
		}
	}
	settleAfter("the reset of one shard")
	seq := func(d lfDelivery) *big.Int { return d.seqN }
	first = check("one shard at a sequence number", map[string]bool{shard: true}, started, returned,
		func(d lfDelivery) bool { return seq(d).Cmp(target.seqN) < 0 },
		func(d lfDelivery) bool { return seq(d).Cmp(target.seqN) >= 0 })
	if first[shard].seq != target.seq {
		t.Errorf("one shard: the first record after the reset is %s:%d, want %s:%d, the record at the sequence number", first[shard].key, first[shard].n, target.key, target.n)
	}

	// One reader per shard throughout: no two workers' tenures of a shard overlap.
	prod.stop()
	deliveries, events, bad := rec.snapshot()
	for _, b := range bad {
		t.Errorf("worker output: %s", b)
	}
	tenures, _ := lfTenures(deliveries, events)
	for i, a := range tenures {
		for _, b := range tenures[i+1:] {
			if a.shard != b.shard || a.worker == b.worker {
				continue
			}
			aFrom, aTo := a.deliveries[0].t, a.deliveries[len(a.deliveries)-1].t
			bFrom, bTo := b.deliveries[0].t, b.deliveries[len(b.deliveries)-1].t
			if aFrom.Before(bTo.Add(-lfTolerance)) && bFrom.Before(aTo.Add(-lfTolerance)) {
				t.Errorf("shard %s read by %s (%s to %s) and %s (%s to %s) at once", a.shard,
					a.worker, aFrom.Format("15:04:05.000"), aTo.Format("15:04:05.000"), b.worker, bFrom.Format("15:04:05.000"), bTo.Format("15:04:05.000"))
			}
		}
	}
}

// maxApplied is the longest an owner took to apply a reset.
func maxApplied(r admin.ResetReport) time.Duration {
	var m time.Duration
	for _, s := range r.Shards {
		m = max(m, s.AppliedAfter)
	}
	return m
}

// resetRecorder is the lease table as the test's resets see it: it records when a reset sent
// each shard's lease back to the group (a take for a worker, or a release, of a lease held
// under the reset's id). A worker takes the lease, and reads at the new position, only after.
type resetRecorder struct {
	*lease.DynamoDBStore
	mu sync.Mutex
	at map[string]time.Time // by shard, since the last begin
}

// begin forgets the last reset's give-backs.
func (s *resetRecorder) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = map[string]time.Time{}
}

// givenBack is when the reset since begin last sent each shard's lease back.
func (s *resetRecorder) givenBack() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.at)
}

func (s *resetRecorder) sending(held lease.Lease) {
	if strings.HasPrefix(held.Owner, "kinesis-reset/") {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.at[held.ShardID] = time.Now()
	}
}

func (s *resetRecorder) Take(ctx context.Context, observed lease.Lease, owner string) (lease.Lease, error) {
	if !strings.HasPrefix(owner, "kinesis-reset/") {
		s.sending(observed)
	}
	return s.DynamoDBStore.Take(ctx, observed, owner)
}

func (s *resetRecorder) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	s.sending(held)
	return s.DynamoDBStore.Release(ctx, held)
}
