package sim_test

// Resets among the events: admin.ResetGroup moves the running group to a time within what was
// published, to LATEST, to TRIM_HORIZON, or one shard to (or past) a record the group
// delivered, with or without Settle, concurrently with everything else the schedule does
// (crashes, pauses, cut-offs, store and Kinesis faults, reshards, starts and closes, another
// reset). The reset's calls to the lease table meet the table's faults as the instances' do, and
// every lease write it makes is recorded, so the checks know exactly which shards a reset moved,
// including a reset that failed: a shard is at its new position once the reset's checkpoint
// (or create) was applied, and at the old one otherwise.
//
// What a move of shard S to position P by reset R, applied while R held S's lease at key K
// (incarnation, generation: leaseKey), must show (invariant 7):
//
//	7a  a reader that took S's lease after the move (key > K) delivers nothing before P;
//	    a reader that held it before (key < K) delivers nothing before P later than one
//	    LeaseRenewInterval (the longest an instance is configured with) after R returned, or,
//	    when that instance could not reach the lease store then, than its stop point
//	    (0.8 × LeaseDuration on the slowest clock) after R returned;
//	7b  every record of S at or after P of the last move of S is delivered again by a reader
//	    that took the lease after it (nothing lost; drain waits for it);
//	7d  the first record delivered by readers after the move (before S's next move) is the
//	    first record of S at P;
//	7e  the reset wrote nothing but its position, a reset that returned nil moved every shard
//	    its report says it moved, and a position a KCL table cannot hold is refused.
//
// One reader per shard (invariant 3) is checked as ever, by lease key. What a reset changes in
// the other invariants: a record before the position of a move of its shard is owed no
// delivery (1); a reader after a move begins a new tenure at the position (2, through
// world.iterator); checkpoints start over at each move and must not go before its position (4);
// a redelivery after a move of a record at or after its position is the reset's doing, not a
// duplicate, and a reset that fenced an owner is a disruption (6); a lease the reset created
// again starts a new incarnation whose generations start over (3, 4).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// resetKind is where a reset moves the group.
type resetKind int

const (
	rkTime        resetKind = iota // AT_TIMESTAMP, a time between the run's start and the reset
	rkLatest                       // LATEST
	rkTrimHorizon                  // TRIM_HORIZON
	rkAtSeq                        // one shard, at a record the group delivered
	rkAfterSeq                     // one shard, past a record the group delivered
)

// resetPlan is one reset event, drawn with the schedule; what it names in the stream (a shard,
// a record) is chosen against the world as it is when it runs.
type resetPlan struct {
	kind     resetKind
	frac     float64 // rkTime: where the time falls between the run's start and the reset
	oneShard bool    // rkTime, rkLatest, rkTrimHorizon: one shard only
	settle   bool
	wait     bool   // ResetConfig.Wait: wait for the owners to apply it
	pick     uint64 // which shard, or which delivered record
	// refused: a position a KCL table cannot hold, on a KCL table; ResetGroup must refuse it.
	refused bool
	// failCall, when not 0, is the reset's lease-table call that fails (counting from 1): a
	// blip of the operator's own link, before the call reaches the table or, failAfter, after
	// it was applied (the answer is lost), so that resets fail part way through.
	failCall  int
	failAfter bool
}

func (p resetPlan) String() string {
	s := [...]string{"to a time", "to LATEST", "to TRIM_HORIZON", "one shard at a delivered record", "one shard after a delivered record"}[p.kind]
	if p.kind == rkTime {
		s = fmt.Sprintf("to a time (%.0f%% of the way from the start)", p.frac*100)
	}
	if p.oneShard && p.kind <= rkTrimHorizon {
		s += ", one shard"
	}
	if p.settle {
		s += ", settle"
	}
	if p.wait {
		s += ", wait"
	}
	if p.refused {
		s += ", on a KCL table (must be refused)"
	}
	if p.failCall > 0 {
		s += fmt.Sprintf(", its lease-table call %d fails", p.failCall)
		if p.failAfter {
			s += " once applied"
		}
	}
	return s
}

const (
	firstResetAt = 2 * time.Second
	// resetTimeout bounds one ResetGroup call; one that takes this long broke invariant 7.
	resetTimeout = 2 * time.Minute
	// resetSlot names a reset in the ownership records.
	resetSlot = "reset"
)

// resetEvents draws a seed's resets from a generator of their own, so that the other events of
// every seed stay what they were: none in three seeds in ten, else one to three (two to four
// with SIM_MIX=reset), at random times, one in four on the heels of the one before (two
// resets in flight at once).
func resetEvents(seed uint64, m mix) []event {
	r := rand.New(rand.NewPCG(seed, 0x7e5e7))
	n := [...]int{0, 0, 0, 1, 1, 1, 1, 2, 2, 3}[r.IntN(10)]
	if m.name == "reset" {
		n = 2 + r.IntN(3)
	}
	kcl := kclFor(seed)
	var evs []event
	at := time.Duration(0)
	for i := 0; i < n; i++ {
		if i > 0 && r.IntN(4) == 0 {
			at += time.Duration(r.Int64N(int64(600 * time.Millisecond)))
		} else {
			at = firstResetAt + time.Duration(r.Int64N(int64(runLength-firstResetAt-time.Second)))
		}
		p := resetPlan{kind: resetKind([...]int{0, 0, 0, 1, 1, 2, 2, 3, 3, 4}[r.IntN(10)]),
			frac: r.Float64(), oneShard: r.IntN(5) == 0, settle: r.IntN(2) == 0, wait: r.IntN(4) == 0, pick: r.Uint64()}
		if kcl && p.kind != rkTrimHorizon && p.kind != rkAfterSeq {
			// A KCL table holds TRIM_HORIZON and sequence numbers only: one in eight tries
			// another position, which must be refused; the rest move to what it holds.
			switch {
			case r.IntN(8) == 0:
				p.refused = true
			case p.kind == rkAtSeq:
				p.kind = rkAfterSeq
			default:
				p.kind = rkTrimHorizon
			}
		}
		if at < runLength {
			evs = append(evs, event{at: at, kind: evReset, reset: p})
		}
	}
	// A generator of its own again, so that what the draws above make stays as it was.
	f := rand.New(rand.NewPCG(seed, 0x7e5e8))
	for i := range evs {
		if f.IntN(4) == 0 {
			evs[i].reset.failCall, evs[i].reset.failAfter = 1+f.IntN(12), f.IntN(2) == 0
		}
	}
	return evs
}

// resetWorld is what resets add to the world. Guarded by the world's mu.
type resetWorld struct {
	runs    []*resetRec
	moves   map[string][]*resetMove // by shard, in the order the store applied them
	running int
	idx     *streamIndex // the stream as the harness read it (streamIdx)
	idxN    int          // len(w.published) when idx was read
}

// resetRec is one ResetGroup call.
type resetRec struct {
	id                int
	plan              resetPlan
	calls             int // lease-table calls it made (guarded by the world's mu)
	cfg               admin.ResetConfig
	started, returned time.Time // returned is zero while it runs
	report            admin.ResetReport
	err               error
	moves             []*resetMove
}

func (r *resetRec) String() string {
	s := fmt.Sprintf("reset #%d (%s", r.id, r.cfg.To.Type)
	switch r.cfg.To.Type {
	case admin.ResetToTimestamp:
		s += " " + rel(r.cfg.To.Timestamp.Truncate(time.Millisecond))
	case admin.ResetToSequenceNumber, admin.ResetAfterSequenceNumber:
		s += " …" + tail(r.cfg.To.SequenceNumber)
	}
	if r.cfg.ShardID != "" {
		s += " of " + r.cfg.ShardID
	}
	if r.cfg.Settle {
		s += ", settle"
	}
	if r.returned.IsZero() {
		return s + fmt.Sprintf(", began %s)", rel(r.started))
	}
	return s + fmt.Sprintf(", began %s, returned %s)", rel(r.started), rel(r.returned))
}

// resetMove is one shard moved: the reset's checkpoint (or create at the position) as the
// store applied it.
type resetMove struct {
	r       *resetRec
	shard   string
	ord     int
	at      time.Time
	key     leaseKey // the lease as the reset held it when it wrote
	counter int64
	value   string
	pos     resetPos
	posErr  error
}

// resetPos is a position a reset wrote: a lease.Start, or a plain sequence number (after it).
type resetPos struct {
	start lease.Start
	after string
}

func parseResetPos(v string) (resetPos, error) {
	s, ok, err := lease.ParseStart(v)
	switch {
	case err != nil:
		return resetPos{}, err
	case ok:
		return resetPos{start: s}, nil
	case v == "" || strings.Trim(v, "0123456789") != "":
		return resetPos{}, fmt.Errorf("%q is no position", v)
	}
	return resetPos{after: v}, nil
}

// covers: the record is at or after the position (records of the position's shard only).
func (p resetPos) covers(ri recInfo) bool {
	if p.after != "" {
		c, err := memlog.CompareSequenceNumbers(ri.seq, p.after)
		return err == nil && c > 0
	}
	switch p.start.Type {
	case lease.StartAtTimestamp:
		return !ri.arrival.Before(p.start.Timestamp)
	case lease.StartAtSequenceNumber:
		c, err := memlog.CompareSequenceNumbers(ri.seq, p.start.SequenceNumber)
		return err == nil && c >= 0
	}
	return true // TRIM_HORIZON
}

func (p resetPos) String() string {
	switch {
	case p.after != "":
		return "after …" + tail(p.after)
	case p.start.Type == lease.StartAtTimestamp:
		return "AT_TIMESTAMP " + rel(p.start.Timestamp)
	case p.start.Type == lease.StartAtSequenceNumber:
		return "AT_SEQUENCE_NUMBER …" + tail(p.start.SequenceNumber)
	}
	return string(p.start.Type)
}

func tail(s string) string { return s[max(0, len(s)-6):] }

// startReset runs one reset on a goroutine of its own, as an operator's command beside the
// group, with the sim's timings (its SettleTimeout the group's HandoffTimeout, its
// KCLFailoverTime the KCL's LeaseDuration).
func (w *world) startReset(e event) {
	p := e.reset
	var shards []string
	if p.oneShard && p.kind <= rkTrimHorizon {
		shards = w.listedShards()
	}
	cfg := admin.ResetConfig{Stream: simStream, ConsumerGroup: simGroup, Client: w.log,
		Settle: p.settle, SettleTimeout: handoffTimeout, RequestTimeout: requestTimeout, KCLFailoverTime: leaseDuration}
	if p.wait {
		cfg.Wait = 2 * leaseDuration
	}
	now := time.Now()
	w.mu.Lock()
	rec := &resetRec{id: len(w.rs.runs) + 1, plan: p, started: now}
	switch p.kind {
	case rkTime:
		cfg.To = admin.ResetPosition{Type: admin.ResetToTimestamp, Timestamp: w.start.Add(time.Duration(p.frac * float64(now.Sub(w.start))))}
	case rkLatest:
		cfg.To = admin.ResetPosition{Type: admin.ResetToLatest}
	case rkAtSeq, rkAfterSeq:
		if len(w.deliveries) > 0 {
			d := w.deliveries[p.pick%uint64(len(w.deliveries))]
			cfg.ShardID, cfg.To = d.shard, admin.ResetPosition{Type: admin.ResetToSequenceNumber, SequenceNumber: d.seq}
			if p.kind == rkAfterSeq {
				cfg.To.Type = admin.ResetAfterSequenceNumber
			}
			break
		}
		fallthrough // nothing delivered yet
	default:
		cfg.To = admin.ResetPosition{Type: admin.ResetToTrimHorizon}
	}
	if len(shards) > 0 {
		cfg.ShardID = shards[p.pick%uint64(len(shards))]
	}
	if p.refused {
		cfg.To = admin.ResetPosition{Type: admin.ResetToTimestamp, Timestamp: w.start}
	}
	store := &resetStore{w: w, r: rec, s: w.store}
	cfg.LeaseStore = store
	if w.kcl != nil {
		cfg.LeaseStore = resetKCLStore{store}
	}
	rec.cfg = cfg
	w.rs.runs = append(w.rs.runs, rec)
	w.rs.running++
	w.mu.Unlock()
	w.notef("  (%s)", rec)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
		report, err := admin.ResetGroup(ctx, cfg)
		cancel()
		w.mu.Lock()
		rec.report, rec.err, rec.returned = report, err, time.Now()
		w.rs.running--
		// A reset fences the owners of what it holds, moved or not: what they acked since
		// their last checkpoint may come again (invariant 6).
		w.disrupt = append(w.disrupt, disruption{what: "reset", shard: cfg.ShardID, from: rec.started.Add(-riskBefore), to: rec.returned.Add(stopBound)})
		moved := len(rec.moves)
		w.mu.Unlock()
		msg := "ok"
		if err != nil {
			msg = err.Error()
		}
		w.notef("  reset #%d returned after %s, %d shards written, to %s: %s", rec.id, rec.returned.Sub(rec.started), moved, report.To, msg)
	}()
}

// listedShards are the stream's shards, open or closed, in id order.
func (w *world) listedShards() []string {
	var ids []string
	in := &awskinesis.ListShardsInput{StreamName: aws.String(simStream)}
	for {
		out, err := w.log.ListShards(harnessCtx(), in)
		if err != nil {
			panic(err) // the world's own stream: cannot fail
		}
		for _, s := range out.Shards {
			ids = append(ids, aws.ToString(s.ShardId))
		}
		if out.NextToken == nil {
			return ids
		}
		in = &awskinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// resetStore is the reset's view of the lease table: the world's store behind the table's
// faults (not behind any instance's gate: the operator's command runs elsewhere), recording
// the ownership changes and position writes it makes.
type resetStore struct {
	w *world
	r *resetRec
	s *lease.MemoryStore
}

var (
	_ lease.Store      = (*resetStore)(nil)
	_ lease.Membership = (*resetStore)(nil)
)

// resetKCLStore is the reset's view of a KCL application's table, as the instances see it.
type resetKCLStore struct{ *resetStore }

func (resetKCLStore) ForeignWorkers() string { return "KCL workers" }

func (s *resetStore) call(ctx context.Context, op func() (lease.Lease, error)) (lease.Lease, error) {
	s.w.mu.Lock()
	s.r.calls++
	blip := s.r.calls == s.r.plan.failCall
	s.w.mu.Unlock()
	if blip && !s.r.plan.failAfter {
		return lease.Lease{}, errResetLink
	}
	delay, err := s.w.storeFault()
	if err != nil {
		return lease.Lease{}, err
	}
	if err := sleepCtx(ctx, delay/2); err != nil {
		return lease.Lease{}, err
	}
	l, err := op()
	if err2 := sleepCtx(ctx, delay-delay/2); err2 != nil && err == nil {
		return lease.Lease{}, err2 // applied, but the answer is lost
	}
	if blip {
		return lease.Lease{}, errResetLinkAfter
	}
	return l, err
}

var (
	errResetLink      = errors.New("sim: the reset's link to the lease table failed (the call was not applied)")
	errResetLinkAfter = errors.New("sim: the reset's link to the lease table failed (the call was applied, its answer lost)")
)

// noted records what the store applied for the reset.
func (s *resetStore) noted(how string, l lease.Lease, moved bool) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.noteOwnerLocked(resetSlot, how, l)
	if !moved {
		return
	}
	m := &resetMove{r: s.r, shard: l.ShardID, ord: w.nextOrd(), at: time.Now(), key: k, counter: l.Counter, value: l.Checkpoint}
	m.pos, m.posErr = parseResetPos(l.Checkpoint)
	if w.rs.moves == nil {
		w.rs.moves = map[string][]*resetMove{}
	}
	w.rs.moves[l.ShardID] = append(w.rs.moves[l.ShardID], m)
	s.r.moves = append(s.r.moves, m)
	if traceNotes {
		w.notes = append(w.notes, fmt.Sprintf("%9s    reset #%d moved %s to %s (lease %s)", w.since().Round(time.Millisecond), s.r.id, l.ShardID, l.Checkpoint, k))
	}
}

func (s *resetStore) Create(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) {
		out, err := s.s.Create(ctx, l)
		if err == nil {
			s.noted("create", out, out.Checkpoint != "")
		}
		return out, err
	})
}

func (s *resetStore) List(ctx context.Context, group, stream string) ([]lease.Lease, error) {
	var out []lease.Lease
	_, err := s.call(ctx, func() (lease.Lease, error) {
		var err error
		out, err = s.s.List(ctx, group, stream)
		return lease.Lease{}, err
	})
	s.w.mu.Lock()
	kcl := s.w.kcl != nil
	s.w.mu.Unlock()
	if kcl {
		for i := range out {
			out[i].Foreign = strings.HasPrefix(out[i].Owner, "kcl-")
		}
	}
	return out, err
}

func (s *resetStore) Take(ctx context.Context, observed lease.Lease, owner string) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) {
		l, err := s.s.Take(ctx, observed, owner)
		if err == nil {
			how := "reset-give"
			if strings.HasPrefix(owner, "kinesis-reset/") {
				how = "reset-take"
			}
			s.noted(how, l, false)
		}
		return l, err
	})
}

func (s *resetStore) Renew(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) { return s.s.Renew(ctx, held) })
}

func (s *resetStore) Checkpoint(ctx context.Context, held lease.Lease, checkpoint string) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) {
		l, err := s.s.Checkpoint(ctx, held, checkpoint)
		if err == nil {
			s.noted("reset-write", l, true)
		}
		return l, err
	})
}

func (s *resetStore) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) {
		l, err := s.s.Release(ctx, held)
		if err == nil {
			s.noted("reset-release", l, false)
		}
		return l, err
	})
}

func (s *resetStore) RequestHandoff(ctx context.Context, observed lease.Lease, taker string) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) { return s.s.RequestHandoff(ctx, observed, taker) })
}

func (s *resetStore) Handoff(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) {
		l, err := s.s.Handoff(ctx, held)
		if err == nil {
			s.noted("reset-handoff", l, false)
		}
		return l, err
	})
}

func (s *resetStore) DeleteFinished(ctx context.Context, observed lease.Lease) error {
	_, err := s.call(ctx, func() (lease.Lease, error) { return lease.Lease{}, s.s.DeleteFinished(ctx, observed) })
	return err
}

func (s *resetStore) Heartbeat(ctx context.Context, m lease.Member) (lease.Member, error) {
	var out lease.Member
	_, err := s.call(ctx, func() (lease.Lease, error) {
		var err error
		out, err = s.s.Heartbeat(ctx, m)
		return lease.Lease{}, err
	})
	return out, err
}

func (s *resetStore) NotifyMember(ctx context.Context, m lease.Member) error {
	_, err := s.call(ctx, func() (lease.Lease, error) { return lease.Lease{}, s.s.NotifyMember(ctx, m) })
	return err
}

func (s *resetStore) Members(ctx context.Context, group, stream string) ([]lease.Member, error) {
	var out []lease.Member
	_, err := s.call(ctx, func() (lease.Lease, error) {
		var err error
		out, err = s.s.Members(ctx, group, stream)
		return lease.Lease{}, err
	})
	return out, err
}

func (s *resetStore) RemoveMember(ctx context.Context, observed lease.Member) error {
	_, err := s.call(ctx, func() (lease.Lease, error) { return lease.Lease{}, s.s.RemoveMember(ctx, observed) })
	return err
}

// recInfo is one record of the stream: which publish it is, where, and when it arrived.
type recInfo struct {
	rec     pubRec
	shard   string
	seq     string
	arrival time.Time
}

// streamIndex is every record of the stream, as the harness read it.
type streamIndex struct {
	byRec   map[pubRec]recInfo
	byShard map[string][]recInfo // in sequence order
	bySeq   map[string]recInfo   // shard + "/" + sequence number
}

// streamIdx is the stream's records, read again once more were published. The caller holds
// mu; the reads are the harness's own (no fault hook, no lock of the world's).
func (w *world) streamIdx() *streamIndex {
	if w.rs.idx != nil && w.rs.idxN == len(w.published) {
		return w.rs.idx
	}
	idx := &streamIndex{byRec: map[pubRec]recInfo{}, byShard: map[string][]recInfo{}, bySeq: map[string]recInfo{}}
	ctx := harnessCtx()
	for _, shard := range w.listedShards() {
		it, err := w.log.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{
			StreamName: aws.String(simStream), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			panic(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			out, err := w.log.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				panic(err)
			}
			for i := range out.Records {
				rec := &out.Records[i]
				msg, err := kinesis.EnvelopeMarshaler{}.Unmarshal(simStream, shard, rec)
				if err != nil {
					panic(err)
				}
				n, _ := strconv.Atoi(msg.Metadata.Get("n"))
				ri := recInfo{rec: pubRec{msg.Metadata.Get("key"), n}, shard: shard, seq: aws.ToString(rec.SequenceNumber), arrival: aws.ToTime(rec.ApproximateArrivalTimestamp)}
				if _, dup := idx.byRec[ri.rec]; !dup {
					idx.byRec[ri.rec] = ri
				}
				idx.byShard[shard] = append(idx.byShard[shard], ri)
				idx.bySeq[shard+"/"+ri.seq] = ri
			}
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	w.rs.idx, w.rs.idxN = idx, len(w.published)
	return idx
}

// recOf is what the stream says of a delivered record.
func (w *world) recOf(idx *streamIndex, d *delivery) recInfo {
	if ri, ok := idx.byRec[pubRec{d.key, d.n}]; ok && ri.shard == d.shard {
		return ri
	}
	return recInfo{rec: pubRec{d.key, d.n}, shard: d.shard, seq: d.seq, arrival: d.arrival}
}

// governing is the index of the last move of the shard applied before the lease holder k
// took it (its reader then starts at that move's position or after), -1 if none.
func (w *world) governing(shard string, k leaseKey) int {
	ms := w.rs.moves[shard]
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].key.less(k) {
			return i
		}
	}
	return -1
}

// resetEpoch is the move that governs a delivery (see governing), -1 if none. The caller
// holds mu.
func (w *world) resetEpoch(d *delivery) int {
	if len(w.rs.moves[d.shard]) == 0 {
		return -1
	}
	return w.governing(d.shard, leaseKey{d.inc, d.gen})
}

// skippedByReset: a move of the record's shard put its position after the record, so the
// group owes it no delivery (unless a later move put it back: invariant 7b asks that). The
// caller holds mu.
func (w *world) skippedByReset(rec pubRec) bool {
	if len(w.rs.moves) == 0 {
		return false
	}
	ri, ok := w.streamIdx().byRec[rec]
	if !ok {
		return false
	}
	for _, m := range w.rs.moves[ri.shard] {
		if m.posErr == nil && !m.pos.covers(ri) {
			return true
		}
	}
	return false
}

// resetsOwed: every reset has returned, no unfinished lease is held under a reset's id, and
// every record at or after the last move of its shard was delivered and acked after it (what
// the drain waits for). A reset that failed may leave leases under its id (one whose answer
// was lost, or one an owner handed over, with Settle, after the reset gave up); the group
// takes them once they expire, as a crashed worker's; invariant 5 finds one it never takes.
// The caller holds mu.
func (w *world) resetsOwed() bool {
	if w.rs.running > 0 {
		return false
	}
	if len(w.rs.runs) > 0 {
		leases, err := w.store.List(context.Background(), simGroup, simStream)
		if err != nil {
			panic(err) // the world's own store: cannot fail
		}
		for _, l := range leases {
			if strings.HasPrefix(l.Owner, "kinesis-reset/") && l.Checkpoint != lease.ShardEnd {
				return false
			}
		}
	}
	if len(w.rs.moves) == 0 {
		return true
	}
	idx := w.streamIdx()
	done := map[pubRec]bool{}
	for _, d := range w.deliveries {
		ms := w.rs.moves[d.shard]
		if d.acked && len(ms) > 0 && ms[len(ms)-1].key.less(leaseKey{d.inc, d.gen}) {
			done[pubRec{d.key, d.n}] = true
		}
	}
	published := w.publishedSet()
	for shard, ms := range w.rs.moves {
		last := ms[len(ms)-1]
		for _, ri := range idx.byShard[shard] {
			if last.posErr == nil && last.pos.covers(ri) && published[ri.rec] && !done[ri.rec] {
				return false
			}
		}
	}
	return true
}

func (w *world) publishedSet() map[pubRec]bool {
	set := make(map[pubRec]bool, len(w.published))
	for _, p := range w.published {
		set[p] = true
	}
	return set
}

// maxRenewInterval is the longest LeaseRenewInterval an instance was configured with: the
// driver's default, a third of its LeaseDuration, on its clock.
func (w *world) maxRenewInterval() time.Duration {
	longest := onClock(leaseDuration, 1-maxRateSkew) / 3
	for _, in := range w.insts {
		longest = max(longest, onClock(leaseDuration, in.rate)/3)
	}
	return longest
}

// stopBound is how long after a reset returns a fenced reader that cannot reach the lease
// store may go on delivering: until its stop point, 0.8 × LeaseDuration after its last
// renewal (sent before the reset took the lease), on the slowest clock.
var stopBound = func() time.Duration {
	stopAfter := float64(leaseDuration - leaseDuration/5)
	return time.Duration(stopAfter/(1-maxRateSkew)) + overlapTolerance
}()

// storeTrouble: the instance in slot could not reach the lease store, or reached it late
// (cut off, an outage, a slow store), at some time in [from, to].
func (w *world) storeTrouble(slot string, from, to time.Time) bool {
	for _, x := range w.disrupt {
		if x.what != "cut-off" && x.what != "store-outage" && x.what != "slow-store" || x.slots != nil && !x.slots[slot] {
			continue
		}
		if x.from.Before(to) && from.Before(x.to) {
			return true
		}
	}
	return false
}

// checkResets is invariant 7 (see the top of this file). The caller holds mu.
func (w *world) checkResets() []violation {
	if len(w.rs.runs) == 0 {
		return nil
	}
	var vs []violation
	add := func(format string, args ...any) {
		vs = append(vs, violation{invReset, fmt.Sprintf(format, args...)})
	}
	for _, r := range w.rs.runs {
		switch {
		case r.returned.IsZero():
			add("%s never returned", r)
			continue
		case r.returned.Sub(r.started) >= resetTimeout:
			add("%s took %s, its whole budget: %v", r, r.returned.Sub(r.started), r.err)
		}
		if r.plan.refused && (r.err == nil || len(r.moves) > 0) {
			add("%s on a KCL table wrote %d positions and returned %v; a KCL table cannot hold that position and the reset must be refused", r, len(r.moves), r.err)
		}
		for _, m := range r.moves {
			if m.posErr != nil || r.report.To != "" && m.value != r.report.To {
				add("%s wrote %q to %s, not its position %q (%v)", r, m.value, m.shard, r.report.To, m.posErr)
			}
		}
		if r.err != nil {
			continue
		}
		for _, s := range r.report.Shards {
			if s.Action != admin.ResetActionMove && s.Action != admin.ResetActionCreate {
				continue
			}
			wrote := false
			for _, m := range r.moves {
				wrote = wrote || m.shard == s.ShardID
			}
			if !wrote {
				add("%s returned nil and reports shard %s %s (%s), but never wrote its position", r, s.ShardID, s.Action, s.From)
			}
		}
	}
	if len(w.rs.moves) == 0 {
		return vs
	}
	idx := w.streamIdx()
	published := w.publishedSet()
	byShard := map[string][]*delivery{}
	for _, d := range w.deliveries {
		if len(w.rs.moves[d.shard]) > 0 {
			byShard[d.shard] = append(byShard[d.shard], d)
		}
	}
	renew := w.maxRenewInterval() + overlapTolerance
	for shard, ms := range w.rs.moves {
		ds := byShard[shard]
		// 7a: readers after a move start at its position; readers before it stop in time.
		late := 0
		for _, d := range ds {
			ri := w.recOf(idx, d)
			k := leaseKey{d.inc, d.gen}
			g := w.governing(shard, k)
			if g >= 0 && ms[g].posErr == nil && !ms[g].pos.covers(ri) {
				if late++; late <= 3 {
					add("%s#%d/sub%d delivered %s/%d of %s (seq …%s, arrived %s) at %s under lease %s, taken after %s moved the shard to %s (lease %s): it is before that position",
						d.slot, d.by.inst, d.by.sub, d.key, d.n, shard, tail(ri.seq), rel(ri.arrival), rel(d.at), k, ms[g].r, ms[g].pos, ms[g].key)
				}
			}
			for _, m := range ms[g+1:] {
				bound := m.r.returned.Add(renew)
				if w.storeTrouble(d.slot, m.r.started.Add(-leaseDuration), d.at) {
					bound = m.r.returned.Add(stopBound)
				}
				if m.posErr == nil && d.at.After(bound) && !m.pos.covers(ri) {
					if late++; late <= 3 {
						add("%s#%d/sub%d delivered %s/%d of %s (seq …%s, arrived %s) at %s under lease %s, %s after %s returned, which had moved the shard to %s (lease %s): later than the bound (%s)",
							d.slot, d.by.inst, d.by.sub, d.key, d.n, shard, tail(ri.seq), rel(ri.arrival), rel(d.at), k, d.at.Sub(m.r.returned), m.r, m.pos, m.key, bound.Sub(m.r.returned))
					}
				}
			}
		}
		// 7d: the first record after each move is the first at its position.
		for i, m := range ms {
			if m.posErr != nil {
				continue
			}
			var first *delivery
			for _, d := range ds {
				k := leaseKey{d.inc, d.gen}
				if m.key.less(k) && (i+1 == len(ms) || k.less(ms[i+1].key)) {
					first = d
					break
				}
			}
			if first == nil {
				continue
			}
			var want *recInfo
			for j, ri := range idx.byShard[shard] {
				if m.pos.covers(ri) {
					want = &idx.byShard[shard][j]
					break
				}
			}
			if got := w.recOf(idx, first); want == nil || got.rec != want.rec {
				wantS := "none (no record of the shard is at the position)"
				if want != nil {
					wantS = fmt.Sprintf("%s/%d (seq …%s, arrived %s)", want.rec.key, want.rec.n, tail(want.seq), rel(want.arrival))
				}
				add("the first record %s delivered after %s moved %s to %s (lease %s) is %s/%d (seq …%s, arrived %s) by %s#%d/sub%d at %s under lease %d.%d; the first at the position is %s",
					shard, m.r, shard, m.pos, m.key, got.rec.key, got.rec.n, tail(got.seq), rel(got.arrival), first.slot, first.by.inst, first.by.sub, rel(first.at), first.inc, first.gen, wantS)
			}
		}
		// 7b: nothing at or after the last move's position is lost.
		last := ms[len(ms)-1]
		if last.posErr != nil {
			continue
		}
		again := map[pubRec]bool{}
		for _, d := range ds {
			if last.key.less(leaseKey{d.inc, d.gen}) {
				again[pubRec{d.key, d.n}] = true
			}
		}
		var lost []string
		for _, ri := range idx.byShard[shard] {
			if last.pos.covers(ri) && published[ri.rec] && !again[ri.rec] {
				lost = append(lost, fmt.Sprintf("%s/%d (seq …%s)", ri.rec.key, ri.rec.n, tail(ri.seq)))
			}
		}
		if len(lost) > 0 {
			add("%d records of %s at or after %s, where %s moved it (lease %s), were not delivered by a reader that took the lease after it, e.g. %v",
				len(lost), shard, last.pos, last.r, last.key, lost[:min(len(lost), 5)])
		}
	}
	return vs
}
