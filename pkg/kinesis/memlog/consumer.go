package memlog

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Enhanced fan-out consumers. A consumer belongs to one incarnation of a stream: the registry is
// keyed by the *stream, so a deleted stream's consumers are unreachable at once (every lookup
// first finds the live stream) and a stream created again under the same name starts with none.
// The entries of deleted streams are dropped the next time a consumer is registered.

const (
	tokConsumers          = 3   // token kind of a ListStreamConsumers NextToken
	defaultConsumerList   = 100 // consumers per ListStreamConsumers page, also the most it returns
	maxConsumerListParam  = 10000
	maxConsumerARNLen     = 2048
	maxConsumerTokenLen   = 1048576
	consumerARNPattern    = `^(arn):aws.*:kinesis:.*:\d{12}:.*stream\/[a-zA-Z0-9_.-]+\/consumer\/[a-zA-Z0-9_.-]+:[0-9]+`
	consumerTokenHeader   = 1 + 8 + 8 + 1 // kind | incarnation | issued | stream name length
	consumerTokenLifetime = nextTokenLifetime
)

// fanout is a Log's enhanced fan-out state: the registered consumers of each stream, and the SDK
// client SubscribeToShard builds its answers with (subscribe.go).
type fanout struct {
	mu        sync.Mutex
	consumers map[*stream]map[string]*consumer // by stream, then by consumer name; guarded by mu

	clientOnce sync.Once
	client     *awskinesis.Client
}

// consumer is one registered consumer. Its name, arn and registration time never change.
type consumer struct {
	name       string
	arn        string
	registered time.Time // on the Log's clock, to the millisecond

	// subs holds, by shard index, the consumer's latest successful SubscribeToShard, running or
	// not: the 5-second rule is about when a subscription was made, not whether it still runs.
	// Guarded by fanout.mu.
	subs map[int]*subscription

	// quota holds, by shard index, the consumer's SubscribeToShard calls and pushed bytes on
	// the shard, with Config.Quotas (fanout_quota.go). Guarded by fanout.mu.
	quota map[int]*fanOutQuota
}

// status is the consumer's status at now: CREATING until Config.ConsumerActivation has passed
// since it was registered, ACTIVE from then on. It is worked out when read, so no timer runs for
// it and a test's clock decides.
func (l *Log) status(c *consumer, now time.Time) types.ConsumerStatus {
	if now.Sub(c.registered) >= l.activation {
		return types.ConsumerStatusActive
	}
	return types.ConsumerStatusCreating
}

// consumerARN is the ARN AWS gives a consumer: the stream's ARN, the consumer's name and the
// Unix second it was registered.
func (l *Log) consumerARN(st *stream, name string, registered time.Time) string {
	return st.arn + "/consumer/" + name + ":" + strconv.FormatInt(registered.Unix(), 10)
}

// parseConsumerARN splits arn:PARTITION:kinesis:REGION:ACCOUNT:stream/STREAM/consumer/NAME:SECONDS.
func parseConsumerARN(arn string) (region, account, stream, name string, ok bool) {
	region, account, rest, ok := parseARN(arn)
	if !ok {
		return "", "", "", "", false
	}
	stream, rest, found := strings.Cut(rest, "/consumer/")
	if !found || !validName(stream) {
		return "", "", "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 || !validName(rest[:i]) || !allDigits(rest[i+1:]) {
		return "", "", "", "", false
	}
	return region, account, stream, rest[:i], true
}

// consumerStream is the stream a ConsumerARN names, for the fault hook; "" if it names none.
func consumerStream(arn *string) string {
	if arn == nil {
		return ""
	}
	_, _, stream, _, _ := parseConsumerARN(*arn)
	return stream
}

// consumerRef is how a request names a consumer: by ConsumerARN, or by StreamARN and
// ConsumerName.
type consumerRef struct {
	arn    *string
	stream streamRef
	name   *string
	// from a ConsumerARN that parsed:
	region, account, streamName, consumerName string
}

// parseConsumerRef reads the ConsumerARN, StreamARN and ConsumerName a request has, recording
// schema violations in c. Which consumer they name, and whether it exists, is findConsumer's
// business.
func (l *Log) parseConsumerRef(c *checks, consumerARN, streamARN, name *string) consumerRef {
	r := consumerRef{arn: consumerARN, name: name}
	if consumerARN != nil {
		c.consumerARN(top("consumerARN"), *consumerARN)
		r.region, r.account, r.streamName, r.consumerName, _ = parseConsumerARN(*consumerARN)
	}
	if streamARN != nil {
		r.stream = l.parseRef(c, nil, streamARN)
	}
	if name != nil {
		c.name(top("consumerName"), *name)
	}
	return r
}

// consumerARN checks a ConsumerARN against the API's length and pattern.
func (c *checks) consumerARN(f field, arn string) {
	switch {
	case len(arn) < 1:
		c.fail(&arn, f, "have length greater than or equal to 1")
	case len(arn) > maxConsumerARNLen:
		c.fail(&arn, f, "have length less than or equal to 2048")
	default:
		if _, _, _, _, ok := parseConsumerARN(arn); !ok {
			c.fail(&arn, f, "satisfy regular expression pattern: "+consumerARNPattern)
		}
	}
}

// findConsumerLocked resolves a consumer reference to the live stream and the consumer registered
// with it now, with AWS's errors for the ways it can fail. The caller holds l.fanout.mu.
func (l *Log) findConsumerLocked(r consumerRef) (*stream, *consumer, error) {
	var st *stream
	var name string
	switch {
	case r.arn != nil:
		if r.region != l.region || r.account != l.account {
			return nil, nil, l.errConsumerNotFound(*r.arn)
		}
		if r.stream.byARN && r.stream.arnName != r.streamName || r.name != nil && *r.name != r.consumerName {
			return nil, nil, errInvalid("ConsumerARN %s does not refer to the consumer named by StreamARN and ConsumerName.", *r.arn)
		}
		if st = l.lookup(r.streamName); st == nil {
			return nil, nil, l.errConsumerNotFound(*r.arn)
		}
		name = r.consumerName
	case r.stream.byARN && r.name != nil:
		var err error
		if st, err = l.find(r.stream); err != nil {
			return nil, nil, err
		}
		name = *r.name
	default:
		return nil, nil, errInvalid("Either ConsumerARN or both ConsumerName and StreamARN should be provided.")
	}
	c := l.fanout.consumers[st][name]
	if c == nil || r.arn != nil && c.arn != *r.arn {
		if r.arn != nil {
			return nil, nil, l.errConsumerNotFound(*r.arn)
		}
		return nil, nil, l.errConsumerNotFound(name + " under stream " + st.arn)
	}
	return st, c, nil
}

func (l *Log) errConsumerNotFound(what string) error {
	return errNotFound("Consumer %s under account %s not found.", what, l.account)
}

// RegisterStreamConsumer registers a consumer called ConsumerName with the stream StreamARN
// names, for SubscribeToShard. The answer says CREATING, as AWS's does; the consumer is ACTIVE
// once Config.ConsumerActivation (default 0: at once) has passed on the Log's clock. Names are
// unique per stream (ResourceInUseException), and a stream holds at most Config.ConsumerLimit
// consumers (LimitExceededException). Tags are accepted and not kept: a Log has no tagging.
func (l *Log) RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, _ ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error) {
	if in == nil {
		in = &awskinesis.RegisterStreamConsumerInput{}
	}
	if err := l.before(ctx, Call{Op: "RegisterStreamConsumer", Stream: refName(nil, in.StreamARN)}); err != nil {
		return nil, err
	}
	var c checks
	c.required(top("streamARN"), in.StreamARN)
	if c.required(top("consumerName"), in.ConsumerName) {
		c.name(top("consumerName"), *in.ConsumerName)
	}
	r := l.parseRef(&c, nil, in.StreamARN)
	if err := c.err(); err != nil {
		return nil, err
	}
	st, err := l.find(r)
	if err != nil {
		return nil, err
	}
	name := *in.ConsumerName
	now := l.now().Truncate(time.Millisecond)
	l.fanout.mu.Lock()
	defer l.fanout.mu.Unlock()
	l.pruneConsumersLocked()
	if l.lookup(st.name) != st {
		return nil, l.errStreamNotFound(st.name) // deleted since it was found
	}
	byName := l.fanout.consumers[st]
	if byName[name] != nil {
		return nil, errInUse("Consumer %s under stream %s already exists for account %s.", name, st.name, l.account)
	}
	if len(byName) >= l.consumerLimit {
		return nil, errLimit("Consumer limit of %d for stream %s under account %s has been reached.",
			l.consumerLimit, st.name, l.account)
	}
	if byName == nil {
		byName = map[string]*consumer{}
		if l.fanout.consumers == nil {
			l.fanout.consumers = map[*stream]map[string]*consumer{}
		}
		l.fanout.consumers[st] = byName
	}
	cons := &consumer{name: name, arn: l.consumerARN(st, name, now), registered: now, subs: map[int]*subscription{}}
	byName[name] = cons
	return &awskinesis.RegisterStreamConsumerOutput{Consumer: &types.Consumer{
		ConsumerARN:               ptr(cons.arn),
		ConsumerName:              ptr(name),
		ConsumerCreationTimestamp: ptr(now),
		ConsumerStatus:            types.ConsumerStatusCreating,
	}}, nil
}

// pruneConsumersLocked drops the consumers of deleted streams, so a Log that creates and deletes
// streams does not keep them. The caller holds l.fanout.mu.
func (l *Log) pruneConsumersLocked() {
	for st := range l.fanout.consumers {
		if l.lookup(st.name) != st {
			delete(l.fanout.consumers, st)
		}
	}
}

// lockConsumer runs the fault hook for op, then finds the consumer named by its ARN, or by
// its stream's ARN and its name, and returns it with the fan-out lock held until unlock.
func (l *Log) lockConsumer(ctx context.Context, op string, consumerARN, streamARN, name *string) (*stream, *consumer, func(), error) {
	call := Call{Op: op, Stream: refName(nil, streamARN)}
	if call.Stream == "" {
		call.Stream = consumerStream(consumerARN)
	}
	if err := l.before(ctx, call); err != nil {
		return nil, nil, nil, err
	}
	var c checks
	r := l.parseConsumerRef(&c, consumerARN, streamARN, name)
	if err := c.err(); err != nil {
		return nil, nil, nil, err
	}
	l.fanout.mu.Lock()
	st, cons, err := l.findConsumerLocked(r)
	if err != nil {
		l.fanout.mu.Unlock()
		return nil, nil, nil, err
	}
	return st, cons, l.fanout.mu.Unlock, nil
}

// DescribeStreamConsumer describes the consumer named by ConsumerARN, or by StreamARN and
// ConsumerName, with its status as of now (see RegisterStreamConsumer).
func (l *Log) DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, _ ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error) {
	if in == nil {
		in = &awskinesis.DescribeStreamConsumerInput{}
	}
	st, cons, unlock, err := l.lockConsumer(ctx, "DescribeStreamConsumer", in.ConsumerARN, in.StreamARN, in.ConsumerName)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return &awskinesis.DescribeStreamConsumerOutput{ConsumerDescription: &types.ConsumerDescription{
		ConsumerARN:               ptr(cons.arn),
		ConsumerName:              ptr(cons.name),
		ConsumerCreationTimestamp: ptr(cons.registered),
		ConsumerStatus:            l.status(cons, l.now()),
		StreamARN:                 ptr(st.arn),
	}}, nil
}

// DeregisterStreamConsumer removes the consumer named by ConsumerARN, or by StreamARN and
// ConsumerName, at once (AWS shows it DELETING for a while; a Log has nothing to wait for).
// Its open subscriptions end with a ResourceNotFoundException in their event streams, as the
// consumer no longer exists.
func (l *Log) DeregisterStreamConsumer(ctx context.Context, in *awskinesis.DeregisterStreamConsumerInput, _ ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error) {
	if in == nil {
		in = &awskinesis.DeregisterStreamConsumerInput{}
	}
	st, cons, unlock, err := l.lockConsumer(ctx, "DeregisterStreamConsumer", in.ConsumerARN, in.StreamARN, in.ConsumerName)
	if err != nil {
		return nil, err
	}
	defer unlock()
	delete(l.fanout.consumers[st], cons.name)
	gone := l.errConsumerNotFound(cons.arn)
	for _, sub := range cons.subs {
		sub.end(gone)
	}
	return &awskinesis.DeregisterStreamConsumerOutput{}, nil
}

// consumerCount is how many consumers st has registered, for DescribeStreamSummary.
func (l *Log) consumerCount(st *stream) int {
	l.fanout.mu.Lock()
	defer l.fanout.mu.Unlock()
	return len(l.fanout.consumers[st])
}
