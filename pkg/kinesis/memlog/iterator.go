package memlog

import (
	"context"
	"encoding/binary"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Token kinds, the first byte of every sealed token, so an iterator is never taken for a
// NextToken or the other way round.
const (
	tokIterator  = 1
	tokNextToken = 2
)

// iterator is what a shard iterator carries. It holds the absolute ordinal of the next record
// to read, so GetRecords starts there directly instead of searching.
//
// Encoded (before sealing) as: kind (1) | incarnation (8) | shard index (4) | position (8) |
// issue time in Unix ms (8) | stream name, all big-endian.
type iterator struct {
	stream      string
	incarnation uint64 // of the stream, so a recreated stream's iterators do not carry over
	shard       int
	pos         uint64 // ordinal of the next record to read
	issued      int64  // Unix milliseconds, for expiry
}

const iterHeader = 1 + 8 + 4 + 8 + 8

func (l *Log) encodeIterator(it iterator) string {
	b := make([]byte, 0, iterHeader+len(it.stream)+macLen)
	b = append(b, tokIterator)
	b = binary.BigEndian.AppendUint64(b, it.incarnation)
	b = binary.BigEndian.AppendUint32(b, uint32(it.shard))
	b = binary.BigEndian.AppendUint64(b, it.pos)
	b = binary.BigEndian.AppendUint64(b, uint64(it.issued))
	b = append(b, it.stream...)
	return l.sign.seal(b)
}

// decodeIterator opens a shard iterator. Anything this Log did not issue is an
// InvalidArgumentException, as on AWS.
func (l *Log) decodeIterator(s string) (iterator, error) {
	msg, ok := l.sign.open(s)
	if !ok || len(msg) <= iterHeader || msg[0] != tokIterator {
		return iterator{}, errInvalid("Invalid ShardIterator.")
	}
	return iterator{
		incarnation: binary.BigEndian.Uint64(msg[1:]),
		shard:       int(binary.BigEndian.Uint32(msg[9:])),
		pos:         binary.BigEndian.Uint64(msg[13:]),
		issued:      int64(binary.BigEndian.Uint64(msg[21:])),
		stream:      string(msg[iterHeader:]),
	}, nil
}

// checkFresh fails an iterator issued more than five minutes before now, with AWS's message.
func checkFresh(it iterator, now time.Time) error {
	issued := time.UnixMilli(it.issued)
	if now.Sub(issued) <= iteratorLifetime {
		return nil
	}
	return &types.ExpiredIteratorException{Message: ptr("Iterator expired. The iterator was created at time " +
		amzTime(issued) + " while right now it is " + amzTime(now) +
		" which is further in the future than the tolerated delay of 300000 milliseconds.")}
}

// target finds the shard an iterator reads; a deleted or recreated stream no longer has it.
func (l *Log) target(it iterator) (*stream, *shard, error) {
	st := l.lookup(it.stream)
	if st == nil || st.incarnation != it.incarnation {
		return nil, nil, l.errShardNotFound(shardID(it.shard), it.stream)
	}
	set := st.shards.Load()
	if it.shard >= len(set.all) {
		return nil, nil, l.errShardNotFound(shardID(it.shard), it.stream)
	}
	return st, set.all[it.shard], nil
}

// GetShardIterator returns an iterator, valid for five minutes by the Log's clock, positioned by
// one of the five iterator types. A sequence number must be one this stream's shard issued, and
// its record (for AFTER_SEQUENCE_NUMBER, the record after it) must not have been trimmed by
// retention: an expired checkpoint is an InvalidArgumentException, as on AWS, not a silent jump
// to the trim horizon. A closed shard that retention has passed is a ResourceNotFoundException.
func (l *Log) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, _ ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	if in == nil {
		in = &awskinesis.GetShardIteratorInput{}
	}
	call := Call{Op: "GetShardIterator", Stream: refName(in.StreamName, in.StreamARN), ShardID: deref(in.ShardId)}
	if err := l.before(ctx, call); err != nil {
		return nil, err
	}
	var c checks
	r := l.parseRef(&c, in.StreamName, in.StreamARN)
	if c.required(top("shardId"), in.ShardId) {
		c.name(top("shardId"), *in.ShardId)
	}
	checkIteratorType(&c, "shardIteratorType", in.ShardIteratorType)
	if err := c.err(); err != nil {
		return nil, err
	}
	st, err := l.find(r)
	if err != nil {
		return nil, err
	}
	set := st.shards.Load()
	sh := set.byID(*in.ShardId)
	if sh == nil || set.state[sh.index].expired {
		// A closed shard that retention has passed is gone, as on AWS.
		return nil, l.errShardNotFound(*in.ShardId, st.name)
	}
	now := l.now()
	if l.quotas != nil && !l.quotas.admitIterator(sh, now) {
		st.usage.throttle("GetShardIterator")
		return nil, l.errShardRate(st, sh)
	}
	pos, err := l.startPosition(st, sh, in, now)
	if err != nil {
		return nil, err
	}
	if isTrue(in.DryRun) {
		return nil, errDryRun()
	}
	it := iterator{stream: st.name, incarnation: st.incarnation, shard: sh.index, pos: pos, issued: now.UnixMilli()}
	return &awskinesis.GetShardIteratorOutput{ShardIterator: ptr(l.encodeIterator(it))}, nil
}

// checkIteratorType checks an iterator type as AWS does, naming the field (shardIteratorType in
// GetShardIterator, startingPosition.type in SubscribeToShard).
func checkIteratorType(c *checks, field string, t types.ShardIteratorType) {
	switch t {
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber,
		types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeLatest, types.ShardIteratorTypeAtTimestamp:
	case "":
		c.fail(nil, top(field), "not be null")
	default:
		c.fail(ptr(string(t)), top(field),
			"satisfy enum value set: [AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, LATEST, AT_TIMESTAMP]")
	}
}

const iteratorArgs = "Must either specify (1) AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER and StartingSequenceNumber or " +
	"(2) TRIM_HORIZON or LATEST and no StartingSequenceNumber or (3) AT_TIMESTAMP and Timestamp. "

// startPosition is the ordinal a new iterator of the requested type starts at.
func (l *Log) startPosition(st *stream, sh *shard, in *awskinesis.GetShardIteratorInput, now time.Time) (uint64, error) {
	typ, seq := in.ShardIteratorType, in.StartingSequenceNumber
	switch typ {
	case types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeLatest, types.ShardIteratorTypeAtTimestamp:
		if seq != nil {
			return 0, errInvalid(iteratorArgs+"Request specified %s and also a StartingSequenceNumber.", typ)
		}
	default:
		if seq == nil {
			return 0, errInvalid(iteratorArgs+"Request specified %s and no StartingSequenceNumber.", typ)
		}
	}
	switch typ {
	case types.ShardIteratorTypeTrimHorizon:
		return sh.horizon(), nil
	case types.ShardIteratorTypeLatest:
		return sh.latest(), nil
	case types.ShardIteratorTypeAtTimestamp:
		ts := in.Timestamp
		if ts == nil {
			return 0, errInvalid("Must specify timestampInMillis parameter for iterator of type AT_TIMESTAMP. Current request has no timestamp parameter.")
		}
		if ts.UnixMilli() > now.UnixMilli() {
			return 0, errInvalid("The timestampInMillis parameter cannot be greater than the currentTimestampInMillis. "+
				"timestampInMillis: %d, currentTimestampInMillis: %d", ts.UnixMilli(), now.UnixMilli())
		}
		return sh.atTime(ts.UnixNano()), nil
	}
	n, err := l.checkStartSeq(st, sh, *seq)
	if err != nil {
		return 0, err
	}
	pos := n.ordinal
	if typ == types.ShardIteratorTypeAfterSequenceNumber {
		pos++
	}
	// Ordinal 0 (the StartingSequenceNumber) names no record, so only records from 1 on can
	// have been trimmed away.
	if max(pos, 1) < sh.horizon() {
		return 0, errInvalid("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s "+
			"is invalid because it is older than the trim horizon of the shard: its records have passed the retention period.",
			*seq, sh.id, st.name, l.account)
	}
	return pos, nil
}

// checkStartSeq accepts a sequence number only if this very shard of this very stream issued it.
func (l *Log) checkStartSeq(st *stream, sh *shard, seq string) (seqNum, error) {
	n, ok := parseSeq(seq)
	if !ok {
		return seqNum{}, errInvalid("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid.",
			seq, sh.id, st.name, l.account)
	}
	if n.shard != uint64(sh.index) {
		return seqNum{}, errInvalid("Invalid StartingSequenceNumber. It encodes %s, while it was used in a call to a shard with %s",
			shardID(int(n.shard)), sh.id)
	}
	if n.incarnation != st.incarnation || n.ordinal > sh.newest() {
		return seqNum{}, errInvalid("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid because it did not come from this stream.",
			seq, sh.id, st.name, l.account)
	}
	return n, nil
}
