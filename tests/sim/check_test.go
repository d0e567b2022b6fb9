package sim_test

// The invariants, checked on the record of a finished run. Each check returns what it found
// wrong, as text that names the shard, the key, the instances and the fake times.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// The invariants, numbered as in the issue.
const (
	invDelivered  = 1 // every acked publish was delivered
	invOrder      = 2 // per key, numbers never go back within a tenure
	invExclusive  = 3 // one deliverer per shard at a time
	invCheckpoint = 4 // checkpoints never go back and are written by the generation's owner
	invCleanup    = 5 // no goroutine and no lease left behind after Close
	invDuplicates = 6 // redeliveries of acked records stay within what disruptions explain
	invReset      = 7 // a reset moves each shard it writes, live and safely (reset_test.go)
)

// overlapTolerance is how long two deliverers may both deliver one shard. An owner whose
// renewals fail stops at stopAfter = LeaseDuration - LeaseDuration/5 after sending its last
// successful renewal, on its own clock; another instance takes the lease no sooner than
// LeaseDuration after it first saw that renewal's counter, which is after the renewal was sent,
// on its clock. In bubble time the first is at most stopAfter/(1-skew), the second at least
// LeaseDuration/(1+skew): with skew 2 % that is 4.08 s against 4.90 s, so clock rates explain
// no overlap (they would from a skew of about 11 %). A pause explains none either, in this
// harness's model: the paused instance's timers run on, so it stops on time, and its handler
// receives nothing during the pause. Handoffs and releases stop delivering before the lease
// changes hands. What is left is one instant: a reader's last send and the next owner's first
// can land on the same fake time stamp.
//
// Not modelled: a freeze of the whole process (a GC pause, SIGSTOP), in which the timers stop
// too. On waking, such a reader may find a send and its stop point ready in one select, and Go
// picks either: one message may go out after the stop point. That is the documented stop
// margin, and tests/live_failover_test.go covers a real SIGSTOP against real processes.
var overlapTolerance = func() time.Duration {
	stopAfter, take := float64(leaseDuration-leaseDuration/5)/(1-maxRateSkew), float64(leaseDuration)/(1+maxRateSkew)
	return max(0, time.Duration(stopAfter-take)) + time.Millisecond
}()

type violation struct {
	inv int
	msg string
}

// tenure is one continuous run of deliveries of a shard by one deliverer. A new one begins when
// the instance gets an iterator from the shard's checkpoint (a reader starting or restarting:
// hookRestart), which is seen before the reader's first delivery. The driver's hooks make
// poor boundaries: OnAcquired can run after the new reader's first send, and a reader that
// reached a shard's end and could not release its lease stops with no hook at all. An
// iterator call does not say which subscription made it, so it begins new tenures for every
// subscription of the instance.
type tenure struct {
	by         deliverer
	slot       string
	shard      string
	start, end time.Time
	count      int
	last       map[string]int       // key -> highest number delivered in this tenure
	seen       map[pubRec]*delivery // the latest delivery of each record in this tenure
}

func (t *tenure) String() string {
	return fmt.Sprintf("%s#%d/sub%d on %s [%s, %s] (%d deliveries)", t.slot, t.by.inst, t.by.sub, t.shard,
		rel(t.start), rel(t.end), t.count)
}

var bubbleEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// rel prints a fake instant as time since the bubble's epoch, which is where every run starts.
func rel(t time.Time) string { return t.Sub(bubbleEpoch).Round(time.Millisecond).String() }

// tenures replays deliveries and hooks in the order they happened and checks invariant 2.
func (w *world) tenures() (map[string][]*tenure, []violation) {
	type item struct {
		ord int
		d   *delivery
		h   *hookRec
	}
	var items []item
	for _, d := range w.deliveries {
		items = append(items, item{ord: d.ord, d: d})
	}
	for i := range w.hooks {
		items = append(items, item{ord: w.hooks[i].ord, h: &w.hooks[i]})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].ord < items[j].ord })
	cur := map[string]map[deliverer]*tenure{}
	all := map[string][]*tenure{}
	var vs []violation
	for _, it := range items {
		if h := it.h; h != nil {
			if h.kind == hookRestart {
				for by := range cur[h.shard] {
					if by.inst == h.inst {
						delete(cur[h.shard], by)
					}
				}
			}
			continue
		}
		d := it.d
		if cur[d.shard] == nil {
			cur[d.shard] = map[deliverer]*tenure{}
		}
		t := cur[d.shard][d.by]
		if t == nil {
			t = &tenure{by: d.by, slot: d.slot, shard: d.shard, start: d.at, last: map[string]int{}, seen: map[pubRec]*delivery{}}
			cur[d.shard][d.by] = t
			all[d.shard] = append(all[d.shard], t)
		}
		rec := pubRec{d.key, d.n}
		prev := t.seen[rec]
		t.seen[rec] = d
		if last, ok := t.last[d.key]; ok && d.n < last && (prev == nil || prev.acked) {
			// Going back is fine only to resend a record of this tenure that was not acked
			// (a nack, or a window resent after a pause, with later records in flight).
			vs = append(vs, violation{invOrder, fmt.Sprintf("key %s went back from %d to %d at %s in the tenure %s",
				d.key, last, d.n, rel(d.at), t)})
		}
		t.last[d.key] = max(t.last[d.key], d.n)
		t.end = d.at
		t.count++
	}
	return all, vs
}

// checkExclusive is invariant 3: tenures of one shard by different deliverers do not overlap.
func checkExclusive(all map[string][]*tenure) []violation {
	var vs []violation
	for _, ts := range all {
		sort.Slice(ts, func(i, j int) bool { return ts[i].start.Before(ts[j].start) })
		for i, a := range ts {
			for _, b := range ts[i+1:] {
				if !b.start.Before(a.end.Add(-overlapTolerance)) {
					break // b and all later ones start after a ended
				}
				if a.by != b.by {
					vs = append(vs, violation{invExclusive, fmt.Sprintf("%s and %s delivered one shard at the same time", a, b)})
				}
			}
		}
	}
	return vs
}

// checkGenerations is invariant 3 seen through the lease: every delivery carries the lease
// generation its reader held (RecordInfo.LeaseGeneration), and a new owner always takes a higher
// one (within one incarnation of the lease: a reset may create a deleted lease again, whose
// generations start over, so deliveries are compared by leaseKey). A delivery under a lower
// generation than one already delivered of the same shard came
// from a reader that had been replaced and still delivered: two readers of one shard at once,
// whether in two instances or in one subscription (which the tenures above cannot tell apart,
// since they know deliverers, not readers).
func (w *world) checkGenerations() []violation {
	var vs []violation
	type newest struct {
		key leaseKey
		d   *delivery
	}
	byShard := map[string]newest{}
	for _, d := range w.deliveries { // in delivery order
		n := byShard[d.shard]
		k := leaseKey{d.inc, d.gen}
		// Two handlers record their deliveries in the order they run, which within one fake
		// instant need not be the order of the sends: the same tolerance as checkExclusive.
		if n.d != nil && k.less(n.key) && d.at.After(n.d.at.Add(overlapTolerance)) {
			vs = append(vs, violation{invExclusive, fmt.Sprintf("%s#%d/sub%d delivered %s/%d of %s at %s under lease generation %s, after %s#%d/sub%d had delivered under generation %s at %s",
				d.slot, d.by.inst, d.by.sub, d.key, d.n, d.shard, rel(d.at), k, n.d.slot, n.d.by.inst, n.d.by.sub, n.key, rel(n.d.at))})
			continue
		}
		if n.d == nil || !k.less(n.key) {
			byShard[d.shard] = newest{k, d}
		}
	}
	return vs
}

// checkDelivered is invariant 1.
func (w *world) checkDelivered() []violation {
	seen := map[pubRec]bool{}
	for _, d := range w.deliveries {
		seen[pubRec{d.key, d.n}] = true
	}
	var missing []pubRec
	for _, p := range w.published {
		if !seen[p] && w.owedByGroup(p) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []violation{{invDelivered, fmt.Sprintf("%d of %d acked publishes were never delivered, e.g. %v",
		len(missing), len(w.published), missing[:min(len(missing), 8)])}}
}

// checkCheckpoints is invariant 4. Successful writes are ordered by the lease's counter, which
// the store bumps on every write, so their order is the store's, within one incarnation of the
// lease (a reset may create it again, and its counter starts over). A reset's write of a
// position (reset_test.go) starts the order over: the checkpoints after it must not be before
// its position, and never go back from there.
func (w *world) checkCheckpoints() []violation {
	var vs []violation
	type incarnation struct {
		shard string
		inc   int
	}
	byShard := map[incarnation][]ckptRec{}
	for _, c := range w.checkpoints {
		if c.err != nil {
			continue
		}
		byShard[incarnation{c.held.ShardID, c.inc}] = append(byShard[incarnation{c.held.ShardID, c.inc}], c)
		rec, ok := w.owners[c.held.ShardID][leaseKey{c.inc, c.held.Generation}]
		switch {
		case ownerOf(c.held.Owner) != c.inst.name:
			vs = append(vs, violation{invCheckpoint, fmt.Sprintf("%s#%d checkpointed %s of %s holding owner %q's lease",
				c.inst.name, c.inst.id, c.value, c.held.ShardID, c.held.Owner)})
		case !ok || rec.owner != c.held.Owner:
			vs = append(vs, violation{invCheckpoint, fmt.Sprintf("%s#%d checkpointed %s as %q in generation %d of %s, which went to %q (%s)",
				c.inst.name, c.inst.id, c.held.ShardID, c.held.Owner, c.held.Generation, c.held.ShardID, rec.owner, rec.how)})
		}
	}
	for key, cs := range byShard {
		shard := key.shard
		sort.Slice(cs, func(i, j int) bool { return cs[i].result.Counter < cs[j].result.Counter })
		var moves []*resetMove // this incarnation's, in counter order as the store applied them
		for _, m := range w.rs.moves[shard] {
			if m.key.inc == key.inc {
				moves = append(moves, m)
			}
		}
		var prev *ckptRec
		var moved *resetMove
		for i := range cs {
			c := &cs[i]
			for len(moves) > 0 && moves[0].counter < c.result.Counter {
				prev, moved, moves = nil, moves[0], moves[1:]
			}
			if _, isStart, _ := lease.ParseStart(c.value); isStart {
				continue // a position handed on as it was read: no record finished yet
			}
			if moved != nil && moved.posErr == nil && c.value != lease.ShardEnd && c.value != moved.pos.after {
				if ri, ok := w.streamIdx().bySeq[shard+"/"+c.value]; ok && !moved.pos.covers(ri) {
					vs = append(vs, violation{invCheckpoint, fmt.Sprintf("checkpoint of %s went to %s (%s#%d at %s), before the position %s where %s moved it",
						shard, c.value, c.inst.name, c.inst.id, rel(c.at), moved.pos, moved.r)})
				}
			}
			if prev != nil && checkpointLess(c.value, prev.value) {
				vs = append(vs, violation{invCheckpoint, fmt.Sprintf("checkpoint of %s went back from %s (%s#%d at %s) to %s (%s#%d at %s)",
					shard, prev.value, prev.inst.name, prev.inst.id, rel(prev.at),
					c.value, c.inst.name, c.inst.id, rel(c.at))})
			}
			prev = c
		}
	}
	return vs
}

// checkpointLess orders checkpoints: sequence numbers as numbers, SHARD_END after all.
func checkpointLess(a, b string) bool {
	switch {
	case a == b || a == lease.ShardEnd:
		return false
	case b == lease.ShardEnd:
		return true
	}
	c, err := memlog.CompareSequenceNumbers(a, b)
	return err == nil && c < 0
}

// checkLeases is the lease half of invariant 5: after every instance closed, a lease is free,
// or finished (SHARD_END) and held by an instance that could not release it: one that crashed,
// or whose Close met a lease-store outage, a slow store, a cut-off or a pause (the release is bounded by
// CloseTimeout/2, and nobody takes a finished shard's lease again). An unfinished lease left
// that way is taken and released by the tail's instance, so it must be free in the end.
func (w *world) checkLeases() []violation {
	leases, err := w.store.List(context.Background(), simGroup, simStream)
	if err != nil {
		return []violation{{invCleanup, "listing leases: " + err.Error()}}
	}
	crashed := map[string]bool{}
	for _, in := range w.insts {
		if in.crashed || in.closedInTrouble {
			crashed[in.name] = true
		}
	}
	for _, r := range w.rs.runs {
		if r.err != nil && r.report.Worker != "" {
			// A reset that failed gives back what it holds, best effort: one it could not
			// give back is left as a crashed instance's is (a finished one until the group
			// deletes it, deleteFinishedAfter after it stood still).
			crashed[r.report.Worker] = true
		}
	}
	var vs []violation
	for _, l := range leases {
		if l.Owner == "" || (l.Checkpoint == lease.ShardEnd && (crashed[ownerOf(l.Owner)] || crashed[l.Owner])) {
			continue
		}
		vs = append(vs, violation{invCleanup, fmt.Sprintf("lease of %s still owned by %q (generation %d, checkpoint %q) after every instance closed",
			l.ShardID, l.Owner, l.Generation, l.Checkpoint)})
	}
	return vs
}

// checkDuplicates is invariant 6. A duplicate is a delivery of a record after an earlier
// delivery of it was acked. A disruption (crash, pause, cut-off, outage, slow store, a shard
// refused) may redeliver what the instances it hit acked since their last checkpoint: the
// budget is the acks they made from riskBefore before it until it ended, plus, per disruption,
// MaxInFlight records per shard (acked above an unacked one, so above the watermark). Clean
// closes and handoffs redeliver only what was acked above the watermark: MaxInFlight-1 records
// of the previous deliverer per change of tenure. Throttling, 5xx, expired iterators and
// reshards redeliver nothing acked. A reset that moves a shard redelivers what is at or after
// its position by design: deliveries are compared within the epoch of the last move before
// their reader's lease (resetEpoch), and a reset also counts as a disruption of what it held.
func (w *world) checkDuplicates(all map[string][]*tenure) (dups, budget int, vs []violation) {
	budget = w.windowBudget(all)
	type inEpoch struct {
		rec   pubRec
		epoch int
	}
	firstAck := map[inEpoch]*delivery{}
	for _, d := range w.deliveries {
		k := inEpoch{pubRec{d.key, d.n}, w.resetEpoch(d)}
		if o, ok := firstAck[k]; d.acked && (!ok || d.ackOrd < o.ackOrd) {
			firstAck[k] = d
		}
	}
	shards := map[string]bool{}
	var examples []string
	// A record that came again is one duplicate per deliverer that had it again: the resends
	// of a message the new deliverer nacks are its own business, not more redelivery.
	type again struct {
		rec inEpoch
		by  deliverer
	}
	counted := map[again]bool{}
	for _, d := range w.deliveries {
		shards[d.shard] = true
		k := inEpoch{pubRec{d.key, d.n}, w.resetEpoch(d)}
		if o, ok := firstAck[k]; ok && d.ord > o.ackOrd && !counted[again{k, d.by}] {
			counted[again{k, d.by}] = true
			dups++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("%s/%d acked by %s#%d/sub%d at %s, again to %s#%d/sub%d at %s from %s",
					d.key, d.n, o.slot, o.by.inst, o.by.sub, rel(o.ackAt), d.slot, d.by.inst, d.by.sub, rel(d.at), d.shard))
			}
		}
	}
	for _, x := range w.disrupt {
		budget += 3 * len(shards)
		for _, d := range w.deliveries {
			if d.acked && !d.ackAt.Before(x.from) && !d.ackAt.After(x.to) &&
				(x.slots == nil || x.slots[d.slot]) && (x.shard == "" || x.shard == d.shard) {
				budget++
			}
		}
	}
	if dups > budget {
		vs = append(vs, violation{invDuplicates, fmt.Sprintf("%d duplicate deliveries; the %d disruptions explain at most %d; e.g. %s",
			dups, len(w.disrupt), budget, strings.Join(examples, "; "))})
	}
	return dups, budget, vs
}

// windowBudget is what changes of tenure may redeliver: the records the previous deliverer
// acked above its watermark. MaxInFlight bounds the messages unacked at once, not the acks
// behind the oldest of them (those are bounded by the shard's share of the memory budget), so
// the count is taken from the tenure itself.
func (w *world) windowBudget(all map[string][]*tenure) int {
	budget := 0
	for _, ts := range all {
		sort.Slice(ts, func(i, j int) bool { return ts[i].start.Before(ts[j].start) })
		for i := 1; i < len(ts); i++ {
			budget += max(w.insts[ts[i-1].by.inst].maxIF-1, ackedAboveWatermark(ts[i-1]))
		}
	}
	return budget
}

// ackedAboveWatermark counts the records t acked above the oldest record it delivered last
// without an ack: what its watermark, and so its last checkpoint, could not pass.
func ackedAboveWatermark(t *tenure) int {
	oldest := ""
	for _, d := range t.seen {
		if !d.acked && (oldest == "" || checkpointLess(d.seq, oldest)) {
			oldest = d.seq
		}
	}
	if oldest == "" {
		return 0
	}
	n := 0
	for _, d := range t.seen {
		if d.acked && checkpointLess(oldest, d.seq) {
			n++
		}
	}
	return n
}
