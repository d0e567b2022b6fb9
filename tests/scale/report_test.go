package scale_test

// The table (markdown, printed and written to SCALE_OUT) and the goals under it.

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// The goals the table is held against (printed MET / MISSED, never asserted).
const (
	goalEvenSyncs      = 3    // even within 3 lease syncs of a start, join or leave
	goalCrashSyncs     = 2    // even within LeaseDuration + 2 syncs of a crash, and every shard of the crashed instances read again
	goalSteadyFraction = 10   // steady RCU/s at 1,000 shards at most a tenth of listing every lease every sync
	goalKeyRCU         = 1500 // no partition key above this RCU/s at 4,000 shards
	goalKeyWCU         = 500  // nor above this WCU/s
	goalGrowthSlack    = 1.25 // per-instance calls grow no faster than 1.25 × the leases held
)

func renderReport(results []*sizeResult, full bool) string {
	var b strings.Builder
	rc := results[0].rc
	fmt.Fprintf(&b, "\n## Scale run (tests/scale)\n\n")
	if !full {
		fmt.Fprintf(&b, "Small configuration of a plain `go test` (%d shards); `make scale` runs the full sizes.\n\n", rc.shards)
	}
	fmt.Fprintf(&b, "Fake time in a testing/synctest bubble: memlog stream, one lease.MemoryStore, kinesis.Subscriber instances of one group. "+
		"%d instances start at once, %d join, %d leave (Close), %d crash (their calls hang, nothing more reaches memlog or the lease store). "+
		"Lease timings at their defaults (LeaseDuration %s, LeaseSyncInterval %s, renewal every LeaseDuration/3, CheckpointInterval 5s, HandoffTimeout 10s, ShardSyncInterval 30s); "+
		"PollInterval and MinReadInterval raised to %s and %s (defaults 400ms, 200ms) to cut goroutine wakeups. "+
		"One record per shard every %s; handlers ack at once.\n\n",
		rc.start, rc.join, rc.leave, rc.crash, leaseDuration, leaseSyncInterval, rc.pollInterval, rc.minReadInterval, rc.pubEvery)
	b.WriteString("- *even after*: from the membership change until max − min ≤ 1 lease held among live instances and every shard held by one " +
		"(held = the lease store names the instance as owner AND its Health shows an unpaused reader at that generation); *syncs* = that / LeaseSyncInterval.\n")
	b.WriteString("- Rates are over the phase's window: the change until the spread was even (at least one lease sync); *steady* is the quiet stretch " +
		fmt.Sprintf("(%s) after *start* settled. *calls*: lease-store calls that reached the table; R = List and Members, W = every write; "+
			"per instance = group ÷ live instances.\n", rc.quiet))
	fmt.Fprintf(&b, "- RCU/WCU are an ESTIMATE from the cost model in tests/scale/cost_test.go (DynamoDB's pricing of what each call would send on the bucketed layout: "+
		"List = %d strongly consistent bucket queries, ceil(bytes/4096) each, at least 1; writes ceil(size/1024), failed ones too; the GetItem after a failed Take, RequestHandoff or Handoff).\n",
		lease.DynamoDBLeaseBuckets)
	b.WriteString("- *hottest key*: the partition key with the most units over the window; *busiest second*: the most units one key took in one second of it " +
		"(sampled each second; DynamoDB throttles a partition by the second, less what its burst capacity absorbs).\n")
	b.WriteString("- *dup*: records delivered again after an acked delivery (by the phase of the repeat); *lost*: records published in the phase with no acked delivery by the end.\n\n")

	b.WriteString("| shards | phase | live | even after (s) | syncs | window (s) | calls/inst/s R | calls/inst/s W | group R/s | group W/s | RCU/s | WCU/s | hottest key RCU/s | hottest key WCU/s | busiest second, key RCU/s | busiest second, key WCU/s | dup | lost |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---:|---:|\n")
	for _, res := range results {
		rows := []phaseResult{res.phases[0], res.steady}
		rows = append(rows, res.phases[1:]...)
		for _, p := range rows {
			b.WriteString(row(res, p))
		}
	}
	b.WriteString("\n")
	for _, res := range results {
		b.WriteString(notes(res))
	}
	b.WriteString(goals(results))
	return b.String()
}

func row(res *sizeResult, p phaseResult) string {
	w := p.cost
	t := w.total()
	secs := math.Max(w.secs, 1e-9)
	live := float64(max(p.live, 1))
	evenCol, syncCol := "—", "—"
	if p.name != "steady" {
		evenCol = fmt.Sprintf("%.2f", p.evenAfter.Seconds())
		syncCol = fmt.Sprintf("%.1f", p.evenAfter.Seconds()/leaseSyncInterval.Seconds())
		if !p.even {
			evenCol = fmt.Sprintf("not even in %.0f (min %d, max %d, %d unheld)", p.evenAfter.Seconds(), p.last.min, p.last.max, p.last.unheld)
			syncCol = fmt.Sprintf(">%.0f", p.evenAfter.Seconds()/leaseSyncInterval.Seconds())
		}
	} else if !p.even || p.flaps > 0 {
		evenCol = fmt.Sprintf("uneven in %d samples", p.flaps)
	}
	rk, ru := w.hottest(true)
	wk, wu := w.hottest(false)
	return fmt.Sprintf("| %d | %s | %d | %s | %s | %.1f | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f `%s` | %.1f `%s` | %.0f `%s` | %.0f `%s` | %d | %d |\n",
		res.rc.shards, p.name, p.live, evenCol, syncCol, w.secs,
		float64(t.reads)/secs/live, float64(t.writes)/secs/live,
		float64(t.reads)/secs, float64(t.writes)/secs,
		float64(t.rcu)/secs, float64(t.wcu)/secs,
		float64(ru)/secs, rk, float64(wu)/secs, wk,
		p.peak.rcu, p.peak.rkey, p.peak.wcu, p.peak.wkey,
		p.dup, p.lost)
}

// notes are the lines under the table for one size: wall time, the steady state by call, what
// the driver logged at WARN and ERROR, and the harness's problems.
func notes(res *sizeResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%d shards**: wall time %s; %d records published; %d still unacked when the drain ended.\n\n",
		res.rc.shards, res.wall.Round(100*time.Millisecond), res.total, res.pending)
	w := res.steady.cost
	secs := math.Max(w.secs, 1e-9)
	var parts []string
	for _, op := range sortedKeys(w.ops) {
		c := w.ops[op]
		if c.reads+c.writes == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f/s (%.1f RCU/s, %.1f WCU/s)", op, float64(c.reads+c.writes)/secs, float64(c.rcu)/secs, float64(c.wcu)/secs))
	}
	fmt.Fprintf(&b, "- steady, by call: %s\n", strings.Join(parts, "; "))
	for i, p := range res.phases {
		var ps []string
		for _, op := range sortedKeys(p.cost.ops) {
			c := p.cost.ops[op]
			switch {
			case c.failed > 0:
				ps = append(ps, fmt.Sprintf("%s %d (%d failed)", op, c.reads+c.writes, c.failed))
			case c.reads+c.writes > 0:
				ps = append(ps, fmt.Sprintf("%s %d", op, c.reads+c.writes))
			}
		}
		fmt.Fprintf(&b, "- %s (%.1fs window), calls: %s\n", phaseNames[i], p.cost.secs, strings.Join(ps, ", "))
		fmt.Fprintf(&b, "  - spread (min–max held per live instance / shards unheld) at each lease sync: %s\n", strings.Join(p.timeline, ", "))
		if !p.even {
			b.WriteString(unevenDetail(p))
		}
	}
	type line struct {
		k logKey
		c *logCount
	}
	var lines []line
	taken := map[int]int{}
	for k, c := range res.logs {
		switch {
		case k.level == "ERROR" || k.level == "WARN":
			lines = append(lines, line{k, c})
		case k.msg == "Lease taken":
			taken[k.phase] += c.n
		}
	}
	sort.Slice(lines, func(i, j int) bool {
		if lines[i].k.phase != lines[j].k.phase {
			return lines[i].k.phase < lines[j].k.phase
		}
		if lines[i].k.crashed != lines[j].k.crashed {
			return !lines[i].k.crashed
		}
		return lines[i].c.n > lines[j].c.n
	})
	var ts []string
	for i, n := range phaseNames {
		ts = append(ts, fmt.Sprintf("%s %d", n, taken[i]))
	}
	fmt.Fprintf(&b, "- \"Lease taken\" log lines by phase: %s\n", strings.Join(ts, ", "))
	if len(lines) == 0 {
		b.WriteString("- the driver logged nothing at WARN or ERROR\n")
	}
	for i, l := range lines {
		if i == 12 {
			fmt.Fprintf(&b, "- ... %d more WARN/ERROR messages\n", len(lines)-i)
			break
		}
		who := ""
		if l.k.crashed {
			who = " (by crashed instances: expected)"
		}
		fmt.Fprintf(&b, "- %s %s%s ×%d: %q, e.g. %s\n", phaseNames[l.k.phase], l.k.level, who, l.c.n, l.k.msg, l.c.example)
	}
	for i, p := range res.problems {
		if i == 8 {
			fmt.Fprintf(&b, "- ... %d more harness problems\n", len(res.problems)-i)
			break
		}
		fmt.Fprintf(&b, "- harness: %s\n", p)
	}
	for _, v := range res.violations {
		fmt.Fprintf(&b, "- OVERLAP: %s\n", v)
	}
	b.WriteString("\n")
	return b.String()
}

func verdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}

// goals compares the table with the goals, per size where a goal names one.
func goals(results []*sizeResult) string {
	var b strings.Builder
	b.WriteString("### Goals\n\n")
	bySize := map[int]*sizeResult{}
	for _, r := range results {
		bySize[r.rc.shards] = r
	}

	// 1. Even spread soon after every change.
	evenLimit := time.Duration(goalEvenSyncs) * leaseSyncInterval
	crashLimit := leaseDuration + time.Duration(goalCrashSyncs)*leaseSyncInterval
	for _, r := range results {
		var parts []string
		all := true
		for _, p := range r.phases {
			limit := evenLimit
			if p.name == "crash" {
				limit = crashLimit
			}
			ok := p.even && p.evenAfter <= limit
			all = all && ok
			parts = append(parts, fmt.Sprintf("%s %.1fs ≤ %s %s", p.name, p.evenAfter.Seconds(), limit, verdict(ok)))
		}
		fmt.Fprintf(&b, "- even spread within %d lease syncs of a start/join/leave, LeaseDuration + %d syncs of a crash, %d shards: %s — **%s**\n",
			goalEvenSyncs, goalCrashSyncs, r.rc.shards, strings.Join(parts, "; "), verdict(all))
	}

	// 1b. Crash failover: every shard the crashed instances held read again.
	for _, r := range results {
		for _, p := range r.phases {
			if p.name != "crash" {
				continue
			}
			ok := p.victimsWaiting == 0 && p.failover <= crashLimit
			fmt.Fprintf(&b, "- crash failover, %d shards: the %d shards of the %d crashed instances all read again by live instances within LeaseDuration + %d syncs (%s): %.1fs (%d not yet) — **%s**\n",
				r.rc.shards, p.victims, r.rc.crash, goalCrashSyncs, crashLimit, p.failover.Seconds(), p.victimsWaiting, verdict(ok))
		}
	}

	// 2. Steady RCU at 1,000 shards against listing every lease every sync.
	if r := bySize[1000]; r != nil {
		b.WriteString(steadyGoal(r))
	} else {
		b.WriteString("- steady group RCU/s at 1,000 shards ≤ 1/10 of listing every lease every sync: not run at 1,000 shards (for what ran: ")
		var ps []string
		for _, r := range results {
			ps = append(ps, strings.TrimSpace(strings.TrimPrefix(steadyGoal(r), "-")))
		}
		b.WriteString(strings.Join(ps, "; ") + ")\n")
	}

	// 3. Hot partitions at 4,000 shards.
	if r := bySize[4000]; r != nil {
		b.WriteString(hotGoal(r))
	} else {
		var ps []string
		for _, r := range results {
			ps = append(ps, strings.TrimSpace(strings.TrimPrefix(hotGoal(r), "-")))
		}
		fmt.Fprintf(&b, "- no partition key above %d RCU/s or %d WCU/s at 4,000 shards: not run at 4,000 shards (for what ran: %s)\n",
			goalKeyRCU, goalKeyWCU, strings.Join(ps, "; "))
	}

	// 4. Per-instance calls against the leases held.
	b.WriteString(growthGoal(results, bySize))

	// 5. Duplicates and losses.
	for _, r := range results {
		graceful := 0
		for _, p := range r.phases {
			if p.name != "crash" {
				graceful += p.dup
			}
		}
		fmt.Fprintf(&b, "- %d shards: dup = 0 through start, join and graceful leave: %d — **%s**; lost = 0: %d — **%s**; dup after the crash (allowed: acked, not yet checkpointed): %d\n",
			r.rc.shards, graceful, verdict(graceful == 0), r.lostAll, verdict(r.lostAll == 0), r.dupCrash)
	}
	b.WriteString("\n")
	return b.String()
}

func steadyGoal(r *sizeResult) string {
	w := r.steady.cost
	measured := float64(w.total().rcu) / math.Max(w.secs, 1e-9)
	ref := float64(r.startN) / leaseSyncInterval.Seconds() * float64(r.refList)
	limit := ref / goalSteadyFraction
	return fmt.Sprintf("- steady group RCU/s at %d shards ≤ 1/%d of listing every lease every sync: reference %d instances × 1/%s × %d RCU per List = %.0f RCU/s, limit %.0f; measured %.1f RCU/s (%.2f of the reference) — **%s**\n",
		r.rc.shards, goalSteadyFraction, r.startN, leaseSyncInterval, r.refList, ref, limit, measured, measured/math.Max(ref, 1e-9), verdict(measured <= limit))
}

func hotGoal(r *sizeResult) string {
	rows := append([]phaseResult{r.steady}, r.phases...)
	var worstR, worstW, peakR, peakW float64
	var whereR, whereW, wherePR, wherePW string
	for _, p := range rows {
		secs := math.Max(p.cost.secs, 1e-9)
		if k, u := p.cost.hottest(true); float64(u)/secs > worstR {
			worstR, whereR = float64(u)/secs, fmt.Sprintf("%s `%s`", p.name, k)
		}
		if k, u := p.cost.hottest(false); float64(u)/secs > worstW {
			worstW, whereW = float64(u)/secs, fmt.Sprintf("%s `%s`", p.name, k)
		}
		if p.peak.rcu > peakR {
			peakR, wherePR = p.peak.rcu, fmt.Sprintf("%s `%s`", p.name, p.peak.rkey)
		}
		if p.peak.wcu > peakW {
			peakW, wherePW = p.peak.wcu, fmt.Sprintf("%s `%s`", p.name, p.peak.wkey)
		}
	}
	ok := worstR <= goalKeyRCU && worstW <= goalKeyWCU
	okPeak := peakR <= goalKeyRCU && peakW <= goalKeyWCU
	return fmt.Sprintf("- no partition key above %d RCU/s or %d WCU/s at %d shards: over each phase's window, hottest %.1f RCU/s (%s), %.1f WCU/s (%s) — **%s**; "+
		"in the busiest second, %.0f RCU/s (%s), %.0f WCU/s (%s) — **%s**\n",
		goalKeyRCU, goalKeyWCU, r.rc.shards, worstR, whereR, worstW, whereW, verdict(ok), peakR, wherePR, peakW, wherePW, verdict(okPeak))
}

// perInstance is one instance's steady-state figures.
type perInstance struct {
	name       string
	held       int
	rps, wps   float64
	rcus, wcus float64
}

func steadyInstances(r *sizeResult) []perInstance {
	w := r.steady.cost
	secs := math.Max(w.secs, 1e-9)
	var out []perInstance
	for i, c := range w.inst {
		name := fmt.Sprintf("w%03d", i)
		held, ok := r.held[name]
		if !ok {
			continue
		}
		out = append(out, perInstance{name, held, float64(c.reads) / secs, float64(c.writes) / secs, float64(c.rcu) / secs, float64(c.wcu) / secs})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].held != out[j].held {
			return out[i].held < out[j].held
		}
		return out[i].name < out[j].name
	})
	return out
}

func mean(ps []perInstance) perInstance {
	var m perInstance
	for _, p := range ps {
		m.held += p.held
		m.rps += p.rps
		m.wps += p.wps
		m.rcus += p.rcus
		m.wcus += p.wcus
	}
	n := float64(max(len(ps), 1))
	return perInstance{name: "mean", held: int(math.Round(float64(m.held) / n)), rps: m.rps / n, wps: m.wps / n, rcus: m.rcus / n, wcus: m.wcus / n}
}

// growthGoal: what an instance asks of the lease table should grow with the leases it holds,
// not faster. At a fixed number of instances the leases held grow with the shards, so the
// ratio of the 4,000-shard to the 1,000-shard per-instance calls is held against the ratio of
// the leases held; the fewest and most leases held in steady state show it within one size.
func growthGoal(results []*sizeResult, bySize map[int]*sizeResult) string {
	var b strings.Builder
	b.WriteString("- lease-table calls per instance grow with the shards it owns (steady state; per instance: leases held → reads/s, writes/s, RCU/s, WCU/s):\n")
	for _, r := range results {
		ps := steadyInstances(r)
		if len(ps) == 0 {
			continue
		}
		show := []perInstance{ps[0], ps[len(ps)-1], mean(ps)}
		var parts []string
		for _, p := range show {
			parts = append(parts, fmt.Sprintf("%s %d → %.2f, %.2f, %.1f, %.1f", p.name, p.held, p.rps, p.wps, p.rcus, p.wcus))
		}
		fmt.Fprintf(&b, "  - %d shards: %s\n", r.rc.shards, strings.Join(parts, "; "))
	}
	lo, hi := bySize[1000], bySize[4000]
	if lo == nil || hi == nil {
		b.WriteString("  - the 4,000 : 1,000 ratio needs both sizes — not judged\n")
		return b.String()
	}
	ml, mh := mean(steadyInstances(lo)), mean(steadyInstances(hi))
	heldRatio := float64(mh.held) / math.Max(float64(ml.held), 1e-9)
	callRatio := (mh.rps + mh.wps) / math.Max(ml.rps+ml.wps, 1e-9)
	rcuRatio := mh.rcus / math.Max(ml.rcus, 1e-9)
	ok := callRatio <= goalGrowthSlack*heldRatio
	fmt.Fprintf(&b, "  - 4,000 : 1,000 per instance: leases held ×%.2f, calls/s ×%.2f, RCU/s ×%.2f; calls grow no faster than %.2f × the leases held — **%s**\n",
		heldRatio, callRatio, rcuRatio, goalGrowthSlack, verdict(ok))
	return b.String()
}

// unevenDetail shows, for a phase that did not spread evenly, the instances holding the fewest
// and the most leases at the end, with the lease-table calls each made in the window.
func unevenDetail(p phaseResult) string {
	type held struct {
		in *instance
		n  int
	}
	var hs []held
	for in, n := range p.last.held {
		hs = append(hs, held{in, n})
	}
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].n != hs[j].n {
			return hs[i].n < hs[j].n
		}
		return hs[i].in.idx < hs[j].in.idx
	})
	var b strings.Builder
	show := hs
	if len(hs) > 4 {
		show = append(append([]held(nil), hs[:2]...), hs[len(hs)-2:]...)
	}
	for _, h := range show {
		var ops []string
		if h.in.idx < len(p.cost.instOps) {
			io := p.cost.instOps[h.in.idx]
			for _, op := range sortedKeys(io) {
				if c := io[op]; c.reads+c.writes > 0 {
					ops = append(ops, fmt.Sprintf("%s %d", op, c.reads+c.writes))
				}
			}
		}
		fmt.Fprintf(&b, "  - not even at the end: %s holds %d; its lease-table calls in the window: %s\n", h.in.name, h.n, strings.Join(ops, ", "))
	}
	return b.String()
}
