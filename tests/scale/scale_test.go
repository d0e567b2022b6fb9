// Package scale_test is the scale run: one consumer group of many instances on a stream of
// many shards (memlog, one lease.MemoryStore, kinesis.Subscriber instances on the fake time of
// a testing/synctest bubble), through four membership changes, measuring how long the group
// takes to spread the shards evenly again after each, what the lease table is asked meanwhile
// and in steady state, what that would cost on DynamoDB (an estimate, see cost_test.go), and
// whether any record was delivered twice or never.
//
//	go test ./tests/scale                 the small configuration (64 shards, 8 instances,
//	                                      +2, -2, 1 crash); asserts the invariants only
//	make scale                            SCALE=1: 1,000 and 4,000 shards, 50 instances,
//	                                      +10, -10, 5 crashes; prints the table and the goals
//	SCALE_SHARDS=1000,4000                the sizes of a SCALE=1 run
//	SCALE_OUT=path                        also writes the table (markdown) to path
//	SCALE_TRACE=1                         prints every log line of the driver, with fake time
//
// The phases, each from one fake instant (the membership change):
//
//	start  every instance Subscribes at once
//	join   more instances Subscribe at once
//	leave  some instances Close gracefully at once
//	crash  some instances stop dead: none of their calls reaches memlog or the lease store
//	       again (they hang at the instance's gate) and their handlers read nothing more
//
// After each change the run samples the spread until it is even (spread in world_test.go),
// then waits a quiet stretch; the quiet stretch after start is the "steady" row.
package scale_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// runConfig is one size of the run and its timings.
type runConfig struct {
	shards                    int
	start, join, leave, crash int
	quiet                     time.Duration // the quiet stretch after a phase's spread is even
	evenLimit                 time.Duration // how long a phase may take to spread evenly before the run gives up waiting
	sample                    time.Duration // how often the spread is looked at
	drainLimit                time.Duration // how long the end waits for the last records
	pubEvery                  time.Duration // each shard gets one record every pubEvery
	pollInterval              time.Duration // SubscriberConfig.PollInterval
	minReadInterval           time.Duration // SubscriberConfig.MinReadInterval
}

// The driver's lease timings at their defaults, which the run leaves alone; they are here for
// the goals and the syncs column.
const (
	leaseDuration     = 10 * time.Second
	leaseSyncInterval = 2 * time.Second
)

// fullConfig is a size of make scale.
func fullConfig(shards int) runConfig {
	return runConfig{
		shards: shards, start: 50, join: 10, leave: 10, crash: 5,
		quiet: 60 * time.Second, evenLimit: 180 * time.Second, sample: 250 * time.Millisecond,
		drainLimit: 120 * time.Second, pubEvery: 5 * time.Second,
		// Raised from 400 ms and 200 ms: thousands of readers polling empty shards are most of
		// the goroutine wakeups of the bubble. Lease timings stay at their defaults.
		pollInterval: time.Second, minReadInterval: time.Second,
	}
}

// smallConfig is what a plain go test runs (under -race in CI).
func smallConfig() runConfig {
	rc := fullConfig(64)
	rc.start, rc.join, rc.leave, rc.crash = 8, 2, 2, 1
	rc.quiet, rc.evenLimit, rc.drainLimit, rc.pubEvery = 20*time.Second, 60*time.Second, 60*time.Second, 2*time.Second
	return rc
}

var phaseNames = []string{"start", "join", "leave", "crash"}

// phaseResult is one row of the table.
type phaseResult struct {
	name      string
	live      int           // live instances after the change
	even      bool          // the spread became even within evenLimit
	evenAfter time.Duration // from the change
	last      spread        // the spread when it became even (or at evenLimit)
	flaps     int           // samples of the quiet stretch that found the spread uneven
	cost      window        // from the change until the spread was even (at least one lease sync)
	timeline  []string      // the spread at every lease sync after the change, until even
	peak      peak          // the busiest second of the window, per partition key
	dup, lost int
	// crash only: from the crash until every shard the crashed instances held was acquired by
	// a live instance; victims, and those never acquired again by the end of the phase.
	failover                time.Duration
	victims, victimsWaiting int
}

// sizeResult is everything one size found.
type sizeResult struct {
	rc       runConfig
	wall     time.Duration
	phases   []phaseResult
	steady   phaseResult
	held     map[string]int // leases held by each instance at the end of the steady stretch
	refList  int64          // RCU of one List of every lease, at N leases (as stored after start)
	startN   int            // instances in steady state
	total    int            // records published
	dupCrash int
	lostAll  int
	pending  int // records not acked when the drain gave up
	// problems, overlaps and logs, as the world recorded them.
	problems   []string
	violations []string
	logs       map[logKey]*logCount
}

func TestScale(t *testing.T) {
	full := os.Getenv("SCALE") != ""
	var cfgs []runConfig
	if full {
		sizes := []int{1000, 4000}
		if s := os.Getenv("SCALE_SHARDS"); s != "" {
			sizes = nil
			for _, f := range strings.Split(s, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 1 {
					t.Fatalf("SCALE_SHARDS=%q: want shard counts separated by commas", s)
				}
				sizes = append(sizes, n)
			}
		}
		for _, n := range sizes {
			cfgs = append(cfgs, fullConfig(n))
		}
	} else {
		if testing.Short() {
			t.Skip("the scale run's small configuration takes a few seconds; skipped with -short")
		}
		cfgs = []runConfig{smallConfig()}
	}
	var results []*sizeResult
	for _, rc := range cfgs {
		t.Run(fmt.Sprintf("shards=%d", rc.shards), func(t *testing.T) {
			res := runSize(t, rc)
			if res == nil {
				return
			}
			results = append(results, res)
			t.Logf("%d shards: %s wall, %d records, %d phases", rc.shards, res.wall.Round(time.Millisecond), res.total, len(res.phases))
			check(t, res, full)
		})
	}
	if len(results) == 0 {
		return
	}
	report := renderReport(results, full)
	fmt.Print(report)
	if path := os.Getenv("SCALE_OUT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Errorf("SCALE_OUT: %v", err)
		}
	}
}

// check asserts what must always hold, whatever the size: nothing lost, no shard read by two
// live instances at once and, in the small configuration, every phase spread evenly within its
// bound and no duplicate through the graceful phases. The performance goals are printed, not
// asserted.
func check(t *testing.T, res *sizeResult, full bool) {
	t.Helper()
	if res.lostAll > 0 {
		t.Errorf("%d shards: %d records never delivered (acked) by the end (%d still pending when the drain gave up)", res.rc.shards, res.lostAll, res.pending)
	}
	for _, v := range res.violations {
		t.Errorf("%d shards: shard read by two instances at once: %s", res.rc.shards, v)
	}
	if full {
		return
	}
	for _, p := range res.phases {
		if !p.even {
			t.Errorf("%d shards: %s: the spread was not even within %s (min %d, max %d, %d shards not held by a live instance)",
				res.rc.shards, p.name, res.rc.evenLimit, p.last.min, p.last.max, p.last.unheld)
		}
		if p.name != "crash" && p.dup > 0 {
			t.Errorf("%d shards: %s: %d records delivered again after an acked delivery, with no crash", res.rc.shards, p.name, p.dup)
		}
	}
}

// runSize runs one size in its own bubble and measures its wall time.
func runSize(t *testing.T, rc runConfig) *sizeResult {
	var res *sizeResult
	began := time.Now() // outside the bubble: wall time
	synctest.Test(t, func(t *testing.T) {
		var err error
		res, err = runBubble(rc)
		if err != nil {
			t.Fatal(err)
		}
	})
	if res != nil {
		res.wall = time.Since(began)
	}
	return res
}

// runBubble is one size from start to finish, inside the bubble.
func runBubble(rc runConfig) (*sizeResult, error) {
	w, err := newWorld(rc)
	if err != nil {
		return nil, err
	}
	go w.produce()
	res := &sizeResult{rc: rc}
	var leaving *sync.WaitGroup
	acts := []func() error{
		func() error { return w.startInstances(rc.start) },
		func() error { return w.startInstances(rc.join) },
		func() error { leaving = w.leave(w.pick(rc.leave)); return nil },
		func() error { w.crash(w.pick(rc.crash)); return nil },
	}
	var steadyFrom, steadyTo time.Time
	for i, act := range acts {
		w.setPhase(i)
		pr := phaseResult{name: phaseNames[i]}
		changeAt, before := time.Now(), w.meter.snapshot()
		peaks := &peakTracker{last: before}
		if err := act(); err != nil {
			close(w.stopPub)
			<-w.pubDone
			w.shutdown()
			return nil, err
		}
		for n := 0; ; n++ {
			pr.last = w.spread()
			if n%int(leaseSyncInterval/rc.sample) == 0 || pr.last.even {
				pr.timeline = append(pr.timeline, fmt.Sprintf("%.2fs %d–%d/%d", time.Since(changeAt).Seconds(), pr.last.min, pr.last.max, pr.last.unheld))
			}
			if pr.last.even || time.Since(changeAt) >= rc.evenLimit {
				pr.even, pr.evenAfter = pr.last.even, time.Since(changeAt)
				break
			}
			time.Sleep(rc.sample)
			peaks.tick(w.meter, &pr.peak)
		}
		for time.Since(changeAt) < leaseSyncInterval {
			time.Sleep(rc.sample) // a window of at least one lease sync, so that its rates mean something
			peaks.tick(w.meter, &pr.peak)
		}
		pr.cost = between(before, w.meter.snapshot())
		pr.live = len(w.live())
		if phaseNames[i] == "crash" {
			pr.failover, pr.victims, pr.victimsWaiting = w.failover()
		}
		quietFrom, quietBefore := time.Now(), w.meter.snapshot()
		quietPeaks, steadyPeak := &peakTracker{last: quietBefore}, peak{}
		for time.Since(quietFrom) < rc.quiet {
			time.Sleep(rc.sample)
			quietPeaks.tick(w.meter, &steadyPeak)
			if !w.spread().even {
				pr.flaps++
			}
		}
		if i == 0 {
			sp := w.spread()
			res.steady = phaseResult{name: "steady", live: pr.live, even: sp.even, last: sp, flaps: pr.flaps,
				cost: between(quietBefore, w.meter.snapshot()), peak: steadyPeak}
			steadyFrom, steadyTo = quietFrom, time.Now()
			res.held = map[string]int{}
			for in, n := range sp.held {
				res.held[in.name] = n
			}
			res.startN = len(sp.held)
			ls, _ := w.store.List(context.Background(), scaleGroup, scaleStream)
			res.refList = listUnits(ls, w.meter)
		}
		res.phases = append(res.phases, pr)
	}
	leaving.Wait()
	close(w.stopPub)
	<-w.pubDone
	drainFrom := time.Now()
	for {
		res.pending = w.allAcked()
		if res.pending == 0 || time.Since(drainFrom) >= rc.drainLimit {
			break
		}
		time.Sleep(time.Second)
	}
	w.shutdown()

	w.mu.Lock()
	defer w.mu.Unlock()
	res.total = len(w.recs)
	for _, r := range w.recs {
		if !r.dupAt.IsZero() {
			res.phases[r.dupPhase].dup++
			if !r.dupAt.Before(steadyFrom) && r.dupAt.Before(steadyTo) {
				res.steady.dup++
			}
		}
		if r.acked == 0 {
			res.lostAll++
			res.phases[r.phase].lost++
			if !r.at.Before(steadyFrom) && r.at.Before(steadyTo) {
				res.steady.lost++
			}
		}
	}
	res.dupCrash = res.phases[3].dup
	res.problems, res.violations, res.logs = w.problems, w.violations, w.logs
	return res, nil
}
