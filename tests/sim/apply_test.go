package sim_test

// Carrying out the schedule against the world.

import (
	"fmt"
	"math/big"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// riskBefore is how far before a disruption acked records may still be uncheckpointed: one
// CheckpointInterval, twice (a checkpoint write can itself be slow or lost), plus a tenth for
// the slowest clock.
const riskBefore = 2*checkpointInterval + checkpointInterval/10

func (w *world) apply(e event) {
	now := time.Now()
	w.notef("%s", e)
	w.mu.Lock()
	in := w.live[e.slot]
	w.mu.Unlock()
	switch e.kind {
	case evStart:
		w.startInstance(e)
	case evClose:
		w.wg.Add(1)
		go func() { defer w.wg.Done(); in.close() }()
	case evCrash:
		in.crash(e.hang)
		w.disrupted("crash", []string{e.slot}, now.Add(-riskBefore), now)
	case evPause:
		in.pause()
		w.disrupted("pause", []string{e.slot}, now.Add(-riskBefore), now.Add(e.dur))
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			time.Sleep(e.dur)
			in.resume()
		}()
	case evCutOff:
		in.gate.cut(now.Add(e.dur))
		w.disrupted("cut-off", []string{e.slot}, now.Add(-riskBefore), now.Add(e.dur))
	case evReset:
		w.startReset(e)
	default:
		w.applyFault(e, now)
	}
}

func (w *world) startInstance(e event) {
	in, err := w.newInstance(e.slot, e.subs, e.hk, e.rate, e.maxIF, e.byKey, e.fanOut)
	if err != nil {
		w.notef("NewSubscriber %s: %v", e.slot, err)
		return
	}
	w.wg.Add(1)
	go in.run()
}

// applyFault starts a fault of the lease table or of Kinesis, or reshards the stream.
func (w *world) applyFault(e event, now time.Time) {
	switch e.kind {
	case evSplit, evMerge, evShardCount:
		if err := w.reshard(e); err != nil {
			w.notef("  (reshard refused: %v)", err)
		}
		return
	}
	var open []types.Shard
	if e.kind == evExpire || e.kind == evDenied {
		open = w.openShards()
	}
	until := now.Add(e.dur)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e.kind {
	case evOutage:
		w.sf.outageUntil = until
		w.disrupt = append(w.disrupt, disruption{what: "store-outage", from: now.Add(-riskBefore), to: until})
	case evSlowStore:
		w.sf.slowUntil, w.sf.slowBy = until, time.Duration(e.pick%1500)*time.Millisecond
		w.disrupt = append(w.disrupt, disruption{what: "slow-store", from: now.Add(-riskBefore), to: until})
	case evSlowReads:
		w.kf.slowUntil, w.kf.slowBy = until, slowReadsBy(e.pick)
	case evThrottle:
		w.kf.throttleUntil = until
	case evInternal:
		w.kf.internalUntil = until
	case evExpire:
		for _, s := range open {
			w.kf.expireNext[aws.ToString(s.ShardId)] = true
		}
	case evDenied:
		id := aws.ToString(open[e.pick%uint64(len(open))].ShardId)
		w.kf.deniedUntil[id] = until
		w.disrupt = append(w.disrupt, disruption{what: "access-denied " + id, shard: id, from: now.Add(-riskBefore), to: until.Add(leaseDuration)})
		w.notes = append(w.notes, fmt.Sprintf("%9s    (shard %s)", w.since().Round(time.Millisecond), id))
	}
}

// openShards lists the open shards, in shard id order. The harness's own calls pass memlog's
// fault hook untouched.
func (w *world) openShards() []types.Shard {
	out, err := w.log.ListShards(harnessCtx(), &awskinesis.ListShardsInput{StreamName: aws.String(simStream)})
	if err != nil {
		panic(err) // the world's own stream: cannot fail
	}
	var open []types.Shard
	for _, s := range out.Shards {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, s)
		}
	}
	sort.Slice(open, func(i, j int) bool { return aws.ToString(open[i].ShardId) < aws.ToString(open[j].ShardId) })
	return open
}

// maxOpenShards keeps the stream small, and so the run cheap.
const maxOpenShards = 6

func (w *world) reshard(e event) error {
	ctx := harnessCtx()
	open := w.openShards()
	name := aws.String(simStream)
	switch {
	case e.kind == evSplit && len(open) < maxOpenShards:
		s := open[e.pick%uint64(len(open))]
		lo, hi := hashOf(s.HashKeyRange.StartingHashKey), hashOf(s.HashKeyRange.EndingHashKey)
		mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
		mid.Add(mid, big.NewInt(1))
		_, err := w.log.SplitShard(ctx, &awskinesis.SplitShardInput{StreamName: name, ShardToSplit: s.ShardId, NewStartingHashKey: aws.String(mid.String())})
		return err
	case e.kind == evMerge:
		pairs := adjacentPairs(open)
		if len(pairs) == 0 {
			return fmt.Errorf("no adjacent shards")
		}
		p := pairs[e.pick%uint64(len(pairs))]
		_, err := w.log.MergeShards(ctx, &awskinesis.MergeShardsInput{StreamName: name, ShardToMerge: p[0].ShardId, AdjacentShardToMerge: p[1].ShardId})
		return err
	case e.kind == evShardCount:
		n := len(open)
		var targets []int
		for t := (n + 1) / 2; t <= min(2*n, maxOpenShards); t++ {
			if t != n && t >= 1 {
				targets = append(targets, t)
			}
		}
		if len(targets) == 0 {
			return fmt.Errorf("no shard count to go to from %d", n)
		}
		t := targets[e.pick%uint64(len(targets))]
		w.notef("  (%d -> %d shards)", n, t)
		_, err := w.log.UpdateShardCount(ctx, &awskinesis.UpdateShardCountInput{StreamName: name, TargetShardCount: aws.Int32(int32(t)), ScalingType: types.ScalingTypeUniformScaling})
		return err
	}
	return fmt.Errorf("%d shards open already", len(open))
}

func hashOf(s *string) *big.Int {
	v, _ := new(big.Int).SetString(aws.ToString(s), 10)
	return v
}

// adjacentPairs are the open shards whose hash key ranges touch, which MergeShards accepts.
func adjacentPairs(open []types.Shard) [][2]types.Shard {
	var out [][2]types.Shard
	one := big.NewInt(1)
	for _, a := range open {
		for _, b := range open {
			end := new(big.Int).Add(hashOf(a.HashKeyRange.EndingHashKey), one)
			if end.Cmp(hashOf(b.HashKeyRange.StartingHashKey)) == 0 {
				out = append(out, [2]types.Shard{a, b})
			}
		}
	}
	return out
}
