package memlog

import (
	"context"
	"encoding/binary"
	"sort"
	"strconv"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// listQuery is one ListShards listing: which stream, from which shard on, and which shards.
// A NextToken carries it to the next page.
//
// Encoded (before sealing) as: kind (1) | incarnation (8) | from (4) | filter (1) |
// filter timestamp in Unix ms (8) | issue time in Unix ms (8) | stream name.
type listQuery struct {
	st     *stream
	stream string
	inc    uint64
	from   int        // index of the first shard to consider
	filter listFilter // which shards
	at     int64      // Unix ms, for listAtTime and listFromTime
	issued int64
}

// listFilter is which shards a listing holds, from a ShardFilter's type.
type listFilter byte

const (
	listAll           listFilter = iota // no filter, AFTER_SHARD_ID, FROM_TRIM_HORIZON
	listOpen                            // AT_LATEST
	listAtTrimHorizon                   // AT_TRIM_HORIZON
	listAtTime                          // AT_TIMESTAMP
	listFromTime                        // FROM_TIMESTAMP
)

const tokenHeader = 1 + 8 + 4 + 1 + 8 + 8

// ListShards lists a stream's shards in shard id order, MaxResults (1..10000, default 1000) at a
// time, with a NextToken (valid five minutes) while more remain. A NextToken must come alone,
// without StreamName, StreamARN, ExclusiveStartShardId, ShardFilter or StreamCreationTimestamp.
//
// Closed shards are listed, with their EndingSequenceNumber, until retention has passed them
// (see ExpireRecords). The ShardFilter types select as AWS documents them: AFTER_SHARD_ID the
// shards after an id; AT_LATEST the open shards; FROM_TRIM_HORIZON all; AT_TRIM_HORIZON those
// open at the trim horizon, i.e. those none of whose parents is still listed; AT_TIMESTAMP those
// open at the Timestamp (created at or before it, closed at or after it or still open), a
// Timestamp before the stream's creation counting as its creation; FROM_TIMESTAMP those open at
// or after it. A shard is created and its parents closed at the same millisecond, so at that
// instant both generations are open.
func (l *Log) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, _ ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	if in == nil {
		in = &awskinesis.ListShardsInput{}
	}
	call := Call{Op: "ListShards", Stream: refName(in.StreamName, in.StreamARN)}
	var tok listQuery
	tokErr := errInvalid("Invalid NextToken.")
	if in.NextToken != nil {
		if tok, tokErr = l.decodeNextToken(*in.NextToken); tokErr == nil && call.Stream == "" {
			call.Stream = tok.stream
		}
	}
	if err := l.before(ctx, call); err != nil {
		return nil, err
	}
	limit, err := checkListShards(in)
	if err != nil {
		return nil, err
	}
	var q listQuery
	if in.NextToken != nil {
		q, err = l.continueListing(in, tok, tokErr)
	} else {
		q, err = l.startListing(in)
	}
	if err != nil {
		return nil, err
	}
	return l.listPage(q, limit), nil
}

// checkListShards validates the members every ListShards request may have, returning the page
// size.
func checkListShards(in *awskinesis.ListShardsInput) (int, error) {
	var c checks
	if s := in.ExclusiveStartShardId; s != nil {
		c.name(top("exclusiveStartShardId"), *s)
	}
	if s := in.NextToken; s != nil && *s == "" {
		c.fail(s, top("nextToken"), "have length greater than or equal to 1")
	}
	limit := defaultListLimit
	if m := in.MaxResults; m != nil {
		s := strconv.Itoa(int(*m))
		switch {
		case *m < 1:
			c.fail(&s, top("maxResults"), "have value greater than or equal to 1")
		case *m > maxListResults:
			c.fail(&s, top("maxResults"), "have value less than or equal to 10000")
		}
		limit = int(*m)
	}
	if f := in.ShardFilter; f != nil {
		checkShardFilterType(&c, f.Type)
	}
	return limit, c.err()
}

func checkShardFilterType(c *checks, t types.ShardFilterType) {
	for _, ok := range t.Values() {
		if t == ok {
			return
		}
	}
	v := ptr(string(t))
	if t == "" {
		v = nil
	}
	c.fail(v, top("shardFilter.type"), "satisfy enum value set: [AFTER_SHARD_ID, AT_TRIM_HORIZON, "+
		"FROM_TRIM_HORIZON, AT_LATEST, AT_TIMESTAMP, FROM_TIMESTAMP]")
}

// startListing reads a first-page request.
func (l *Log) startListing(in *awskinesis.ListShardsInput) (listQuery, error) {
	var c checks
	r := l.parseRef(&c, in.StreamName, in.StreamARN)
	if err := c.err(); err != nil {
		return listQuery{}, err
	}
	if !r.byName && !r.byARN {
		return listQuery{}, errInvalid("Either NextToken or StreamName should be provided.")
	}
	st, err := l.find(r)
	if err != nil {
		return listQuery{}, err
	}
	if ts := in.StreamCreationTimestamp; ts != nil && ts.UnixMilli() != st.created.UnixMilli() {
		return listQuery{}, errNotFound("Stream %s under account %s with creation timestamp %s not found.",
			st.name, l.account, amzTime(*ts))
	}
	set := st.shards.Load()
	q := listQuery{st: st, stream: st.name, inc: st.incarnation}
	if s := in.ExclusiveStartShardId; s != nil {
		q.from = after(set, *s)
	}
	if f := in.ShardFilter; f != nil {
		switch f.Type {
		case types.ShardFilterTypeAfterShardId:
			if f.ShardId == nil {
				return listQuery{}, errInvalid("ShardFilter of type AFTER_SHARD_ID requires a ShardId.")
			}
			q.from = max(q.from, after(set, *f.ShardId))
		case types.ShardFilterTypeAtTimestamp, types.ShardFilterTypeFromTimestamp:
			if f.Timestamp == nil {
				return listQuery{}, errInvalid("ShardFilter of type %s requires a Timestamp.", f.Type)
			}
			q.filter, q.at = listFromTime, f.Timestamp.UnixMilli()
			if f.Type == types.ShardFilterTypeAtTimestamp {
				q.filter, q.at = listAtTime, max(q.at, st.created.UnixMilli())
			}
		case types.ShardFilterTypeAtLatest:
			q.filter = listOpen
		case types.ShardFilterTypeAtTrimHorizon:
			q.filter = listAtTrimHorizon
		}
	}
	return q, nil
}

// after is the index of the first shard whose id sorts after id.
func after(set *shardSet, id string) int {
	return sort.Search(len(set.all), func(i int) bool { return set.all[i].id > id })
}

// continueListing reads a NextToken request.
func (l *Log) continueListing(in *awskinesis.ListShardsInput, tok listQuery, tokErr error) (listQuery, error) {
	switch {
	case in.StreamName != nil || in.StreamARN != nil:
		return listQuery{}, errInvalid("NextToken and StreamName cannot be provided together.")
	case in.ExclusiveStartShardId != nil:
		return listQuery{}, errInvalid("NextToken and ExclusiveStartShardId cannot be provided together.")
	case in.ShardFilter != nil:
		return listQuery{}, errInvalid("NextToken and ShardFilter cannot be provided together.")
	case in.StreamCreationTimestamp != nil:
		return listQuery{}, errInvalid("NextToken and StreamCreationTimestamp cannot be provided together.")
	case tokErr != nil:
		return listQuery{}, tokErr
	}
	now := l.now()
	if issued := time.UnixMilli(tok.issued); now.Sub(issued) > nextTokenLifetime {
		return listQuery{}, &types.ExpiredNextTokenException{Message: ptr("The NextToken was issued at " +
			amzTime(issued) + ", more than 300 seconds before now (" + amzTime(now) + "), and has expired.")}
	}
	st := l.lookup(tok.stream)
	if st == nil || st.incarnation != tok.inc {
		return listQuery{}, l.errStreamNotFound(tok.stream)
	}
	tok.st = st
	return tok, nil
}

// listPage returns up to limit shards of q, and a NextToken if more remain. It reads one shard
// set, so the page shows the stream at one moment.
func (l *Log) listPage(q listQuery, limit int) *awskinesis.ListShardsOutput {
	set := q.st.shards.Load()
	out := &awskinesis.ListShardsOutput{Shards: []types.Shard{}}
	i := q.from
	for ; i < len(set.all) && len(out.Shards) < limit; i++ {
		if q.lists(set, i) {
			out.Shards = append(out.Shards, set.describe(i))
		}
	}
	for ; i < len(set.all); i++ {
		if q.lists(set, i) {
			q.from, q.issued = i, l.now().UnixMilli()
			out.NextToken = ptr(l.encodeNextToken(q))
			break
		}
	}
	return out
}

// lists reports whether the listing holds the shard at index i of set.
func (q *listQuery) lists(set *shardSet, i int) bool {
	sh, s := set.all[i], set.state[i]
	if s.expired {
		return false
	}
	open := set.isOpen(i)
	switch q.filter {
	case listOpen:
		return open
	case listAtTrimHorizon:
		return !set.listed(sh.parent) && !set.listed(sh.adjacentParent)
	case listAtTime:
		return sh.created <= q.at && (open || s.closed >= q.at)
	case listFromTime:
		return open || s.closed >= q.at
	}
	return true
}

// listed reports whether the shard called id is in the stream and not aged out.
func (set *shardSet) listed(id string) bool {
	if id == "" {
		return false
	}
	sh := set.byID(id)
	return sh != nil && !set.state[sh.index].expired
}

// describe is the shard at index i as ListShards shows it.
func (set *shardSet) describe(i int) types.Shard {
	s := set.all[i]
	d := types.Shard{
		ShardId: ptr(s.id),
		HashKeyRange: &types.HashKeyRange{
			StartingHashKey: ptr(s.hashes.startStr),
			EndingHashKey:   ptr(s.hashes.endStr),
		},
		SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: ptr(s.startSeq)},
	}
	if s.parent != "" {
		d.ParentShardId = ptr(s.parent)
	}
	if s.adjacentParent != "" {
		d.AdjacentParentShardId = ptr(s.adjacentParent)
	}
	if end := set.state[i].endSeq; end != "" {
		d.SequenceNumberRange.EndingSequenceNumber = ptr(end)
	}
	return d
}

func (l *Log) encodeNextToken(q listQuery) string {
	b := make([]byte, 0, tokenHeader+len(q.stream)+macLen)
	b = append(b, tokNextToken)
	b = binary.BigEndian.AppendUint64(b, q.inc)
	b = binary.BigEndian.AppendUint32(b, uint32(q.from))
	b = append(b, byte(q.filter))
	b = binary.BigEndian.AppendUint64(b, uint64(q.at))
	b = binary.BigEndian.AppendUint64(b, uint64(q.issued))
	b = append(b, q.stream...)
	return l.sign.seal(b)
}

func (l *Log) decodeNextToken(s string) (listQuery, error) {
	msg, ok := l.sign.open(s)
	if !ok || len(msg) <= tokenHeader || msg[0] != tokNextToken {
		return listQuery{}, errInvalid("Invalid NextToken.")
	}
	return listQuery{
		inc:    binary.BigEndian.Uint64(msg[1:]),
		from:   int(binary.BigEndian.Uint32(msg[9:])),
		filter: listFilter(msg[13]),
		at:     int64(binary.BigEndian.Uint64(msg[14:])),
		issued: int64(binary.BigEndian.Uint64(msg[22:])),
		stream: string(msg[tokenHeader:]),
	}, nil
}
