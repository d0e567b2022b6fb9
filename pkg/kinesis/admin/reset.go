package admin

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/google/uuid"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// A reset moves a consumer group's position on a stream, live, through the lease protocol and
// never around it. For each lease it moves, it
//
//  1. takes the lease under a worker id of its own (resetOwnerPrefix), conditioned on what it
//     listed, as any take is: the owner's reader is fenced, and stops delivering at its next
//     lease write (a renewal, at the latest LeaseRenewInterval later), as after any lost
//     lease. Its messages in flight are dropped (their acks can no longer checkpoint); with
//     Settle the reset first asks for the lease as a worker evening out the group does, and
//     the owner settles them and hands the lease over;
//  2. writes the new position as the lease's checkpoint (a lease.Start), creating the lease if
//     the group has none (a closed parent whose lease was deleted once it was read);
//  3. gives the lease back: taken again for the worker that owned it, in a new generation, or
//     released if nobody did. That worker starts a reader at the new position once its fenced
//     reader has exited, as it does for any lease held under its id with no reader: at no
//     moment can two readers hold the shard. The owners are notified (lease.Membership), so
//     they look at once rather than at their next renewal.
//
// Every step is a Store call every store has (List, Create, Take, Checkpoint, Release), so a
// reset needs nothing of a store beyond what a group does, and a group needs nothing new to
// obey it.

// ResetType says where ResetGroup moves a group.
type ResetType int

const (
	// ResetToTrimHorizon moves every shard to the oldest record the stream still has.
	ResetToTrimHorizon ResetType = iota + 1
	// ResetToLatest skips what is in the stream: every shard goes on with the records that
	// arrive from the reset on (from one second before it, so that a clock ahead of Kinesis's
	// by up to that loses nothing).
	ResetToLatest
	// ResetToTimestamp moves every shard to the first record that arrived at or after
	// ResetPosition.Timestamp (by Kinesis's ApproximateArrivalTimestamp).
	ResetToTimestamp
	// ResetToSequenceNumber moves one shard (ResetConfig.ShardID) to the record with
	// ResetPosition.SequenceNumber: that record is delivered again, and everything after it.
	ResetToSequenceNumber
	// ResetAfterSequenceNumber moves one shard (ResetConfig.ShardID) past the record with
	// ResetPosition.SequenceNumber: the next record after it comes next. This steps over a
	// poison record.
	ResetAfterSequenceNumber
)

func (t ResetType) String() string {
	switch t {
	case ResetToTrimHorizon:
		return "TRIM_HORIZON"
	case ResetToLatest:
		return "LATEST"
	case ResetToTimestamp:
		return "AT_TIMESTAMP"
	case ResetToSequenceNumber:
		return "AT_SEQUENCE_NUMBER"
	case ResetAfterSequenceNumber:
		return "AFTER_SEQUENCE_NUMBER"
	}
	return fmt.Sprintf("ResetType(%d)", int(t))
}

// ResetPosition is where ResetGroup moves a group.
type ResetPosition struct {
	Type ResetType
	// Timestamp is the time of ResetToTimestamp. Kinesis keeps arrival times to the
	// millisecond; a finer time is cut to its millisecond (so nothing at the time is skipped).
	Timestamp time.Time
	// SequenceNumber is the record of ResetToSequenceNumber and ResetAfterSequenceNumber, as
	// the shard's records carry it (decimal digits).
	SequenceNumber string
}

// resetLatestMargin is how long before the reset a ResetToLatest starts: Kinesis stamps arrival
// times by its own clock.
const resetLatestMargin = time.Second

// checkpoint is the checkpoint a reset made at 'at' writes for p.
func (p ResetPosition) checkpoint(at time.Time) string {
	switch p.Type {
	case ResetToLatest:
		return lease.Start{Type: lease.StartAtTimestamp, Timestamp: at.Add(-resetLatestMargin)}.Checkpoint()
	case ResetToTimestamp:
		return lease.Start{Type: lease.StartAtTimestamp, Timestamp: p.Timestamp}.Checkpoint()
	case ResetToSequenceNumber:
		return lease.Start{Type: lease.StartAtSequenceNumber, SequenceNumber: p.SequenceNumber}.Checkpoint()
	case ResetAfterSequenceNumber:
		return p.SequenceNumber // the last record finished, as any checkpoint
	}
	return lease.TrimHorizon
}

// Defaults of ResetConfig.
const (
	defaultResetSettleTimeout = 10 * time.Second
	defaultKCLFailoverTime    = 10 * time.Second
)

// resetOwnerPrefix starts the worker id a reset holds leases under. A group's workers see such
// an owner as any other; another reset refuses to run while one holds a lease.
const resetOwnerPrefix = "kinesis-reset/"

// ResetConfig configures ResetGroup.
type ResetConfig struct {
	// Stream is the Kinesis stream. Required.
	Stream string
	// ConsumerGroup is the group, as in SubscriberConfig.Group.Name. Required.
	ConsumerGroup string
	// Client is the Kinesis client: *kinesis.Client of aws-sdk-go-v2, or a *memlog.Log.
	// Required. ResetGroup calls ListShards only.
	Client kinesis.KinesisAPI
	// LeaseStore holds the group's leases: the store its subscribers use (for a LeaseTable,
	// lease.NewDynamoDBStore on that table; for a KCL application's table, kcl.NewStore).
	// Required.
	LeaseStore lease.Store

	// To is where the group goes. Required.
	To ResetPosition
	// ShardID limits the reset to one shard; "" moves every shard the stream lists. Required
	// with the sequence number positions. A shard alone is moved alone: if it was split or
	// merged, its children go on where they are.
	ShardID string

	// DryRun lists, per shard, where the group stands and where it would go, and writes
	// nothing. Default false.
	DryRun bool
	// Settle asks each owner to hand its lease over, as a worker evening out the group does:
	// the owner stops delivering, lets the messages in flight be acked or nacked for up to
	// half of its HandoffTimeout, checkpoints and hands over. Without it (the default) each
	// owner is fenced at once and its messages in flight are dropped: their acks no longer
	// checkpoint, which costs nothing, as the position is being replaced anyway.
	Settle bool
	// SettleTimeout bounds the wait for the owners to hand over with Settle; an owner that
	// has not by then is fenced. Default 10 s (the group's default HandoffTimeout).
	SettleTimeout time.Duration
	// Wait, when positive, makes ResetGroup wait up to that long for every owner to apply
	// the reset (take the lease again and start reading at the new position), and report
	// per shard when it did (ShardReset.AppliedBy, AppliedAfter). 0 (the default) returns
	// once the positions are written.
	Wait time.Duration
	// KCLFailoverTime is how long a lease held by a KCL worker must be seen standing still
	// for the worker to count as gone, on a KCL application's table (kcl.Store). A reset
	// refuses to run while a KCL worker is live. Default 10 s (the KCL's failoverTimeMillis).
	KCLFailoverTime time.Duration
	// RequestTimeout bounds each call to Kinesis and the lease store. Default 10 s.
	RequestTimeout time.Duration
	// Logger receives one INFO line per lease moved. Default: none.
	Logger watermill.LoggerAdapter
}

func (c *ResetConfig) setDefaults() {
	setDefault(&c.SettleTimeout, defaultResetSettleTimeout)
	setDefault(&c.KCLFailoverTime, defaultKCLFailoverTime)
	setDefault(&c.RequestTimeout, defaultRequestTimeout)
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
	c.To.Timestamp = c.To.Timestamp.Truncate(time.Millisecond)
}

var sequenceNumberPattern = regexp.MustCompile(`^[0-9]{1,128}$`)

// Validate reports every problem of the config at once (errors.Join), each naming its field.
func (c ResetConfig) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kinesis: ResetConfig."+format, args...))
	}
	if err := kinesis.ValidateStreamName(c.Stream); err != nil {
		add("Stream: %w", err)
	}
	switch {
	case c.ConsumerGroup == "":
		add("ConsumerGroup is empty; name the group to move (SubscriberConfig.Group.Name of its subscribers)")
	case !utf8.ValidString(c.ConsumerGroup):
		add("ConsumerGroup %q is not valid UTF-8", c.ConsumerGroup)
	}
	if isNil(c.Client) {
		add("Client is nil; pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log")
	}
	if isNil(c.LeaseStore) {
		add("LeaseStore is nil; pass the group's store (lease.NewDynamoDBStore on its lease table, or its lease.MemoryStore)")
	}
	switch c.To.Type {
	case ResetToTrimHorizon, ResetToLatest:
	case ResetToTimestamp:
		switch {
		case c.To.Timestamp.IsZero():
			add("To.Timestamp is zero; ResetToTimestamp needs the time to move the group to")
		case c.To.Timestamp.After(time.Now()):
			// Kinesis refuses an AT_TIMESTAMP iterator in the future: every reader would
			// fail until then. To skip what is there, reset to LATEST.
			add("To.Timestamp %s is in the future; Kinesis reads from a time that has come (to skip what is in the stream now, use ResetToLatest)", c.To.Timestamp.UTC().Format(time.RFC3339Nano))
		}
	case ResetToSequenceNumber, ResetAfterSequenceNumber:
		if !sequenceNumberPattern.MatchString(c.To.SequenceNumber) {
			add("To.SequenceNumber %q is not a sequence number (decimal digits, as a record's SequenceNumber)", c.To.SequenceNumber)
		}
		if c.ShardID == "" {
			add("ShardID is empty; a sequence number belongs to one shard: name it")
		}
	default:
		add("To.Type is %v; use ResetToTrimHorizon, ResetToLatest, ResetToTimestamp, ResetToSequenceNumber or ResetAfterSequenceNumber", c.To.Type)
	}
	for name, d := range map[string]time.Duration{"SettleTimeout": c.SettleTimeout, "Wait": c.Wait, "KCLFailoverTime": c.KCLFailoverTime, "RequestTimeout": c.RequestTimeout} {
		if d < 0 {
			add("%s is %s; it must not be negative", name, d)
		}
	}
	if _, kcl := c.LeaseStore.(lease.ForeignTable); kcl && !isNil(c.LeaseStore) {
		switch c.To.Type {
		case ResetToLatest, ResetToTimestamp, ResetToSequenceNumber:
			add("To.Type is %v, which a KCL application's lease table cannot hold as a checkpoint the KCL reads the same way (the KCL takes AT_TIMESTAMP's time from its own configuration, and has no AT_SEQUENCE_NUMBER checkpoint); on a KCL table, reset to TRIM_HORIZON or after a sequence number", c.To.Type)
		}
	}
	return errors.Join(errs...)
}

// ResetReport is what ResetGroup did, or with DryRun would do: one entry per shard, sorted by
// shard id.
type ResetReport struct {
	Stream        string `json:"stream"`
	ConsumerGroup string `json:"consumer_group"`
	// To is the position as it is written in the leases: TRIM_HORIZON,
	// AT_TIMESTAMP@<RFC 3339 time>, AT_SEQUENCE_NUMBER@<sequence number>, or a sequence
	// number (after it). ResetToLatest is AT_TIMESTAMP at the reset's time less one second.
	To string `json:"to"`
	// At is when the reset began (UTC).
	At     time.Time    `json:"at"`
	DryRun bool         `json:"dry_run"`
	Shards []ShardReset `json:"shards"`
	// Worker is the id the reset held the leases under while it moved them.
	Worker string `json:"worker,omitempty"`
}

// What a reset does to one shard (ShardReset.Action).
const (
	ResetActionMove   = "move"   // the lease's checkpoint is replaced
	ResetActionCreate = "create" // the group has no lease for the shard: it is created at the position
	ResetActionGone   = "gone"   // the lease's shard is no longer listed (aged out): left as it is
	ResetActionNone   = "none"   // not the shard asked for (ResetConfig.ShardID): left as it is
)

// ShardReset is one shard of a ResetReport.
type ShardReset struct {
	ShardID string     `json:"shard_id"`
	State   ShardState `json:"state"`
	Parents []string   `json:"parents"`
	// Action is move, create, gone or none (the ResetAction constants).
	Action string `json:"action"`
	// Owner and From are the lease's owner ("" free) and checkpoint before the reset.
	Owner string `json:"owner"`
	From  string `json:"from"`
	// GivenTo is the worker the lease was given back to after the reset ("" released);
	// Generation the lease's generation as the reset left it.
	GivenTo    string `json:"given_to,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	// Settled is set when the owner handed the lease over after settling its messages in
	// flight (ResetConfig.Settle); false when it was fenced.
	Settled bool `json:"settled,omitempty"`
	// AppliedBy is the worker that took the lease after the reset and reads from the new
	// position, and AppliedAfter how long after the reset's writes it was seen to (with
	// ResetConfig.Wait). Waiting says why a shard is not applied yet.
	AppliedBy    string        `json:"applied_by,omitempty"`
	AppliedAfter time.Duration `json:"applied_after_ns,omitempty"`
	Waiting      string        `json:"waiting,omitempty"`
}

// ResetGroup moves a consumer group on a stream to cfg.To, live: see ResetConfig, and
// docs/operating.md for the runbook.
//
// On a running group each owner learns of the reset at its next lease write (or at once, when
// the store keeps member records and the owner is notified), stops delivering, and resumes
// from the new position; no two readers hold a shard at any moment, and a record before the
// position is delivered no later than LeaseRenewInterval after ResetGroup returns (the stop
// point, 0.8 × LeaseDuration, if the owner cannot reach the store). On a stopped group it
// applies when the group starts.
//
// A reset to a time or to the trim horizon reads every shard the stream lists: closed parents
// of a split or merge still within retention are read first (their leases created again if
// the group deleted them), then their children, so each key's records come in order as on a
// first read. Leases of shards the stream no longer lists are reported (ResetActionGone) and
// left alone.
//
// It fails, naming the shard, when a lease keeps changing under it, when another reset holds a
// lease, when a KCL worker is live on a KCL table, or when the store or Kinesis fails; it then
// gives back every lease it holds before it returns. A shard it did not reach keeps its
// position; run it again.
func ResetGroup(ctx context.Context, cfg ResetConfig) (ResetReport, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return ResetReport{}, fmt.Errorf("kinesis: invalid ResetConfig: %w", err)
	}
	cfg.Client = awscall.OneRetryLayer(cfg.Client)
	at := time.Now().UTC()
	report := ResetReport{Stream: cfg.Stream, ConsumerGroup: cfg.ConsumerGroup, To: cfg.To.checkpoint(at), At: at, DryRun: cfg.DryRun}
	r := &resetter{cfg: cfg, to: report.To, self: resetOwnerPrefix + uuid.NewString(), held: map[string]lease.Lease{}}
	// The leases first, then the shards: a child a split made in between is listed as a shard
	// (and moved as one the group has no lease for, or has by then), never left out as a
	// lease of a shard the stream does not list. run looks again for leases made after this.
	leases, err := r.list(ctx)
	if err != nil {
		return report, err
	}
	shards, err := inspectListShards(ctx, InspectConfig{Stream: cfg.Stream, Client: cfg.Client, RequestTimeout: cfg.RequestTimeout})
	if err != nil {
		return report, err
	}
	joined := joinShardsAndLeases(shards, leases)
	report.Shards = planReset(joined, cfg.ShardID)
	if err := refuseUnreached(cfg, joined); err != nil {
		return report, err
	}
	if cfg.ShardID != "" && !listed(report.Shards, cfg.ShardID) {
		return report, fmt.Errorf("kinesis: resetting group %q on stream %q: the stream lists no shard %q (ListShards); is it a shard of another stream, or aged out?", cfg.ConsumerGroup, cfg.Stream, cfg.ShardID)
	}
	if cfg.DryRun {
		return report, nil // it shows another reset's leases as their owner's, and writes nothing
	}
	if err := refuseOtherResets(cfg, leases); err != nil {
		return report, err
	}
	if err := r.checkSequenceNumber(ctx); err != nil {
		return report, err
	}
	if err := r.checkForeign(ctx, leases); err != nil {
		return report, err
	}
	report.Worker = r.self
	err = r.run(ctx, &report, leases)
	if err != nil || cfg.Wait <= 0 {
		return report, err
	}
	if err := r.wait(ctx, report.Shards); err != nil {
		return report, fmt.Errorf("kinesis: the reset of group %q on stream %q was applied (the positions are written); only the wait for the owners was cut short: %w",
			cfg.ConsumerGroup, cfg.Stream, err)
	}
	return report, nil
}

// resetter carries a reset out. It runs on the caller's goroutine alone.
type resetter struct {
	cfg  ResetConfig
	to   string // the checkpoint to write
	self string // the worker id the leases are held under
	// held are the leases this reset holds now, by shard; owners the worker each is given
	// back to ("" to release it).
	held   map[string]lease.Lease
	owners map[string]string
	// asked are the owners this reset asked for a handoff (Settle), by shard; tried the owner
	// of each lease it tried to take (a take applied whose answer was lost goes back to whom
	// it fenced, never released under a reader still delivering); vetted the KCL workers'
	// leases checkForeign saw standing still.
	asked  map[string]string
	tried  map[string]string
	vetted map[string]lease.Lease
}

func (r *resetter) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.cfg.RequestTimeout)
}

func (r *resetter) list(ctx context.Context) ([]lease.Lease, error) {
	callCtx, cancel := r.call(ctx)
	defer cancel()
	leases, err := r.cfg.LeaseStore.List(callCtx, r.cfg.ConsumerGroup, r.cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("kinesis: listing the leases of group %q on stream %q: %w", r.cfg.ConsumerGroup, r.cfg.Stream, err)
	}
	return leases, nil
}

func (r *resetter) fields(shardID string) watermill.LogFields {
	return watermill.LogFields{"stream": r.cfg.Stream, "group": r.cfg.ConsumerGroup, "worker": r.self, "shard": shardID}
}

func (r *resetter) errorf(shardID, format string, args ...any) error {
	return fmt.Errorf("kinesis: resetting shard %q of group %q on stream %q: %w", shardID, r.cfg.ConsumerGroup, r.cfg.Stream, fmt.Errorf(format, args...))
}
