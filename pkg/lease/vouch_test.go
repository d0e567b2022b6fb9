package lease_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func TestHeartbeatStop(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	const stopAfter = 8 * time.Second
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name  string
		beats []lease.Beat
		want  time.Time
	}{
		{"none", nil, time.Time{}},
		{"the join alone", []lease.Beat{{1, at(0)}}, at(0).Add(stopAfter)},
		{"two since the join: still the join", []lease.Beat{{1, at(0)}, {2, at(1)}, {3, at(2)}}, at(0).Add(stopAfter)},
		{"BeatsBehind before the last", []lease.Beat{{5, at(4)}, {6, at(5)}, {7, at(6)}}, at(4).Add(stopAfter)},
		{"a heartbeat whose answer was lost", []lease.Beat{{3, at(2)}, {5, at(4)}, {6, at(5)}}, at(2).Add(stopAfter)},
		{"history too short: vouches for nothing", []lease.Beat{{5, at(4)}, {6, at(5)}}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lease.HeartbeatStop(tc.beats, stopAfter); !got.Equal(tc.want) {
				t.Fatalf("HeartbeatStop = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMemberTrackerHeartbeatSince(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	m := func(c, inc int64) []lease.Member {
		return []lease.Member{{Group: "g", Stream: "s", Worker: "a", Counter: c, Incarnation: inc}}
	}
	tr := lease.NewMemberTracker()
	for _, step := range []struct {
		at      int
		read    []lease.Member
		inc     int64
		wantOK  bool
		wantAt  int
		wantCtr int64
	}{
		{0, m(1, 7), 7, true, 0, 1},
		{2, m(3, 7), 7, true, 0, 3},  // BeatSince(3) = 1: the join, seen at 0
		{4, m(5, 7), 7, true, 2, 5},  // 3 seen at 2
		{6, m(8, 7), 7, true, 6, 8},  // 6 and 7 never seen: the first at least 6 is 8, at 6
		{8, m(8, 7), 7, true, 6, 8},  // unchanged
		{8, m(8, 7), 9, false, 0, 0}, // a lease of another incarnation: its heartbeats count for nothing here
		{10, m(1, 9), 9, true, 10, 1},
		{10, m(1, 9), 7, false, 0, 0}, // the old incarnation is over
		{12, nil, 9, false, 0, 0},     // the record is gone
	} {
		tr.Observe(step.read, at(step.at))
		since, got, ok := tr.HeartbeatSince("a", step.inc)
		if ok != step.wantOK || ok && (!since.Equal(at(step.wantAt)) || got.Counter != step.wantCtr || got.Incarnation != step.inc) {
			t.Fatalf("at %ds, incarnation %d: HeartbeatSince = %v, %+v, %v; want %v, counter %d, %v",
				step.at, step.inc, since.Sub(t0), got, ok, time.Duration(step.wantAt)*time.Second, step.wantCtr, step.wantOK)
		}
	}
}

// TestHeartbeatStopBeforeHeartbeatSince is the property the heartbeat path of failover rests
// on: whatever the delays of the heartbeats and the times of the reads, an owner whose record is
// fenced at the counter a reader last read stops, by every heartbeat it knows succeeded
// (HeartbeatStop), no later than stopAfter after the reader's HeartbeatSince, while the
// reader waits LeaseDuration (more than stopAfter) from there.
func TestHeartbeatStopBeforeHeartbeatSince(t *testing.T) {
	const stopAfter = 8 * time.Second
	t0 := time.Unix(1_700_000_000, 0)
	for seed := uint64(1); seed <= 3000; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
		// The owner: one heartbeat at a time, each landing (taking the next counter) after a
		// delay; its answer comes back after another, or never (a timeout: the owner learns
		// nothing, though the write may have landed).
		type write struct {
			sent, landed, answered time.Time
			counter                int64
			answeredOK             bool
		}
		var writes []write
		now, counter := t0, int64(0)
		for now.Before(t0.Add(40 * time.Second)) {
			w := write{sent: now, landed: now.Add(ms(0, 1500))}
			counter++
			w.counter = counter
			w.answeredOK = rng.IntN(5) > 0
			w.answered = w.landed.Add(ms(0, 500))
			writes = append(writes, w)
			now = w.answered.Add(ms(50, 1500))
		}
		// The reader: reads at random intervals, seeing every counter landed by then; it
		// fences at the counter of its last read before a random moment, which holds only if
		// nothing landed since.
		tr := lease.NewMemberTracker()
		fenceAt := t0.Add(ms(1000, 40000))
		var lastRead int64
		for read := t0.Add(ms(0, 2000)); read.Before(fenceAt); read = read.Add(ms(100, 3000)) {
			var c int64
			for _, w := range writes {
				if !w.landed.After(read) {
					c = w.counter
				}
			}
			if c > 0 {
				tr.Observe([]lease.Member{{Worker: "a", Counter: c, Incarnation: 1}}, read)
				lastRead = c
			}
		}
		if lastRead == 0 {
			continue
		}
		var atFence int64
		for _, w := range writes {
			if !w.landed.After(fenceAt) {
				atFence = w.counter
			}
		}
		if atFence != lastRead {
			continue // the fence fails: the heartbeat moved since the read, nobody takes anything
		}
		since, _, ok := tr.HeartbeatSince("a", 1)
		if !ok {
			t.Fatalf("seed %d: no HeartbeatSince after reads", seed)
		}
		// Every heartbeat that landed before the fence may have been answered; none after.
		var known []lease.Beat
		for _, w := range writes {
			if w.answeredOK && !w.landed.After(fenceAt) {
				known = append(known, lease.Beat{Counter: w.counter, Sent: w.sent})
			}
		}
		if len(known) > lease.BeatsBehind+1 {
			known = known[len(known)-lease.BeatsBehind-1:]
		}
		if stop := lease.HeartbeatStop(known, stopAfter); stop.After(since.Add(stopAfter)) {
			t.Fatalf("seed %d: the owner stops at %v, after the reader's HeartbeatSince %v + stopAfter", seed, stop.Sub(t0), since.Sub(t0))
		}
	}
}
