package admin

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Lease inspection answers what an operator asks first when a group lags or a shard seems
// stuck: who holds each shard, where its checkpoint is, whether a handoff is waiting, how long
// the oldest record the group has not finished has been waiting, and whether each owner is
// still alive (its counters seen to move). It only reads: it never writes a lease, so it is
// safe to run against a live group at any time.

// defaultInspectConcurrency is InspectConfig.Concurrency's default: enough to inspect a stream
// of hundreds of shards in seconds, few enough not to crowd the account's control-plane calls.
const defaultInspectConcurrency = 4

// DefaultInspectWatch is InspectConfig.Watch's default: the default LeaseRenewInterval (a third
// of the default LeaseDuration of 10 s, 3.3 s) plus a margin, so that an owner that renews its
// leases on the default schedule is seen to move at least once, even without member records.
const DefaultInspectWatch = 4 * time.Second

// NoWatch, as InspectConfig.Watch, lists the leases once: no owner is watched, so none is
// known to be alive or not.
const NoWatch time.Duration = -1

// inspectAttempts is how many times one shard's measurement is tried when Kinesis throttles it
// or fails transiently: its reads share the shard's 5 reads per second with the group itself.
const inspectAttempts = 4

// InspectConfig configures InspectLeases.
type InspectConfig struct {
	// Stream is the Kinesis stream whose leases to show. Required.
	Stream string
	// ConsumerGroup is the group, as in SubscriberConfig.Group.Name. Required.
	ConsumerGroup string
	// Client is the Kinesis client: *kinesis.Client of aws-sdk-go-v2, or a *memlog.Log.
	// Required. InspectLeases calls ListShards and, for each shard it measures,
	// GetShardIterator and one GetRecords with Limit 1.
	Client kinesis.KinesisAPI
	// LeaseStore holds the group's leases: the store its subscribers use (for a LeaseTable,
	// lease.NewDynamoDBStore on that table). Required. Only List is called.
	LeaseStore lease.Store
	// SkipBehind leaves out the reads that measure how far behind each shard is (ShardLease's
	// Pending, BehindMillis and so on stay zero, Measured false), for when the stream's read
	// quota is too precious even for one read per shard. Default false.
	SkipBehind bool
	// Concurrency is how many shards are measured at once. Default 4. Must not be negative.
	Concurrency int
	// RequestTimeout bounds each call to Kinesis and the lease store. Default 10 s. Must not
	// be negative.
	RequestTimeout time.Duration
	// Watch is how long the leases (and member records, when the store keeps them) are
	// watched for moving counters, which tell a live owner from a dead one (see OwnerReport).
	// They are listed at the start, then every Watch/8 (at least 250 ms apart) until Watch
	// has passed, while the shards are measured; InspectLeases returns after Watch or once
	// every shard is measured, whichever is later. Each listing is one List (and one Members)
	// call of the store. Default DefaultInspectWatch (4 s). For a group whose store keeps no
	// member records and whose LeaseRenewInterval is longer than the default, set it above
	// that interval, or live owners may show no move. NoWatch lists them once. Must not be
	// negative otherwise.
	Watch time.Duration
	// Now is the clock that BehindMillis and GroupReport.InspectedAt are read from. Tests
	// inject one. Default time.Now. The watch is timed on the time package's monotonic clock,
	// not on Now.
	Now func() time.Time
}

func (c *InspectConfig) setDefaults() {
	setDefault(&c.Concurrency, defaultInspectConcurrency)
	setDefault(&c.RequestTimeout, defaultRequestTimeout)
	setDefault(&c.Watch, DefaultInspectWatch)
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every problem of the config at once (errors.Join), each naming its field.
// Zero values that have a default are valid.
func (c InspectConfig) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kinesis: InspectConfig."+format, args...))
	}
	if err := kinesis.ValidateStreamName(c.Stream); err != nil {
		add("Stream: %w", err)
	}
	switch {
	case c.ConsumerGroup == "":
		add("ConsumerGroup is empty; name the group whose leases to show (SubscriberConfig.Group.Name of its subscribers)")
	case !utf8.ValidString(c.ConsumerGroup):
		add("ConsumerGroup %q is not valid UTF-8, so no lease table can hold leases of it", c.ConsumerGroup)
	}
	if isNil(c.Client) {
		add("Client is nil; pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log")
	}
	if isNil(c.LeaseStore) {
		add("LeaseStore is nil; pass the group's store (lease.NewDynamoDBStore on its lease table, or its lease.MemoryStore)")
	}
	if c.Concurrency < 0 {
		add("Concurrency is %d; it must not be negative", c.Concurrency)
	}
	if c.RequestTimeout < 0 {
		add("RequestTimeout is %s; it must not be negative", c.RequestTimeout)
	}
	if c.Watch < 0 && c.Watch != NoWatch {
		add("Watch is %s; it must not be negative (NoWatch lists the leases once)", c.Watch)
	}
	return errors.Join(errs...)
}

// ShardState is whether Kinesis still lists a shard, and whether it takes new records.
type ShardState string

const (
	// ShardOpen is a shard that takes new records (ListShards gives it no
	// EndingSequenceNumber).
	ShardOpen ShardState = "open"
	// ShardClosed is a parent of a split or merge: it has an EndingSequenceNumber and takes
	// no new records, but its records can still be read.
	ShardClosed ShardState = "closed"
	// ShardGone is a shard that has a lease but that ListShards no longer lists: it aged out
	// of the stream's retention period, or the stream was deleted and created again.
	ShardGone ShardState = "gone"
)

// GroupReport is what InspectLeases found: one entry per shard, sorted by shard id, and one
// per owner, sorted by worker id. Encode it with encoding/json (or WriteJSON) for machines, or
// WriteTable for people.
type GroupReport struct {
	// Stream and ConsumerGroup are those of the InspectConfig.
	Stream        string `json:"stream"`
	ConsumerGroup string `json:"consumer_group"`
	// InspectedAt is when the shards were measured (InspectConfig.Now, in UTC), just after
	// the first look at the leases, which Shards show.
	InspectedAt time.Time `json:"inspected_at"`
	// Shards has every shard ListShards lists (with or without a lease) and every leased
	// shard it no longer lists (ShardGone), sorted by shard id.
	Shards []ShardLease `json:"shards"`
	// MaxBehindMillis is the largest BehindMillis of a shard with records waiting, and
	// MaxBehindShard that shard (the first by shard id on a tie); 0 and "" when no measured
	// shard has any waiting.
	MaxBehindMillis int64  `json:"max_behind_millis"`
	MaxBehindShard  string `json:"max_behind_shard,omitempty"`

	// Owners has one entry per worker that held a lease or had a member record in any look,
	// sorted by worker id. Never null in JSON.
	Owners []OwnerReport `json:"owners"`
	// Looks is how many times the leases (and member records) were listed: 1 with NoWatch,
	// else the first look and one every Watch/8 (at least 250 ms apart) until Watch passed:
	// 9, or fewer when a listing takes longer than that, or a shorter Watch. A look that
	// failed is not counted.
	Looks int `json:"looks"`
	// WatchedMillis is the time from the start of the first look to the end of the last one;
	// the owners' "ago" are counted back from that end, about InspectedAt plus WatchedMillis.
	// 0 with one look.
	WatchedMillis int64 `json:"watched_millis"`
	// MembersKept is set when the store keeps member records (lease.Membership), whose
	// heartbeats then count as moves.
	MembersKept bool `json:"members_kept"`
	// WatchError says how many looks after the first failed, and the last one's error; ""
	// when none did. The owners' moves are timed from the looks that succeeded, so they stay
	// right, only less precise.
	WatchError string `json:"watch_error,omitempty"`
}

// ShardLease is one shard of a GroupReport: what Kinesis says of it, its lease, and how far the
// group is behind on it.
//
// "Behind" is measured by reading from where the group would go on: GetShardIterator
// AFTER_SEQUENCE_NUMBER at the checkpoint (AT_SEQUENCE_NUMBER inside a KPL aggregate,
// TRIM_HORIZON with no checkpoint, which is the group's default InitialPosition) and one
// GetRecords with Limit 1. The record it returns, if any, is the oldest the group has not
// finished; BehindMillis is how long it has been in the stream. A shard at SHARD_END is
// finished and not read.
type ShardLease struct {
	// ShardID is the shard, e.g. "shardId-000000000003".
	ShardID string `json:"shard_id"`
	// State is open, closed or gone: what ListShards says of the shard.
	State ShardState `json:"state"`
	// EndingSequenceNumber is the last sequence number of a closed shard, "" otherwise.
	EndingSequenceNumber string `json:"ending_sequence_number,omitempty"`

	// HasLease is false for a shard the group has no lease for: a new shard no coordinator has
	// listed since, a finished shard whose lease was deleted (Finished), or, for a whole group
	// without leases, a group that never ran (or a misspelt group name). The lease fields below
	// are then zero.
	HasLease bool `json:"has_lease"`
	// Owner is the worker holding the lease; "" means free.
	Owner string `json:"owner"`
	// Generation changes whenever the owner changes (take, release, handoff).
	Generation int64 `json:"generation"`
	// Counter moves on every lease write; an owner that renews keeps it moving. The report's
	// Owners say whose counters moved while watched.
	Counter int64 `json:"counter"`
	// Checkpoint is the sequence number of the last record the group finished, "SHARD_END",
	// or "" when it has finished none.
	Checkpoint string `json:"checkpoint"`
	// Parents are the shard ids this shard was split or merged from: the lease's, or, without
	// a lease, those ListShards gives. Never null in JSON.
	Parents []string `json:"parents"`
	// PendingOwner is a worker that asked for the lease to be handed over to it; "" if none.
	PendingOwner string `json:"pending_owner"`

	// Finished is set when the checkpoint is SHARD_END: every record of the shard is done. It
	// is also set, with HasLease false, for a closed shard whose lease the group deleted once
	// its children were read (a child has a lease that was taken, or is finished itself).
	Finished bool `json:"finished"`
	// Measured is set when the fields below hold an answer: the shard was read, or it is
	// finished. It is false for a shard that is gone, with SkipBehind, and when the read
	// failed (Error).
	Measured bool `json:"measured"`
	// Pending is set when at least one record after the checkpoint is waiting for the group.
	Pending bool `json:"pending"`
	// NextSequenceNumber and NextArrival are the oldest waiting record's sequence number and
	// ApproximateArrivalTimestamp (UTC).
	NextSequenceNumber string     `json:"next_sequence_number,omitempty"`
	NextArrival        *time.Time `json:"next_arrival,omitempty"`
	// BehindMillis is how long the oldest waiting record has been in the stream: InspectedAt
	// minus NextArrival, in milliseconds (at least 0; the arrival time is Kinesis's clock,
	// InspectedAt this machine's). When the read returned no record but Kinesis says more
	// are there (MillisBehindLatest > 0, which AWS does past a gap in a shard), it is
	// MillisBehindLatest. 0 when nothing is waiting.
	BehindMillis int64 `json:"behind_millis"`
	// MillisBehindLatest is Kinesis's own answer to the read: how far the read's end is from
	// the tip of the shard. With Limit 1 that is past the oldest waiting record, so it can be
	// 0 with one record waiting. (kinesalite always answers 0.)
	MillisBehindLatest int64 `json:"millis_behind_latest"`
	// CheckpointExpired is set when Kinesis refused the checkpoint as a starting point: its
	// records aged out of retention, or the stream was created again. The group resumes at
	// TRIM_HORIZON then, and the shard was measured from there.
	CheckpointExpired bool `json:"checkpoint_expired,omitempty"`
	// Error says why the shard could not be measured; "" if it was (or was not tried).
	Error string `json:"error,omitempty"`

	err error // Error as an error, for GroupReport.Err
}

// InspectLeases reports the consumer group's leases on the stream, shard by shard, with how far
// the group is behind on each, and owner by owner, with when each was last seen to move. It
// lists the shards, the leases and the member records (when the store keeps them), then
// measures each shard (see ShardLease), Concurrency at a time, while it lists the leases and
// member records again every Watch/8 until Watch has passed (see OwnerReport). It takes Watch
// (4 s by default) or as long as the measuring, whichever is longer.
//
// It fails when the config is invalid, when the stream, the leases or the member records
// cannot be listed at the start (kinesis.ErrStreamNotFound for a missing stream), or when ctx ends. A
// shard that cannot be measured does not fail the report: its Error says why, and
// GroupReport.Err joins those errors. Nor does a later look that fails (WatchError).
func InspectLeases(ctx context.Context, cfg InspectConfig) (GroupReport, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return GroupReport{}, fmt.Errorf("kinesis: invalid InspectConfig: %w", err)
	}
	cfg.Client = awscall.OneRetryLayer(cfg.Client)
	shards, err := inspectListShards(ctx, cfg)
	if err != nil {
		return GroupReport{}, err
	}
	first, err := lookAtLeases(ctx, cfg)
	if err != nil {
		return GroupReport{}, err
	}
	_, membersKept := cfg.LeaseStore.(lease.Membership)
	r := GroupReport{
		Stream:        cfg.Stream,
		ConsumerGroup: cfg.ConsumerGroup,
		InspectedAt:   cfg.Now().UTC(),
		Shards:        joinShardsAndLeases(shards, first.leases),
		MembersKept:   membersKept,
	}
	measured := make(chan struct{})
	go func() {
		defer close(measured)
		measureShards(ctx, cfg, r.Shards, r.InspectedAt)
	}()
	looks, watchErr := watchLeases(ctx, cfg, first)
	<-measured
	if err := ctx.Err(); err != nil {
		return GroupReport{}, fmt.Errorf("kinesis: inspecting group %q on stream %q: %w", cfg.ConsumerGroup, cfg.Stream, err)
	}
	r.MaxBehindMillis, r.MaxBehindShard = maxBehind(r.Shards)
	r.Owners = ownerReports(looks, r.Shards)
	r.Looks, r.WatchError = len(looks), watchErr
	r.WatchedMillis = looks[len(looks)-1].end.Sub(looks[0].start).Milliseconds()
	if len(looks) == 1 {
		r.WatchedMillis = 0
	}
	return r, nil
}

// Err joins the errors of the shards that could not be measured, each naming its shard; nil
// when every shard was.
func (r GroupReport) Err() error {
	var errs []error
	for _, s := range r.Shards {
		switch {
		case s.err != nil:
			errs = append(errs, s.err)
		case s.Error != "": // a report decoded from JSON has only the text
			errs = append(errs, fmt.Errorf("kinesis: measuring shard %q of stream %q: %s", s.ShardID, r.Stream, s.Error))
		}
	}
	return errors.Join(errs...)
}

// inspectListShards returns every shard ListShards lists, following NextToken.
func inspectListShards(ctx context.Context, cfg InspectConfig) ([]types.Shard, error) {
	var shards []types.Shard
	in := &awskinesis.ListShardsInput{StreamName: aws.String(cfg.Stream)}
	for {
		callCtx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		out, err := cfg.Client.ListShards(callCtx, in)
		cancel()
		if err != nil {
			if awscall.Classify(ctx, err) == awscall.NotFound {
				return nil, fmt.Errorf("%w: %q: %w", kinesis.ErrStreamNotFound, cfg.Stream, err)
			}
			return nil, fmt.Errorf("kinesis: listing the shards of stream %q: %w", cfg.Stream, err)
		}
		shards = append(shards, out.Shards...)
		if aws.ToString(out.NextToken) == "" {
			return shards, nil
		}
		// A request with a NextToken must not name the stream.
		in = &awskinesis.ListShardsInput{NextToken: out.NextToken}
	}
}
