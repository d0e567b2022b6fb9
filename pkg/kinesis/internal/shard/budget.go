package shard

import "time"

// readBudget is what sizes a shard's reads: the subscription's memory budget
// (MaxBufferedRecords, MaxBufferedBytes), how many shards share it, and the shard's own record
// size. Reads used to be GetRecordsLimit records (10,000) whatever the backlog, so a
// subscriber's heap grew with it: 13.5 times as much for a 200,000 record backlog as for a
// 10,000 one on 16 shards.
type readBudget struct {
	maxRecords      int
	maxBytes        int64
	shards          int           // readers of the subscription, this one included
	avgRecordBytes  int           // of the shard's last read that returned records; 0 before
	minReadInterval time.Duration // the pace of reads that catch up
}

// assumedRecordBytes is the record size a shard's reads assume before one has returned
// records.
const assumedRecordBytes = 1 << 10

// outrunFactor is how much faster than Kinesis's per-shard write limits (1,000 records/s,
// 1 MiB/s) a shard that catches up must at least read, however many shards share the budget.
const outrunFactor = 1.25

// holdLimit is the most records a shard may hold in memory: fetched and not yet delivered, or
// delivered and not yet done. It is the shard's share of each budget, but never below what
// reads faster than Kinesis's write limits at one read per minReadInterval (so that a shard
// that is behind catches up), and at least 1.
func (b readBudget) holdLimit() int {
	shards := max(b.shards, 1)
	perSecond := b.minReadInterval.Seconds()
	records := max(b.maxRecords/shards, int(outrunFactor*1000*perSecond+0.999))
	avg := b.avgRecordBytes
	if avg <= 0 {
		avg = assumedRecordBytes
	}
	bytes := max(b.maxBytes/int64(shards), int64(outrunFactor*(1<<20)*perSecond))
	return max(min(records, int(bytes/int64(avg))), 1)
}

// holdLimit is this reader's holdLimit now: the budget is shared by the subscription's
// readers, so a reader's share changes as shards come and go.
func (r *Reader) holdLimit() int {
	cfg := r.cfg
	return readBudget{
		maxRecords: cfg.MaxBufferedRecords, maxBytes: cfg.MaxBufferedBytes,
		shards: int(r.links.Readers()), avgRecordBytes: r.avgRecordBytes,
		minReadInterval: cfg.MinReadInterval,
	}.holdLimit()
}

// readLimit is the Limit of the reader's next GetRecords: what its hold limit leaves room for,
// within GetRecordsLimit and the reader's ramp. A shard whose last read came back full with
// more behind it skips the ramp: it reaches its share of the budget at its second read, not
// its seventh, so that the memory a backlog takes does not depend on how long the backlog is.
// A cold start still asks for firstReadRecords on every shard at once.
func (r *Reader) readLimit() int32 {
	room := max(r.holdLimit()-len(r.window), 1)
	ramp := readRamp(r.readsWithRecords)
	if r.backlogged {
		ramp = int(r.cfg.GetRecordsLimit)
	}
	return int32(min(room, int(r.cfg.GetRecordsLimit), ramp))
}

// firstReadRecords is what a reader's first read asks for at most.
const firstReadRecords = 100

// readRamp is the most a reader's next read asks for after reads that returned records:
// firstReadRecords, doubling with each such read (10,000, Kinesis's limit, after seven). A
// subscription starting on a backlog used to ask for 10,000 records on every shard at once:
// a server that is slow to answer them answers none within RequestTimeout, and retries add
// to its load (Watermill's concurrent-subscribe test on kinesalite, 50 subscriptions of 4
// shards: no message for 45 s while other tests ran). Small first reads bring the first
// messages at once; a shard still reaches full reads within seven reads, 1.4 s at 5 reads/s.
func readRamp(readsWithRecords int) int {
	return firstReadRecords << min(readsWithRecords, maxRampDoublings)
}

// maxRampDoublings is how many times readRamp doubles: past Kinesis's limit of 10,000.
const maxRampDoublings = 7
