package group

import (
	"slices"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// memberEvents are the changes to a group's members between two lease syncs, as one member
// saw them.
type memberEvents struct {
	joined []string // live now, not live before
	left   []string // live before, and their record is gone: they removed it on Close
	gone   []string // live before, record still there but no heartbeat for memberFresh
}

// diffMembers compares the live members of two syncs with the records read now, in time linear
// in the group's size (a group may have hundreds of members). It is pure, for a table test.
func diffMembers(before, now []string, records []lease.Member) memberEvents {
	var ev memberEvents
	wasLive := make(map[string]bool, len(before))
	for _, w := range before {
		wasLive[w] = true
	}
	isLive := make(map[string]bool, len(now))
	for _, w := range now {
		isLive[w] = true
		if !wasLive[w] {
			ev.joined = append(ev.joined, w)
		}
	}
	recorded := make(map[string]bool, len(records))
	for _, m := range records {
		recorded[m.Worker] = true
	}
	for _, w := range before {
		switch {
		case isLive[w]:
		case recorded[w]:
			ev.gone = append(ev.gone, w)
		default:
			ev.left = append(ev.left, w)
		}
	}
	return ev
}

// logMemberChanges writes one INFO line per member that joined, left or was judged gone since
// the last sync that read the members. Every member sees these changes; only the first live
// member (the one that also removes stale records, see syncMembers) logs them, so that the
// group's logs hold each change once. The first read that counts this member live sets the
// baseline and logs nothing: what was there before this member came is not news. A member's own
// join and leave it logs itself (heartbeatOnce, leave). Coordinator goroutine only.
func (c *Subscription) logMemberChanges(live []string, records []lease.Member) {
	self := c.cfg.WorkerID
	if c.liveSeen == nil {
		// The baseline is the first read that counts this member live: the others' liveness
		// is judged by then as well.
		if slices.Contains(live, self) {
			c.liveSeen = slices.Clone(live)
		}
		return
	}
	before := c.liveSeen
	c.liveSeen = append([]string{}, live...) // never nil once set: nil means no baseline yet
	if len(live) == 0 || live[0] != self {
		return
	}
	ev := diffMembers(before, live, records)
	for _, w := range ev.joined {
		if w != self { // its own join and leave a member logs itself
			c.cfg.Logger.Info("Member joined the group", c.logFields().Add(watermill.LogFields{"member": w}))
		}
	}
	for _, w := range ev.left {
		c.cfg.Logger.Info("Member left the group (it removed its record)", c.logFields().Add(watermill.LogFields{"member": w}))
	}
	for _, w := range ev.gone {
		c.cfg.Logger.Info("Member judged gone: its heartbeat stopped; its leases are taken once they expire",
			c.logFields().Add(watermill.LogFields{"member": w, "after": memberFresh(c.cfg).String()}))
	}
}
