package sim_test

// One seed from start to finish: the schedule and the producer run for runLength, then every
// fault is lifted and the group drains in a quiet tail, then everything is closed and checked.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing/synctest"
	"time"
)

var simKeys = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}

func runSeed(seed uint64, m mix, wp **world) *outcome {
	w, err := newWorld(seed, m)
	if err != nil {
		return &outcome{seed: seed, violations: []violation{{0, "harness: " + err.Error()}}}
	}
	*wp = w
	if kclFor(seed) {
		w.setUpKCL()
		pauseAt, resumeAt, stopAt := w.kclSchedule()
		w.wg.Add(1)
		go w.runKCLWorker(pauseAt, resumeAt, stopAt)
	}
	evs := schedule(seed, m)
	w.wg.Add(1)
	go w.produce()
	for _, e := range evs {
		time.Sleep(time.Until(w.start.Add(e.at)))
		w.apply(e)
	}
	time.Sleep(time.Until(w.start.Add(runLength)))
	w.notef("quiet tail: every fault lifted, paused instances resumed")
	w.quiet()
	w.ensureLive()
	drained := w.drain()
	w.notef("drained=%v; closing everything", drained)
	w.shutdown()
	leaks := w.leaks()
	return w.outcome(leaks)
}

// produce publishes small batches of numbered messages over the keys until runLength.
func (w *world) produce() {
	defer w.wg.Done()
	r := rand.New(rand.NewPCG(w.seed, 0x9b0d))
	next := map[string]int{}
	w.mu.Lock()
	for _, p := range w.published { // a backlog published before the run (kcl_test.go)
		next[p.key] = max(next[p.key], p.n+1)
	}
	w.mu.Unlock()
	for {
		time.Sleep(100*time.Millisecond + time.Duration(r.Int64N(int64(200*time.Millisecond))))
		if w.since() >= runLength {
			return
		}
		batch := make([]pubRec, 1+r.IntN(4))
		for i := range batch {
			k := simKeys[r.IntN(len(simKeys))]
			batch[i] = pubRec{k, next[k]}
			next[k]++
		}
		w.publish(batch)
	}
}

// ensureLive starts an instance for the tail if none is live: someone has to drain the stream.
func (w *world) ensureLive() {
	w.mu.Lock()
	n := len(w.live)
	w.mu.Unlock()
	if n == 0 {
		e := event{kind: evStart, slot: slotNames[0], subs: 1, hk: handlerQuick, rate: 1, maxIF: 1}
		w.notef("tail %s", e)
		w.startInstance(e)
	}
}

// drain waits until every acked publish has been delivered and acked, or drainLimit passes,
// and at least settleTail: readers paused by a fault renew and resume (or stop) before Close,
// so that Close finds the group settled. (Closing a paused reader straight away leaves its
// lease behind to expire; that is a slower handover, not a broken one.)
func (w *world) drain() bool {
	settled := time.Now().Add(settleTail)
	deadline := time.Now().Add(drainLimit)
	for time.Now().Before(deadline) {
		if w.allAcked() && w.kclGone() && w.resetsDone() && !time.Now().Before(settled) {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}

// resetsDone: every reset returned, and what the last move of each shard owes was delivered
// and acked after it (reset_test.go).
func (w *world) resetsDone() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resetsOwed()
}

func (w *world) allAcked() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	done := map[pubRec]bool{}
	for _, d := range w.deliveries {
		if d.acked {
			done[pubRec{d.key, d.n}] = true
		}
	}
	for _, p := range w.published {
		if !done[p] && w.owedByGroup(p) {
			return false
		}
	}
	return true
}

// shutdown closes the live instances, then ends the run (hung calls of crashed instances fail
// from now on) and closes the rest, and waits for every goroutine of the harness.
func (w *world) shutdown() {
	closeAll := func(insts []*instance) {
		var wg sync.WaitGroup
		for _, in := range insts {
			wg.Add(1)
			go func() { defer wg.Done(); in.close() }()
		}
		wg.Wait()
	}
	w.mu.Lock()
	var live []*instance
	for _, in := range w.live {
		live = append(live, in)
	}
	w.mu.Unlock()
	closeAll(live)
	close(w.end)
	w.mu.Lock()
	all := append([]*instance(nil), w.insts...)
	w.mu.Unlock()
	closeAll(all)
	w.wg.Wait()
	if err := w.pub.Close(); err != nil {
		w.mu.Lock()
		w.closeErrs = append(w.closeErrs, "publisher: Close: "+err.Error())
		w.mu.Unlock()
	}
}

var bubbleRE = regexp.MustCompile(`synctest bubble (\d+)\]`)

// leaks lists the goroutines of this bubble still there once everything closed and the bubble
// is idle, by their topmost frames of the driver.
func (w *world) leaks() []string {
	// No grace period: Close has returned for every instance, so a goroutine of the driver
	// still there once the bubble is idle is a leak, however soon it would have ended.
	synctest.Wait()
	buf := make([]byte, 1<<20)
	me := bubbleRE.FindSubmatch(buf[:runtime.Stack(buf, false)])
	var all []byte
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			all = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range bytes.Split(all, []byte("\n\n")) {
		m := bubbleRE.FindSubmatch(g)
		if i == 0 || m == nil || me == nil || string(m[1]) != string(me[1]) {
			continue // the first is this goroutine
		}
		if bytes.Contains(g, []byte("testing.tRunner")) || bytes.Contains(g, []byte("testingSynctestTest")) ||
			!bytes.Contains(g, []byte("watermill-kinesis/")) {
			continue // the bubble's own goroutines (synctest and testing), not the run's
		}
		out = append(out, summarizeStack(string(g)))
	}
	return out
}

// summarizeStack keeps a goroutine's header and its frames in this module.
func summarizeStack(g string) string {
	lines := strings.Split(g, "\n")
	var keep []string
	for _, l := range lines[1:] {
		if strings.Contains(l, "watermill-kinesis/pkg/") && !strings.HasPrefix(l, "\t") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	if len(keep) > 4 {
		keep = keep[:4]
	}
	return lines[0] + " " + strings.Join(keep, " <- ")
}

// outcome runs every check on the finished run.
func (w *world) outcome(leaks []string) *outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := &outcome{seed: w.seed, schedule: w.notes}
	all, vs := w.tenures()
	o.violations = append(o.violations, w.checkDelivered()...)
	o.violations = append(o.violations, vs...)
	o.violations = append(o.violations, checkExclusive(all)...)
	o.violations = append(o.violations, w.checkGenerations()...)
	o.violations = append(o.violations, w.checkCheckpoints()...)
	o.violations = append(o.violations, w.checkKCL()...)
	o.violations = append(o.violations, w.checkResets()...)
	for _, l := range leaks {
		o.violations = append(o.violations, violation{invCleanup, "goroutine left after Close: " + l})
	}
	for _, e := range w.closeErrs {
		o.violations = append(o.violations, violation{invCleanup, e})
	}
	o.violations = append(o.violations, w.checkLeases()...)
	dups, budget, dv := w.checkDuplicates(all)
	o.violations = append(o.violations, dv...)
	tenures := 0
	for _, ts := range all {
		tenures += len(ts)
	}
	moved := 0
	for _, ms := range w.rs.moves {
		moved += len(ms)
	}
	o.resets, o.moves = len(w.rs.runs), moved
	for _, r := range w.rs.runs {
		if r.err != nil {
			o.resetErrs++
			if len(r.moves) > 0 {
				o.resetPartial++
			}
		}
	}
	o.stats = fmt.Sprintf("%d published, %d deliveries, %d duplicates (budget %d), %d tenures, %d instances, %d resets (%d shards moved)",
		len(w.published), len(w.deliveries), dups, budget, tenures, len(w.insts), len(w.rs.runs), moved)
	return o
}
