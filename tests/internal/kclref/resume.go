package kclref

import "fmt"

// Record is one user record as a KCL record processor sees it after
// deaggregation: the Kinesis record's sequence number, the index of the user
// record inside a KPL aggregate, and whether it came from one.
type Record struct {
	SequenceNumber    string
	SubSequenceNumber int64
	Aggregated        bool
}

// position is the record's extended sequence number as the KCL computes it.
// A plain (not aggregated) record always has sub-sequence 0 in the KCL: the
// field only gets a value when the deaggregator splits an aggregate, counting
// from 0 within each aggregate. A sub-sequence given for a plain record is
// therefore ignored.
func (r Record) position() ExtendedSequenceNumber {
	if !r.Aggregated {
		return ExtendedSequenceNumber{SequenceNumber: r.SequenceNumber}
	}
	return ExtendedSequenceNumber{SequenceNumber: r.SequenceNumber, SubSequenceNumber: r.SubSequenceNumber}
}

// Resume returns the user records, out of records (one shard's user records
// in shard order, aggregates already split), that a KCL worker hands its
// record processor when it starts the shard from checkpoint:
//
//   - a numeric checkpoint S/k: the worker opens its iterator AT_SEQUENCE_NUMBER
//     S (InitializeTask, then KinesisDataFetcher or FanOutRecordsPublisher via
//     IteratorBuilder), so the Kinesis record S itself is fetched again; ProcessTask
//     (filterAndGetMaxExtendedSequenceNumber) then drops every user record
//     whose position is <= S/k by ExtendedSequenceNumber order. So a plain
//     record S (position S/0) is not redelivered after a checkpoint at S/0,
//     sub-records 0..k of an aggregate S are dropped and k+1.. kept, and
//     everything after S is kept. Records before S are never fetched.
//   - TRIM_HORIZON: the iterator starts at the oldest record: all of records.
//   - AT_TIMESTAMP: the iterator starts at the configured initial timestamp;
//     records is taken to be what lies at or after it, so all are returned.
//   - LATEST: the iterator starts after the newest record: none of records.
//   - SHARD_END: the shard is done (ShardInfo.isCompleted); the consumer goes
//     straight to shutdown and processes nothing.
//
// The pending checkpoint plays no part: the KCL starts from the checkpoint
// and only passes the pending one to the processor's initialize.
//
// Not modelled: the deaggregator also drops sub-records whose explicit hash
// key falls outside the shard's range. Resume panics on a record or
// checkpoint the KCL could not compare (it would throw and retry forever).
func Resume(checkpoint ExtendedSequenceNumber, records []Record) []Record {
	if !checkpoint.Valid() {
		panic(fmt.Sprintf("kclref: checkpoint %q is neither digits nor a sentinel", checkpoint.SequenceNumber))
	}
	switch checkpoint.SequenceNumber {
	case SentinelLatest, SentinelShardEnd:
		return nil
	}
	var out []Record
	for _, r := range records {
		c, err := r.position().Compare(checkpoint)
		if err != nil {
			panic("kclref: " + err.Error())
		}
		if c > 0 {
			out = append(out, r)
		}
	}
	return out
}

// CheckpointOf returns the position a KCL record processor stores when it
// calls checkpoint() (no argument) after processing r last: the largest
// position handed to it, which keeps an aggregate's sub-sequence number and
// is sub-sequence 0 for a plain record. By contrast checkpoint(Record) and
// checkpoint(String) in KCL 2.x/3.x always store sub-sequence 0, so after
// checkpointing an aggregated record that way its other sub-records are
// redelivered; checkpoint(String, long) stores what it is given.
func CheckpointOf(r Record) ExtendedSequenceNumber { return r.position() }
