package sim_test

// A group moving in from a KCL application (kcl.Store; docs/kcl.md), under the same random
// schedules as every seed. One seed in four (every seed with SIM_MIX=kcl) starts from a table a
// KCL application left: a backlog of records, each shard's lease held by a KCL worker with a
// checkpoint somewhere in the shard, and the store telling the group that KCL workers share it
// (lease.ForeignTable). Worker kcl-a stopped at the start; worker kcl-b is still running,
// renews its leases as the KCL does (every LeaseDuration/3), pauses for a while, and stops.
//
// The KCL worker is modelled from its source (DynamoDBLeaseRenewer, Scheduler): it reads a
// shard while it holds the lease by its own clock, that is until LeaseDuration after the answer
// to its last successful renewal, and its consumer stops at the next dispatch, up to
// kclDispatch later. Its lease taker is not modelled: it steals leases that are being read
// (maxLeasesToStealAtOneTime is at least 1), which no protocol on the taker's side can make
// safe; the group refuses to share a table with a live KCL worker for that reason, and says so.
//
// What the seed must show, besides the invariants of every seed: no instance delivers a shard
// while a KCL worker may still read it (invariant 3), nothing the KCL checkpointed is delivered
// (invariant 6: it would be a replay), and everything after its checkpoints is (invariant 1).

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// kclDispatch is how long after a KCL worker stops holding a lease its shard consumer may run
// on: the Scheduler's shardConsumerDispatchPollIntervalMillis, 1 s by default.
const kclDispatch = time.Second

// kclWorld is what a KCL seed adds to the world. Guarded by the world's mu.
type kclWorld struct {
	done map[pubRec]bool // records the KCL had checkpointed: never to be delivered
	// reads are when the KCL workers may read each shard: a window per tenure, from the
	// start (or its take) until its last successful renewal + LeaseDuration + kclDispatch.
	reads  map[string][]*kclRead // by shard
	steals int                   // leases kcl-b took from a live owner
	starts int                   // times kcl-b started or resumed (each may steal once)
	acts   []time.Time           // kcl-b's successful renewals and takes: what shows it alive
}

// yieldBound is how long after a KCL worker shows itself alive (or after an instance starts,
// for one started meanwhile) the instances stop delivering: a listing (at least every
// LeaseDuration on a KCL table), its next renewal, the next listing, the full member read that
// confirms it is not a member, and a slow store's delays.
const yieldBound = leaseDuration + renewInterval + 3*leaseSyncInterval + 2*requestTimeout

type kclRead struct {
	worker    string
	from      time.Time
	lastRenew time.Time // the answer to its last successful renewal (or its take)
	// victim is the slot kcl-b stole the lease from (at from), "" if it took it free or
	// expired: that instance's reader goes on until its next renewal fails, by the KCL's
	// design, and its deliveries until then are the steal's, not the group's, doing.
	victim string
	open   bool // kcl-b still holds it
}

func (r *kclRead) end() time.Time { return r.lastRenew.Add(leaseDuration + kclDispatch) }

// stealBound is how long a reader may go on after its lease was stolen: until its stop point,
// 0.8 × LeaseDuration after its last renewal, on a clock up to maxRateSkew slow.
var stealBound = func() time.Duration {
	stopAfter := leaseDuration - leaseDuration/5
	return time.Duration(float64(stopAfter)/(1-maxRateSkew)) + overlapTolerance
}()

// kclFor picks one seed in four for a KCL start (all of them with SIM_MIX=kcl), from a
// generator of its own so that the other seeds' schedules stay what they were.
func kclFor(seed uint64) bool {
	if os.Getenv("SIM_MIX") == "kcl" {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte("kcl"))
	return rand.New(rand.NewPCG(seed, h.Sum64())).IntN(4) == 0
}

// setUpKCL publishes the backlog, one record per call so that each shard holds its keys'
// records in publish order, and creates the KCL's leases. It runs before the schedule starts.
func (w *world) setUpKCL() {
	r := rand.New(rand.NewPCG(w.seed, 0xc1c1))
	next := map[string]int{}
	for range 6 + r.IntN(18) {
		k := simKeys[r.IntN(len(simKeys))]
		w.publish([]pubRec{{k, next[k]}})
		next[k]++
	}
	k := &kclWorld{done: map[pubRec]bool{}, reads: map[string][]*kclRead{}}
	now := time.Now()
	for _, s := range w.openShards() {
		id := aws.ToString(s.ShardId)
		recs := w.shardRecords(id)
		upTo := r.IntN(len(recs)+1) - 1 // -1: the KCL checkpointed nothing (TRIM_HORIZON)
		l := lease.Lease{Group: simGroup, Stream: simStream, ShardID: id, Owner: "kcl-a"}
		if r.IntN(2) == 0 {
			l.Owner = "kcl-b"
		}
		for i, rec := range recs[:upTo+1] {
			k.done[rec.p] = true
			if i == upTo {
				l.Checkpoint = rec.seq
			}
		}
		if _, err := w.store.Create(context.Background(), l); err != nil {
			panic(err) // the world's own store, empty: cannot fail
		}
		k.reads[id] = []*kclRead{{worker: l.Owner, from: now, lastRenew: now, open: l.Owner == "kcl-b"}}
		w.notef("KCL lease of %s: %s, checkpoint after %d of %d records", id, l.Owner, upTo+1, len(recs))
	}
	w.mu.Lock()
	w.kcl = k
	w.mu.Unlock()
}

type shardRec struct {
	p   pubRec
	seq string
}

// shardRecords reads a shard's records in order, as pubRecs: the backlog was published one
// record per call, and a key's records are numbered in order from 0.
func (w *world) shardRecords(shard string) []shardRec {
	ctx := harnessCtx()
	it, err := w.log.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{
		StreamName: aws.String(simStream), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		panic(err)
	}
	out, err := w.log.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		panic(err)
	}
	seen := map[string]int{}
	var recs []shardRec
	for _, rec := range out.Records {
		key := aws.ToString(rec.PartitionKey)
		recs = append(recs, shardRec{pubRec{key, seen[key]}, aws.ToString(rec.SequenceNumber)})
		seen[key]++
	}
	return recs
}

// runKCLWorker is kcl-b, modelled from DynamoDBLeaseRenewer and DynamoDBLeaseTaker of KCL
// 2.x: it renews its leases every LeaseDuration/3, dropping one whose renewal fails, and runs
// its lease taker at its start, every 2 × LeaseDuration, and when it resumes; it pauses from
// pauseAt to resumeAt and stops at stopAt.
func (w *world) runKCLWorker(pauseAt, resumeAt, stopAt time.Duration) {
	defer w.wg.Done()
	t := &kclTaker{seen: map[string]kclSeen{}}
	nextTake, paused := time.Duration(0), false
	for {
		at := w.since()
		switch {
		case at >= stopAt:
			w.notef("KCL worker kcl-b stops")
			w.kclDrop(func(string) bool { return true })
			return
		case at >= pauseAt && at < resumeAt:
			paused = true
		default:
			if paused {
				paused, nextTake = false, 0 // the taker's overdue run comes at once
			}
			w.kclRenew()
			if at >= nextTake {
				if nextTake == 0 {
					w.mu.Lock()
					w.kcl.starts++
					w.mu.Unlock()
				}
				w.kclTake(t)
				nextTake = at + 2*leaseDuration
			}
		}
		time.Sleep(renewInterval)
	}
}

// kclRenew renews kcl-b's leases; one that fails (taken meanwhile) is dropped.
func (w *world) kclRenew() {
	for _, l := range w.kclLeases() {
		w.mu.Lock()
		rd := w.kclOpen(l.ShardID)
		w.mu.Unlock()
		if rd == nil {
			continue
		}
		if l.Owner != "kcl-b" {
			w.kclDrop(func(shard string) bool { return shard == l.ShardID })
			continue
		}
		err := w.kclCall(func() error { _, err := w.store.Renew(context.Background(), l); return err })
		w.mu.Lock()
		switch {
		case errors.Is(err, errOutage):
			// The table is down for the KCL too: it keeps the lease and tries again (its
			// read window, to the last renewal + LeaseDuration, is still open).
		case err != nil:
			rd.open = false
		default:
			rd.lastRenew = time.Now()
			w.kcl.acts = append(w.kcl.acts, rd.lastRenew)
		}
		w.mu.Unlock()
	}
}

// kclOpen is kcl-b's open read of shard, nil if it holds none. The caller holds mu.
func (w *world) kclOpen(shard string) *kclRead {
	rs := w.kcl.reads[shard]
	if n := len(rs); n > 0 && rs[n-1].worker == "kcl-b" && rs[n-1].open {
		return rs[n-1]
	}
	return nil
}

// kclDrop ends kcl-b's open reads of the shards drop selects.
func (w *world) kclDrop(drop func(string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for shard := range w.kcl.reads {
		if rd := w.kclOpen(shard); rd != nil && drop(shard) {
			rd.open = false
		}
	}
}

// kclTaker is the lease taker's own view: when it first saw each lease's counter.
type kclTaker struct{ seen map[string]kclSeen }

type kclSeen struct {
	counter int64
	since   time.Time
}

// kclTake is one run of the KCL 2.x lease taker: expired leases (free, or a counter that has
// not moved for LeaseDuration since this taker first saw it) up to the target, ceil(leases /
// workers) with the workers the owners of unexpired leases and itself; with none expired and
// below target, one lease stolen from the most loaded worker holding at least the target.
func (w *world) kclTake(t *kclTaker) {
	now := time.Now()
	list := w.kclLeases()
	var expired []lease.Lease
	counts := map[string]int{"kcl-b": 0}
	open := 0
	for _, l := range list {
		if l.Checkpoint == lease.ShardEnd {
			continue
		}
		open++
		s, ok := t.seen[l.ShardID]
		if !ok || s.counter != l.Counter {
			s = kclSeen{l.Counter, now}
			t.seen[l.ShardID] = s
		}
		if l.Owner == "" || now.Sub(s.since) >= leaseDuration {
			expired = append(expired, l)
			continue
		}
		counts[l.Owner]++
	}
	target := (open + len(counts) - 1) / len(counts)
	need := target - counts["kcl-b"]
	if need <= 0 {
		return
	}
	if len(expired) > 0 {
		for _, l := range expired[:min(need, len(expired))] {
			w.kclTakeOne(l, "")
		}
		return
	}
	most, mostN := "", 0
	for o, n := range counts {
		if o != "kcl-b" && (n > mostN || n == mostN && o < most) {
			most, mostN = o, n
		}
	}
	if most == "" || mostN < target || mostN == target && need <= 1 {
		return
	}
	for _, l := range list {
		if l.Owner == most && l.Checkpoint != lease.ShardEnd {
			w.kclTakeOne(l, ownerOf(most))
			return
		}
	}
}

// kclTakeOne takes one lease for kcl-b, conditioned on what it observed, and opens its read.
func (w *world) kclTakeOne(l lease.Lease, victim string) {
	if err := w.kclCall(func() error { _, err := w.store.Take(context.Background(), l, "kcl-b"); return err }); err != nil {
		return
	}
	now := time.Now()
	if victim != "" {
		// What the victim acked since its last checkpoint, and until its reader stops, comes
		// again after it gets the shard back: the KCL worker checkpoints its own progress,
		// not the victim's.
		w.disruptedShard("kcl-steal", victim, l.ShardID, now.Add(-riskBefore), now.Add(stealBound))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kcl.reads[l.ShardID] = append(w.kcl.reads[l.ShardID], &kclRead{worker: "kcl-b", from: now, lastRenew: now, victim: victim, open: true})
	w.kcl.acts = append(w.kcl.acts, now)
	if victim != "" {
		w.kcl.steals++
		if os.Getenv("SIM_KCL_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "seed %d: steal of %s from %s at %s\n", w.seed, l.ShardID, victim, w.since())
		}
	}
	w.notes = append(w.notes, fmt.Sprintf("%9s  KCL worker kcl-b took %s from %q", w.since().Round(time.Millisecond), l.ShardID, l.Owner))
}

// kclCall runs one call of the KCL worker through the lease table's faults, as an instance's
// calls go: an outage fails it, a slow store delays it, half before and half after.
func (w *world) kclCall(call func() error) error {
	delay, err := w.storeFault()
	if err != nil {
		return err
	}
	time.Sleep(delay / 2)
	err = call()
	time.Sleep(delay - delay/2)
	return err
}

func (w *world) kclLeases() []lease.Lease {
	list, err := w.store.List(context.Background(), simGroup, simStream)
	if err != nil {
		panic(err)
	}
	return list
}

// kclSchedule draws kcl-b's pause and stop, and notes them.
func (w *world) kclSchedule() (pauseAt, resumeAt, stopAt time.Duration) {
	r := rand.New(rand.NewPCG(w.seed, 0xc1c2))
	pauseAt = time.Duration(r.Int64N(int64(runLength / 2)))
	resumeAt = pauseAt + time.Second + time.Duration(r.Int64N(int64(3*leaseDuration)))
	stopAt = resumeAt + time.Duration(r.Int64N(int64(runLength/3)))
	w.notef("KCL worker kcl-b: renews until %s, pauses until %s, stops at %s", pauseAt, resumeAt, stopAt)
	return pauseAt, resumeAt, stopAt
}

// checkKCL is invariant 3 against the KCL workers (no delivery of a shard while a KCL worker
// may read it, but for a reader whose lease kcl-b stole, until its stop point: the KCL's own
// double read, which the group cannot prevent and answers by giving up its leases, so that
// kcl-b steals at most once each time it starts or resumes) and invariant 6 against their
// checkpoints (nothing they checkpointed is delivered).
func (w *world) checkKCL() []violation {
	if w.kcl == nil {
		return nil
	}
	var vs []violation
	replayed := map[pubRec]bool{}
	for _, d := range w.deliveries {
		rec := pubRec{d.key, d.n}
		if w.kcl.done[rec] && !replayed[rec] && w.resetEpoch(d) < 0 { // after a reset: its doing (7a)
			replayed[rec] = true
			vs = append(vs, violation{invDuplicates, fmt.Sprintf("%s#%d delivered %s/%d of %s at %s, which the KCL had checkpointed",
				d.slot, d.by.inst, d.key, d.n, d.shard, rel(d.at))})
		}
		for _, rd := range w.kcl.reads[d.shard] {
			stolen := rd.victim == d.slot && d.at.Before(rd.from.Add(stealBound))
			if !d.at.Before(rd.from.Add(overlapTolerance)) && d.at.Before(rd.end()) && !stolen {
				vs = append(vs, violation{invExclusive, fmt.Sprintf("%s#%d delivered %s/%d of %s at %s, while KCL worker %s may read it (%s to %s)",
					d.slot, d.by.inst, d.key, d.n, d.shard, rel(d.at), rd.worker, rel(rd.from), rel(rd.end()))})
			}
		}
	}
	vs = append(vs, w.checkYield()...)
	if w.kcl.steals > w.kcl.starts {
		vs = append(vs, violation{invExclusive, fmt.Sprintf("KCL worker kcl-b stole %d leases in %d starts: the group did not give up its leases to it",
			w.kcl.steals, w.kcl.starts)})
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].msg < vs[j].msg })
	return vs
}

// checkYield: while kcl-b shows itself alive (renewals or takes, LeaseDuration/3 apart), the
// instances deliver nothing once yieldBound has passed since its first act (or since their
// start), until about LeaseDuration after its last: the group refuses to read beside it.
func (w *world) checkYield() []violation {
	type episode struct{ first, last time.Time }
	var eps []episode
	for _, a := range w.kcl.acts {
		if n := len(eps); n > 0 && a.Sub(eps[n-1].last) <= renewInterval+100*time.Millisecond {
			eps[n-1].last = a
			continue
		}
		eps = append(eps, episode{a, a})
	}
	var vs []violation
	until := time.Duration(float64(leaseDuration)*(1-maxRateSkew)) - overlapTolerance
	for _, d := range w.deliveries {
		for _, ep := range eps {
			from := ep.first
			if started := w.insts[d.by.inst].startedAt; started.After(from) {
				from = started
			}
			if !d.at.Before(from.Add(yieldBound)) && d.at.Before(ep.last.Add(until)) {
				vs = append(vs, violation{invExclusive, fmt.Sprintf("%s#%d delivered %s/%d of %s at %s while KCL worker kcl-b was alive (%s to %s): the group did not give up its leases",
					d.slot, d.by.inst, d.key, d.n, d.shard, rel(d.at), rel(ep.first), rel(ep.last))})
				break
			}
		}
	}
	return vs
}

// disruptedShard records a disruption of one instance's reading of one shard.
func (w *world) disruptedShard(what, slot, shard string, from, to time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.disrupt = append(w.disrupt, disruption{what: what, slots: map[string]bool{slot: true}, shard: shard, from: from, to: to})
}

// kclGone reports whether no KCL worker holds a lease any more: the tail waits for the group to
// take those of the stopped ones, so that Close finds them in the group's hands.
func (w *world) kclGone() bool {
	w.mu.Lock()
	k := w.kcl
	w.mu.Unlock()
	if k == nil {
		return true
	}
	for _, l := range w.kclLeases() {
		if l.Owner == "kcl-a" || l.Owner == "kcl-b" {
			return false
		}
	}
	return true
}

// owedByGroup is whether the group must deliver rec: not if the KCL checkpointed it, nor if a
// reset moved its shard past it (what a later reset owes, invariant 7b checks).
func (w *world) owedByGroup(rec pubRec) bool {
	return (w.kcl == nil || !w.kcl.done[rec]) && !w.skippedByReset(rec)
}
