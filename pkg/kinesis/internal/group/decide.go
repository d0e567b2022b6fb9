package group

import (
	"slices"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// The coordinator's decisions are pure functions of what it knows at one lease sync (view) and
// the clock, as shard.decide is for a reader: decide says which leases to take, ask for, hand
// over, release or give up; listDue whether the sync lists the leases first; nextExpiry when a
// lease expires. Their callers (sync.go) gather the facts and carry the decisions out.
//
// One rule decides who may take a lease, and it rests on the lease alone: free (released, or
// never taken), handed over to this worker, or another worker's whose owner, generation and
// counter this worker saw standing still for LeaseDuration on its own clock (plus
// foreignExpiryMargin for a KCL worker's). Every take is conditioned on the values it saw, so a
// lease that moved in between is not taken. Members only count the workers for the shares. A
// lease already held under this worker's id with no reader here (a restart with the same
// WorkerID, or a reader of its own that stopped) is its own: it is read at once, which is why
// WorkerIDs must be unique among live instances.

// view is what one lease sync decides from, as plain values: (*Subscription).view builds it,
// tests build it by hand.
type view struct {
	now  time.Time
	self string
	// leases are the group's leases as last listed, with this worker's writes since, in shard
	// order. listed: the listing was made at this sync (only then are readers checked
	// against it).
	leases []lease.Lease
	listed bool
	// listedAt is when the last listing was sent. expiresAt holds, for each lease of another
	// worker that this worker observed with its current values, when it expires: LeaseDuration
	// (and the foreign margin) after this worker first saw those values. A lease is expired
	// once a listing sent at or after that moment still showed them: a listing older than
	// that says nothing of whether the counter moved since.
	listedAt  time.Time
	expiresAt map[string]time.Time
	// members are the live members (nil: the store keeps no member records).
	members []string
	// eligible are the shards whose leases may be read now: listed, not finished, parents
	// finished, not skipped by a LATEST start.
	eligible map[string]bool
	// reading are the shards that have a reader here, live or stopping, with the generation
	// of the lease it reads under.
	reading map[string]int64
	// asked are the leases this worker asked for; it takes one itself once takeAskedAfter
	// has passed (handoffTakeAfter).
	asked          map[string]handoffAsk
	takeAskedAfter time.Duration
}

// plan is what one lease sync does: stop the readers whose lease moved on, tell those whose
// lease was asked for to hand it over, release finished leases nobody reads, take, and ask.
type plan struct {
	lost     []lease.Lease // the readers' leases as listed now (Owner "" if gone)
	handOver []string
	release  []lease.Lease
	// releaseIdle are leases held under this worker's id, with no reader here, that may not
	// be read yet (their parents are not finished): a reset gave them back to this worker.
	// Nothing of this worker reads them, so releasing them is safe, and whoever reads them
	// once they may be read takes them free, not once they expire.
	releaseIdle []lease.Lease
	take        []takeStep
	ask         []lease.Lease
	// asked are the requests of this worker still pending after this sync (those of the
	// listing under its id, and the ones act makes on top).
	asked map[string]handoffAsk
	// unsettled: this worker is not at its share yet, or waits for a lease it asked for; the
	// next lease sync lists the leases again.
	unsettled bool
}

// takeStep is one lease to take, why, and from whom ("" if nobody else), for the "Lease
// taken" log line and the metric.
type takeStep struct {
	lease     lease.Lease
	why, from string
}

// handoffAsk is a lease this worker asked another worker for: when, and of whom.
type handoffAsk struct {
	at    time.Time
	owner string
}

// Why a worker takes a lease.
const (
	takeFree       = "free"
	takeExpired    = "expired: its owner stopped renewing it"
	takeHandedOver = "handed over"
	takeOverdue    = "not handed over within HandoffTimeout: taken from its owner"
	takeOwnIdle    = "held under this worker's id with no reader here (a restart of this worker, a reader of it that stopped, or a reset of the group's position)"
)

// decide is one lease sync's decision.
func decide(v view) plan {
	p := plan{asked: map[string]handoffAsk{}}
	byShard := make(map[string]lease.Lease, len(v.leases))
	for _, l := range v.leases {
		byShard[l.ShardID] = l
	}
	if v.listed {
		for _, id := range sortedKeys(v.reading) {
			l, ok := byShard[id]
			switch {
			case !ok || l.Owner != v.self || l.Generation != v.reading[id]:
				p.lost = append(p.lost, lease.Lease{ShardID: id, Owner: l.Owner})
			case shard.HandoffAsked(l):
				p.handOver = append(p.handOver, id)
			}
		}
	}
	taking := map[string]bool{}
	for _, l := range v.leases {
		_, reading := v.reading[l.ShardID]
		ask, asked := v.asked[l.ShardID]
		if l.PendingOwner == v.self && l.Owner != v.self && l.Owner != "" {
			if !asked { // asked under this worker's id before a restart: wait for it all the same
				ask = handoffAsk{at: v.now, owner: l.Owner}
			}
			p.asked[l.ShardID] = ask
		}
		if l.Owner != v.self || l.Foreign || reading {
			continue
		}
		switch {
		case l.Checkpoint == lease.ShardEnd:
			p.release = append(p.release, l)
		case v.eligible[l.ShardID]:
			// Ours with no reader: handed over, or left by a reader that stopped. Taking it
			// again moves its generation, so that no earlier reader of ours can write.
			step := takeStep{lease: l, why: takeOwnIdle}
			if asked {
				step.why, step.from = takeHandedOver, ask.owner
			}
			p.take, taking[l.ShardID] = append(p.take, step), true
		case v.listed:
			p.releaseIdle = append(p.releaseIdle, l)
		}
	}
	expired := func(l lease.Lease) bool {
		at, ok := v.expiresAt[l.ShardID]
		return ok && (mutant == "takeearly" || !v.listedAt.Before(at))
	}
	foreign := map[string]bool{}
	for _, l := range v.leases {
		if l.Foreign {
			foreign[l.Owner] = true
		}
	}
	share := planShare(shareInput{
		self: v.self, leases: v.leases, members: v.members,
		live:     func(l lease.Lease) bool { return !expired(l) },
		eligible: func(l lease.Lease) bool { return v.eligible[l.ShardID] },
		foreign:  func(owner string) bool { return foreign[owner] },
	})
	for _, l := range share.take {
		if _, reading := v.reading[l.ShardID]; reading {
			continue // its reader here is still stopping: taken once its exit report is in
		}
		step := takeStep{lease: l, why: takeFree}
		if !l.Free() {
			step.why, step.from = takeExpired, l.Owner
		}
		p.take, taking[l.ShardID] = append(p.take, step), true
	}
	p.ask = share.ask
	for _, id := range sortedKeys(p.asked) {
		if _, reading := v.reading[id]; !taking[id] && !reading && v.eligible[id] && v.now.Sub(p.asked[id].at) >= v.takeAskedAfter {
			p.take = append(p.take, takeStep{lease: byShard[id], why: takeOverdue, from: byShard[id].Owner})
		}
	}
	p.unsettled = len(p.take) > 0 || len(p.ask) > 0 || share.held < share.quota || len(p.asked) > 0
	return p
}

// nextExpiry is the earliest moment at which a lease of another worker that is not alive
// (alive says which are) expires, among those no listing has confirmed yet (listed before that
// moment); false if none will. The coordinator syncs, and lists, then: a crashed worker's
// shards move LeaseDuration after its leases' last counters were first seen, not a lease sync
// or a listing later. The leases of a live member move at every renewal; they are looked at
// by the listings that other changes bring, and at the latest every listMaxAge.
func nextExpiry(v view, alive func(owner string) bool) (time.Time, bool) {
	var next time.Time
	for _, l := range v.leases {
		at, ok := v.expiresAt[l.ShardID]
		if !ok || l.Free() || l.Owner == v.self || alive(l.Owner) || !v.listedAt.Before(at) || !v.eligible[l.ShardID] {
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// listing is what listDue looks at.
type listing struct {
	now, listedAt time.Time // listedAt: when the last listing was sent (zero: never)
	maxAge        time.Duration
	// soon: something happened that only a listing shows: a reader of this worker exited, a
	// take or request failed, a member read failed, another worker sent a notice, or the last
	// plan left this worker below its share.
	soon bool
	// noMembers: the store keeps no member records, so that only the leases show the others;
	// foreign: leases of foreign workers were held at the last listing (foreign.go).
	noMembers, foreign bool
	// aliveAtList are the members alive at the last listing, aliveNow those alive now: one gone
	// (it left, or missed a heartbeat) may have left its leases to take.
	aliveAtList, aliveNow []string
	// expiry: a lease of a worker that is not alive expires now (nextExpiry).
	expiry bool
}

// listDue reports whether a lease sync lists the leases before it decides. A listing reads
// every lease of the group, the one cost of the lease table that grows with the stream's shards
// rather than with a worker's own, so a quiet group lists every maxAge, and a change that a
// listing shows makes one at once. A member that appears lists nothing: it only lowers the
// others' quotas, and what it lacks it asks for, with a notice to the owners it asks.
func listDue(l listing) bool {
	gone := false
	for _, w := range l.aliveAtList {
		gone = gone || !slices.Contains(l.aliveNow, w)
	}
	return l.listedAt.IsZero() || l.soon || l.noMembers || l.foreign || gone || l.expiry || l.now.Sub(l.listedAt) >= l.maxAge
}
