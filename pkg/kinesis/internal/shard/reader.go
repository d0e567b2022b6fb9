package shard

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/logs"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Exit is what a shard reader reports to its coordinator when it stops.
type Exit struct {
	// Reader is who reports: the coordinator acts on an exit only for the reader its table
	// holds for the shard.
	Reader *Reader
	// ShardEnded: the shard is closed and every record of it was acked (and, in a group,
	// checkpointed SHARD_END).
	ShardEnded bool
	// HandedTo is the worker the lease went to, when it was handed over to the worker that
	// asked for it; "" otherwise.
	HandedTo string
	// Children are the shards that replaced this one, from the read that reached its end:
	// the coordinator creates their leases from them at once, without waiting for a shard
	// listing that shows them.
	Children []types.ChildShard
	// LastAcked is the sequence number of the last record acked in order ("" if none), where
	// a no-group subscription resumes the shard if it starts it again.
	LastAcked string
	// Err is why the reader stopped: nil for a shard read to its end or handed over, the
	// context's error for a stop, a wrapped lease.ErrLeaseLost for a lost lease, or the
	// failure no retry could fix (a *awscall.ShardError).
	Err error
}

// Reader reads one shard and delivers its records in sequence order.
//
// Ownership: everything in a Reader belongs to its run goroutine, except the channels
// below and the fields set before run starts (cfg, links, shardID, ctx,
// cancel, start, held, leased, generation), which are read-only after that. The coordinator stops
// a reader with Stop (it cancels ctx), fences it with MarkLost (it closes lost), and asks for a
// handoff with RequestHandoff. Run writes ready once, closes finished once it has given the lease
// up, and then reports its exit (Links.Exits) unless the subscription has stopped listening
// (Links.Quit).
type Reader struct {
	cfg     *Config
	links   *Links
	shardID string
	ctx     context.Context
	cancel  context.CancelFunc
	// facts are what the reader's messages share. Their contexts' parent (facts.parent) has
	// ctx's values, not its end. A message's context ends when the reader sees it settled or
	// gives it up (cancelWindow, after the last acks are counted), never before: ended with
	// ctx, a message acked between the stop and the reader's last settle was checkpointed
	// although its handler had seen its context end, which says it will be redelivered (found
	// by tests/scale under -race). Apart from the Reader: a message a handler keeps keeps its
	// record's answer alive (its payload shares the answer's memory), never the reader's window
	// or its other batches.
	facts    *readerFacts
	lost     chan struct{} // closed by the coordinator when the lease moved to another owner
	ready    chan error    // gets one value: nil once the iterator is held, or why not
	finished chan struct{} // closed by run when nothing of the reader runs any more but its exit report
	// handoff gets a value from the coordinator at each lease listing that finds another
	// worker waiting for this lease (buffered 1; a signal already pending is enough).
	handoff  chan struct{}
	lostOnce sync.Once
	lostTo   string // set by MarkLost before it closes lost: the owner the coordinator saw

	start      Start        // where reading starts
	held       *lease.Lease // nil without a consumer group, and once handed over
	leased     bool         // started with a lease
	generation int64        // held.Generation when taken

	fetchState            // fetch.go: iterator, fetched records, read pacing
	windowState           // window.go: the in-flight window and the watermark
	leaseState            // lease.go: renewal, checkpoint, handoff and pause timing
	push        pushState // fanout.go: the SubscribeToShard subscription, with enhanced fan-out
	wake        *time.Timer
	wakeArmed   time.Time    // what wake is set for; zero once it fired and was received
	watch       *settleWatch // watch.go: settlements of the messages out; nil at MaxInFlight 1
	health      readerHealth // health.go: what Subscriber.Health sees of this reader
	metrics     Metrics      // counts for this shard
	holding     bool         // health.holding as last stored
	progressed  bool         // a message went out or was settled since the last turn (health.progress)
}

// New makes the reader of shardID, reading from start, under held (nil without a group)
// taken at takenAt. Its goroutine is Run, which the caller starts once the reader is in its
// table.
func New(cfg *Config, links *Links, metrics Metrics, shardID string, start Start, held *lease.Lease, takenAt time.Time) *Reader {
	ctx, cancel := context.WithCancel(links.Closing)
	r := &Reader{
		cfg: cfg, links: links, metrics: metrics,
		shardID: shardID, ctx: ctx, cancel: cancel,
		lost: make(chan struct{}), handoff: make(chan struct{}, 1), ready: make(chan error, 1),
		finished: make(chan struct{}),
		start:    start, held: held,
	}
	if cfg.MaxInFlight > 1 {
		r.watch = newSettleWatch(cfg.MaxInFlight)
	}
	r.health.started = time.Now()
	if held != nil {
		r.leased, r.generation, r.renewed = true, held.Generation, takenAt
	}
	r.facts = &readerFacts{parent: context.WithoutCancel(ctx), stream: cfg.Stream, shardID: shardID, generation: r.generation}
	return r
}

// ShardID is the shard the reader reads.
func (r *Reader) ShardID() string { return r.shardID }

// Generation is the lease generation the reader started under; 0 without a lease.
func (r *Reader) Generation() int64 { return r.generation }

// Ready gets one value: nil once the reader holds its first iterator, or why it could not.
func (r *Reader) Ready() <-chan error { return r.ready }

// Finished is closed once nothing of the reader runs any more but its exit report.
func (r *Reader) Finished() <-chan struct{} { return r.finished }

// Stop ends the reader: it stops delivering, checkpoints what was acked and, if the lease is
// still its own, releases it. It never blocks.
func (r *Reader) Stop() { r.cancel() }

// now is time.Now: one name for the reader's reading of the time (fake in a testing/synctest
// bubble).
func (r *Reader) now() time.Time { return time.Now() }

// RequestHandoff tells the reader, from the coordinator, that another worker asked for its
// lease. It never blocks.
func (r *Reader) RequestHandoff() {
	select {
	case r.handoff <- struct{}{}:
	default:
	}
}

// MarkLost tells the reader, from the coordinator, that the lease moved to another owner
// (owner, "" if it is free now or gone).
func (r *Reader) MarkLost(owner string) {
	r.lostOnce.Do(func() {
		r.lostTo = owner // read by the reader only after lost is closed
		close(r.lost)
	})
}

// LogFields are the reader's log fields: the subscription's, the shard and, with a lease, its
// generation.
func (r *Reader) LogFields() watermill.LogFields {
	f := r.cfg.LogFields()
	f["shard"] = r.shardID
	if r.leased {
		f["generation"] = r.generation
	}
	return f
}

// Run is the reader goroutine. It reports its exit to the coordinator at most once, and never
// blocks on it once the subscription has stopped listening.
//
// Shutdown order: stop delivering; cancel the contexts of messages in flight (they will be
// redelivered to the shard's next reader); if the lease is still ours, write the last
// checkpoint and release the lease so another instance takes it at once; close finished;
// report the exit.
func (r *Reader) Run() {
	exit := Exit{Reader: r}
	defer func() {
		r.settleAll(r.now()) // acks that came before the stop are progress too
		if r.watch != nil {
			r.watch.close() // no message is sent any more
		}
		r.cancelWindow()
		r.endPush()
		exit.LastAcked = r.acked
		if r.held != nil && !errors.Is(exit.Err, lease.ErrLeaseLost) {
			r.giveUp(r.releaseReason(exit))
		}
		if r.leased { // released, handed over or lost by now: no longer this worker's
			r.metrics.Count(CountLeasesHeld, -1)
		}
		if r.wake != nil {
			r.wake.Stop()
		}
		r.cancel()
		close(r.finished)
		select {
		case r.links.Exits <- exit:
		case <-r.links.Quit:
		}
	}()
	if err := r.initIterator(); err != nil {
		r.ready <- err
		exit.Err = err
		return
	}
	r.ready <- nil
	if r.leased {
		r.startLease(r.now())
		// On this goroutine, before the shard's first message: the application learns of the
		// shard before it sees its records, and a slow hook holds up this shard only.
		r.hook(r.cfg.Hooks.OnAcquired)
	}
	exit.ShardEnded, exit.Err = r.loop()
	exit.HandedTo = r.handedTo
	if exit.ShardEnded {
		exit.Children = r.children
	}
	switch {
	case errors.Is(exit.Err, lease.ErrLeaseLost):
		r.logLost(exit.Err)
		r.cancelWindow() // the hook runs once nothing of this shard is live any more
		if !r.paused {   // a pause has told the application already
			r.hook(r.cfg.Hooks.OnLost)
		}
	case exit.Err != nil && r.ctx.Err() == nil:
		// Not a stop: a stop (Close, the Subscribe context's end, cancelled or past its
		// deadline, the coordinator giving the shard up) ends r.ctx first.
		r.cfg.Logger.Error("Shard reader stopped", exit.Err, r.LogFields())
	}
}

// releaseReason says why the reader gives its lease back, for the log line.
func (r *Reader) releaseReason(exit Exit) string {
	switch {
	case r.saved == lease.ShardEnd || exit.ShardEnded:
		return ReleaseShardFinished
	case r.links.Closing.Err() != nil:
		return releaseClosing
	case exit.Err != nil:
		return releaseStopped + ": " + exit.Err.Error()
	}
	return releaseStopped
}

// logLost writes the one line of a lost lease. Losing a lease is fencing at work: another
// worker took it because this one did not renew it in time, and this reader stops before it
// delivers anything more. A pause already said so at WARN, so the loss is INFO then; a loss
// with no pause before it (found at a lease sync or by a refused write) is the WARN.
func (r *Reader) logLost(err error) {
	fields := r.LogFields().Add(watermill.LogFields{"reason": err.Error()})
	lostTo := ""
	select {
	case <-r.lost:
		if lostTo = r.lostTo; lostTo != "" {
			fields["to"] = lostTo
		}
	default:
	}
	r.metrics.Count(CountLost, 1)
	const msg = "Lease lost; stopped reading the shard"
	if r.paused {
		r.cfg.Logger.Info(msg, fields)
		return
	}
	why := "another worker owns the lease: this worker did not renew it in time (a process pause?), or took too long to hand it over; " +
		"or a reset of the group's position (admin.ResetGroup, kinesis-leases reset) moved it, and this worker resumes at the new position"
	if lostTo == r.cfg.WorkerID {
		// Given back to this worker in a new generation: only a reset does that.
		why = "a reset of the group's position (admin.ResetGroup, kinesis-leases reset) moved the lease; this worker resumes at the new position"
	}
	logs.Warn(r.cfg.Logger, msg, nil, fields.Add(watermill.LogFields{"why": why}))
}

// hook runs one of the application's ShardHooks for this shard, if it is set.
func (r *Reader) hook(f func(shardID string)) {
	if f != nil {
		f(r.shardID)
	}
}
