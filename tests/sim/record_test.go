package sim_test

// What the run records: every acked publish, delivery, ack, ownership hook, ownership change
// and checkpoint write, each stamped with fake time and with a global order (ord) taken under
// the world's lock, which is the order the checks replay them in.

import (
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
	ord    int
	at     time.Time
	by     deliverer
	slot   string
	shard  string
	seq    string
	key    string
	n      int
	acked  bool // acked while the message's context was live
	ackAt  time.Time
	ackOrd int
}

type hookKind string

const (
	hookAcquired hookKind = "acquired"
	hookRevoked  hookKind = "revoked"
	hookLost     hookKind = "lost"
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
	inst   *instance
	held   lease.Lease
	value  string
	result lease.Lease
	err    error
}

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
	d := &delivery{
		ord: w.nextOrd(), at: time.Now(), by: deliverer{in.id, sub}, slot: in.name,
		shard: info.ShardID, seq: info.SequenceNumber, key: msg.Metadata.Get("key"), n: n,
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
}

func (w *world) noteOwner(in *instance, how string, l lease.Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	gens := w.owners[l.ShardID]
	if gens == nil {
		gens = map[int64]ownerRec{}
		w.owners[l.ShardID] = gens
	}
	gens[l.Generation] = ownerRec{owner: l.Owner, slot: in.name, how: how}
}

func (w *world) noteCheckpoint(in *instance, held lease.Lease, value string, result lease.Lease, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkpoints = append(w.checkpoints, ckptRec{at: time.Now(), inst: in, held: held, value: value, result: result, err: err})
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
