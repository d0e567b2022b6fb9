// Package sim_test is a seeded simulation of one consumer group: memlog, the in-memory lease
// store and several Subscriber instances, on the fake time of a testing/synctest bubble, under a
// random schedule of starts, closes, crashes, pauses, lease-store and Kinesis faults,
// reshards and resets of the group's position (admin.ResetGroup, reset_test.go). After each run
// it checks the invariants in check_test.go and reset_test.go.
//
// A seed fixes the schedule (events, instances, handlers, clock rates); it does not fix the
// order in which goroutines run at one fake instant, so a race in the driver may show up in
// some runs of a seed and not others. A failing seed prints its schedule; SIM_TRACE=1 prints
// deliveries, hooks and the driver's logs as they happen, with fake time.
//
//	go test ./tests/sim                                  seeds 1..200 (SIM_SEEDS to change)
//	SIM_SEED=17 go test ./tests/sim -run TestSimulation  seed 17 alone, with its schedule
//	SIM_SEED=17 SIM_REPEAT=200 SIM_BRIEF=1 ...           seed 17, 200 times (a failure may need
//	                                                     one order of goroutines: see rerun)
//	SIM_MIX=faults|restarts|subs|calm|kcl|reset          another scenario family (events_test.go)
//	make sim SEEDS=1000                                  without -race, a line per failing seed
//	                                                     and a summary line
//	SIM_TRACE=1                                          print the schedule as it is applied
package sim_test

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// briefFailures (SIM_BRIEF=1, as make sim sets) reports a failing seed in one line; SIM_SEED
// then prints it in full.
var briefFailures = os.Getenv("SIM_BRIEF") != ""

// defaultSeeds is how many seeds a plain go test runs; it fits make test's budget under -race.
const defaultSeeds = 200

// outcome is what one seed found.
type outcome struct {
	seed       uint64
	violations []violation
	schedule   []string
	stats      string
	// resets made, those that returned an error (partly: after moving shards), and shards
	// they moved (reset_test.go)
	resets, resetErrs, resetPartial, moves int
}

func (o *outcome) failed() bool { return len(o.violations) > 0 }

// invariants lists the invariants the seed broke, e.g. "2,6".
func (o *outcome) invariants() string {
	set := map[int]bool{}
	for _, v := range o.violations {
		set[v.inv] = true
	}
	var out []string
	for i := 1; i <= invReset; i++ {
		if set[i] {
			out = append(out, strconv.Itoa(i))
		}
	}
	return strings.Join(out, ",")
}

func (o *outcome) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d broke invariants %s (%s)\n%s\n", o.seed, o.invariants(), o.stats, rerun(o.seed))
	perInv := map[int]int{}
	for _, v := range o.violations {
		perInv[v.inv]++
		if perInv[v.inv] <= 5 {
			fmt.Fprintf(&b, "  invariant %d: %s\n", v.inv, v.msg)
		} else if perInv[v.inv] == 6 {
			fmt.Fprintf(&b, "  invariant %d: ... (more)\n", v.inv)
		}
	}
	b.WriteString("schedule (fake time since start):\n")
	for _, s := range o.schedule {
		b.WriteString("  " + s + "\n")
	}
	return b.String()
}

func TestSimulation(t *testing.T) {
	seeds, err := seedsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := mixes[os.Getenv("SIM_MIX")]
	if name := os.Getenv("SIM_MIX"); !ok && name != "" {
		t.Fatalf("SIM_MIX=%q: no such mix", name)
	} else if !ok {
		m = mixes["all"]
	}
	var mu sync.Mutex
	var ran, resets, resetErrs, resetPartial, moves, withResets int
	var failures []*outcome
	t.Cleanup(func() {
		sort.Slice(failures, func(i, j int) bool { return failures[i].seed < failures[j].seed })
		var list []string
		for _, o := range failures {
			list = append(list, fmt.Sprintf("%d[%s]", o.seed, o.invariants()))
		}
		fmt.Printf("sim: mix %s: %d seeds ran, %d failed %s\n", m.name, ran, len(failures), strings.Join(list, " "))
		fmt.Printf("sim: %d resets in %d seeds (%d returned an error, %d of them after moving shards), %d shard moves\n",
			resets, withResets, resetErrs, resetPartial, moves)
	})
	// Seeds run in parallel within batches: a parallel subtest waits as a goroutine until it
	// may run, and the leak check reads every goroutine's stack, so 10,000 seeds started at
	// once made each check read 10,000 stacks (a 10,000-seed run took minutes, not seconds).
	for start := 0; start < len(seeds); start += seedBatch {
		batch := seeds[start:min(start+seedBatch, len(seeds))]
		t.Run(fmt.Sprintf("seeds=%d-%d", batch[0], batch[len(batch)-1]), func(t *testing.T) {
			for _, seed := range batch {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					t.Parallel()
					o := runInBubble(t, seed, m)
					mu.Lock()
					ran++
					resets, resetErrs, moves = resets+o.resets, resetErrs+o.resetErrs, moves+o.moves
					resetPartial += o.resetPartial
					if o.resets > 0 {
						withResets++
					}
					if o.failed() {
						failures = append(failures, o)
					}
					mu.Unlock()
					switch {
					case o.failed() && briefFailures:
						t.Errorf("seed %d broke invariants %s: %s\n%s", o.seed, o.invariants(), o.violations[0].msg, rerun(o.seed))
					case o.failed():
						t.Error(o)
					}
				})
			}
		})
	}
}

// seedBatch is how many seeds run in parallel at most.
const seedBatch = 32

// rerun is how to replay a seed. A seed fixes the schedule, not the order of the goroutines
// within one fake instant, so a failure that needs one order shows in some runs of its seed
// only: the command runs it SIM_REPEAT times.
func rerun(seed uint64) string {
	mix := os.Getenv("SIM_MIX")
	if mix != "" {
		mix = "SIM_MIX=" + mix + " "
	}
	return fmt.Sprintf("rerun: %sSIM_SEED=%d SIM_REPEAT=200 SIM_BRIEF=1 go test ./tests/sim -run '^TestSimulation$' (then SIM_SEED=%d alone prints the schedule)", mix, seed, seed)
}

// seedsFromEnv is SIM_SEED (one seed, SIM_REPEAT times: default once) or SIM_SEEDS (seeds
// 1..n), default 1..defaultSeeds.
func seedsFromEnv() ([]uint64, error) {
	if s := os.Getenv("SIM_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("SIM_SEED=%q: %w", s, err)
		}
		repeat := 1
		if r := os.Getenv("SIM_REPEAT"); r != "" {
			if repeat, err = strconv.Atoi(r); err != nil || repeat < 1 {
				return nil, fmt.Errorf("SIM_REPEAT=%q: want a positive number", r)
			}
		}
		seeds := make([]uint64, repeat)
		for i := range seeds {
			seeds[i] = n
		}
		return seeds, nil
	}
	count := defaultSeeds
	if s := os.Getenv("SIM_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("SIM_SEEDS=%q: want a positive number", s)
		}
		count = n
	}
	seeds := make([]uint64, count)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds, nil
}

// runInBubble runs one seed in its own synctest bubble. Goroutines of the driver that outlive
// every Close make synctest panic once the run returns ("blocked goroutines remain"); that panic
// is invariant 5 failing, not the test binary's end, so it is recovered here.
func runInBubble(t *testing.T, seed uint64, m mix) (o *outcome) {
	var w *world
	defer func() {
		if r := recover(); r != nil {
			if o == nil {
				o = &outcome{seed: seed, schedule: []string{"(the run did not finish)"}}
				if w != nil {
					o.schedule = append(w.notes, o.schedule...)
				}
			}
			o.violations = append(o.violations, violation{invCleanup, fmt.Sprintf("synctest: %v", r)})
		}
	}()
	synctest.Test(t, func(t *testing.T) {
		o = runSeed(seed, m, &w)
	})
	return o
}
