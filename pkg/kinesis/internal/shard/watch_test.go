package shard

import (
	"testing"
	"testing/synctest"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TestSettleWatch: each settlement is reported once, with the message it was for; a watcher
// that reported takes the next message instead of a new one starting; a pause's takeBack frees
// the watchers of messages never settled; close stops watchers that still wait.
func TestSettleWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newSettleWatch(4)
		deliveries := make([]*delivery, 3)
		for i := range deliveries {
			deliveries[i] = &delivery{msg: message.NewMessage("m", nil)}
			w.watch(deliveries[i])
		}
		if w.started != 3 {
			t.Fatalf("three messages out, none settled: %d watchers, want 3", w.started)
		}
		deliveries[1].msg.Ack()
		deliveries[2].msg.Nack()
		synctest.Wait()
		w.take()
		if len(w.pending) != 2 {
			t.Fatalf("two settled: %d reported, want 2", len(w.pending))
		}
		for _, m := range w.pending {
			if m.d == deliveries[0] || m.msg != m.d.msg {
				t.Errorf("reported %p for delivery %p (message %p)", m.msg, m.d, m.d.msg)
			}
		}
		w.pending = w.pending[:0]

		// The two that reported are idle: the next two messages go to them.
		for range 2 {
			d := &delivery{msg: message.NewMessage("m", nil)}
			synctest.Wait() // the watchers are parked on work again
			w.watch(d)
		}
		if w.started != 3 {
			t.Errorf("two more messages with two watchers idle: %d watchers started in all, want 3", w.started)
		}
		// A pause takes the three out back; nobody ever settles them. Their watchers go idle
		// and watch the resends.
		w.takeBack()
		for range 3 {
			synctest.Wait()
			w.watch(&delivery{msg: message.NewMessage("m", nil)})
		}
		if w.started != 3 {
			t.Errorf("after a pause took three messages back, three resends: %d watchers started in all, want 3", w.started)
		}
		w.take()
		if len(w.pending) != 0 {
			t.Errorf("messages taken back reported settled: %d", len(w.pending))
		}
		w.close() // returns only once every watcher has: none of the resends is settled
		synctest.Wait()
		w.take()
		if len(w.pending) != 0 {
			t.Errorf("after close, %d settlements reported", len(w.pending))
		}
	})
}
