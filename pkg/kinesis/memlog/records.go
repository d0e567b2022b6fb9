package memlog

import (
	"context"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// GetRecords reads up to Limit records (default and maximum 10000) and at most 10 MiB of data
// and keys (always at least one record) from the iterator's position, in O(records returned).
//
// NextShardIterator is always set on an open shard: after the last record returned, or at the
// same position when none was. On a closed shard read to its end it is nil and ChildShards is
// set. Each call returns fresh Data: one allocation holds all payloads, each Record.Data a
// capacity-capped sub-slice, so appending to one cannot clobber its neighbour.
//
// MillisBehindLatest is 0 when the response reaches the newest record of the shard; otherwise it
// is how long the oldest record not yet returned has been in the shard (now minus its
// ApproximateArrivalTimestamp, at least 1), i.e. how far behind the consumer is in time.
func (l *Log) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, _ ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	if in == nil {
		in = &awskinesis.GetRecordsInput{}
	}
	var it iterator
	itErr := errInvalid("Invalid ShardIterator.")
	call := Call{Op: "GetRecords"}
	if in.ShardIterator != nil && len(*in.ShardIterator) <= maxIteratorLen {
		if it, itErr = l.decodeIterator(*in.ShardIterator); itErr == nil {
			call.Stream, call.ShardID = it.stream, l.peekShardID(it)
		}
	}
	if err := l.before(ctx, call); err != nil {
		return nil, err
	}
	limit, err := l.checkGetRecords(in)
	if err != nil {
		return nil, err
	}
	if itErr != nil {
		return nil, itErr
	}
	now := l.now()
	if err := checkFresh(it, now); err != nil {
		return nil, err
	}
	st, sh, err := l.target(it)
	if err != nil {
		return nil, err
	}
	if in.StreamARN != nil && *in.StreamARN != st.arn {
		return nil, errInvalid("StreamARN %s does not match the stream %s of the ShardIterator.", *in.StreamARN, st.arn)
	}
	if isTrue(in.DryRun) {
		return nil, errDryRun()
	}
	st.usage.getCalls.Add(1)
	if l.quotas != nil && !l.quotas.admitRead(sh, now) {
		st.usage.getThrottled.Add(1)
		return nil, l.errShardRate(st, sh)
	}
	out, read := l.readRecords(st, sh, sh.read(it.pos, limit), now)
	st.usage.bytesRead.Add(int64(read))
	if l.quotas != nil {
		l.quotas.chargeRead(sh, now, read)
	}
	return out, nil
}

// checkGetRecords validates what GetRecords has besides its iterator and returns the limit.
func (l *Log) checkGetRecords(in *awskinesis.GetRecordsInput) (int, error) {
	var c checks
	if s := in.ShardIterator; c.required(top("shardIterator"), s) {
		switch {
		case len(*s) < 1:
			c.fail(s, top("shardIterator"), "have length greater than or equal to 1")
		case len(*s) > maxIteratorLen:
			c.fail(s, top("shardIterator"), "have length less than or equal to 512")
		}
	}
	if err := c.err(); err != nil {
		return 0, err
	}
	if in.Limit == nil {
		return maxGetLimit, nil
	}
	if n := *in.Limit; n < 1 || n > maxGetLimit {
		return 0, errInvalid("Limit %d is invalid: it must be between 1 and %d.", n, maxGetLimit)
	}
	return int(*in.Limit), nil
}

// peekShardID names an iterator's shard for the fault hook, without allocating if it can.
func (l *Log) peekShardID(it iterator) string {
	if _, sh, err := l.target(it); err == nil {
		return sh.id
	}
	return shardID(it.shard)
}

// readRecords turns a view into a response: the records that fit in maxGetBytes, the next
// iterator, MillisBehindLatest, and ChildShards at the end of a closed shard. It also returns the
// bytes of data and keys the response holds, which the read quota charges.
func (l *Log) readRecords(st *stream, sh *shard, v view, now time.Time) (*awskinesis.GetRecordsOutput, int) {
	n, size, read := fit(v)
	recs := make([]types.Record, n)
	strs := make([]string, 2*n)   // sequence numbers and partition keys, pointed to by recs
	times := make([]time.Time, n) // arrival timestamps, pointed to by recs
	buf := make([]byte, size)
	i, off := 0, 0
	nextArrival := v.nextArrival
fill:
	for _, seg := range v.segs {
		for j := range seg {
			r := &seg[j]
			if i == n {
				nextArrival = r.arrival
				break fill
			}
			end := off + copy(buf[off:], r.data)
			strs[2*i], strs[2*i+1] = r.seq, r.key
			times[i] = time.UnixMilli(r.arrival).UTC()
			recs[i] = types.Record{
				Data:                        buf[off:end:end],
				SequenceNumber:              &strs[2*i],
				PartitionKey:                &strs[2*i+1],
				ApproximateArrivalTimestamp: &times[i],
			}
			off = end
			i++
		}
	}
	out := &awskinesis.GetRecordsOutput{Records: recs, MillisBehindLatest: ptr(int64(0))}
	next := v.from + uint64(n)
	if next <= v.last {
		*out.MillisBehindLatest = max(now.UnixMilli()-nextArrival, 1)
	}
	if v.closed && next > v.last {
		out.ChildShards = cloneChildShards(v.children)
		return out, read
	}
	it := iterator{stream: st.name, incarnation: st.incarnation, shard: sh.index, pos: next, issued: now.UnixMilli()}
	out.NextShardIterator = ptr(l.encodeIterator(it))
	return out, read
}

// fit is how many records of v one response holds under maxGetBytes, their payload bytes, and
// their payload and key bytes. The first record always fits, so a reader can never be stuck
// behind a large one.
func fit(v view) (n, size, total int) {
	for _, seg := range v.segs {
		for j := range seg {
			r := &seg[j]
			if n > 0 && total+len(r.data)+len(r.key) > maxGetBytes {
				return n, size, total
			}
			total += len(r.data) + len(r.key)
			n++
			size += len(r.data)
		}
	}
	return n, size, total
}

// cloneChildShards copies the child shards of a closed shard, so callers cannot change the Log's.
func cloneChildShards(cs []types.ChildShard) []types.ChildShard {
	out := make([]types.ChildShard, len(cs))
	for i, c := range cs {
		out[i] = types.ChildShard{ShardId: ptr(deref(c.ShardId)), ParentShards: append([]string(nil), c.ParentShards...)}
		if c.HashKeyRange != nil {
			out[i].HashKeyRange = &types.HashKeyRange{
				StartingHashKey: ptr(deref(c.HashKeyRange.StartingHashKey)),
				EndingHashKey:   ptr(deref(c.HashKeyRange.EndingHashKey)),
			}
		}
	}
	return out
}
