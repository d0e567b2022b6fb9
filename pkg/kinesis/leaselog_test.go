package kinesis_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

// about keeps the lines at level (any level if "") about shard whose message starts with
// prefix.
func about(level, shard, prefix string) func(fltEntry) bool {
	return func(l fltEntry) bool {
		return (level == "" || l.level == level) && l.fields["shard"] == shard && strings.HasPrefix(l.msg, prefix)
	}
}

// TestGroupLeaseLogLines runs a scripted takeover and reads what each instance logged about
// its leases: one INFO line when a lease is taken (saying from whom and why), handed over,
// released or lost; one WARN for the expected fencing event (a paused owner); no ERROR; and
// every line about a shard names stream, shard, group, worker and generation.
func TestGroupLeaseLogLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newGrpWorld(t, 4)
		w.publishing = true
		w1 := w.start("w1")
		shards := w.owned("w1")
		if len(shards) != 4 {
			t.Fatalf("w1 alone owns %v, want all 4 shards", shards)
		}
		for _, s := range shards {
			if got := w1.logs.matching(about("INFO", s, "Lease taken")); len(got) != 1 || got[0].fields["reason"] != "free" || got[0].fields["from"] != nil {
				t.Errorf("w1 taking free %s logged %v, want one INFO \"Lease taken\" with reason free and no from", s, got)
			}
		}

		w.steps(grpSyncInterval / 2)
		w2 := w.start("w2")
		w.runUntil("spread over w1 and w2", 4*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
		for _, s := range w.owned("w2") {
			if got := w1.logs.matching(about("INFO", s, "Lease handed over")); len(got) != 1 || got[0].fields["to"] != "w2" {
				t.Errorf("w1 handing %s over logged %v, want one INFO \"Lease handed over\" to w2", s, got)
			}
			if got := w2.logs.matching(about("INFO", s, "Lease taken")); len(got) != 1 || got[0].fields["reason"] != "handed over" || got[0].fields["from"] != "w1" {
				t.Errorf("w2 taking %s by handoff logged %v, want one INFO \"Lease taken\", handed over from w1", s, got)
			}
		}

		// w1 stops getting through to the lease store, as a paused process does; w2 takes its
		// shards once they expire; then w1 is back.
		w.steps(grpSyncInterval)
		victims := w.owned("w1")
		w1.store.setMode(grpHang)
		w.runUntil("w2 takes w1's shards", 2*grpLeaseDuration, func() bool { return len(w.owned("w2")) == 4 })
		w1.store.setMode(grpPass)
		w.runUntil("w1 stops reading them", 2*grpSyncInterval, func() bool {
			for _, s := range victims {
				if len(w1.logs.matching(about("", s, "Lease lost"))) == 0 {
					return false
				}
			}
			return true
		})
		for _, s := range victims {
			warns := w1.logs.matching(about("WARN", s, ""))
			if len(warns) != 1 || !strings.HasPrefix(warns[0].msg, "Lease not renewed in time; deliveries paused") {
				t.Errorf("w1, paused, logged %v at WARN about %s; want the one pause", warns, s)
			}
			// Found at a lease sync, the line names the new owner; found by a refused write, the
			// store's answer does not say.
			if got := w1.logs.matching(about("", s, "Lease lost")); len(got) != 1 || got[0].level != "INFO" ||
				(got[0].fields["to"] != nil && got[0].fields["to"] != "w2") || !strings.Contains(fmt.Sprint(got[0].fields["reason"]), "lease lost") {
				t.Errorf("w1 losing %s logged %v, want one INFO \"Lease lost\" (the pause was the WARN)", s, got)
			}
			if got := w2.logs.matching(about("INFO", s, "Lease taken")); len(got) != 1 || !strings.HasPrefix(fmt.Sprint(got[0].fields["reason"]), "expired: ") || got[0].fields["from"] != "w1" {
				t.Errorf("w2 taking %s from the paused w1 logged %v, want one INFO \"Lease taken\", expired, from w1", s, got)
			}
		}

		w.publishing = false
		w.close(w1)
		w.close(w2)
		for _, s := range shards {
			if got := w2.logs.matching(about("INFO", s, "Lease released")); len(got) != 1 || got[0].fields["reason"] != "subscription closing" {
				t.Errorf("w2 closing logged %v about %s, want one INFO \"Lease released\" (subscription closing)", got, s)
			}
		}
		for _, wk := range []*grpWorker{w1, w2} {
			for _, l := range wk.logs.matching(func(l fltEntry) bool { return l.level == "ERROR" }) {
				t.Errorf("%s logged an ERROR in a takeover that needs nobody: %v", wk.id, l)
			}
			for _, l := range wk.logs.matching(func(l fltEntry) bool { return l.fields["shard"] != nil && l.level != "DEBUG" && l.level != "TRACE" }) {
				for _, f := range []string{"stream", "group", "worker", "generation"} {
					if l.fields[f] == nil {
						t.Errorf("%s's line about a shard has no %s: %v", wk.id, f, l)
					}
				}
			}
		}
		if t.Failed() {
			for _, wk := range []*grpWorker{w1, w2} {
				for _, l := range wk.logs.matching(func(l fltEntry) bool { return l.level != "DEBUG" && l.level != "TRACE" }) {
					t.Logf("%s: %v", wk.id, l)
				}
			}
		}
		_ = w.pub.Close()
		_ = w.e.pub.Close()
		goleak.VerifyNone(t, ignore)
	})
}
