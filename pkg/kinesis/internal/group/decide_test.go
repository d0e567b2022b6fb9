package group

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// baseView is "me" at t0+1m with no leases, no readers and nothing asked; cases add to it.
func baseView(f func(v *view)) view {
	v := view{
		now: at(time.Minute), self: "me", listed: true, listedAt: at(time.Minute),
		expiresAt: map[string]time.Time{}, eligible: map[string]bool{}, reading: map[string]int64{},
		asked: map[string]handoffAsk{}, takeAskedAfter: 10 * time.Second,
	}
	f(&v)
	return v
}

// withLeases sets v's leases from specs "shard=owner" (owner "-" free; a suffix ">p" for a
// pending owner p, "*" for SHARD_END), each eligible unless it is finished.
func withLeases(v *view, specs ...string) {
	for _, s := range specs {
		id, spec, _ := strings.Cut(s, "=")
		l := lease.Lease{Group: "g", Stream: "s", ShardID: id, Generation: 1, Counter: 1}
		spec, finished := strings.CutSuffix(spec, "*")
		if spec != "-" {
			l.Owner, l.PendingOwner, _ = strings.Cut(spec, ">")
		}
		if finished {
			l.Checkpoint = lease.ShardEnd
		} else {
			v.eligible[id] = true
		}
		v.leases = append(v.leases, l)
	}
}

// planString is a plan in one line, for comparing with a table's want.
func planString(p plan) string {
	var parts []string
	for _, l := range p.lost {
		parts = append(parts, fmt.Sprintf("lost %s(%s)", l.ShardID, l.Owner))
	}
	for _, id := range p.handOver {
		parts = append(parts, "hand over "+id)
	}
	for _, l := range p.release {
		parts = append(parts, "release "+l.ShardID)
	}
	for _, l := range p.releaseIdle {
		parts = append(parts, "release idle "+l.ShardID)
	}
	for _, t := range p.take {
		parts = append(parts, fmt.Sprintf("take %s %s from %q", t.lease.ShardID, t.why, t.from))
	}
	for _, l := range p.ask {
		parts = append(parts, "ask "+l.ShardID)
	}
	for _, id := range sortedKeys(p.asked) {
		parts = append(parts, fmt.Sprintf("asked %s of %s at %s", id, p.asked[id].owner, p.asked[id].at.Sub(t0)))
	}
	if p.unsettled {
		parts = append(parts, "unsettled")
	}
	return strings.Join(parts, "; ")
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name string
		view view
		want string
	}{
		{"alone: every free lease", baseView(func(v *view) { withLeases(v, "s0=-", "s1=-") }),
			`take s0 free from ""; take s1 free from ""; unsettled`},
		{"at its share: nothing to do", baseView(func(v *view) {
			withLeases(v, "s0=me", "s1=a")
			v.reading["s0"], v.members = 1, []string{"a", "me"}
		}), ``},
		{"a free lease waiting for its parents is not taken", baseView(func(v *view) {
			withLeases(v, "s0=-")
			delete(v.eligible, "s0")
		}), ``},
		{"ours with no reader: taken again (a restart)", baseView(func(v *view) { withLeases(v, "s0=me") }),
			`take s0 held under this worker's id with no reader here (a restart of this worker, a reader of it that stopped, or a reset of the group's position) from ""; unsettled`},
		{"ours with no reader, asked for: handed over", baseView(func(v *view) {
			withLeases(v, "s0=me")
			v.asked["s0"] = handoffAsk{at: t0, owner: "a"}
		}), `take s0 handed over from "a"; unsettled`},
		{"ours at SHARD_END with no reader: released", baseView(func(v *view) { withLeases(v, "s0=me*") }), `release s0`},
		{"ours with no reader, waiting for its parents (given back by a reset): released", baseView(func(v *view) {
			withLeases(v, "s0=me")
			delete(v.eligible, "s0")
		}), `release idle s0`},
		{"the same from a view not listed at this sync: left to the next listing", baseView(func(v *view) {
			withLeases(v, "s0=me")
			delete(v.eligible, "s0")
			v.listed = false
		}), ``},
		{"a reader whose lease another took: lost", baseView(func(v *view) {
			withLeases(v, "s0=a")
			v.reading["s0"], v.members = 1, []string{"a", "me"}
		}), `lost s0(a)`},
		{"a reader whose lease moved to another generation: lost", baseView(func(v *view) {
			withLeases(v, "s0=me")
			v.reading["s0"] = 2
		}), `lost s0(me)`},
		{"a reader whose lease is gone: lost", baseView(func(v *view) { v.reading["s0"] = 1 }), `lost s0()`},
		{"readers are checked only against a listing of this sync", baseView(func(v *view) {
			withLeases(v, "s0=a")
			v.reading["s0"], v.listed, v.members = 1, false, []string{"a", "me"}
		}), ``},
		{"a reader whose lease was asked for: hand it over", baseView(func(v *view) {
			withLeases(v, "s0=me>a", "s1=me")
			v.reading["s0"], v.reading["s1"], v.members = 1, 1, []string{"a", "me"}
		}), `hand over s0`},
		{"expired by a listing sent at its expiry: taken", baseView(func(v *view) {
			withLeases(v, "s0=me", "s1=dead")
			v.reading["s0"] = 1
			v.expiresAt["s1"] = v.listedAt
		}), `take s1 expired: its owner stopped renewing it from "dead"; unsettled`},
		{"expired by an older listing's clock only: not taken, asked for", baseView(func(v *view) {
			withLeases(v, "s0=a", "s1=a")
			v.expiresAt["s1"] = v.listedAt.Add(time.Millisecond)
		}), `ask s1; unsettled`},
		{"a free lease whose reader here still stops: not taken yet", baseView(func(v *view) {
			withLeases(v, "s0=-")
			v.reading["s0"] = 1
		}), `lost s0(); unsettled`},
		{"nothing free: ask the owner above its share", baseView(func(v *view) {
			withLeases(v, "s0=a", "s1=a", "s2=a", "s3=a")
			v.members = []string{"a", "me"}
		}), `ask s3; ask s2; unsettled`},
		{"a foreign owner is never asked", baseView(func(v *view) {
			withLeases(v, "s0=kcl", "s1=kcl")
			v.leases[0].Foreign, v.leases[1].Foreign = true, true
		}), `unsettled`},
		{"a request pending: kept, and unsettled", baseView(func(v *view) {
			withLeases(v, "s0=a>me", "s1=a")
			v.asked["s0"] = handoffAsk{at: at(55 * time.Second), owner: "a"}
			v.members = []string{"a", "me"}
		}), `asked s0 of a at 55s; unsettled`},
		{"a request not handed over in time: taken", baseView(func(v *view) {
			withLeases(v, "s0=a>me", "s1=a")
			v.asked["s0"] = handoffAsk{at: at(50 * time.Second), owner: "a"}
			v.members = []string{"a", "me"}
		}), `take s0 not handed over within HandoffTimeout: taken from its owner from "a"; asked s0 of a at 50s; unsettled`},
		{"a request made under this worker's id before a restart: waited for from now", baseView(func(v *view) {
			withLeases(v, "s0=a>me", "s1=a")
			v.members = []string{"a", "me"}
		}), `asked s0 of a at 1m0s; unsettled`},
		{"a request the lease no longer shows: forgotten", baseView(func(v *view) {
			withLeases(v, "s0=a", "s1=me")
			v.reading["s1"] = 1
			v.asked["s0"] = handoffAsk{at: t0, owner: "a"}
			v.members = []string{"a", "me"}
		}), ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planString(decide(tc.view)); got != tc.want {
				t.Errorf("decide:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestNextExpiry(t *testing.T) {
	v := baseView(func(v *view) {
		withLeases(v, "s0=dead", "s1=alive", "s2=me", "s3=-", "s4=dead", "s5=dead", "s6=dead")
		v.listedAt = at(30 * time.Second)
		v.expiresAt = map[string]time.Time{
			"s0": at(45 * time.Second), "s1": at(35 * time.Second), "s2": at(35 * time.Second), "s3": at(35 * time.Second),
			"s4": at(50 * time.Second), "s5": at(20 * time.Second), // confirmed by the listing at 30s already
			"s6": at(40 * time.Second),
		}
		delete(v.eligible, "s6") // waits for its parents
	})
	alive := func(w string) bool { return w == "alive" }
	if got, ok := nextExpiry(v, alive); !ok || !got.Equal(at(45*time.Second)) {
		t.Errorf("nextExpiry = %v %v, want s0's 45s: not a live owner's, this worker's, a free, an ineligible one, nor one a listing confirmed", got.Sub(t0), ok)
	}
	v.expiresAt = map[string]time.Time{"s1": at(35 * time.Second)}
	if got, ok := nextExpiry(v, alive); ok {
		t.Errorf("nextExpiry = %v, want none: only a live owner's lease", got.Sub(t0))
	}
}

func TestListDue(t *testing.T) {
	quiet := listing{now: at(time.Minute), listedAt: at(50 * time.Second), maxAge: time.Minute,
		aliveAtList: []string{"a", "me"}, aliveNow: []string{"a", "me"}}
	for _, tc := range []struct {
		name string
		edit func(l *listing)
		want bool
	}{
		{"a quiet group: no", func(*listing) {}, false},
		{"never listed", func(l *listing) { l.listedAt = time.Time{} }, true},
		{"something only a listing shows", func(l *listing) { l.soon = true }, true},
		{"no member records: every sync", func(l *listing) { l.noMembers = true }, true},
		{"foreign workers hold leases", func(l *listing) { l.foreign = true }, true},
		{"a member gone (left, or missed a heartbeat)", func(l *listing) { l.aliveNow = []string{"me"} }, true},
		{"a member appeared: no (it asks for what it lacks)", func(l *listing) { l.aliveNow = []string{"a", "b", "me"} }, false},
		{"a lease of a worker not alive expires", func(l *listing) { l.expiry = true }, true},
		{"the last listing is maxAge old", func(l *listing) { l.listedAt = at(0) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := quiet
			tc.edit(&l)
			if got := listDue(l); got != tc.want {
				t.Errorf("listDue = %v, want %v", got, tc.want)
			}
		})
	}
}
