package memlog

import (
	"sync"
	"time"
)

// Quotas makes a Log enforce Kinesis Data Streams' documented rate quotas, so a test can see
// what a producer or a consumer does at AWS's limits: Config.Quotas = &memlog.Quotas{} is AWS's
// numbers; a nil Config.Quotas (the default) enforces none, as before.
//
// Each field is one quota; its zero value is AWS's default, a negative value lifts it. The
// quotas are token buckets on the Log's clock (Config.Now) that hold one second's worth, so a
// test on an injected clock or in a testing/synctest bubble moves time to let calls through
// again, and never sleeps. The sources are in the field docs; the two pages most of them come
// from are "Quotas and limits - Amazon Kinesis Data Streams"
// (https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html) and each
// operation's page of the Amazon Kinesis API Reference,
// https://docs.aws.amazon.com/kinesis/latest/APIReference/API_<Operation>.html, titled
// "<Operation> - Amazon Kinesis Data Streams Service".
//
// What is refused, and how, is as AWS answers:
//   - writes: a PutRecords entry over its shard's quota fails alone, with ErrorCode
//     "ProvisionedThroughputExceededException" and "Rate exceeded for shard ... in stream ...
//     under account ...", the other entries succeed; PutRecord fails with
//     *types.ProvisionedThroughputExceededException;
//   - GetRecords and GetShardIterator: *types.ProvisionedThroughputExceededException;
//   - control-plane calls over their rate: *types.LimitExceededException, "Rate exceeded for
//     stream S under account A." (per-stream quotas) or "Rate exceeded for account A."
//     (per-account ones), the messages AWS answers with;
//   - SubscribeToShard over its rate: *types.LimitExceededException; the records a
//     subscription pushes are paced to FanOutBytes a second rather than refused.
//
// The rate of every control-plane operation a Log implements is in controlQuotas (quota.go),
// each with its source; ControlCalls overrides it.
type Quotas struct {
	// ShardWriteRecords is how many records a shard takes a second, through PutRecord and
	// PutRecords together. Default 1,000: "Each shard can support up to 1,000 records per
	// second for writes" (Quotas and limits; PutRecords API reference).
	ShardWriteRecords int

	// ShardWriteBytes is how many bytes a shard takes a second, a record counting its data and
	// its partition key. Default 1 MiB (1,048,576): "up to a maximum total data write rate of
	// 1 MB per second (including partition keys)" (Quotas and limits; PutRecords API
	// reference). A record larger than this (a stream's MaxRecordSizeInKiB may allow up to
	// 10 MiB) is taken once the shard's budget is full (it wrote nothing for a second), and
	// the budget goes into debt for the rest: the shard's next writes are refused for the
	// seconds the record borrowed.
	ShardWriteBytes int

	// ShardReadCalls is how many GetRecords calls a shard answers a second, shared by every
	// consumer that polls it. Default 5: "Each shard can support up to five read transactions
	// per second" (Quotas and limits); "This operation has a limit of five transactions per
	// second per shard" (GetRecords API reference).
	ShardReadCalls int

	// ShardReadBytes is how many bytes of data and keys GetRecords returns from a shard a
	// second, shared by every polling consumer. Default 2 MiB (2,097,152): "Each shard can
	// support up to a maximum total data read rate of 2 MB per second via GetRecords"
	// (Quotas and limits). A call may return up to 10 MiB; what it returns is charged after,
	// and the shard's budget may go into debt: "If a call to GetRecords returns 10 MB,
	// subsequent calls made within the next 5 seconds throw an exception" (Quotas and limits;
	// GetRecords API reference). Here a call is refused while the shard's budget is in debt,
	// so 10 MiB read with a full second's budget keeps reads out for 4 s, with none, for 5 s.
	ShardReadBytes int

	// ShardIteratorCalls is how many GetShardIterator calls a shard answers a second.
	// Default 5: "GetShardIterator has a limit of five transactions per second per account per
	// open shard" (GetShardIterator API reference; Quotas and limits). Closed shards are held
	// to it too: nothing says they are free, and a reader of one asks for an iterator once.
	ShardIteratorCalls int

	// SubscribeCalls is how many SubscribeToShard calls one consumer may make for one shard a
	// second. Default 1: "You can make one call to SubscribeToShard per second per registered
	// consumer per shard" (SubscribeToShard API reference). It comes on top of the 5-second
	// rule memlog always applies to successful subscriptions (ResourceInUseException).
	SubscribeCalls int

	// FanOutBytes is how many bytes of data and keys a SubscribeToShard subscription pushes a
	// second to its consumer from its shard; a subscription that is ahead waits before its next
	// event, as AWS's pushes keep to the rate, rather than failing. Default 2 MiB: consumers
	// "receive data from the stream using enhanced fan-out, at a rate of up to 2 MiB per
	// second for every shard you subscribe to. This rate is unaffected by the total number of
	// consumers that read from the same stream" (RegisterStreamConsumer API reference).
	FanOutBytes int

	// ControlCalls sets the calls a second of control-plane operations by Op name (see Call),
	// replacing AWS's rate from controlQuotas; a negative value lifts the quota. Operations
	// missing from it keep AWS's rate.
	ControlCalls map[string]int
}

// controlQuota is one control-plane operation's documented rate and what it is counted per.
type controlQuota struct {
	perSec    int64
	perStream bool // counted per stream; otherwise per account (the Log)
}

// controlQuotas are the documented call rates of the control-plane operations a Log
// implements. Each is from that operation's page of the Amazon Kinesis API Reference
// ("<Op> - Amazon Kinesis Data Streams Service",
// https://docs.aws.amazon.com/kinesis/latest/APIReference/API_<Op>.html), quoted. DescribeStream,
// ListStreams and DescribeLimits (10, 5 and 1 a second per account) are not here: a Log does not
// implement them.
var controlQuotas = map[string]controlQuota{
	// "This operation has a limit of 1000 transactions per second per data stream." (Quotas
	// and limits, older versions of which said 100.)
	"ListShards": {perSec: 1000, perStream: true},
	// "DescribeStreamSummary has a limit of 20 transactions per second per account."
	"DescribeStreamSummary": {perSec: 20},
	// "CreateStream has a limit of five transactions per second per account."
	"CreateStream": {perSec: 5},
	// "DeleteStream has a limit of five transactions per second per account."
	"DeleteStream": {perSec: 5},
	// "SplitShard has a limit of five transactions per second per account."
	"SplitShard": {perSec: 5},
	// "MergeShards has a limit of five transactions per second per account."
	"MergeShards": {perSec: 5},
	// "Make over 10 TPS. TPS over 10 will trigger the LimitExceededException", with no scope
	// given, so per account. (Its "ten times per rolling 24-hour period per stream" is a count,
	// not a rate, and is not modelled.)
	"UpdateShardCount": {perSec: 10},
	// "The use of this operation has a limit of five transactions per second per account."
	"RegisterStreamConsumer": {perSec: 5},
	// "This operation has a limit of 20 transactions per second per stream."
	"DescribeStreamConsumer": {perSec: 20, perStream: true},
	// "This operation has a limit of 5 transactions per second per stream."
	"ListStreamConsumers": {perSec: 5, perStream: true},
	// "This operation has a limit of five transactions per second per stream."
	"DeregisterStreamConsumer": {perSec: 5, perStream: true},
}

// AWS's defaults of the per-shard quotas; see the fields of Quotas for their sources.
const (
	awsShardWriteRecords  = 1000
	awsShardWriteBytes    = 1 << 20
	awsShardReadCalls     = 5
	awsShardReadBytes     = 2 << 20
	awsShardIteratorCalls = 5
	awsSubscribeCalls     = 1
	awsFanOutBytes        = 2 << 20
)

// limits is a Quotas resolved into rates, built once by New; a nil *limits enforces nothing.
// A lifted quota has ok false for it.
type limits struct {
	writeRecords, writeBytes rate
	readCalls, readBytes     rate
	iterators                rate
	subscribes               rate
	fanOut                   rate
	control                  map[string]controlQuota
	lifted                   map[string]bool // quotas with a negative value, by field

	mu      sync.Mutex         // guards account
	account map[string]*bucket // the per-account control-plane buckets, by Op
}

func newLimits(q *Quotas) *limits {
	if q == nil {
		return nil
	}
	lim := &limits{lifted: map[string]bool{}, control: map[string]controlQuota{}, account: map[string]*bucket{}}
	pick := func(name string, v, def int) rate {
		switch {
		case v < 0:
			lim.lifted[name] = true
		case v > 0:
			def = v
		}
		return perSecond(int64(def))
	}
	lim.writeRecords = pick("ShardWriteRecords", q.ShardWriteRecords, awsShardWriteRecords)
	lim.writeBytes = pick("ShardWriteBytes", q.ShardWriteBytes, awsShardWriteBytes)
	lim.readCalls = pick("ShardReadCalls", q.ShardReadCalls, awsShardReadCalls)
	lim.readBytes = pick("ShardReadBytes", q.ShardReadBytes, awsShardReadBytes)
	lim.iterators = pick("ShardIteratorCalls", q.ShardIteratorCalls, awsShardIteratorCalls)
	lim.subscribes = pick("SubscribeCalls", q.SubscribeCalls, awsSubscribeCalls)
	lim.fanOut = pick("FanOutBytes", q.FanOutBytes, awsFanOutBytes)
	for op, cq := range controlQuotas {
		if v, ok := q.ControlCalls[op]; ok && v != 0 {
			if v < 0 {
				continue
			}
			cq.perSec = int64(v)
		}
		lim.control[op] = cq
	}
	return lim
}

// on reports whether the quota of the Quotas field name is enforced.
func (lim *limits) on(name string) bool { return lim != nil && !lim.lifted[name] }

// shardQuota is a shard's buckets. Its zero value is full buckets, so a shard needs nothing at
// creation and costs a Log without quotas nothing but the space.
type shardQuota struct {
	mu                       sync.Mutex
	writeRecords, writeBytes bucket
	readCalls, readBytes     bucket
	iterators                bucket
}

// admitWrite takes a record of size bytes (data and key) from sh's write quotas, if both have
// room for it, and reports whether they had.
func (lim *limits) admitWrite(sh *shard, now time.Time, size int) bool {
	recs, bytes := lim.on("ShardWriteRecords"), lim.on("ShardWriteBytes")
	if !recs && !bytes {
		return true
	}
	q := &sh.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	// Look at both before taking from either, so a record refused for its bytes does not use
	// up a record of the count. A record over a second's bytes needs a full budget, and
	// borrows the rest.
	if recs && q.writeRecords.wait(lim.writeRecords, now, 1) > 0 ||
		bytes && q.writeBytes.wait(lim.writeBytes, now, min(int64(size), lim.writeBytes.burst)) > 0 {
		return false
	}
	if recs {
		q.writeRecords.take(lim.writeRecords, now, 1)
	}
	if bytes {
		q.writeBytes.charge(lim.writeBytes, now, int64(size))
	}
	return true
}

// admitRead takes one GetRecords call from sh's read quota, unless the calls are used up or
// the shard's read bytes are in debt, and reports whether it did.
func (lim *limits) admitRead(sh *shard, now time.Time) bool {
	q := &sh.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	if lim.on("ShardReadBytes") && q.readBytes.inDebt(lim.readBytes, now) {
		return false
	}
	return !lim.on("ShardReadCalls") || q.readCalls.take(lim.readCalls, now, 1)
}

// chargeRead charges what a GetRecords call returned to sh's read bytes.
func (lim *limits) chargeRead(sh *shard, now time.Time, size int) {
	if !lim.on("ShardReadBytes") {
		return
	}
	q := &sh.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	q.readBytes.charge(lim.readBytes, now, int64(size))
}

// admitIterator takes one GetShardIterator call from sh's quota, and reports whether it did.
func (lim *limits) admitIterator(sh *shard, now time.Time) bool {
	if !lim.on("ShardIteratorCalls") {
		return true
	}
	q := &sh.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.iterators.take(lim.iterators, now, 1)
}

// admitControl takes one call of op from its control-plane quota, per stream (st's buckets) or
// per account, and reports whether it did. Operations with no quota are always admitted, and
// so is a per-stream one whose stream does not exist (it fails as not found).
func (lim *limits) admitControl(op string, st *stream, now time.Time) bool {
	cq, ok := lim.control[op]
	if !ok {
		return true
	}
	r := perSecond(cq.perSec)
	if cq.perStream {
		if st == nil {
			return true
		}
		return st.usage.takeControl(op, r, now)
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	return takeOne(lim.account, op, r, now)
}

// takeOne takes one token from m's bucket for op, which starts full at its first use; the
// caller holds the lock that guards m.
func takeOne(m map[string]*bucket, op string, r rate, now time.Time) bool {
	b := m[op]
	if b == nil {
		b = &bucket{}
		m[op] = b
	}
	return b.take(r, now, 1)
}

// perStream reports whether op's control-plane quota is counted per stream.
func (lim *limits) perStream(op string) bool { return lim.control[op].perStream }
