package memlog

import (
	"context"
	"maps"
	"sort"
	"sync/atomic"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// stream is one stream. Its shard set is replaced whole (copy on write) when shards change, so
// routing and lookups never lock.
type stream struct {
	name         string
	arn          string
	incarnation  uint64 // distinguishes this stream from a deleted one of the same name
	created      time.Time
	mode         types.StreamMode
	maxRecordKiB int32
	maxRecord    int // bytes of data + partition key a record may have
	shards       atomic.Pointer[shardSet]
	usage        usage // what the stream was charged (Usage), and its per-stream quotas
}

// shardSet is a stream's shards at one moment. A reshard or an expiry publishes a new one whole,
// so whoever loads a set sees every shard as it was at that moment.
type shardSet struct {
	all   []*shard     // by index, so all[i].id is shardID(i); includes closed shards
	open  []*shard     // open shards ordered by starting hash key; together they cover the key space
	state []shardState // by index: what the listing shows of each shard at this moment
}

// shardState is what a shardSet records of one shard beyond the shard itself: whether it is
// closed (and how it ended) and whether it has aged out of the stream.
type shardState struct {
	endSeq  string // EndingSequenceNumber; "" while the shard is open
	closed  int64  // Unix milliseconds of the close; 0 while open
	expired bool   // closed and past retention: no longer listed, no new iterators
}

// isOpen reports whether the shard at index i is open in this set.
func (set *shardSet) isOpen(i int) bool { return set.state[i].endSeq == "" }

// route returns the open shard whose hash key range holds h.
func (set *shardSet) route(h hashKey) *shard {
	i := sort.Search(len(set.open), func(i int) bool { return set.open[i].hashes.start.cmp(h) > 0 })
	return set.open[max(i-1, 0)]
}

// byID returns the shard called id, or nil.
func (set *shardSet) byID(id string) *shard {
	const prefix = "shardId-"
	if len(id) != len(prefix)+12 || id[:len(prefix)] != prefix {
		return nil
	}
	i, ok := parseDigits(id[len(prefix):])
	if !ok || i >= uint64(len(set.all)) {
		return nil
	}
	return set.all[i]
}

// CreateStream creates a stream that is ACTIVE at once (AWS takes seconds; tests should not
// wait). ShardCount is required for a PROVISIONED stream; an ON_DEMAND stream gets ShardCount
// shards if given, else 4, as AWS starts one. MaxRecordSizeInKiB (1024..10240, default 1024)
// sets the stream's largest record.
func (l *Log) CreateStream(ctx context.Context, in *awskinesis.CreateStreamInput, _ ...func(*awskinesis.Options)) (*awskinesis.CreateStreamOutput, error) {
	if in == nil {
		in = &awskinesis.CreateStreamInput{}
	}
	if err := l.before(ctx, Call{Op: "CreateStream", Stream: deref(in.StreamName)}); err != nil {
		return nil, err
	}
	var c checks
	if c.required(top("streamName"), in.StreamName) {
		c.name(top("streamName"), *in.StreamName)
	}
	mode := types.StreamModeProvisioned
	if in.StreamModeDetails != nil {
		mode = in.StreamModeDetails.StreamMode
		if mode != types.StreamModeProvisioned && mode != types.StreamModeOnDemand {
			v := ptr(string(mode))
			if mode == "" {
				v = nil
			}
			c.fail(v, top("streamModeDetails.streamMode"), "satisfy enum value set: [PROVISIONED, ON_DEMAND]")
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	name := *in.StreamName
	count, err := newShardCount(name, in.ShardCount, mode)
	if err != nil {
		return nil, err
	}
	kib := int32(defaultRecordKiB)
	if in.MaxRecordSizeInKiB != nil {
		kib = *in.MaxRecordSizeInKiB
		if kib < defaultRecordKiB || kib > maxRecordKiB {
			return nil, errInvalid("MaxRecordSizeInKiB must be between %d and %d, but was %d.", defaultRecordKiB, maxRecordKiB, kib)
		}
	}
	return &awskinesis.CreateStreamOutput{}, l.addStream(name, count, mode, kib)
}

func newShardCount(name string, count *int32, mode types.StreamMode) (int, error) {
	switch {
	case count == nil && mode == types.StreamModeOnDemand:
		return onDemandShards, nil
	case count == nil:
		return 0, errInvalid("ShardCount is required for stream %s because its StreamMode is PROVISIONED.", name)
	case *count < 1:
		return 0, errInvalid("ShardCount %d for stream %s is invalid: it must be at least 1.", *count, name)
	}
	return int(*count), nil
}

// addStream registers a new stream, under the shard quota.
func (l *Log) addStream(name string, count int, mode types.StreamMode, kib int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.streams.Load()
	if old[name] != nil {
		return errInUse("Stream %s under account %s already exists.", name, l.account)
	}
	if open := l.openShardsLocked(); open+count > l.shardLimit || l.incarnations >= maxIncarnate {
		return l.errShardLimit(open, count)
	}
	l.incarnations++
	st := &stream{
		name:         name,
		arn:          l.arn(name),
		incarnation:  l.incarnations,
		created:      l.now().Truncate(time.Millisecond),
		mode:         mode,
		maxRecordKiB: kib,
		maxRecord:    int(kib) * 1024,
	}
	set := &shardSet{all: make([]*shard, count), state: make([]shardState, count)}
	for i, r := range splitHashSpace(count) {
		set.all[i] = newShard(i, st.incarnation, r, st.created.UnixMilli())
	}
	set.open = set.all
	st.shards.Store(set)
	next := maps.Clone(old)
	next[name] = st
	l.streams.Store(&next)
	return nil
}

// DeleteStream removes a stream at once, with its records. Iterators and NextTokens of the
// stream fail with ResourceNotFoundException from then on, even if a stream of the same name is
// created again.
func (l *Log) DeleteStream(ctx context.Context, in *awskinesis.DeleteStreamInput, _ ...func(*awskinesis.Options)) (*awskinesis.DeleteStreamOutput, error) {
	if in == nil {
		in = &awskinesis.DeleteStreamInput{}
	}
	if err := l.before(ctx, Call{Op: "DeleteStream", Stream: refName(in.StreamName, in.StreamARN)}); err != nil {
		return nil, err
	}
	st, err := l.resolve(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.streams.Load()
	if old[st.name] != st {
		return nil, l.errStreamNotFound(st.name)
	}
	next := maps.Clone(old)
	delete(next, st.name)
	l.streams.Store(&next)
	return &awskinesis.DeleteStreamOutput{}, nil
}

// DescribeStreamSummary describes a stream as AWS does for an ACTIVE, unencrypted stream with no
// enhanced monitoring and no consumers, with 24 hours of retention.
func (l *Log) DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, _ ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	if in == nil {
		in = &awskinesis.DescribeStreamSummaryInput{}
	}
	if err := l.before(ctx, Call{Op: "DescribeStreamSummary", Stream: refName(in.StreamName, in.StreamARN)}); err != nil {
		return nil, err
	}
	st, err := l.resolve(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	return &awskinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{
		StreamName:              ptr(st.name),
		StreamARN:               ptr(st.arn),
		StreamStatus:            types.StreamStatusActive,
		StreamModeDetails:       &types.StreamModeDetails{StreamMode: st.mode},
		RetentionPeriodHours:    ptr(int32(24)),
		StreamCreationTimestamp: ptr(st.created),
		EnhancedMonitoring:      []types.EnhancedMetrics{{ShardLevelMetrics: []types.MetricsName{}}},
		EncryptionType:          types.EncryptionTypeNone,
		OpenShardCount:          ptr(int32(len(st.shards.Load().open))),
		ConsumerCount:           ptr(int32(l.consumerCount(st))),
		MaxRecordSizeInKiB:      ptr(st.maxRecordKiB),
	}}, nil
}
