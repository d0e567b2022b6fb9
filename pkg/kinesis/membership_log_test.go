package kinesis_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestGroupMemberLogLines: every change to a group's members is logged once at INFO across the
// group: a member's own join and leave by itself, and what the others see (joined, left, judged
// gone) by the first live member only.
func TestGroupMemberLogLines(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	w := newGrpWorld(t, 4)
	w1 := w.start("w1")
	w.steps(grpSyncInterval)
	w2 := w.start("w2")
	w3 := w.start("w3")
	w.runUntil("spread over w1, w2, w3", 6*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2", "w3") })

	// w3 crashes: it stops heartbeating and renewing, and its record stays.
	w3.dead.Store(true)
	w3.client.dead.Store(true)
	w3.store.setMode(grpFail)
	w.runUntil("w3's shards taken", 3*grpLeaseDuration, func() bool { return len(w.owned("w3")) == 0 })
	w.close(w2)
	w.steps(3 * grpSyncInterval)

	workers := []*grpWorker{w1, w2, w3}
	count := func(msg, member string) (n int, by []string) {
		for _, wk := range workers {
			for _, l := range wk.logs.matching(func(l fltEntry) bool {
				return l.level == "INFO" && l.msg == msg && (member == "" || l.fields["member"] == member)
			}) {
				n++
				by = append(by, wk.id+":"+l.fields["worker"].(string))
			}
		}
		return n, by
	}
	for _, tc := range []struct{ msg, member string }{
		{"Member joined the group", "w2"},
		{"Member joined the group", "w3"},
		{"Member judged gone: its heartbeat stopped; its leases are taken once they expire", "w3"},
		{"Member left the group (it removed its record)", "w2"},
	} {
		if n, by := count(tc.msg, tc.member); n != 1 {
			t.Errorf("%q about %s logged %d times (by %v), want once in the group", tc.msg, tc.member, n, by)
		}
	}
	if n, by := count("Member joined the group", "w1"); n != 0 {
		t.Errorf("w1's join was news to nobody (it came first), but was logged %d times (by %v)", n, by)
	}
	for _, wk := range workers {
		if got := wk.logs.matching(func(l fltEntry) bool { return l.level == "INFO" && l.msg == "Joined the group: member record written" }); len(got) != 1 {
			t.Errorf("%s logged its own join %d times, want once", wk.id, len(got))
		}
	}
	if got := w2.logs.matching(func(l fltEntry) bool { return l.level == "INFO" && l.msg == "Left the group: member record removed" }); len(got) != 1 {
		t.Errorf("w2 logged its own leave %d times, want once", len(got))
	}
	if t.Failed() {
		for _, wk := range workers {
			for _, l := range wk.logs.matching(func(l fltEntry) bool {
				return l.fields["member"] != nil || l.msg == "Joined the group: member record written"
			}) {
				t.Logf("%s: %v", wk.id, l)
			}
		}
	}
	w.close(w1)
	w.close(w3)
	_ = w.pub.Close()
	_ = w.e.pub.Close()
	goleak.VerifyNone(t, ignore)
}
