package sim_test

// Resets among the events: admin.ResetGroup moves the running group to a time, to LATEST, to
// TRIM_HORIZON, or one shard to (or past) a record it delivered, with or without Settle,
// concurrently with everything else the schedule does. What a reset may change in the other
// invariants, and what it must keep (invariant 7), is here.

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// invReset is invariant 7: after a reset returns, no record before its position is delivered
// later than one renewal interval (on the slowest clock), and every record at or after it that
// the group had delivered is delivered again, by a reader that took the lease after the reset.
const invReset = 7

// The kinds of reset a plan makes.
const (
	rpTime = iota
	rpLatest
	rpTrimHorizon
	rpSequence
)

// resetPlan is what one reset event does, drawn from its pick.
type resetPlan struct {
	kind   int
	back   time.Duration // rpTime: how far before the reset
	after  bool          // rpSequence: after the record rather than at it
	settle bool
	which  uint64 // rpSequence: which delivered record
}

func resetPlanOf(pick uint64) resetPlan {
	return resetPlan{kind: int(pick % 4), back: time.Duration(1+(pick>>2)%8) * time.Second,
		after: (pick>>5)&1 == 1, settle: (pick>>6)&1 == 1, which: pick >> 7}
}

func (p resetPlan) String() string {
	s := map[int]string{rpTime: fmt.Sprintf("to %s ago", p.back), rpLatest: "to LATEST", rpTrimHorizon: "to TRIM_HORIZON",
		rpSequence: "one shard at a delivered record"}[p.kind]
	if p.kind == rpSequence && p.after {
		s = "one shard after a delivered record"
	}
	if p.settle {
		s += " (settle)"
	}
	return s
}

// resetEvents draws a seed's resets (none, one or two, after the first 3 s) from a generator
// of their own, so that the other events of every seed stay what they were. A seed that moves
// in from a KCL application has none: its KCL worker's leases are foreign, which the world's
// bare store does not say (kcl_test.go marks them in the instances' view).
func resetEvents(seed uint64, m mix) []event {
	if m.name == "kcl" || kclFor(seed) {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, 0x7e5e7))
	var evs []event
	for range r.IntN(3) {
		at := 3*time.Second + time.Duration(r.Int64N(int64(runLength-5*time.Second)))
		evs = append(evs, event{at: at, kind: evReset, pick: r.Uint64()})
	}
	return evs
}

// resetRec is one reset: what it was asked, when it ran and what it returned.
type resetRec struct {
	plan              resetPlan
	cfg               admin.ResetConfig
	started, returned time.Time // returned: zero while it runs
	report            admin.ResetReport
	err               error
	at                time.Time // a time or LATEST: the position's time
}

// startReset runs one reset on a goroutine of its own, as an operator's command beside the
// group.
func (w *world) startReset(e event) {
	p := resetPlanOf(e.pick)
	cfg := admin.ResetConfig{Stream: simStream, ConsumerGroup: simGroup, Client: w.log, LeaseStore: w.store,
		Settle: p.settle, SettleTimeout: handoffTimeout, RequestTimeout: requestTimeout}
	rec := &resetRec{plan: p}
	w.mu.Lock()
	switch p.kind {
	case rpTime:
		cfg.To = admin.ResetPosition{Type: admin.ResetToTimestamp, Timestamp: time.Now().Add(-p.back)}
	case rpLatest:
		cfg.To = admin.ResetPosition{Type: admin.ResetToLatest}
	case rpSequence:
		if len(w.deliveries) > 0 {
			d := w.deliveries[p.which%uint64(len(w.deliveries))]
			cfg.ShardID, cfg.To = d.shard, admin.ResetPosition{Type: admin.ResetToSequenceNumber, SequenceNumber: d.seq}
			if p.after {
				cfg.To.Type = admin.ResetAfterSequenceNumber
			}
			break
		}
		fallthrough
	default:
		cfg.To = admin.ResetPosition{Type: admin.ResetToTrimHorizon}
	}
	rec.cfg, rec.started = cfg, time.Now()
	w.resets = append(w.resets, rec)
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		report, err := admin.ResetGroup(harnessCtx(), cfg)
		w.mu.Lock()
		rec.report, rec.err, rec.returned = report, err, time.Now()
		if s, ok, _ := lease.ParseStart(report.To); ok && s.Type == lease.StartAtTimestamp {
			rec.at = s.Timestamp
		}
		w.mu.Unlock()
		w.notef("  reset %s returned %s after it began: %s %v", report.To, time.Since(rec.started).Round(time.Millisecond), moved(report), err)
	}()
}

func moved(r admin.ResetReport) string {
	n := 0
	for _, s := range r.Shards {
		if s.Action == admin.ResetActionMove || s.Action == admin.ResetActionCreate {
			n++
		}
	}
	return fmt.Sprintf("%d shards moved", n)
}

// mayMove: the reset may have moved the shard's lease (a failed one may have moved any it
// named).
func (r *resetRec) mayMove(shard string) bool {
	return r.cfg.ShardID == "" || r.cfg.ShardID == shard
}

// movedShard: the reset moved the shard and returned without error; gen is the generation it
// left the lease at.
func (r *resetRec) movedShard(shard string) (gen int64, ok bool) {
	if r.err != nil || r.returned.IsZero() {
		return 0, false
	}
	for _, s := range r.report.Shards {
		if s.ShardID == shard && (s.Action == admin.ResetActionMove || s.Action == admin.ResetActionCreate) {
			return s.Generation, true
		}
	}
	return 0, false
}

// before: the delivered record is before the reset's position.
func (r *resetRec) before(d *delivery) bool {
	switch r.cfg.To.Type {
	case admin.ResetToTimestamp, admin.ResetToLatest:
		return d.arrival.Before(r.at)
	case admin.ResetToSequenceNumber, admin.ResetAfterSequenceNumber:
		c, err := memlog.CompareSequenceNumbers(d.seq, r.cfg.To.SequenceNumber)
		return err == nil && (c < 0 || c == 0 && r.cfg.To.Type == admin.ResetAfterSequenceNumber)
	}
	return false
}

// resetBound is how long after a reset returns a fenced reader may still deliver: until its
// next renewal, on the slowest clock, and the same instant's tolerance as invariant 3.
var resetBound = func() time.Duration {
	slowest := float64(renewInterval) / (1 - maxRateSkew)
	return time.Duration(slowest) + overlapTolerance
}()

// stopBound is how long after a reset returns a fenced reader that cannot reach the lease
// store may still deliver: until its stop point, 0.8 × LeaseDuration after its last renewal,
// on the slowest clock. It cannot learn of the reset sooner (docs/operating.md says so).
var stopBound = func() time.Duration {
	slowest := float64(leaseDuration-leaseDuration/5) / (1 - maxRateSkew)
	return time.Duration(slowest) + overlapTolerance
}()

// storeTrouble: the instance in slot could not reach the lease store (cut off, an outage, a
// slow store) at some time in [from, to].
func (w *world) storeTrouble(slot string, from, to time.Time) bool {
	for _, x := range w.disrupt {
		switch {
		case x.what != "cut-off" && x.what != "store-outage" && x.what != "slow-store",
			x.slots != nil && !x.slots[slot]:
			continue
		}
		if x.from.Before(to) && from.Before(x.to) {
			return true
		}
	}
	return false
}

// checkResets is invariant 7.
func (w *world) checkResets() []violation {
	var vs []violation
	shards := map[string]bool{}
	for _, d := range w.deliveries {
		shards[d.shard] = true
	}
	for i, r := range w.resets {
		if w.overlapped(r) {
			continue // two resets at once: the shard is at either's position, or the old one
		}
		for shard := range shards {
			gen, ok := r.movedShard(shard)
			if !ok {
				continue
			}
			var next time.Time // the next reset that may move the shard: what it allows is its own
			for _, r2 := range w.resets[i+1:] {
				if r2.mayMove(shard) {
					next = r2.started
					break
				}
			}
			bound := r.returned.Add(resetBound)
			redelivered := map[pubRec]bool{}
			for _, d := range w.deliveries {
				if d.shard != shard || !next.IsZero() && !d.at.Before(next) {
					continue
				}
				if d.at.After(bound) && r.before(d) && !(d.at.Before(r.returned.Add(stopBound)) && w.storeTrouble(d.slot, r.started.Add(-stopBound), d.at)) {
					vs = append(vs, violation{invReset, fmt.Sprintf("%s/%d of %s (seq …%s) is before the position %s of the reset that returned at %s, but %s#%d/sub%d delivered it at %s (gen %d)",
						d.key, d.n, shard, tail(d.seq), r.report.To, rel(r.returned), d.slot, d.by.inst, d.by.sub, rel(d.at), d.gen)})
				}
				if d.gen > gen {
					redelivered[pubRec{d.key, d.n}] = true
				}
			}
			if !next.IsZero() {
				continue // a later reset may move the shard past what this one owed
			}
			lost := 0
			for _, d := range w.deliveries {
				if d.shard == shard && d.at.Before(r.started) && !r.before(d) && !redelivered[pubRec{d.key, d.n}] {
					if lost++; lost <= 3 {
						vs = append(vs, violation{invReset, fmt.Sprintf("%s/%d of %s (seq …%s) is at or after the position %s of the reset that returned at %s, but no reader that took the lease after it (generation > %d) delivered it",
							d.key, d.n, shard, tail(d.seq), r.report.To, rel(r.returned), gen)})
					}
				}
			}
		}
	}
	return vs
}

// overlapped: another reset ran while r did (one of them should have refused, or failed).
func (w *world) overlapped(r *resetRec) bool {
	for _, o := range w.resets {
		if o != r && o.started.Before(r.returned) && r.started.Before(o.returned) {
			return true
		}
	}
	return false
}

func tail(s string) string { return s[max(0, len(s)-6):] }

// skippedByReset: a reset to a time (or LATEST) after the record's Publish began may have
// moved the group past it before any reader delivered it. A reset to a record skips only what
// was delivered (the record was).
func (w *world) skippedByReset(rec pubRec) bool {
	for _, r := range w.resets {
		if !r.at.IsZero() && w.pubStart[rec].Before(r.at) {
			return true
		}
		if r.returned.IsZero() && (r.cfg.To.Type == admin.ResetToTimestamp || r.cfg.To.Type == admin.ResetToLatest) {
			return true // still running at the end (cannot happen: the run waits for it)
		}
	}
	return false
}

// recreated: a reset created the shard's lease again after the group had deleted it (a parent
// read to its end), so its generations started again at 0. The checks keyed by generation
// (invariants 3 and 4) then see one generation number twice: recreatedBetween says when.
func (w *world) recreated(shard string) bool {
	return w.recreatedBetween(shard, time.Time{}, time.Now().Add(time.Hour))
}

func (w *world) recreatedBetween(shard string, from, to time.Time) bool {
	for _, r := range w.resets {
		for _, s := range r.report.Shards {
			if s.ShardID == shard && s.Action == admin.ResetActionCreate && r.started.Before(to) && (r.returned.IsZero() || from.Before(r.returned)) {
				return true
			}
		}
	}
	return false
}

// resetBetween: a reset ran between two moments, so a checkpoint may go back between them.
func (w *world) resetBetween(from, to time.Time, shard string) bool {
	for _, r := range w.resets {
		if r.mayMove(shard) && !r.started.After(to) && (r.returned.IsZero() || !r.returned.Before(from)) {
			return true
		}
	}
	return false
}

// resetBudget is what resets may redeliver, for invariant 6: every record of a shard a reset
// may have moved that was acked before the reset's bound.
func (w *world) resetBudget() int {
	n := 0
	for _, r := range w.resets {
		for _, d := range w.deliveries {
			if d.acked && r.mayMove(d.shard) && (r.returned.IsZero() || d.ackAt.Before(r.returned.Add(resetBound))) && !r.before(d) {
				n++
			}
		}
	}
	return n
}
