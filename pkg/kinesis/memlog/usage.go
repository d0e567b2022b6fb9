package memlog

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Usage is what a stream was charged: the calls made to it and what they moved, counted
// whether Config.Quotas is set or not, so a test or a benchmark can tell what a workload would
// cost and how close to AWS's quotas it runs. It is a snapshot; (*Log).Usage takes one.
type Usage struct {
	// PutCalls counts PutRecord and PutRecords calls that were valid and reached the stream
	// (a DryRun or a fault hook's failure is not counted).
	PutCalls int64
	// Records, Bytes and PayloadUnits are what those calls stored: records, their data and
	// partition key bytes, and PUT payload units, AWS's billing unit for provisioned streams:
	// "A PUT Payload Unit is counted in 25KB payload 'chunks' that comprise a record. For
	// example, a 5KB record contains one PUT Payload Unit, a 45KB record contains two PUT
	// Payload Units, and a 1MB record contains 40 PUT Payload Units" ("Amazon Kinesis Data
	// Streams pricing", https://aws.amazon.com/kinesis/data-streams/pricing/). Here a record
	// is ceil((data + key) / 25 KiB) units.
	Records, Bytes, PayloadUnits int64
	// ThrottledRecords counts records refused for a shard's write quota: PutRecords entries
	// that failed with ProvisionedThroughputExceededException, and PutRecord calls that did.
	ThrottledRecords int64

	// GetRecordsCalls counts GetRecords calls that reached a shard (an iterator that was valid
	// and not expired); GetRecordsThrottled those of them refused for the shard's read quota;
	// BytesRead the data and key bytes the others returned.
	GetRecordsCalls, GetRecordsThrottled, BytesRead int64

	// Calls counts the stream's other calls by Op (see Call), e.g. Calls["ListShards"]: those
	// that named the stream, whatever they answered. Throttled counts those of them refused
	// for a quota: LimitExceededException for the control plane, and
	// ProvisionedThroughputExceededException (GetShardIterator) or LimitExceededException
	// (SubscribeToShard). A call of a per-account quota counts in the stream it named.
	Calls, Throttled map[string]int64
}

// payloadUnit is AWS's PUT payload unit, 25 KB, taken as 25 KiB.
const payloadUnit = 25 << 10

// payloadUnits is the PUT payload units of a record of size bytes: at least one.
func payloadUnits(size int) int64 { return int64(max(1, (size+payloadUnit-1)/payloadUnit)) }

// usage is a stream's counters, and the buckets of its per-stream control-plane quotas. The
// data-plane counters are atomic, so the hot paths pay an add per call, not a lock.
type usage struct {
	putCalls, records, bytes, units, throttledRecords atomic.Int64
	getCalls, getThrottled, bytesRead                 atomic.Int64

	mu        sync.Mutex
	calls     map[string]int64   // guarded by mu
	throttled map[string]int64   // guarded by mu
	control   map[string]*bucket // per-stream control-plane buckets, by Op; guarded by mu
}

// stored counts what a put stored.
func (u *usage) stored(records, bytes, units int64) {
	u.records.Add(records)
	u.bytes.Add(bytes)
	u.units.Add(units)
}

// call and throttle count a call of op, and a call of op refused for a quota.
func (u *usage) call(op string)     { u.count(&u.calls, op) }
func (u *usage) throttle(op string) { u.count(&u.throttled, op) }

func (u *usage) count(m *map[string]int64, op string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if *m == nil {
		*m = map[string]int64{}
	}
	(*m)[op]++
}

// takeControl takes one call of op from the stream's bucket for it.
func (u *usage) takeControl(op string, r rate, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.control == nil {
		u.control = map[string]*bucket{}
	}
	return takeOne(u.control, op, r, now)
}

// Usage returns what the stream called name has been charged since it was created (a stream
// created again under the same name starts from zero); the zero Usage if there is no such
// stream.
func (l *Log) Usage(name string) Usage {
	st := l.lookup(name)
	if st == nil {
		return Usage{Calls: map[string]int64{}, Throttled: map[string]int64{}}
	}
	u := &st.usage
	out := Usage{
		PutCalls: u.putCalls.Load(), Records: u.records.Load(), Bytes: u.bytes.Load(),
		PayloadUnits: u.units.Load(), ThrottledRecords: u.throttledRecords.Load(),
		GetRecordsCalls: u.getCalls.Load(), GetRecordsThrottled: u.getThrottled.Load(), BytesRead: u.bytesRead.Load(),
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	out.Calls, out.Throttled = maps.Clone(u.calls), maps.Clone(u.throttled)
	if out.Calls == nil {
		out.Calls = map[string]int64{}
	}
	if out.Throttled == nil {
		out.Throttled = map[string]int64{}
	}
	return out
}

// meter counts a call that is about to run in its stream's usage and holds it to its
// control-plane quota, answering LimitExceededException over it. The data-plane operations
// count themselves where they know what they moved.
func (l *Log) meter(call Call) error {
	switch call.Op {
	case "PutRecord", "PutRecords", "GetRecords", "SubscribeToShardEvent":
		return nil
	}
	st := l.lookup(call.Stream)
	if st != nil {
		st.usage.call(call.Op)
	}
	if l.quotas == nil || l.quotas.admitControl(call.Op, st, l.now()) {
		return nil
	}
	if st != nil {
		st.usage.throttle(call.Op)
	}
	if l.quotas.perStream(call.Op) {
		return errLimit("Rate exceeded for stream %s under account %s.", call.Stream, l.account)
	}
	return errLimit("Rate exceeded for account %s.", l.account)
}

// errShardRate is AWS's ProvisionedThroughputExceededException for a shard over a quota.
func (l *Log) errShardRate(st *stream, sh *shard) error {
	return errThroughput(l.entryFaultMessage("ProvisionedThroughputExceededException", st.name, sh.id))
}
