// Package memlog is an in-memory Amazon Kinesis Data Streams behind the same method set as the
// AWS SDK's Kinesis client.
//
// It exists so the driver, Watermill's universal suite, the fault suites and the quickstart run
// the very code paths they run against AWS, with no account and no network, and fast. It is a
// model of Kinesis rather than a queue: shards own ranges of the 128-bit hash key space, records
// are routed by the MD5 of their partition key, sequence numbers are large decimal strings,
// iterators are opaque, signed and expire, and requests are validated with the SDK's typed errors
// and AWS's messages. A fault hook lets a test make any call fail, throttle or wait.
//
// Streams reshard as on AWS (SplitShard, MergeShards, UpdateShardCount): parents close with an
// EndingSequenceNumber, children name their parents, and a reader at the end of a closed shard
// gets its ChildShards. Each reshard is atomic and completes before the call returns, so a stream
// is never UPDATING. Records never expire on their own: ExpireRecords applies retention when a
// test says so, moving TRIM_HORIZON and aging out closed shards.
//
// Enhanced fan-out is there too: consumers register with a stream (RegisterStreamConsumer and
// the other consumer operations), and SubscribeToShard returns the SDK's own
// *SubscribeToShardOutput, whose event stream carries records as soon as they are stored,
// heartbeats, ChildShards at a shard's end and in-stream exceptions, decoded by the SDK from
// AWS's event-stream encoding, so a consumer's code runs the very path it runs against AWS.
//
// By default a Log enforces no rate: calls go as fast as the machine allows. Config.Quotas
// turns on AWS's documented quotas (per-shard writes and reads, GetShardIterator, the control
// plane, enhanced fan-out), answered with AWS's errors and messages and timed on the Log's
// clock, so a test sees at once, on fake time, what a producer or a consumer does at AWS's
// limits. Usage reports what a stream was charged (calls, records, bytes, PUT payload units,
// throttles), with quotas or without.
//
// The optFns argument of every method is accepted and ignored: it configures an SDK client
// (retries, endpoints, credentials), which a Log does not have.
package memlog

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Config sets what a Log needs from its surroundings. The zero Config is ready to use.
type Config struct {
	// Now is the Log's clock. Tests inject one to expire iterators and NextTokens (5 minutes)
	// and to control arrival timestamps without sleeping; it must be safe for concurrent use.
	// Default time.Now.
	Now func() time.Time

	// Region is the region written into stream ARNs and required of the ARNs that requests
	// carry, so ARN handling is exercised as on AWS. Default "us-east-1".
	Region string

	// AccountID is the account written into stream ARNs and error messages. Default
	// "000000000000".
	AccountID string

	// ShardLimit caps the open shards of all streams of the Log, as the account's shard quota
	// does on AWS (LimitExceededException). It is there so a wrong ShardCount cannot exhaust
	// memory; the default, 10000, is far above AWS's default quota so tests never meet it.
	ShardLimit int

	// ConsumerLimit caps the enhanced fan-out consumers registered with one stream, as AWS's
	// quota of 20 does (RegisterStreamConsumer answers LimitExceededException beyond it). It is
	// a field so a test can reach the limit with a couple of calls. Default 20.
	ConsumerLimit int

	// ConsumerActivation is how long a registered consumer stays CREATING before it is ACTIVE
	// (AWS takes seconds), judged by Now whenever the status is read. With the default, 0,
	// RegisterStreamConsumer reports CREATING and every later call sees ACTIVE, so tests that do
	// not care never wait; a test that does sets it and moves its clock.
	ConsumerActivation time.Duration

	// After is the Log's timer, for what a SubscribeToShard subscription waits for on the Log's
	// clock: the heartbeat event after 5 s without an event, its end after 5 minutes and, with
	// Quotas, the pause that keeps its pushes under Quotas.FanOutBytes. It must agree with Now:
	// the channel it returns delivers once Now has advanced by d or more, so a test that injects
	// a fake Now injects that fake's After too, and fires the timers it handed out as it moves
	// its clock. A subscription keeps at most two of them pending (three with Quotas). It must
	// be safe for concurrent use. Default time.After.
	After func(d time.Duration) <-chan time.Time

	// Quotas, when set, makes the Log enforce Kinesis Data Streams' documented rate quotas
	// (per-shard reads and writes, GetShardIterator, the control plane, enhanced fan-out):
	// &memlog.Quotas{} is AWS's numbers, each field can change one. Default nil: no quota is
	// enforced, and calls go as fast as the machine allows. Usage counts either way.
	Quotas *Quotas
}

const (
	defaultRegion     = "us-east-1"
	defaultAccountID  = "000000000000"
	defaultShardLimit = 10000
	defaultConsumers  = 20
)

// Log is one in-memory Kinesis "account in a region": a set of streams. It is safe for
// concurrent use. Streams are found without locking; each shard has its own lock, so shards are
// written and read in parallel.
type Log struct {
	now        func() time.Time
	region     string
	account    string
	shardLimit int
	sign       *signer

	consumerLimit int
	activation    time.Duration
	after         func(time.Duration) <-chan time.Time
	fanout        fanout // registered consumers and the SDK client behind SubscribeToShard

	mu           sync.Mutex // serialises CreateStream, DeleteStream, reshards and ExpireRecords
	incarnations uint64     // streams created so far; guarded by mu
	streams      atomic.Pointer[map[string]*stream]

	quotas *limits // nil unless Config.Quotas is set

	fault      atomic.Pointer[FaultFunc]
	entryFault atomic.Pointer[EntryFaultFunc]
}

// New returns an empty Log (no streams) configured by cfg, with defaults for its zero fields.
func New(cfg Config) *Log {
	l := &Log{
		now:        cfg.Now,
		region:     cfg.Region,
		account:    cfg.AccountID,
		shardLimit: cfg.ShardLimit,
		sign:       newSigner(),

		consumerLimit: cfg.ConsumerLimit,
		activation:    cfg.ConsumerActivation,
		after:         cfg.After,
		quotas:        newLimits(cfg.Quotas),
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.region == "" {
		l.region = defaultRegion
	}
	if l.account == "" {
		l.account = defaultAccountID
	}
	if l.shardLimit <= 0 {
		l.shardLimit = defaultShardLimit
	}
	if l.consumerLimit <= 0 {
		l.consumerLimit = defaultConsumers
	}
	if l.after == nil {
		l.after = time.After
	}
	l.streams.Store(&map[string]*stream{})
	return l
}

// lookup returns the live stream called name, or nil.
func (l *Log) lookup(name string) *stream {
	return (*l.streams.Load())[name]
}

// before runs the fault hook, then refuses to start a call whose context is already done, as the
// SDK does, then counts the call and holds it to its control-plane quota (meter). It is the
// first thing every operation does.
func (l *Log) before(ctx context.Context, call Call) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if f := l.fault.Load(); f != nil && *f != nil {
		if err := (*f)(ctx, call); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.meter(call)
}

// isTrue reads an optional request flag such as DryRun.
func isTrue(b *bool) bool { return b != nil && *b }

// deref reads an optional string, "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ptr returns a pointer to a copy of v, so callers cannot reach the Log's own memory.
func ptr[T any](v T) *T { return &v }
