package sim_test

// The schedule of a seed: which instances start (with one or two subscriptions, and what kind
// of handler), close, crash, pause and come back, and what the lease table and Kinesis do to
// them meanwhile. It is drawn from the seed alone, before the run, so that SIM_SEED=n replays
// the same schedule (goroutine interleavings within one fake instant may still differ).

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"
)

type eventKind int

const (
	evStart eventKind = iota
	evClose
	evCrash
	evPause
	evCutOff     // one instance cannot reach the lease store
	evOutage     // nobody can reach the lease store
	evSlowStore  // lease-store calls answer late
	evThrottle   // GetRecords is throttled half the time
	evInternal   // Kinesis answers 5xx a third of the time
	evExpire     // the next GetRecords of every shard finds its iterator expired
	evDenied     // GetRecords of one shard is refused (AccessDenied, not retryable)
	evSplit      // a shard is split in two
	evMerge      // two adjacent shards are merged
	evShardCount // UpdateShardCount
	evSlowReads  // GetRecords and GetShardIterator answer late, some past a lease's stop point
	evReset      // admin.ResetGroup moves the group (reset_test.go); drawn apart, by resetEvents
	numEventKinds
)

var eventNames = [...]string{"start", "close", "crash", "pause", "cut-off", "store-outage", "slow-store",
	"throttle", "kinesis-5xx", "expire-iterators", "access-denied", "split", "merge", "update-shard-count", "slow-reads", "reset"}

func (k eventKind) String() string { return eventNames[k] }

// mix weighs the event kinds of a scenario family; twoSubs is the chance that a started
// instance subscribes twice.
type mix struct {
	name    string
	weights [numEventKinds]int
	twoSubs float64
}

// mixes are the scenario families SIM_MIX picks from: "all" is the default; the others
// isolate one family of faults to find out which invariant catches which bug.
var mixes = map[string]mix{
	"all": {name: "all", twoSubs: 0.25, weights: [numEventKinds]int{
		evStart: 6, evClose: 3, evCrash: 3, evPause: 3, evCutOff: 4, evOutage: 2, evSlowStore: 3,
		evThrottle: 2, evInternal: 2, evExpire: 2, evDenied: 4, evSplit: 1, evMerge: 1, evShardCount: 1, evSlowReads: 2}},
	// no second subscriptions: what the faults alone find
	"faults": {name: "faults", weights: [numEventKinds]int{
		evStart: 6, evClose: 3, evCrash: 3, evPause: 3, evCutOff: 4, evOutage: 2, evSlowStore: 3,
		evThrottle: 2, evInternal: 2, evExpire: 2, evDenied: 4, evSplit: 1, evMerge: 1, evShardCount: 1, evSlowReads: 2}},
	// what makes readers stop and restart while their instance lives: refused reads, an
	// instance cut off from the lease table while others take its shards, a slow table
	"restarts": {name: "restarts", weights: [numEventKinds]int{
		evStart: 4, evClose: 1, evCrash: 1, evPause: 2, evCutOff: 4, evOutage: 2, evSlowStore: 3, evDenied: 5}},
	// instances come and go cleanly, some with two subscriptions; no faults
	"subs": {name: "subs", twoSubs: 0.5, weights: [numEventKinds]int{evStart: 4, evClose: 2}},
	// every seed moves in from a KCL application (kcl_test.go), under the faults of "all"
	"kcl": {name: "kcl", twoSubs: 0.25, weights: [numEventKinds]int{
		evStart: 6, evClose: 3, evCrash: 3, evPause: 3, evCutOff: 4, evOutage: 2, evSlowStore: 3,
		evThrottle: 2, evInternal: 2, evExpire: 2, evDenied: 4, evSplit: 1, evMerge: 1, evShardCount: 1, evSlowReads: 2}},
	// the faults of "all" with two to four resets in every seed (reset_test.go); every other
	// family has none to three in seven seeds in ten
	"reset": {name: "reset", twoSubs: 0.25, weights: [numEventKinds]int{
		evStart: 6, evClose: 3, evCrash: 3, evPause: 3, evCutOff: 4, evOutage: 2, evSlowStore: 3,
		evThrottle: 2, evInternal: 2, evExpire: 2, evDenied: 4, evSplit: 1, evMerge: 1, evShardCount: 1, evSlowReads: 2}},
	// the calm baseline: clean starts and closes, retryable Kinesis trouble, reshards
	"calm": {name: "calm", weights: [numEventKinds]int{
		evStart: 4, evClose: 2, evThrottle: 2, evInternal: 2, evExpire: 2, evSplit: 1, evMerge: 1, evShardCount: 1, evSlowReads: 1}},
}

type event struct {
	at    time.Duration // since the start of the run
	kind  eventKind
	slot  string
	subs  int
	hk    handlerKind
	rate  float64
	maxIF int
	byKey bool // with maxIF > 1: Ordering OrderByKey, else Unordered
	// fanOut: the instance reads with enhanced fan-out (SubscribeToShard), beside others
	// that poll, through the group's one stream consumer.
	fanOut bool
	hang   bool
	dur    time.Duration
	pick   uint64 // for choices made against the stream as it is then (which shard)
	reset  resetPlan
}

func (e event) String() string {
	s := e.kind.String()
	switch e.kind {
	case evStart:
		s += fmt.Sprintf(" %s subs=%d handler=%s clock=%+.1f%% max-in-flight=%d", e.slot, e.subs, e.hk, (e.rate-1)*100, e.maxIF)
		if e.byKey {
			s += " order=key"
		}
		if e.fanOut {
			s += " fan-out"
		}
	case evClose:
		s += " " + e.slot
	case evCrash:
		s += fmt.Sprintf(" %s hang=%v", e.slot, e.hang)
	case evPause, evCutOff:
		s += fmt.Sprintf(" %s for %s", e.slot, e.dur)
	case evSlowStore:
		s += fmt.Sprintf(" for %s, up to %s", e.dur, time.Duration(e.pick%1500)*time.Millisecond)
	case evSlowReads:
		s += fmt.Sprintf(" for %s, up to %s", e.dur, slowReadsBy(e.pick))
	case evOutage, evThrottle, evInternal, evDenied:
		s += fmt.Sprintf(" for %s", e.dur)
	case evReset:
		s += " " + e.reset.String()
	}
	return s
}

const (
	runLength   = 30 * time.Second  // events and publishing happen in [0, runLength)
	drainLimit  = 5 * time.Minute   // the quiet tail may take this long to deliver everything
	settleTail  = 2 * leaseDuration // and takes at least this long
	maxEvents   = 14
	firstEvents = 1 * time.Second
)

// schedule draws the events of a seed. It tracks which slots are live so that every event it
// draws applies to the world as it will be.
func schedule(seed uint64, m mix) []event {
	r := rand.New(rand.NewPCG(seed, 0x5c4ed))
	live := map[string]bool{}
	var evs []event
	start := func(at time.Duration) {
		for _, s := range r.Perm(len(slotNames)) {
			if !live[slotNames[s]] {
				live[slotNames[s]] = true
				evs = append(evs, startEvent(r, m, at, slotNames[s]))
				return
			}
		}
	}
	for i := 0; i < 1+r.IntN(3); i++ {
		start(0)
	}
	at := firstEvents
	for i := 0; i < 6+r.IntN(maxEvents-6); i++ {
		at += time.Duration(r.Int64N(int64(4 * time.Second)))
		if at >= runLength {
			break
		}
		kind := pickKind(r, m)
		if kind == evStart || (kind <= evCutOff && len(live) == 0) {
			start(at)
			continue
		}
		e := event{at: at, kind: kind, pick: r.Uint64()}
		if kind <= evCutOff {
			e.slot = pickLive(r, live)
			if kind == evClose || kind == evCrash {
				delete(live, e.slot)
			}
		}
		e.hang = r.IntN(2) == 0
		e.dur = faultDuration(r, kind)
		evs = append(evs, e)
	}
	evs = append(evs, resetEvents(seed, m)...)
	slices.SortStableFunc(evs, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	return evs
}

func startEvent(r *rand.Rand, m mix, at time.Duration, slot string) event {
	e := event{at: at, kind: evStart, slot: slot, subs: 1, hk: handlerKind(r.IntN(3)), maxIF: 1,
		rate: 1 + (r.Float64()*2-1)*maxRateSkew}
	if r.Float64() < m.twoSubs {
		e.subs = 2
	}
	if r.IntN(3) == 0 {
		e.maxIF, e.byKey = 3, r.IntN(2) == 0
	}
	e.fanOut = fanOutFor(at, slot)
	return e
}

// fanOutFor picks, for one in three starts, enhanced fan-out. It draws from a generator of its
// own, seeded by the start's time and slot (both from the seed's schedule), so that the
// schedules of seeds found before fan-out existed stay what they were.
func fanOutFor(at time.Duration, slot string) bool {
	h := fnv.New64a()
	h.Write([]byte(slot))
	return rand.New(rand.NewPCG(uint64(at), h.Sum64())).IntN(3) == 0
}

func pickKind(r *rand.Rand, m mix) eventKind {
	total := 0
	for _, w := range m.weights {
		total += w
	}
	x := r.IntN(total)
	for k, w := range m.weights {
		if x < w {
			return eventKind(k)
		}
		x -= w
	}
	return evStart
}

func pickLive(r *rand.Rand, live map[string]bool) string {
	var names []string
	for _, n := range slotNames { // slotNames order, not map order: the draw must be seeded
		if live[n] {
			names = append(names, n)
		}
	}
	return names[r.IntN(len(names))]
}

// faultDuration draws how long a fault lasts: pauses and cut-offs outlast the lease (that is
// the point of them), the rest are mostly shorter.
func faultDuration(r *rand.Rand, k eventKind) time.Duration {
	between := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(r.Int64N(int64(hi-lo)))).Round(100 * time.Millisecond)
	}
	switch k {
	case evPause, evCutOff:
		return between(leaseDuration, 3*leaseDuration)
	case evOutage:
		return between(time.Second, 2*leaseDuration)
	case evSlowStore, evThrottle, evInternal:
		return between(time.Second, 8*time.Second)
	case evSlowReads:
		return between(2*leaseDuration, 4*leaseDuration)
	case evDenied:
		return between(200*time.Millisecond, 3*time.Second)
	}
	return 0
}

// slowReadsBy is the longest delay of a slow-reads event: up to 1.4 × leaseDuration, so that
// some reads outlast a reader's stop point (0.8 × leaseDuration after its last renewal) while
// staying under RequestTimeout.
func slowReadsBy(pick uint64) time.Duration {
	return time.Duration(pick%uint64(leaseDuration*7/5/time.Millisecond)) * time.Millisecond
}
