package kinesis_test

import (
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// rgSubDelivery is one message received by one of several subscriptions of a Subscriber.
type rgSubDelivery struct {
	sub, uuid, shard string
}

// rgSubs records what each subscription's channel delivers, acking every message.
type rgSubs struct {
	mu   sync.Mutex
	got  []rgSubDelivery
	done []chan struct{}
}

func (r *rgSubs) consume(name string, ch <-chan *message.Message) {
	done := make(chan struct{})
	r.mu.Lock()
	r.done = append(r.done, done)
	r.mu.Unlock()
	go func() {
		defer close(done)
		for m := range ch {
			shard, _ := kinesis.ShardIDFromContext(m.Context())
			r.mu.Lock()
			r.got = append(r.got, rgSubDelivery{sub: name, uuid: m.UUID, shard: shard})
			r.mu.Unlock()
			m.Ack()
		}
	}()
}

func (r *rgSubs) deliveries() []rgSubDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rgSubDelivery(nil), r.got...)
}

// Item 2: two Subscribe calls on one grouped Subscriber for one stream (a Watermill router
// with two handlers on one topic) are two members of the group. The first uses WorkerID as
// its lease owner, the second WorkerID+"#2"; after convergence the 4 shards are split 2 and 2
// between them, every message is delivered to exactly one of them, once; checkpoints are
// written; nothing is logged at ERROR. Today both use the same WorkerID and fight over every
// lease.
func TestRegress_TwoSubscriptionsOneSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFltWorld(t, 4)
		_, cfg := w.newWorker("w1", &fltClient{KinesisAPI: w.e.log, k: w.kin, worker: "w1"})
		// The shared store itself (the harness's per-instance wrapper would book every take as
		// "w1"'s), and no harness hooks (they check the event's WorkerID against "w1").
		cfg.Group.LeaseStore = w.e.store
		cfg.Group.Hooks.OnAcquired, cfg.Group.Hooks.OnRevoked, cfg.Group.Hooks.OnLost = nil, nil, nil
		sub, err := kinesis.NewSubscriber(cfg, w.logs.worker("w1"))
		if err != nil {
			t.Fatalf("NewSubscriber: %v", err)
		}
		defer sub.Close()
		subs := &rgSubs{}
		from := w.now()
		w.publishing = true
		for _, name := range []string{"first", "second"} {
			ch, err := w.subscribe(sub)
			if err != nil {
				t.Fatalf("Subscribe (%s): %v", name, err)
			}
			subs.consume(name, ch)
			w.settle()
			w.steps(time.Second)
		}
		w.steps(30 * time.Second)
		w.publishing = false
		w.steps(3 * time.Second)
		to := w.now()

		owners := map[string]int{}
		var leases []string
		noCheckpoint := 0
		for _, l := range w.leases() {
			owners[l.Owner]++
			leases = append(leases, l.ShardID+"="+l.Owner)
			if l.Checkpoint == "" {
				noCheckpoint++
			}
		}
		counts := map[string]int{}
		bySub := map[string]int{}
		for _, d := range subs.deliveries() {
			counts[d.uuid]++
			bySub[d.sub]++
		}
		w.mu.Lock()
		published := append([]string(nil), w.pubOrder...)
		w.mu.Unlock()
		missing, twice := 0, 0
		for _, u := range published {
			switch c := counts[u]; {
			case c == 0:
				missing++
			case c > 1:
				twice++
			}
		}
		errorsLogged := w.logs.of("ERROR", from, to)
		sort.Strings(leases)
		t.Logf("%d published, %d deliveries (first=%d second=%d), %d never delivered, %d delivered more than once; leases %v; %d leases without a checkpoint; %d ERROR lines in %s",
			len(published), len(subs.deliveries()), bySub["first"], bySub["second"], missing, twice, leases, noCheckpoint, len(errorsLogged), to.Sub(from))

		if owners["w1"] != 2 || owners["w1#2"] != 2 || len(owners) != 2 {
			t.Errorf("lease owners %v, want 2 shards for %q (the first subscription) and 2 for %q (the second)", owners, "w1", "w1#2")
		}
		if bySub["first"] == 0 || bySub["second"] == 0 {
			t.Errorf("deliveries per subscription %v, want both to read", bySub)
		}
		if missing != 0 || twice != 0 {
			t.Errorf("%d messages never delivered, %d delivered more than once; want each delivered exactly once to one subscription", missing, twice)
		}
		if noCheckpoint != 0 {
			t.Errorf("%d leases without a checkpoint after %s of reading", noCheckpoint, to.Sub(from))
		}
		for i, e := range errorsLogged {
			if i == 5 {
				t.Errorf("... %d ERROR lines in all", len(errorsLogged))
				break
			}
			t.Errorf("the driver logged an error: %s", e)
		}

		if err := sub.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, done := range subs.done {
			select {
			case <-done:
			case <-time.After(subWait):
				t.Fatal("a subscription's channel was not closed after Close")
			}
		}
		w.finish(ignore)
	})
}
