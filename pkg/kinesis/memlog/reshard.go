package memlog

import (
	"context"
	"strconv"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Resharding. AWS answers a reshard at once and carries it out over seconds while the stream is
// UPDATING; a Log carries it out before answering, so the stream is never UPDATING and tests do
// not wait. Each operation is atomic: puts, reads and listings see the stream before it or after
// it (see plan). Puts that race a reshard are routed again to the shard that now owns their key,
// so none is lost and none lands in a closed shard after its EndingSequenceNumber.
//
// Like AWS, the operations refuse ON_DEMAND streams, whose shards AWS manages.

const (
	maxStreamShards = 10000  // open shards UpdateShardCount may give one stream
	maxTargetShards = 100000 // the API's own bound on TargetShardCount
	hashKeyPattern  = `0|([1-9]\d{0,38})`
)

// SplitShard closes ShardToSplit and opens two children: one owning the hash keys below
// NewStartingHashKey, the other the rest. As on AWS, NewStartingHashKey must be greater than one
// plus the shard's StartingHashKey and less than its EndingHashKey, so each child owns at least
// two keys, and the split must not take the account's open shards over Config.ShardLimit.
func (l *Log) SplitShard(ctx context.Context, in *awskinesis.SplitShardInput, _ ...func(*awskinesis.Options)) (*awskinesis.SplitShardOutput, error) {
	if in == nil {
		in = &awskinesis.SplitShardInput{}
	}
	call := Call{Op: "SplitShard", Stream: refName(in.StreamName, in.StreamARN), ShardID: deref(in.ShardToSplit)}
	if err := l.before(ctx, call); err != nil {
		return nil, err
	}
	var c checks
	r := l.parseRef(&c, in.StreamName, in.StreamARN)
	if c.required(top("shardToSplit"), in.ShardToSplit) {
		c.name(top("shardToSplit"), *in.ShardToSplit)
	}
	key, keyOK := hashKey{}, false
	if c.required(top("newStartingHashKey"), in.NewStartingHashKey) {
		if !validHashKeyString(*in.NewStartingHashKey) {
			c.fail(in.NewStartingHashKey, top("newStartingHashKey"), "satisfy regular expression pattern: "+hashKeyPattern)
		}
		key, keyOK = parseHashKey(*in.NewStartingHashKey) // not ok when over 2^128-1: out of every range
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	st, p, unlock, err := l.beginReshard(r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sh, err := l.reshardable(p, *in.ShardToSplit)
	if err != nil {
		return nil, err
	}
	lo, hi := sh.hashes.start, sh.hashes.end
	if !keyOK || key.cmp(lo) <= 0 || key.prev().cmp(lo) <= 0 || key.cmp(hi) >= 0 {
		return nil, errInvalid("NewStartingHashKey %s used in SplitShard() on shard %s in stream %s under account %s "+
			"is not both greater than one plus the shard's StartingHashKey %s and less than the shard's EndingHashKey %s.",
			*in.NewStartingHashKey, sh.id, st.name, l.account, sh.hashes.startStr, sh.hashes.endStr)
	}
	if open := l.openShardsLocked(); open+1 > l.shardLimit {
		return nil, l.errShardLimit(open, 1)
	}
	p.split(sh, key)
	p.commit()
	p.wakeClosed()
	return &awskinesis.SplitShardOutput{}, nil
}

// MergeShards closes ShardToMerge and AdjacentShardToMerge, two open shards whose hash key ranges
// meet (in either order), and opens one child owning both ranges, with ParentShardId
// ShardToMerge and AdjacentParentShardId AdjacentShardToMerge.
func (l *Log) MergeShards(ctx context.Context, in *awskinesis.MergeShardsInput, _ ...func(*awskinesis.Options)) (*awskinesis.MergeShardsOutput, error) {
	if in == nil {
		in = &awskinesis.MergeShardsInput{}
	}
	call := Call{Op: "MergeShards", Stream: refName(in.StreamName, in.StreamARN), ShardID: deref(in.ShardToMerge)}
	if err := l.before(ctx, call); err != nil {
		return nil, err
	}
	var c checks
	r := l.parseRef(&c, in.StreamName, in.StreamARN)
	if c.required(top("shardToMerge"), in.ShardToMerge) {
		c.name(top("shardToMerge"), *in.ShardToMerge)
	}
	if c.required(top("adjacentShardToMerge"), in.AdjacentShardToMerge) {
		c.name(top("adjacentShardToMerge"), *in.AdjacentShardToMerge)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	st, p, unlock, err := l.beginReshard(r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	a, err := l.reshardable(p, *in.ShardToMerge)
	if err != nil {
		return nil, err
	}
	b, err := l.reshardable(p, *in.AdjacentShardToMerge)
	if err != nil {
		return nil, err
	}
	if !follows(a, b) && !follows(b, a) {
		return nil, errInvalid("Shards %s and %s in stream %s under account %s are not an adjacent pair of shards eligible for merging",
			a.id, b.id, st.name, l.account)
	}
	p.merge(a, b)
	p.commit()
	p.wakeClosed()
	return &awskinesis.MergeShardsOutput{}, nil
}

// UpdateShardCount gives the stream TargetShardCount open shards of equal hash key ranges (the
// ranges CreateStream would give), by UNIFORM_SCALING, the only ScalingType. As on AWS it is
// carried out as splits and merges of single shards (see plan.rescale), so it leaves closed
// shards behind, some of them short-lived and empty, and every new shard has at most a parent
// and an adjacent parent: 2 -> 4 splits each shard once; 4 -> 2 merges neighbours; 4 -> 3 splits
// the second and third quarters at the thirds, then merges each third's two pieces.
//
// AWS's limits hold, with its LimitExceededException and messages: at most double and at least
// half the current open shards (so 3 -> 1 is refused: 1 is below 1.5), at most 10000 per stream,
// and within Config.ShardLimit, counting the open shards the stream ends with (AWS also counts
// its short-lived shards while it works; here they are closed before the call returns). AWS's
// limit of ten calls per rolling 24 hours is deliberately not modelled: tests reshard far more
// often than that, and waiting a day is not a test.
func (l *Log) UpdateShardCount(ctx context.Context, in *awskinesis.UpdateShardCountInput, _ ...func(*awskinesis.Options)) (*awskinesis.UpdateShardCountOutput, error) {
	if in == nil {
		in = &awskinesis.UpdateShardCountInput{}
	}
	if err := l.before(ctx, Call{Op: "UpdateShardCount", Stream: refName(in.StreamName, in.StreamARN)}); err != nil {
		return nil, err
	}
	r, n, err := l.checkUpdateShardCount(in)
	if err != nil {
		return nil, err
	}
	st, p, unlock, err := l.beginReshard(r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cur := len(p.open)
	switch {
	case n > maxStreamShards:
		return nil, errLimit("Target shard count or number of open shards cannot be greater than %d. "+
			"Current open shard count: %d, Target shard count: %d", maxStreamShards, cur, n)
	case n > 2*cur:
		return nil, errLimit("UpdateShardCount cannot scale up over double your current open shard count. "+
			"Current open shard count: %d, Target shard count: %d", cur, n)
	case 2*n < cur:
		return nil, errLimit("UpdateShardCount cannot scale down below half your current open shard count. "+
			"Current open shard count: %d, Target shard count: %d", cur, n)
	}
	if open := l.openShardsLocked(); open-cur+n > l.shardLimit {
		return nil, l.errShardLimit(open, n-cur)
	}
	p.rescale(n)
	if len(p.closes) > 0 {
		p.commit()
		p.wakeClosed()
	}
	return &awskinesis.UpdateShardCountOutput{
		CurrentShardCount: ptr(int32(cur)),
		TargetShardCount:  ptr(int32(n)),
		StreamName:        ptr(st.name),
		StreamARN:         ptr(st.arn),
	}, nil
}

// checkUpdateShardCount validates an UpdateShardCount request's members, returning the stream
// reference and the target count.
func (l *Log) checkUpdateShardCount(in *awskinesis.UpdateShardCountInput) (streamRef, int, error) {
	var c checks
	r := l.parseRef(&c, in.StreamName, in.StreamARN)
	switch t := in.ScalingType; t {
	case types.ScalingTypeUniformScaling:
	case "":
		c.fail(nil, top("scalingType"), "not be null")
	default:
		c.fail(ptr(string(t)), top("scalingType"), "satisfy enum value set: [UNIFORM_SCALING]")
	}
	n := 0
	switch {
	case in.TargetShardCount == nil:
		c.fail(nil, top("targetShardCount"), "not be null")
	case *in.TargetShardCount < 1:
		c.fail(ptr(strconv.Itoa(int(*in.TargetShardCount))), top("targetShardCount"), "have value greater than or equal to 1")
	case *in.TargetShardCount > maxTargetShards:
		c.fail(ptr(strconv.Itoa(int(*in.TargetShardCount))), top("targetShardCount"), "have value less than or equal to 100000")
	default:
		n = int(*in.TargetShardCount)
	}
	return r, n, c.err()
}

// beginReshard finds the stream r names and starts a plan of changes to its shards, holding
// l.mu (which serialises reshards) until unlock is called.
func (l *Log) beginReshard(r streamRef) (st *stream, p *plan, unlock func(), err error) {
	if st, err = l.findReshardable(r); err != nil {
		return nil, nil, nil, err
	}
	l.mu.Lock()
	if p, err = l.newPlanLocked(st); err != nil {
		l.mu.Unlock()
		return nil, nil, nil, err
	}
	return st, p, l.mu.Unlock, nil
}

// findReshardable resolves the stream of a reshard request, refusing an ON_DEMAND stream as AWS
// does.
func (l *Log) findReshardable(r streamRef) (*stream, error) {
	st, err := l.find(r)
	if err != nil {
		return nil, err
	}
	if st.mode == types.StreamModeOnDemand {
		return nil, &types.ValidationException{Message: ptr("Request is invalid. Stream " + st.name +
			" under account " + l.account + " is in On-Demand mode.")}
	}
	return st, nil
}

// newPlanLocked starts a plan for st, unless st was deleted since it was found. The caller holds
// l.mu.
func (l *Log) newPlanLocked(st *stream) (*plan, error) {
	if (*l.streams.Load())[st.name] != st {
		return nil, l.errStreamNotFound(st.name)
	}
	return newPlan(st, l.now().UnixMilli()), nil
}

// reshardable finds the shard called id for a split or merge: it must exist, not have aged out,
// and be open.
func (l *Log) reshardable(p *plan, id string) (*shard, error) {
	sh := p.old.byID(id)
	if sh == nil || p.old.state[sh.index].expired {
		return nil, errNotFound("Could not find shard %s in stream %s under account %s.", id, p.st.name, l.account)
	}
	if !p.isOpen(sh) {
		return nil, errInvalid("Shard %s in stream %s under account %s has already been merged or split, "+
			"and thus is not eligible for merging or splitting.", sh.id, p.st.name, l.account)
	}
	return sh, nil
}

// follows reports whether b's hash key range starts right after a's ends.
func follows(a, b *shard) bool {
	return a.hashes.end != maxHashKey && a.hashes.end.next() == b.hashes.start
}

// validHashKeyString checks a hash key against the API's pattern, 0|([1-9]\d{0,38}).
func validHashKeyString(s string) bool {
	if len(s) == 0 || len(s) > 39 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	return allDigits(s)
}
