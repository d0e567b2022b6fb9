package sim_test

// A group moving in from a KCL application (lease.KCLStore; docs/kcl.md), under the same random
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
	// reads are when each KCL worker may read each shard: from the start until its last
	// successful renewal + LeaseDuration + kclDispatch.
	reads map[string]*kclRead // by shard
}

type kclRead struct {
	worker    string
	lastRenew time.Time // the answer to its last successful renewal (the start, for kcl-a)
}

func (r *kclRead) end() time.Time { return r.lastRenew.Add(leaseDuration + kclDispatch) }

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
	k := &kclWorld{done: map[pubRec]bool{}, reads: map[string]*kclRead{}}
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
		k.reads[id] = &kclRead{worker: l.Owner, lastRenew: now}
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

// runKCLWorker is kcl-b: it renews its leases every LeaseDuration/3 until pauseAt, pauses until
// resumeAt, renews again until stopAt, and stops. A renewal that fails (the lease was taken
// while it paused) drops the lease, as the KCL's renewer does.
func (w *world) runKCLWorker(pauseAt, resumeAt, stopAt time.Duration) {
	defer w.wg.Done()
	held := map[string]bool{}
	w.mu.Lock()
	for id, rd := range w.kcl.reads {
		if rd.worker == "kcl-b" {
			held[id] = true
		}
	}
	w.mu.Unlock()
	for len(held) > 0 {
		time.Sleep(renewInterval)
		at := w.since()
		switch {
		case at >= stopAt:
			w.notef("KCL worker kcl-b stops")
			return
		case at >= pauseAt && at < resumeAt:
			continue
		}
		for _, l := range w.kclLeases() {
			if !held[l.ShardID] {
				continue
			}
			if l.Owner != "kcl-b" {
				delete(held, l.ShardID)
				w.notef("KCL worker kcl-b lost %s to %s: its renewal fails", l.ShardID, l.Owner)
				continue
			}
			if _, err := w.store.Renew(context.Background(), l); err != nil {
				delete(held, l.ShardID)
				continue
			}
			w.mu.Lock()
			w.kcl.reads[l.ShardID].lastRenew = time.Now()
			w.mu.Unlock()
		}
	}
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
// may still read it) and invariant 6 against their checkpoints (nothing they checkpointed is
// delivered).
func (w *world) checkKCL() []violation {
	if w.kcl == nil {
		return nil
	}
	var vs []violation
	replayed := map[pubRec]bool{}
	for _, d := range w.deliveries {
		rec := pubRec{d.key, d.n}
		if w.kcl.done[rec] && !replayed[rec] {
			replayed[rec] = true
			vs = append(vs, violation{invDuplicates, fmt.Sprintf("%s#%d delivered %s/%d of %s at %s, which the KCL had checkpointed",
				d.slot, d.by.inst, d.key, d.n, d.shard, rel(d.at))})
		}
		if rd := w.kcl.reads[d.shard]; rd != nil && d.at.Before(rd.end()) {
			vs = append(vs, violation{invExclusive, fmt.Sprintf("%s#%d delivered %s of %s at %s, while KCL worker %s may read it until %s",
				d.slot, d.by.inst, d.shard, fmt.Sprintf("%s/%d", d.key, d.n), rel(d.at), rd.worker, rel(rd.end()))})
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].msg < vs[j].msg })
	return vs
}

// owedByGroup is whether the group must deliver rec: not if the KCL checkpointed it.
func (w *world) owedByGroup(rec pubRec) bool { return w.kcl == nil || !w.kcl.done[rec] }
