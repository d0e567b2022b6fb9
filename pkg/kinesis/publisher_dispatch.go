package kinesis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// dispatcher sends the records of every Publish call to one stream that wait at the same moment
// in shared PutRecords requests: at most MaxInFlightRequests out at once, and what queues while
// they are out goes in the next one. Watermill code publishes one message per call from many
// goroutines; one request per call made each message a Kinesis record and a round trip of its
// own (6,400 calls for 6,400 messages from 64 goroutines).
//
// It makes one attempt per record. Retries stay with the Publish call (writeRound), which
// submits what was rejected again after its backoff: one retry layer, and per-key order is the
// call's business (rounds).
//
// When a sender starts, in short: a call that submits starts one only if no sender is
// between requests (forming) and fewer than MaxInFlightRequests run; otherwise its records wait
// in the queue for the next take. A sender takes everything queued that fits, except records of
// a call with records out in another request (out > 0), which wait for that answer. After an
// answer, it waits until the callers it answered have resumed (resumed), then takes again, or
// ends when nothing is queued.
//
// Ownership: mu guards queue, senders, and the state, written, err and retryable fields of every
// record from submit until it is settled. A sender goroutine (send) is started by submit when
// fewer than MaxInFlightRequests run, and goes on while records wait; it counts itself out, under
// mu, when the queue is empty (or ends at Close's stop, when no call is left). Each call's done
// channel is closed by whoever settles its last record: a sender with the answer, or the call
// itself when its context ends first (abandon); a call answered by a sender then sends once on
// that answer's resumed channel, which the sender made with room for every call.
type dispatcher struct {
	p      *Publisher
	stream string
	pack   *packer // with AggregateKPL: packs single records of different calls; else nil

	mu      sync.Mutex
	queue   []*pendingRecord
	senders int
	// forming counts the senders between requests (started, or settled their last, and not
	// yet taken the next): records that arrive then join the request they take rather than
	// start a sender each, so that callers answered together go out together again.
	forming int
	// kick wakes a sender that lingers (Linger) once a full request waits. Buffered (1).
	kick chan struct{}
}

// recordState is where a record stands in its dispatcher.
type recordState int

const (
	recordQueued  recordState = iota + 1 // waiting for a request
	recordOut                            // in a request that has no answer yet
	recordSettled                        // written, or failed with err (retryable says if a retry may pass)
)

// callWait is one submit of a Publish call: its context and the records it waits for.
type callWait struct {
	ctx  context.Context
	open int           // records not settled yet; guarded by the dispatcher's mu
	out  int           // records in a request without an answer yet; guarded likewise
	done chan struct{} // closed when open reaches 0
	// resumed is the channel of the sender whose answer closed done (nil if the call closed it
	// itself); set under mu. The call sends on it once, when it has resumed.
	resumed chan<- struct{}
}

func newDispatcher(p *Publisher, stream string) *dispatcher {
	d := &dispatcher{p: p, stream: stream, kick: make(chan struct{}, 1)}
	if p.config.AggregateKPL {
		d.pack = newPacker(p, stream)
	}
	return d
}

// submit queues records (one round of a call) and waits until each is settled or ctx ends.
// Then, records still queued are settled as not sent, and records out in a request as "may
// have been written": the call returns at once, and the request goes on without it.
func (d *dispatcher) submit(ctx context.Context, records []*pendingRecord) {
	w := &callWait{ctx: ctx, open: len(records), done: make(chan struct{})}
	now := time.Now()
	d.mu.Lock()
	for _, r := range records {
		r.state, r.call, r.queuedAt, r.written, r.err, r.retryable = recordQueued, w, now, false, nil, false
	}
	d.queue = append(d.queue, records...)
	start := d.forming == 0 && d.senders < d.p.config.MaxInFlightRequests
	if start {
		d.senders++
		d.forming++
		d.p.senders.Add(1) // no Close waits yet: it waits for the calls (p.calls) first
	} else if len(d.queue) >= maxPutRecordsEntries {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
	d.mu.Unlock()
	if start {
		go d.send()
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		d.abandon(records, ctx.Err())
	}
	d.mu.Lock()
	resumed := w.resumed
	d.mu.Unlock()
	if resumed != nil {
		resumed <- struct{}{} // never blocks: it has room for every call of the request
	}
}

// abandon settles the records of a call whose context ended before they were.
func (d *dispatcher) abandon(records []*pendingRecord, cause error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range records {
		switch r.state {
		case recordQueued:
			d.settle(r, false, fmt.Errorf("not sent: %w", cause), false)
		case recordOut:
			d.settle(r, false, fmt.Errorf("%w while its PutRecords request was out: it may have been written", cause), false)
		}
	}
}

// settle records a record's outcome, once; mu is held. It reports whether that answered the
// record's call (its last open record: done is closed).
func (d *dispatcher) settle(r *pendingRecord, written bool, err error, retryable bool) bool {
	if r.state == recordSettled {
		return false // its call gave up on it (abandon): the answer came too late
	}
	if r.state == recordOut {
		r.call.out--
	}
	r.state, r.written, r.err, r.retryable = recordSettled, written, err, retryable
	if r.call.open--; r.call.open == 0 {
		close(r.call.done)
		return true
	}
	return false
}

// send is a sender goroutine: it sends requests while records wait.
func (d *dispatcher) send() {
	defer d.p.senders.Done()
	for {
		if d.pack != nil {
			d.pack.refresh()
		}
		req := d.next()
		if req == nil {
			return
		}
		// Take the next request once the callers this answer released have resumed, so that
		// those that publish again at once (a handler's loop, a burst of requests) go in it.
		// Taken at once, it held the first of them, and each of the others started a sender of
		// its own, until MaxInFlightRequests were out and the rest waited for an answer: 64
		// goroutines publishing one message per call got 0.82x the throughput of a request
		// per call. This waits only for the answered callers to be scheduled (on a short CPU,
		// for what each of them runs before it yields). stop is only a guard: Close cancels it
		// once every call has returned, so the counts this return leaves are never read again.
		resumed, answered := d.put(req)
		for range answered {
			select {
			case <-resumed:
			case <-d.p.stop.Done():
				return
			}
		}
	}
}

// next takes the next request from the queue, after the linger if one is set; nil, with the
// sender counted out, when nothing waits. The sender is forming a request meanwhile.
func (d *dispatcher) next() *putRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	for linger := d.p.config.Linger; linger > 0; {
		oldest := d.oldestQueued()
		wait := time.Until(oldest.Add(linger))
		if oldest.IsZero() || wait <= 0 || len(d.queue) >= maxPutRecordsEntries {
			break
		}
		d.mu.Unlock()
		t := time.NewTimer(wait)
		select { // bounded by Linger; a full request ends it early
		case <-t.C:
		case <-d.kick:
			t.Stop()
		}
		d.mu.Lock()
	}
	req := d.take()
	d.forming--
	if req == nil {
		d.senders--
	}
	return req
}

// oldestQueued is when the longest-waiting queued record was queued; zero if none; mu is held.
func (d *dispatcher) oldestQueued() time.Time {
	for _, r := range d.queue {
		if r.state == recordQueued {
			return r.queuedAt
		}
	}
	return time.Time{}
}

// putRequest is one PutRecords request: its entries, and the records each carries (more than
// one when the packer put records of several calls in one KPL aggregate).
type putRequest struct {
	entries []types.PutRecordsRequestEntry
	records [][]*pendingRecord
	shards  []string // the shard the packer's map predicts for each entry ("" without a map)
	calls   []*callWait
}

// take moves the queued records that fit into one request (maxPutRecordsEntries entries and
// maxPutRecordsSize bytes) out of the queue, in order, leaving those of a call with records
// out in another request; nil if none is taken; mu is held.
func (d *dispatcher) take() *putRequest {
	req := &putRequest{}
	seen := map[*callWait]bool{}
	size, rest := 0, d.queue[:0]
	var packing *packing
	if d.pack != nil {
		packing = d.pack.begin()
	}
	entries := func() int { return len(req.entries) + packing.count() }
queue:
	for i, r := range d.queue {
		if r.state != recordQueued {
			continue // settled by abandon
		}
		if r.call.out > 0 && !seen[r.call] {
			// Its call has records out in another request: a call's requests go one after
			// another, so that its messages are stored in the order given (Watermill's
			// universal suite reads a one-shard stream in publish order).
			rest = append(rest, r)
			continue
		}
		countFull := entries() == maxPutRecordsEntries
		fits := size+r.size+entryOverhead+packing.reserve() <= maxPutRecordsSize
		switch {
		case fits && packing.add(r, !countFull): // into an aggregate (a new one only if the count allows)
		case fits && !countFull:
			req.entries = append(req.entries, r.entry)
			req.records = append(req.records, []*pendingRecord{r})
			req.shards = append(req.shards, packing.predict(r))
		default:
			rest = append(rest, d.queue[i:]...) // moved to the front: copy handles the overlap
			break queue
		}
		r.state = recordOut
		r.call.out++
		size += r.size + entryOverhead
		if !seen[r.call] {
			seen[r.call] = true
			req.calls = append(req.calls, r.call)
		}
	}
	clear(d.queue[len(rest):]) // drop the references the queue no longer holds
	d.queue = rest
	packing.finish(req)
	if len(req.entries) == 0 {
		return nil
	}
	return req
}

// entryOverhead bounds what an entry adds beyond its data and key when packed into an
// aggregate (the record's framing in the KPL message), so that a request stays within
// maxPutRecordsSize however its records are packed.
const entryOverhead = 16

// put sends one request and settles its records with the answer. It returns the channel on
// which each call it answered will say it resumed, and how many it answered.
func (d *dispatcher) put(req *putRequest) (resumed <-chan struct{}, answered int) {
	ctx, cancel := req.context(d.p.config.RequestTimeout)
	out, err := d.p.config.Client.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: &d.stream, Records: req.entries})
	cancel()
	p := d.p
	p.metrics.batches.Add(context.Background(), 1, p.streamAttrs(d.stream))
	written := 0
	ch := make(chan struct{}, len(req.calls))
	answer := func(r *pendingRecord, ok bool, err error, retryable bool) {
		if d.settle(r, ok, err, retryable) {
			r.call.resumed = ch
			answered++
		}
	}
	d.mu.Lock()
	d.forming++ // from the first settle on, the callers answered may publish again
	defer func() {
		d.mu.Unlock()
		p.metrics.sent.Add(context.Background(), int64(written), p.streamAttrs(d.stream))
	}()
	if err != nil {
		class := awscall.Classify(context.Background(), err)
		retryable := class == awscall.Throttled || class == awscall.Transient
		if !retryable {
			err = p.callError(d.stream, err)
		}
		for _, rs := range req.records {
			for _, r := range rs {
				answer(r, false, err, retryable)
			}
		}
		return ch, answered
	}
	if d.pack != nil {
		d.pack.written(req.shards, out.Records)
	}
	for i, rs := range req.records {
		var res types.PutRecordsResultEntry
		if i < len(out.Records) {
			res = out.Records[i]
		}
		err, retryable := entryError(i < len(out.Records), res)
		for _, r := range rs {
			if err == nil {
				written += len(r.messages())
			}
			answer(r, err == nil, err, retryable)
		}
	}
	return ch, answered
}

// entryError is the error of one entry of a PutRecords answer (nil if it was written), and
// whether a retry may pass.
func entryError(answered bool, res types.PutRecordsResultEntry) (error, bool) {
	switch {
	case !answered:
		return fmt.Errorf("kinesis: PutRecords returned fewer results than records sent"), true
	case res.ErrorCode == nil:
		return nil, false
	}
	err := fmt.Errorf("kinesis: entry rejected with %s: %s", *res.ErrorCode, deref(res.ErrorMessage))
	return err, awscall.RetryableEntryCode(*res.ErrorCode)
}

// context is the request's context: the values of its first call's context, bounded by the
// request timeout, and cancelled once every call with records in it has given up on them (its
// context ended), since nobody waits for the answer then.
func (req *putRequest) context(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.calls[0].ctx), timeout)
	waiting := atomic.Int32{}
	waiting.Store(int32(len(req.calls)))
	stops := make([]func() bool, 0, len(req.calls))
	for _, c := range req.calls {
		stops = append(stops, context.AfterFunc(c.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
