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
// Encoded (before sealing) as: kind (1) | incarnation (8) | from (4) | open only (1) |
// issue time in Unix ms (8) | stream name.
type listQuery struct {
	st       *stream
	stream   string
	inc      uint64
	from     int  // index of the first shard to consider
	openOnly bool // AT_LATEST: only shards that are open now
	issued   int64
}

const tokenHeader = 1 + 8 + 4 + 1 + 8

// ListShards lists a stream's shards in shard id order, MaxResults (1..10000, default 1000) at a
// time, with a NextToken (valid five minutes) while more remain. A NextToken must come alone,
// without StreamName, StreamARN, ExclusiveStartShardId, ShardFilter or StreamCreationTimestamp.
//
// Without resharding every shard is open, so of the ShardFilter types only AFTER_SHARD_ID
// narrows the list; AT_LATEST keeps open shards; the trim-horizon and timestamp types list all.
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
		case types.ShardFilterTypeAtLatest:
			q.openOnly = true
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

// listPage returns up to limit shards of q, and a NextToken if more remain.
func (l *Log) listPage(q listQuery, limit int) *awskinesis.ListShardsOutput {
	all := q.st.shards.Load().all
	out := &awskinesis.ListShardsOutput{Shards: []types.Shard{}}
	i := q.from
	for ; i < len(all) && len(out.Shards) < limit; i++ {
		if d, closed := all[i].describe(); !closed || !q.openOnly {
			out.Shards = append(out.Shards, d)
		}
	}
	for ; i < len(all); i++ {
		if !q.openOnly || !all[i].isClosed() {
			q.from, q.issued = i, l.now().UnixMilli()
			out.NextToken = ptr(l.encodeNextToken(q))
			break
		}
	}
	return out
}

func (s *shard) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// describe is the shard as ListShards shows it, and whether it is closed.
func (s *shard) describe() (types.Shard, bool) {
	s.mu.RLock()
	closed, endSeq := s.closed, s.endSeq
	s.mu.RUnlock()
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
	if closed {
		d.SequenceNumberRange.EndingSequenceNumber = ptr(endSeq)
	}
	return d, closed
}

func (l *Log) encodeNextToken(q listQuery) string {
	b := make([]byte, 0, tokenHeader+len(q.stream)+macLen)
	b = append(b, tokNextToken)
	b = binary.BigEndian.AppendUint64(b, q.inc)
	b = binary.BigEndian.AppendUint32(b, uint32(q.from))
	open := byte(0)
	if q.openOnly {
		open = 1
	}
	b = append(b, open)
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
		inc:      binary.BigEndian.Uint64(msg[1:]),
		from:     int(binary.BigEndian.Uint32(msg[9:])),
		openOnly: msg[13] == 1,
		issued:   int64(binary.BigEndian.Uint64(msg[14:])),
		stream:   string(msg[tokenHeader:]),
	}, nil
}
