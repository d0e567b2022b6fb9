package sim_test

// What the run records: every acked publish, delivery, ack, ownership hook, ownership change
// and checkpoint write, each stamped with fake time and with a global order (ord) taken under
// the world's lock, which is the order the checks replay them in.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

type kinesisMessage = message.Message

// pubRec is one acked publish: the n-th message of a partition key.
type pubRec struct {
	key string
	n   int
}

func newSimMessage(p pubRec) *message.Message {
	msg := message.NewMessage(p.key+"-"+strconv.Itoa(p.n), []byte("payload"))
	msg.Metadata.Set("key", p.key)
	msg.Metadata.Set("n", strconv.Itoa(p.n))
	return msg
}

// deliverer is one subscription of one incarnation of an instance.
type deliverer struct {
	inst int // incarnation
	sub  int // which Subscribe call of the instance, from 0
}

type delivery struct {
	ord   int
	at    time.Time
	by    deliverer
	slot  string
	shard string
	seq   string
	key   string
	n     int
	gen   int64 // the lease generation the reader delivered it under
	inc   int   // the lease's incarnation then (world.incarn)
	// arrival is the record's ApproximateArrivalTimestamp (memlog's clock: the bubble's)
	arrival time.Time
	acked   bool // acked while the message's context was live
	ackAt   time.Time
	ackOrd  int
}

type hookKind string

const (
	hookAcquired hookKind = "acquired"
	hookRevoked  hookKind = "revoked"
	hookLost     hookKind = "lost"
	// hookRestart is not a driver hook: it is a GetShardIterator from where the group's
	// checkpoint is (or from the initial position), i.e. a reader (re)starting the shard.
	hookRestart hookKind = "restart"
)

type hookRec struct {
	ord   int
	at    time.Time
	inst  int
	shard string
	kind  hookKind
}

// ckptRec is one Checkpoint call that reached the store.
type ckptRec struct {
	at     time.Time
	inc    int // the lease's incarnation when it was made
	inst   *instance
	held   lease.Lease
	value  string
	result lease.Lease
	err    error
}

// leaseKey orders the holders of one shard's lease: its incarnation (how many times it was
// created again), then its generation. Every take, handoff and release makes a greater one.
type leaseKey struct {
	inc int
	gen int64
}

func (k leaseKey) less(o leaseKey) bool { return k.inc < o.inc || k.inc == o.inc && k.gen < o.gen }

func (k leaseKey) String() string { return fmt.Sprintf("%d.%d", k.inc, k.gen) }

// ownerRec is who was made owner of a generation of a lease, and how.
type ownerRec struct {
	owner string
	slot  string // the instance whose call made the change
	how   string
}

// disruption is an event that may make the group redeliver acked records: those acked by the
// affected instances (all, if slots is nil) in [from, to] were possibly never checkpointed.
type disruption struct {
	what     string
	slots    map[string]bool
	shard    string // only acks of this shard, if set
	from, to time.Time
}

func (w *world) nextOrd() int { w.ord++; return w.ord }

// deliver records a message a handler received, unless its instance has crashed (a dead
// process received nothing anybody could see). It returns nil then.
func (w *world) deliver(in *instance, sub int, msg *message.Message) *delivery {
	info, _ := kinesis.RecordFromContext(msg.Context())
	n, _ := strconv.Atoi(msg.Metadata.Get("n"))
	w.mu.Lock()
	defer w.mu.Unlock()
	if in.crashed {
		return nil
	}
	if traceNotes {
		fmt.Fprintf(os.Stderr, "seed %d: %9s  deliver %s#%d/sub%d %s %s/%s\n", w.seed, w.since().Round(time.Millisecond), in.name, in.id, sub, info.ShardID, msg.Metadata.Get("key"), msg.Metadata.Get("n"))
	}
	d := &delivery{
		ord: w.nextOrd(), at: time.Now(), by: deliverer{in.id, sub}, slot: in.name,
		shard: info.ShardID, seq: info.SequenceNumber, key: msg.Metadata.Get("key"), n: n,
		gen: info.LeaseGeneration, inc: w.incarn[info.ShardID], arrival: info.ArrivalTime,
	}
	w.deliveries = append(w.deliveries, d)
	return d
}

func (w *world) acked(d *delivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d.acked, d.ackAt, d.ackOrd = true, time.Now(), w.nextOrd()
}

func (w *world) hook(in *instance, kind hookKind, ev kinesis.ShardEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hooks = append(w.hooks, hookRec{ord: w.nextOrd(), at: time.Now(), inst: in.id, shard: ev.ShardID, kind: kind})
	if traceNotes {
		fmt.Fprintf(os.Stderr, "seed %d: %9s  hook %s#%d %s %s\n", w.seed, w.since().Round(time.Millisecond), in.name, in.id, kind, ev.ShardID)
	}
}

// iterator records a GetShardIterator that (re)starts a shard from its checkpoint, which begins
// a new tenure of the instance's subscriptions on it. One that continues after the last record
// read (an expired iterator renewed) begins none, unless that record is also the checkpoint,
// where there is nothing it could go back to anyway.
func (w *world) iterator(in *instance, shard, seq string) {
	ckpt := ""
	if ls, err := w.store.List(context.Background(), simGroup, simStream); err == nil {
		for _, l := range ls {
			if l.ShardID == shard {
				ckpt = l.Checkpoint
			}
		}
	}
	if s, isStart, _ := lease.ParseStart(ckpt); isStart && s.Type == lease.StartAtSequenceNumber {
		ckpt = s.SequenceNumber // a reset's start at a record: a reader starts there
	}
	if seq != "" && seq != ckpt {
		return
	}
	w.hook(in, hookRestart, kinesis.ShardEvent{ShardID: shard})
}

func (w *world) noteOwner(in *instance, how string, l lease.Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noteOwnerLocked(in.name, how, l)
}

// noteOwnerLocked records an ownership change made by slot (an instance's name, or a reset's);
// a create of a lease that was there before (a reset creating a deleted one again) begins a
// new incarnation. The first create does not: it is noted just after the store applied it,
// and another instance may take the new lease in between. The caller holds mu.
func (w *world) noteOwnerLocked(slot, how string, l lease.Lease) leaseKey {
	if how == "create" && len(w.owners[l.ShardID]) > 0 {
		w.incarn[l.ShardID]++
	}
	gens := w.owners[l.ShardID]
	if gens == nil {
		gens = map[leaseKey]ownerRec{}
		w.owners[l.ShardID] = gens
	}
	k := leaseKey{w.incarn[l.ShardID], l.Generation}
	gens[k] = ownerRec{owner: l.Owner, slot: slot, how: how}
	if traceNotes {
		fmt.Fprintf(os.Stderr, "seed %d: %9s  %s by %s: %s owner %q gen %s pending %q\n", w.seed, w.since().Round(time.Millisecond), how, slot, l.ShardID, l.Owner, k, l.PendingOwner)
	}
	return k
}

func (w *world) noteCheckpoint(in *instance, held lease.Lease, value string, result lease.Lease, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkpoints = append(w.checkpoints, ckptRec{at: time.Now(), inc: w.incarn[held.ShardID], inst: in, held: held, value: value, result: result, err: err})
	if traceNotes {
		fmt.Fprintf(os.Stderr, "seed %d: %9s  checkpoint %s#%d %s %.12s... gen %d err %v\n", w.seed, w.since().Round(time.Millisecond), in.name, in.id, held.ShardID, value, held.Generation, err)
	}
}

func (w *world) disrupted(what string, slots []string, from, to time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var set map[string]bool
	if slots != nil {
		set = map[string]bool{}
		for _, s := range slots {
			set[s] = true
		}
	}
	w.disrupt = append(w.disrupt, disruption{what: what, slots: set, from: from, to: to})
}
