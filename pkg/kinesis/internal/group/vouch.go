package group

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// vouching is what this member's heartbeats promise its readers (shard.Vouch): the current
// incarnation with lease.HeartbeatStop of its heartbeats that succeeded, and the last stop of
// each incarnation that ended (fenced by another worker, or replaced by a Join after its
// record went). The beat goroutine writes it (succeeded, ended); readers read it from any
// goroutine, lock-free, through an immutable snapshot.
type vouching struct {
	stopAfter time.Duration // shard.LeaseStopAfter: the owner's side of lease.HeartbeatStop
	state     atomic.Pointer[vouchState]
	beats     []lease.Beat // the current incarnation's, oldest first (beat goroutine only)
}

// vouchState is one snapshot of vouching: what Current and StopOf answer until the beat
// goroutine stores the next.
type vouchState struct {
	incarnation int64
	stop        time.Time
	ended       map[int64]time.Time // at most maxEnded, the latest
}

// maxEnded is how many ended incarnations vouching remembers. A reader whose lease names one
// it forgot stops delivering at once, which is safe, and renews with the current one.
const maxEnded = 4

var _ shard.Vouch = (*vouching)(nil)

func newVouching(stopAfter time.Duration) *vouching {
	v := &vouching{stopAfter: stopAfter}
	v.state.Store(&vouchState{})
	return v
}

// Current implements shard.Vouch.
func (v *vouching) Current() (int64, time.Time) {
	s := v.state.Load()
	return s.incarnation, s.stop
}

// StopOf implements shard.Vouch.
func (v *vouching) StopOf(incarnation int64) time.Time {
	s := v.state.Load()
	if incarnation == s.incarnation {
		return s.stop
	}
	return s.ended[incarnation]
}

// succeeded records a Join or Heartbeat of m's incarnation sent at sent that succeeded. A Join
// (Counter 1) starts the incarnation's beats afresh.
func (v *vouching) succeeded(m lease.Member, sent time.Time) {
	if m.Counter == 1 || len(v.beats) > 0 && v.beats[len(v.beats)-1].Counter >= m.Counter {
		v.beats = v.beats[:0]
	}
	v.beats = append(v.beats, lease.Beat{Counter: m.Counter, Sent: sent})
	if len(v.beats) > lease.BeatsBehind+1 {
		v.beats = append(v.beats[:0], v.beats[len(v.beats)-lease.BeatsBehind-1:]...)
	}
	old := v.state.Load()
	v.state.Store(&vouchState{incarnation: m.Incarnation, stop: lease.HeartbeatStop(v.beats, v.stopAfter), ended: old.ended})
}

// end records that incarnation can heartbeat no more: its stop is frozen where it was, and
// nothing is current until the next Join succeeds.
func (v *vouching) end(incarnation int64) {
	old := v.state.Load()
	if old.incarnation != incarnation {
		return
	}
	ended := make(map[int64]time.Time, len(old.ended)+1)
	for inc, stop := range old.ended {
		ended[inc] = stop
	}
	ended[incarnation] = old.stop
	for len(ended) > maxEnded {
		var oldest int64
		for inc, stop := range ended {
			if oldest == 0 || stop.Before(ended[oldest]) {
				oldest = inc
			}
		}
		delete(ended, oldest)
	}
	v.beats = v.beats[:0]
	v.state.Store(&vouchState{ended: ended})
}

// newIncarnation is a random incarnation, neither 0 nor prev.
func newIncarnation(prev int64) int64 {
	for {
		if inc := rand.Int64(); inc != 0 && inc != prev {
			return inc
		}
	}
}
