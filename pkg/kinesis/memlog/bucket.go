package memlog

import "time"

// rate is how a token bucket fills: perSec tokens a second, up to burst tokens. Every quota
// memlog models is "so many a second", so burst is one second's worth unless said otherwise.
type rate struct {
	perSec int64 // tokens gained per second; 0 means the bucket never refills
	burst  int64 // most tokens the bucket holds
}

// perSecond is a rate of n a second with a burst of one second's worth.
func perSecond(n int64) rate { return rate{perSec: n, burst: n} }

// bucket is a token bucket on the Log's clock: a call takes tokens, time puts them back. It is
// a plain value with no lock and no clock of its own; whoever holds it locks it and passes the
// time in, so the same code runs on time.Now, an injected clock and testing/synctest's fake
// time, and is table-tested without any.
//
// A bucket may go into debt (charge): a GetRecords call learns what it read only after
// reading, and a read of 10 MiB against a 2 MiB/s budget must keep the shard's next reads
// out for the seconds it borrowed, as AWS does.
//
// level counts billionths of a token, so that refilling for d at perSec tokens a second adds
// exactly perSec × d.Nanoseconds(): a test that waits 200 ms for one of five calls a second
// gets exactly one token, with no rounding to fall short by.
type bucket struct {
	level int64     // billionths of a token held at time at; below zero while in debt
	at    time.Time // when level was last brought up to date; zero while the bucket is unused
}

const tokenScale = int64(time.Second) // a token is tokenScale units of level

// fill brings the bucket up to date at now. An unused bucket starts full. A clock that went
// backwards adds nothing (an injected clock may do that; the bucket must not lose tokens for it
// either).
func (b *bucket) fill(r rate, now time.Time) {
	full := r.burst * tokenScale
	if b.at.IsZero() {
		b.level, b.at = full, now
		return
	}
	d := now.Sub(b.at)
	if d <= 0 {
		return
	}
	b.at = now
	if b.level >= full || r.perSec <= 0 {
		return
	}
	// Compare the time it takes to fill up first, so that perSec × d cannot overflow after a
	// long idle stretch.
	if missing := full - b.level; d.Nanoseconds() >= (missing+r.perSec-1)/r.perSec {
		b.level = full
		return
	}
	b.level += r.perSec * d.Nanoseconds()
}

// take takes n tokens if the bucket holds n, and reports whether it did; a refused take
// takes nothing. A bucket in debt refuses every take.
func (b *bucket) take(r rate, now time.Time, n int64) bool {
	b.fill(r, now)
	if b.level < n*tokenScale {
		return false
	}
	b.level -= n * tokenScale
	return true
}

// charge takes n tokens whatever the bucket holds, going into debt if need be.
func (b *bucket) charge(r rate, now time.Time, n int64) {
	b.fill(r, now)
	b.level -= n * tokenScale
}

// inDebt reports whether the bucket owes tokens at now.
func (b *bucket) inDebt(r rate, now time.Time) bool {
	b.fill(r, now)
	return b.level < 0
}

// wait is how long from now until the bucket holds n tokens (0 if it does now; a long time if
// it never will).
func (b *bucket) wait(r rate, now time.Time, n int64) time.Duration {
	b.fill(r, now)
	short := n*tokenScale - b.level
	switch {
	case short <= 0:
		return 0
	case r.perSec <= 0 || n > r.burst:
		return time.Duration(1<<63 - 1)
	}
	return time.Duration((short + r.perSec - 1) / r.perSec)
}
