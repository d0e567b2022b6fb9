package kinesis_test

// The fault suite (issue 6, part 3): what AWS does on a bad day, scripted with memlog's fault
// hook and the lease store's, each under a steady load (one record per shard every 100 ms of
// fake time, keyed so that each shard's records are one key's sequence) with every record
// accounted for. Each scenario logs one line in a fixed format (fltWorld.report):
//
//	FAULT <scenario>: produced=N delivered=N redelivered=N lost=N worst_delay=D (uuid) mean_delay=D | extras
//
// produced counts the records published in the whole run, delivered the distinct records
// delivered, redelivered the deliveries beyond the first, lost the records never delivered;
// worst_delay is the longest fake time from a record's arrival in Kinesis to its first delivery
// (the test's consumer acks at once), among the records that arrived while the fault lasted
// where a scenario has such a window, else over the whole run; mean_delay is the mean of the
// same. Fake time moves in steps of 100 ms (the resolution of every delay: 100 ms is an
// undisturbed delivery), and the driver settles after each step, so the figures do not depend on
// the machine; backoff jitter and the order of concurrent calls make them vary a little from
// run to run. FLT_LOGS=1 (or =ERROR, =INFO, ...) adds the driver's log lines after each.
//
// Each test runs in a testing/synctest bubble. Not parallel: goleak sees every goroutine.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// ---- a. throttling ----

// Half of all GetRecords calls, picked at random, are throttled for a minute of fake time.
// Nothing reaches the handler but records, each once and in order; the reader retries with the
// same iterator (no GetShardIterator while throttled: no rewind); nothing is logged at ERROR.
func TestFaultThrottledReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFltWorld(t, fltShards)
		wks := w.warm("w1", "w2")

		rng := rand.New(rand.NewPCG(6, 3))
		from := w.now()
		w.kin.set(func(c memlog.Call) error {
			if c.Op == "GetRecords" && rng.IntN(2) == 0 {
				return &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard " + c.ShardID + " in stream " + c.Stream + " under account 000000000000.")}
			}
			return nil
		})
		w.steps(time.Minute)
		w.kin.set(nil)
		to := w.now()
		w.steps(2 * time.Second)
		w.drain(10 * time.Second)
		w.consumersOpen(wks...)
		w.closeAll(wks...)

		s := w.stats(from, to)
		reads, throttled := w.kin.count("GetRecords", from, to)
		iters, _ := w.kin.count("GetShardIterator", from, to)
		w.report("a throttle 50% GetRecords 1m", s, fmt.Sprintf(
			"GetRecords=%d throttled=%d GetShardIterator_during=%d errors_logged=%d reads_per_shard_per_s=%.1f",
			reads, throttled, iters, len(w.logs.of("ERROR", from, to)), float64(reads)/fltShards/to.Sub(from).Seconds()))
		w.checkAll(w.stats(time.Time{}, time.Time{}), true)
		if throttled < reads/3 {
			t.Errorf("only %d of %d reads throttled: the test did not test throttling", throttled, reads)
		}
		if iters != 0 {
			t.Errorf("%d GetShardIterator calls while reads were throttled: a throttled read must retry with the same iterator", iters)
		}
		w.noErrors("throttling", from, to)
		w.noDecodeErrors()
		w.finish(ignore)
	})
}

// ---- b. expiring iterators ----

// Iterators expire mid-stream and are replaced right after the last record read, which is the
// last record delivered: no record is lost, none comes twice.
//
// "injected": for a minute, every fourth GetRecords of each shard fails with
// ExpiredIteratorException. "memlog": the handler holds one message for six minutes of fake
// time; the reader's next iterator, taken before the hold, outlives memlog's five minutes.
func TestFaultExpiredIterators(t *testing.T) {
	t.Run("injected", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			w := newFltWorld(t, fltShards)
			wks := w.warm("w1", "w2")
			reads := map[string]int{}
			from := w.now()
			w.kin.set(func(c memlog.Call) error {
				if c.Op != "GetRecords" {
					return nil
				}
				reads[c.ShardID]++
				if reads[c.ShardID]%4 == 0 {
					return &types.ExpiredIteratorException{Message: aws.String("Iterator expired.")}
				}
				return nil
			})
			w.steps(time.Minute)
			w.kin.set(nil)
			to := w.now()
			w.drain(10 * time.Second)
			w.closeAll(wks...)

			s := w.stats(from, to)
			calls, expired := w.kin.count("GetRecords", from, to)
			iters := w.replacements(from, to)
			w.report("b expired iterator injected on 1/4 of GetRecords 1m", s, fmt.Sprintf(
				"GetRecords=%d expired=%d GetShardIterator=%d", calls, expired, len(iters)))
			w.checkAll(w.stats(time.Time{}, time.Time{}), true)
			if expired == 0 || len(iters) != expired {
				t.Errorf("%d expired reads, %d new iterators; want one new iterator per expiry", expired, len(iters))
			}
			w.noErrors("expired iterators", from, to)
			w.finish(ignore)
		})
	})

	t.Run("memlog", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			w := newFltWorld(t, fltShards)
			wks := w.warm("w1")
			x := subShard(0)
			wks[0].setHold(func(shard string) bool { return shard == x })
			w.step()
			if len(wks[0].heldMsgs()) != 1 {
				t.Fatalf("w1 holds %d messages of %s, want 1", len(wks[0].heldMsgs()), x)
			}
			from := w.now()
			// Six minutes at a second a step: fewer settles, and well within LeaseRenewInterval.
			w.stepsBy(6*time.Minute, time.Second)
			wks[0].setHold(nil)
			released := w.now()
			wks[0].heldMsgs()[0].msg.Ack()
			w.settle()
			w.steps(2 * time.Second)
			to := w.now()
			w.drain(10 * time.Second)
			w.closeAll(wks...)

			expired := w.kin.outcomesOf(func(o fltOutcome) bool {
				var e *types.ExpiredIteratorException
				return o.op == "GetRecords" && errors.As(o.err, &e) && !o.at.Before(from)
			})
			iters := w.replacements(from, to)
			s := w.stats(time.Time{}, time.Time{})
			// The backlog of x, read after the release: how long its last record took.
			var backlog time.Duration
			for _, d := range w.deliveriesOf(func(d grpDelivery) bool { return d.shard == x && !d.at.Before(released) }) {
				backlog = max(backlog, d.at.Sub(released))
			}
			others := w.statsWhere(func(d grpDelivery) bool { return d.shard != x })
			w.report("b iterator expired in memlog (handler held a message 6m)", s, fmt.Sprintf(
				"expired_reads=%d GetShardIterator=%d other_shards_worst_delay=%s held_shard_backlog_cleared=%s after release",
				len(expired), len(iters), others.worst, backlog))
			w.checkAll(s, true)
			if len(expired) == 0 {
				t.Errorf("no read met an expired iterator: the test did not test expiry")
			}
			if len(iters) != len(expired) {
				t.Errorf("%d expired reads, %d new iterators; want one new iterator per expiry", len(expired), len(iters))
			}
			w.finish(ignore)
		})
	})
}

// replacements lists the GetShardIterator calls made in [from, to) and checks each: it must
// start AFTER_SEQUENCE_NUMBER of a record the same shard delivered (never LATEST, never
// TRIM_HORIZON, never an older checkpoint: inOrderOnce shows no record came twice).
func (w *fltWorld) replacements(from, to time.Time) []fltOutcome {
	w.t.Helper()
	delivered := map[string]bool{}
	for _, d := range w.deliveriesOf(func(grpDelivery) bool { return true }) {
		delivered[d.shard+" "+d.seq] = true
	}
	iters := w.kin.outcomesOf(func(o fltOutcome) bool {
		return o.op == "GetShardIterator" && !o.at.Before(from) && o.at.Before(to)
	})
	for _, o := range iters {
		if o.iterType != types.ShardIteratorTypeAfterSequenceNumber || !delivered[o.shard+" "+o.after] {
			w.t.Errorf("%s asked for a %s iterator of %s after %q at %s; want AFTER_SEQUENCE_NUMBER of the last record delivered",
				o.worker, o.iterType, o.shard, o.after, grpRel(o.at))
		}
	}
	return iters
}

// ---- c. 5xx errors ----

// 5xx errors on reads and on PutRecords.
//
// "reads": for a minute, 30% of GetRecords and every other GetShardIterator call fail with a
// 5xx (5% of reads meet an expired iterator, so that new iterators are needed), and a second
// instance joins halfway (its readers take their first iterators under the
// faults, after a handoff). Every record arrives once, in order.
//
// "read outage": every GetRecords fails for 30 s. The readers back off (bounded calls), say so
// in the log (at ERROR once it lasts), and go on where they were when Kinesis is back.
//
// "iterator outage while joining": every GetShardIterator fails for 30 s while a second
// instance joins and is handed a lease. The new reader waits for its iterator; the instance's
// lease syncs must go on meanwhile.
//
// "PutRecords": for 30 s, every Publish call carries three records per key and a third of
// the entries fail (InternalFailure or ProvisionedThroughputExceededException), and one
// PutRecords call in ten fails whole with a 5xx. The publisher retries what failed: Publish
// succeeds, and each key's records are read once each, in the order they were given.
func TestFaultServerErrors(t *testing.T) {
	t.Run("reads", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			w := newFltWorld(t, fltShards)
			wks := w.warm("w1")
			rng := rand.New(rand.NewPCG(6, 3))
			n, iters := 0, 0
			from := w.now()
			w.kin.set(func(c memlog.Call) error {
				switch c.Op {
				case "GetRecords":
					switch r := rng.IntN(20); {
					case r < 6:
						n++
						return fltServerError(n)
					case r == 6: // now and then an expired iterator, so that new ones are needed
						return &types.ExpiredIteratorException{Message: aws.String("Iterator expired.")}
					}
				case "GetShardIterator":
					if iters++; iters%2 == 1 {
						n++
						return fltServerError(n)
					}
				}
				return nil
			})
			w.steps(30 * time.Second)
			wks = append(wks, w.start("w2", nil))
			w.steps(30 * time.Second)
			w.kin.set(nil)
			to := w.now()
			w.runUntil("spread over w1 and w2", 6*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
			w.drain(10 * time.Second)
			w.closeAll(wks...)

			s := w.stats(from, to)
			reads, failed := w.kin.count("GetRecords", from, to)
			iters, itersFailed := w.kin.count("GetShardIterator", from, to)
			w.report("c 5xx on 30% GetRecords + every other GetShardIterator 1m (5% expired iterators), w2 joins", s, fmt.Sprintf(
				"GetRecords=%d failed=%d GetShardIterator=%d failed=%d read_failed_info=%d errors_logged=%d",
				reads, failed, iters, itersFailed, w.logs.countMsg("INFO", "Read failed", from, to), len(w.logs.of("ERROR", from, to))))
			w.checkAll(w.stats(time.Time{}, time.Time{}), true)
			if failed == 0 || itersFailed == 0 {
				t.Errorf("no 5xx injected (%d reads, %d iterators): the test did not test them", failed, itersFailed)
			}
			w.noDecodeErrors()
			w.finish(ignore)
		})
	})

	t.Run("read outage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			w := newFltWorld(t, fltShards)
			wks := w.warm("w1")
			from := w.now()
			w.kin.failAll("GetRecords")
			w.steps(30 * time.Second)
			w.kin.set(nil)
			to := w.now()
			var back time.Duration
			w.runUntil("reading again", 15*time.Second, func() bool {
				ds := w.deliveriesOf(func(d grpDelivery) bool { return !d.at.Before(to) })
				if len(ds) > 0 {
					back = ds[0].at.Sub(to)
				}
				return len(ds) > 0
			})
			w.drain(15 * time.Second)
			w.closeAll(wks...)

			s := w.stats(time.Time{}, time.Time{})
			reads, _ := w.kin.count("GetRecords", from, to)
			infos := w.logs.countMsg("INFO", "Read failed", from, to)
			errs := w.logs.of("ERROR", from, to)
			w.report("c 5xx on every GetRecords 30s", s, fmt.Sprintf(
				"GetRecords_during=%d (%.2f/s/shard) read_failed_info=%d read_failed_error=%d first_delivery_after_outage=%s",
				reads, float64(reads)/fltShards/to.Sub(from).Seconds(), infos, len(errs), back))
			w.checkAll(s, true)
			if limit := fltShards * 15; reads > limit {
				t.Errorf("%d reads in a 30 s outage on %d shards; backoff should keep it under %d", reads, fltShards, limit)
			}
			if len(errs) == 0 {
				t.Errorf("reads failed for 30 s and nothing was logged at ERROR (%d INFO lines)", infos)
			}
			for _, e := range errs {
				if !strings.Contains(e.msg+fmt.Sprint(e.fields), subStream) && !strings.Contains(fmt.Sprint(e.err), subStream) {
					t.Errorf("error line does not name the stream: %s %v", e, e.fields)
				}
			}
			w.noDecodeErrors()
			w.finish(ignore)
		})
	})

	t.Run("iterator outage while joining", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			w := newFltWorld(t, fltShards)
			wks := w.warm("w1")
			from := w.now()
			w.kin.set(func(c memlog.Call) error {
				if c.Op == "GetShardIterator" {
					return fltServerError(0)
				}
				return nil
			})
			w2 := w.start("w2", nil)
			wks = append(wks, w2)
			w.steps(30 * time.Second)
			w.kin.set(nil)
			to := w.now()
			d := w.runUntil("spread over w1 and w2", 6*grpSyncInterval+2*grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
			w.drain(10 * time.Second)
			w.closeAll(wks...)

			s := w.stats(time.Time{}, time.Time{})
			// w2's lease syncs during the outage: each reads the members, one every
			// LeaseSyncInterval if nothing holds the coordinator up.
			var lists int
			var gap, last time.Duration
			prev := from
			for _, o := range w2.store.opsOf(lease.OpMembers, "") {
				if o.at.Before(from) || !o.at.Before(to) {
					continue
				}
				lists++
				gap = max(gap, o.at.Sub(prev))
				prev = o.at
			}
			last = to.Sub(prev)
			gap = max(gap, last)
			iters, _ := w.kin.count("GetShardIterator", from, to)
			w.report("c 5xx on every GetShardIterator 30s while w2 joins", s, fmt.Sprintf(
				"GetShardIterator_during=%d w2_lease_syncs_during=%d longest_gap_between_w2_syncs=%s spread_after_outage=%s lost_hooks=%d",
				iters, lists, gap, d, len(w2.eventsOfAll("lost"))+len(wks[0].eventsOfAll("lost"))))
			w.checkAll(s, false)
			if gap > 2*grpSyncInterval {
				t.Errorf("w2 did not sync its leases for %s while a new reader waited for its iterator (LeaseSyncInterval %s)", gap, grpSyncInterval)
			}
			w.finish(ignore)
		})
	})

	t.Run("PutRecords", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			w := newFltWorld(t, fltShards)
			wks := w.warm("w1")
			w.publishing = false
			entries, failedEntries, calls := 0, 0, 0
			w.e.log.SetPutRecordsEntryFault(func(_ string, _ int, _ types.PutRecordsRequestEntry) (string, string) {
				entries++ // PutRecords calls come one at a time from this test's goroutine
				switch {
				case entries%3 == 0:
					failedEntries++
					return "InternalFailure", ""
				case entries%7 == 0:
					failedEntries++
					return "ProvisionedThroughputExceededException", ""
				}
				return "", ""
			})
			w.kin.set(func(c memlog.Call) error {
				if c.Op == "PutRecords" {
					calls++
					if calls%10 == 0 {
						return fltServerError(calls / 10)
					}
				}
				return nil
			})
			from := w.now()
			for end := from.Add(30 * time.Second); w.now().Before(end); {
				w.publishMixed(3)
				w.step()
			}
			to := w.now()
			w.e.log.SetPutRecordsEntryFault(nil)
			w.kin.set(nil)
			w.drain(10 * time.Second)
			w.closeAll(wks...)

			s := w.stats(from, to)
			puts, putsFailed := w.kin.count("PutRecords", from, to)
			w.report("c PutRecords 1/3 entries failed + 1/10 calls 5xx 30s, 3 records per key per call", s, fmt.Sprintf(
				"Publish_calls=%d PutRecords=%d failed_whole=%d entries_sent=%d entries_failed=%d",
				int(to.Sub(from)/grpStep), puts, putsFailed, entries, failedEntries))
			w.checkAll(w.stats(time.Time{}, time.Time{}), true)
			if failedEntries == 0 || putsFailed == 0 {
				t.Errorf("no PutRecords fault injected: the test did not test them")
			}
			w.finish(ignore)
		})
	})
}

// ---- d. ListShards failing ----

// ListShards fails (5xx) for a minute, two ShardSyncIntervals. The readers go on as before,
// the instances keep their leases, and each lists the shards again once it works. An instance
// that subscribes during the outage is told why it could not (Subscribe lists the shards).
func TestFaultListShardsFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFltWorld(t, fltShards)
		wks := w.warm("w1", "w2")
		takesBefore := w.changes()
		from := w.now()
		w.kin.failAll("ListShards")
		w.steps(30 * time.Second)
		_, joinErr := w.tryStart("w3", nil)
		w.steps(30 * time.Second)
		w.kin.set(nil)
		to := w.now()
		// Recovery: each instance lists the shards successfully again.
		recovered := map[string]time.Duration{}
		w.runUntil("both instances list the shards again", 30*time.Second+grpStep, func() bool {
			for _, o := range w.kin.outcomesOf(func(o fltOutcome) bool { return o.op == "ListShards" && o.err == nil && !o.at.Before(to) }) {
				if _, ok := recovered[o.worker]; !ok {
					recovered[o.worker] = o.at.Sub(to)
				}
			}
			return len(recovered) == 2
		})
		takesDuring := w.changes() - takesBefore
		w.drain(10 * time.Second)
		w.consumersOpen(wks...)
		w.closeAll(wks...)

		s := w.stats(from, to)
		lists, failed := w.kin.count("ListShards", from, to)
		// A failed listing is retried at the next shard sync: WARN, and ERROR only once listings
		// keep failing (8 in a row; here 5 fail).
		errs := append(w.logs.of("WARN", from, to), w.logs.of("ERROR", from, to)...)
		w.report("d ListShards 5xx 1m", s, fmt.Sprintf(
			"ListShards=%d failed=%d warnings_logged=%d lease_changes=%d subscribe_during=%v relisted_after=w1:%s,w2:%s",
			lists, failed, len(errs), takesDuring, joinErr, recovered["w1"], recovered["w2"]))
		w.checkAll(w.stats(time.Time{}, time.Time{}), true)
		if s.worst > time.Second {
			t.Errorf("worst delay %s while ListShards failed; the readers should not notice", s.worst)
		}
		if takesDuring != 0 {
			t.Errorf("%d lease changes while ListShards failed; nothing should move", takesDuring)
		}
		if failed == 0 || len(errs) == 0 {
			t.Errorf("%d listings failed, %d warnings or errors logged; want the failures logged", failed, len(errs))
		}
		for _, e := range errs {
			if !strings.Contains(fmt.Sprint(e.err), subStream) {
				t.Errorf("error line does not name the stream: %s", e)
			}
		}
		if joinErr == nil || !strings.Contains(joinErr.Error(), subStream) {
			t.Errorf("Subscribe during the outage: %v, want an error naming the stream", joinErr)
		}
		w.finish(ignore)
	})
}

// ---- e. the lease store failing ----

// The lease store (MemoryStore.SetFault) fails every call.
//
// A reader that cannot renew pauses LeaseDuration/5 before its lease could expire, 8 s after its
// last successful renewal: it delivers nothing more, the OnLost hook runs, and it keeps
// trying to renew. A renewal is conditioned on owner and generation, so one that succeeds
// proves nobody took the lease: the reader resumes where it was (OnAcquired again).
//
// "3s", "4s" and "6s": four outages each, shorter than LeaseDuration, at different points of
// the readers' renewal cycles (every LeaseRenewInterval, 3.3 s). Nothing changes: no lease
// moves and nothing comes twice. Outages up to 8 - 3.3 - 0.4 = 4.2 s do not even pause a
// reader (it tries a last renewal LeaseRenewInterval/8 before its stop point); longer ones
// pause the readers whose last renewal came early, and only until the store is back.
//
// "long": one outage of 15 s (more than LeaseDuration). Each reader pauses before its lease
// could expire; when the store is back, it renews and goes on, or, if another instance took the
// lease first, that one reads from the checkpoint. What comes twice is at most what was acked
// after the last checkpoint.
func TestFaultLeaseStoreFailing(t *testing.T) {
	for _, outage := range []time.Duration{3 * time.Second, 4 * time.Second, 6 * time.Second} {
		t.Run(outage.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				leaseStoreOutages(t, outage)
			})
		})
	}
	t.Run("long", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			leaseStoreLongOutage(t, false)
		})
	})
}

// leaseStoreLongOutage is the "long" outage of TestFaultLeaseStoreFailing, reading by polling
// or, with fanOut, with enhanced fan-out.
func leaseStoreLongOutage(t *testing.T, fanOut bool) {
	ignore := goleak.IgnoreCurrent()
	w := newFltWorld(t, fltShards)
	w.fanOut = fanOut
	wks := w.warm("w1", "w2")
	w.steps(3 * time.Second)
	const outage = 15 * time.Second
	// The last successful owner write of each shard before the outage.
	from := w.now()
	lastOK := map[string]time.Time{}
	for _, l := range w.leases() {
		for _, wk := range wks {
			if at, _ := wk.store.lastOwnerWrite(l.ShardID); l.Owner == wk.id {
				lastOK[l.ShardID] = at
			}
		}
	}
	fltStoreDown(w)
	w.steps(outage)
	w.e.store.SetFault(nil)
	back := w.now()
	// Stopped before the lease could expire?
	stoppedAfter := map[string]time.Duration{}
	for _, wk := range wks {
		for _, ev := range wk.eventsOfAll("lost") {
			if !ev.at.Before(from) {
				stoppedAfter[ev.shard] = ev.at.Sub(lastOK[ev.shard])
			}
		}
	}
	// Reading resumes: every shard delivers again.
	var resumed time.Duration
	w.runUntil("every shard delivers again", 4*grpSyncInterval, func() bool {
		shards := map[string]bool{}
		for _, d := range w.deliveriesOf(func(d grpDelivery) bool { return d.at.After(back) }) {
			shards[d.shard] = true
		}
		resumed = w.since(back)
		return len(shards) == fltShards
	})
	w.runUntil("spread over w1 and w2", 6*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
	w.drain(10 * time.Second)
	w.closeAll(wks...)

	s := w.stats(time.Time{}, time.Time{})
	// What may come twice: records acked after the checkpoint the shard was taken again at.
	mayRepeat := w.mayRepeat(back)
	var extra []string
	for u := range w.duplicates() {
		if !mayRepeat[u] {
			extra = append(extra, u)
		}
	}
	var worstStop time.Duration
	for _, d := range stoppedAfter {
		worstStop = max(worstStop, d)
	}
	w.report("e lease store down 15s", s, fmt.Sprintf(
		"readers_paused=%d latest_pause_after_last_renewal=%s (LeaseDuration %s) reading_again_after=%s acked_after_last_checkpoint=%d",
		len(stoppedAfter), worstStop, grpLeaseDuration, resumed, len(mayRepeat)))
	w.checkAll(s, false)
	if len(stoppedAfter) != fltShards {
		t.Errorf("%d of %d readers stopped during a %s outage", len(stoppedAfter), fltShards, outage)
	}
	if worstStop >= grpLeaseDuration {
		t.Errorf("a reader stopped %s after its last renewal, not before LeaseDuration", worstStop)
	}
	if len(extra) > 0 {
		t.Errorf("redelivered beyond what was acked after the last checkpoint: %v", extra)
	}
	if reads, _ := w.kin.count("GetRecords", time.Time{}, w.now()); fanOut && reads != 0 {
		t.Errorf("%d GetRecords calls: the instances were to read with enhanced fan-out", reads)
	}
	w.finish(ignore)
}

// leaseStoreOutages runs four outages of the lease store of the given length, 10 s apart plus
// 1.1 s more each time, so that they fall at different points of each reader's renewal cycle.
func leaseStoreOutages(t *testing.T, outage time.Duration) {
	ignore := goleak.IgnoreCurrent()
	w := newFltWorld(t, fltShards)
	wks := w.warm("w1", "w2")
	before := w.changes()
	from := w.now()
	type window struct{ start, end time.Time }
	var outages []window
	for i := range 4 {
		w.steps(10*time.Second + time.Duration(i)*1100*time.Millisecond)
		start := w.now()
		fltStoreDown(w)
		w.steps(outage)
		w.e.store.SetFault(nil)
		outages = append(outages, window{start, w.now()})
	}
	w.steps(10 * time.Second)
	to := w.now()
	changes := w.changes() - before
	w.runUntil("spread over w1 and w2", 6*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })
	w.drain(10 * time.Second)
	w.closeAll(wks...)

	var failedCalls, stops, unjustified int
	for _, wk := range wks {
		for _, o := range wk.store.opsOf("", "") {
			if o.err != nil && !o.at.Before(from) {
				failedCalls++
			}
		}
		for _, ev := range wk.eventsOfAll("lost") {
			stops++
			// The reader's last successful owner write before it stopped, and the outage.
			var last time.Time
			for _, o := range wk.store.opsOf("", ev.shard) {
				if o.err == nil && o.at.Before(ev.at) && (o.op == lease.OpTake || o.op == lease.OpRenew || o.op == lease.OpCheckpoint) {
					last = o.at
				}
			}
			var end time.Time
			for _, o := range outages {
				if !o.start.After(ev.at) {
					end = o.end
				}
			}
			// Its stop point: LeaseStopAfter after that write.
			stopPoint := last.Add(grpLeaseDuration * 4 / 5)
			t.Logf("%s stopped %s at %s, %s after its last successful renewal; the store came back at %s (its stop point: %s)",
				wk.id, ev.shard, grpRel(ev.at), ev.at.Sub(last), grpRel(end), grpRel(stopPoint))
			if stopPoint.Sub(end) > time.Second {
				unjustified++
				t.Errorf("%s stopped %s although the store was back %s before its stop point", wk.id, ev.shard, stopPoint.Sub(end))
			}
		}
	}
	mayRepeat := w.mayRepeat(from)
	var extra []string
	for u := range w.duplicates() {
		if !mayRepeat[u] {
			extra = append(extra, u)
		}
	}
	s := w.stats(from, to)
	w.report(fmt.Sprintf("e lease store down 4x %s", outage), s, fmt.Sprintf(
		"failed_store_calls=%d readers_paused=%d (of 16 reader-outages) paused_with_store_back_over_1s_before_stop_point=%d lease_changes=%d errors_logged=%d",
		failedCalls, stops, unjustified, changes, len(w.logs.of("ERROR", from, to))))
	w.checkAll(w.stats(time.Time{}, time.Time{}), true)
	if outage < 4200*time.Millisecond && stops != 0 {
		t.Errorf("%d readers paused for outages of %s", stops, outage)
	}
	if changes != 0 {
		t.Errorf("%d lease changes for outages of %s, shorter than LeaseDuration", changes, outage)
	}
	if len(extra) > 0 {
		t.Errorf("redelivered beyond what was acked after the checkpoint the next reader started from: %v", extra)
	}
	if failedCalls == 0 {
		t.Errorf("no store call failed: the test did not test the outage")
	}
	w.finish(ignore)
}

// ---- f. the stream deleted ----

// The stream is deleted under a running group of two instances. Each reader stops with an
// error that names the stream and matches ErrStreamNotFound; nothing spins: over the next
// minute of fake time there is no read, no iterator request and no lease take, and at most a
// listing per ShardSyncInterval per instance.
//
// "deleted": then Close returns at once. "created again": a stream of the same name is created;
// the next shard listing finds it and the group reads it (from TRIM_HORIZON: the checkpoints
// are the old stream's), every record published to it arrives once, in order.
func TestFaultStreamDeleted(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		name := "deleted"
		if recreate {
			name = "created again"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				streamDeleted(t, recreate)
			})
		})
	}
}

func streamDeleted(t *testing.T, recreate bool) {
	ignore := goleak.IgnoreCurrent()
	w := newFltWorld(t, fltShards)
	wks := w.warm("w1", "w2")
	w.drain(5 * time.Second)
	deletedAt := w.now()
	if _, err := w.e.log.DeleteStream(context.Background(), &awskinesis.DeleteStreamInput{StreamName: aws.String(w.e.stream)}); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	w.steps(10 * time.Second)
	from := w.now()
	w.steps(time.Minute)
	to := w.now()
	count := func(op string) int { c, _ := w.kin.count(op, from, to); return c }
	reads, iters, lists := count("GetRecords"), count("GetShardIterator"), count("ListShards")
	var storeCalls int
	for _, wk := range wks {
		for _, o := range wk.store.opsOf("", "") {
			// Reads, and the member heartbeat each lease sync writes, are not a reader starting.
			if !o.at.Before(from) && o.at.Before(to) && o.op != lease.OpList && o.op != lease.OpMembers && o.op != lease.OpHeartbeat {
				storeCalls++
			}
		}
	}
	errs := w.logs.of("ERROR", deletedAt, from)
	errsLater := w.logs.of("ERROR", from, to)
	var named []fltEntry
	for _, e := range errs {
		if errors.Is(e.err, kinesis.ErrStreamNotFound) && strings.Contains(e.err.Error(), `"`+subStream+`"`) {
			named = append(named, e)
		}
	}
	if len(named) == 0 {
		t.Errorf("no error naming the stream and matching ErrStreamNotFound; errors: %v", errs)
	}
	// Bounded: no reads at all once the readers stopped; a listing per ShardSyncInterval
	// (30 s) per instance; an iterator request or a lease take would be a reader started
	// again on a stream that is gone.
	if reads != 0 {
		t.Errorf("%d GetRecords calls after the stream was deleted and the readers stopped", reads)
	}
	if limit := 2 * (int(to.Sub(from)/(30*time.Second)) + 1); lists > limit {
		t.Errorf("%d ListShards calls in %s; want at most %d (one per ShardSyncInterval per instance)", lists, to.Sub(from), limit)
	}
	if iters != 0 || storeCalls != 0 {
		t.Errorf("readers keep being started on a deleted stream: %d GetShardIterator calls, %d lease store writes in %s",
			iters, storeCalls, to.Sub(from))
	}
	figures := fmt.Sprintf("first 10s after the delete: errors naming the stream=%d; the next 1m: GetRecords=%d GetShardIterator=%d ListShards=%d lease_writes=%d errors_logged=%d",
		len(named), reads, iters, lists, storeCalls, len(errsLater))

	if recreate {
		if _, err := w.e.log.CreateStream(context.Background(), &awskinesis.CreateStreamInput{
			StreamName: aws.String(w.e.stream), ShardCount: aws.Int32(fltShards),
		}); err != nil {
			t.Fatalf("CreateStream: %v", err)
		}
		createdAt := w.now()
		w.publishing = true
		w.runUntil("every shard of the new stream is read", time.Minute, func() bool {
			shards := map[string]bool{}
			for _, d := range w.deliveriesOf(func(d grpDelivery) bool { return !d.at.Before(createdAt) }) {
				shards[d.shard] = true
			}
			return len(shards) == fltShards
		})
		readAfter := w.since(createdAt)
		w.steps(5 * time.Second)
		w.drain(10 * time.Second)
		s := w.stats(createdAt, w.now())
		w.checkAll(w.stats(time.Time{}, time.Time{}), true)
		figures += fmt.Sprintf("; created again: every shard read %s later", readAfter)
		w.report("f stream deleted under 2 instances, then created again", s, figures)
	}
	closeTook := map[string]time.Duration{}
	for _, wk := range wks {
		started := time.Now()
		w.close(wk)
		closeTook[wk.id] = time.Since(started).Round(time.Millisecond)
	}
	for id, d := range closeTook {
		if d > time.Second {
			t.Errorf("Close of %s took %s of fake time", id, d)
		}
	}
	if !recreate {
		w.report("f stream deleted under 2 instances", w.stats(time.Time{}, time.Time{}), figures+
			fmt.Sprintf("; Close fake time w1=%s w2=%s", closeTook["w1"], closeTook["w2"]))
	}
	w.finish(ignore)
}
