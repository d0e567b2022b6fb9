package group

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// view gathers what decide rests its safety on: a lease of another worker expires LeaseDuration
// (a foreign worker's, foreignExpiryMargin more) after this worker's listing first showed its
// values, a new value starts that clock again, and a lease asked for is taken after
// max(HandoffTimeout, LeaseDuration). In a synctest bubble: the coordinator reads the time
// with time.Now, and the test moves it.
func TestViewExpiries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newCleanupWorld(t)
		for _, id := range []string{"a", "b", "k"} {
			w.shard(id, false)
			w.lease(id, true, "", false) // taken by w2
		}
		ctx := context.Background()
		t0 := time.Now()
		w.refresh()
		time.Sleep(3 * time.Second)
		if _, err := w.store.Renew(ctx, w.c.leases.byShard["b"]); err != nil { // b moves: its clock starts again
			t.Fatal(err)
		}
		w.refresh()
		k := w.c.leases.byShard["k"]
		k.Foreign = true // as a kcl.Store reads a KCL worker's lease
		w.c.leases.byShard["k"] = k
		v := w.c.view(time.Now())
		ld := w.c.cfg.LeaseDuration
		for id, want := range map[string]time.Time{"a": t0.Add(ld), "b": t0.Add(3*time.Second + ld), "k": t0.Add(ld + foreignExpiryMargin)} {
			if got := v.expiresAt[id]; !got.Equal(want) {
				t.Errorf("expiresAt[%s] = +%s, want +%s", id, got.Sub(t0), want.Sub(t0))
			}
		}
		if !v.eligible["a"] || v.takeAskedAfter != max(w.c.cfg.HandoffTimeout, ld) || !v.listedAt.Equal(time.Now()) {
			t.Errorf("view: eligible %v, takeAskedAfter %s, listedAt +%s", v.eligible, v.takeAskedAfter, v.listedAt.Sub(t0))
		}
		// A lease of this worker's own never expires for it; one written since the listing (a take
		// of this worker's) is not observed with its values.
		mine, err := w.store.Take(ctx, w.c.leases.byShard["a"], "w1")
		if err != nil {
			t.Fatal(err)
		}
		w.c.leases.byShard["a"] = mine
		if _, ok := w.c.view(time.Now()).expiresAt["a"]; ok {
			t.Error("a lease of this worker's own has an expiry")
		}
	})
}
