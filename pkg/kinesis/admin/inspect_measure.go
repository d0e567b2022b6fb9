package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// measureShards fills in how far behind each shard is, cfg.Concurrency shards at a time. Each
// goroutine writes only its own entry.
func measureShards(ctx context.Context, cfg InspectConfig, shards []ShardLease, now time.Time) {
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range shards {
		s := &shards[i]
		if s.Finished {
			s.Measured = true // nothing after SHARD_END: known without a read
			continue
		}
		if s.State == ShardGone || cfg.SkipBehind {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := measureShard(ctx, cfg, s, now); err != nil {
				s.err = fmt.Errorf("kinesis: measuring shard %q of stream %q: %w", s.ShardID, cfg.Stream, err)
				s.Error = s.err.Error()
			}
		})
	}
	wg.Wait()
}

// measureShard reads once from where the group would go on, trying again when Kinesis
// throttles (the group's own reads share the shard's quota) or fails transiently.
func measureShard(ctx context.Context, cfg InspectConfig, s *ShardLease, now time.Time) error {
	for attempt := 0; ; attempt++ {
		out, expired, err := readAfterCheckpoint(ctx, cfg, s.ShardID, s.Checkpoint)
		if err == nil {
			s.CheckpointExpired = expired
			fillBehind(s, out, now)
			return nil
		}
		switch awscall.Classify(ctx, err) {
		case awscall.Throttled, awscall.Transient, awscall.ExpiredIterator:
			if attempt+1 < inspectAttempts {
				if serr := awscall.Sleep(ctx, awscall.Backoff(attempt, 100*time.Millisecond, 2*time.Second)); serr != nil {
					return fmt.Errorf("%w (while retrying after: %w)", serr, err)
				}
				continue
			}
		}
		return err
	}
}

// readAfterCheckpoint gets an iterator where a reader of the group would start and reads one
// record. expired reports that Kinesis refused the checkpoint, so the read started at
// TRIM_HORIZON, as the group's reader does then.
func readAfterCheckpoint(ctx context.Context, cfg InspectConfig, shardID, checkpoint string) (out *awskinesis.GetRecordsOutput, expired bool, err error) {
	it, err := inspectIterator(ctx, cfg, shardID, checkpoint)
	var invalid *types.InvalidArgumentException
	if err != nil && checkpoint != "" && errors.As(err, &invalid) {
		expired = true
		it, err = inspectIterator(ctx, cfg, shardID, "")
	}
	if err != nil {
		return nil, false, fmt.Errorf("getting a shard iterator: %w", err)
	}
	// From inside a record (a checkpoint seq:sub) the read starts at the record itself, which
	// may be done already (a plain record, or an aggregate's last user record): then the one
	// after it says what is waiting.
	seq, sub, inside := wire.ParsePosition(checkpoint)
	if _, isStart, _ := lease.ParseStart(checkpoint); isStart {
		inside = false // a reset's start: the record there is waiting
	}
	limit := int32(1)
	if inside && !expired {
		limit = 2
	}
	callCtx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	out, err = cfg.Client.GetRecords(callCtx, &awskinesis.GetRecordsInput{ShardIterator: &it, Limit: aws.Int32(limit)})
	if err != nil {
		return nil, false, fmt.Errorf("reading one record: %w", err)
	}
	if limit == 2 && len(out.Records) > 0 && aws.ToString(out.Records[0].SequenceNumber) == seq && wire.RecordDone(out.Records[0], sub) {
		rest := *out
		rest.Records = out.Records[1:]
		out = &rest
	}
	return out, expired, nil
}

func inspectIterator(ctx context.Context, cfg InspectConfig, shardID, checkpoint string) (string, error) {
	in := &awskinesis.GetShardIteratorInput{StreamName: aws.String(cfg.Stream), ShardId: aws.String(shardID)}
	seq, _, inside := wire.ParsePosition(checkpoint)
	start, isStart, _ := lease.ParseStart(checkpoint)
	switch {
	case isStart && start.Type == lease.StartAtTimestamp: // where a reset put the group
		in.ShardIteratorType, in.Timestamp = types.ShardIteratorTypeAtTimestamp, aws.Time(start.Timestamp)
	case isStart && start.Type == lease.StartAtSequenceNumber:
		in.ShardIteratorType, in.StartingSequenceNumber = types.ShardIteratorTypeAtSequenceNumber, aws.String(start.SequenceNumber)
	case checkpoint == "" || isStart:
		in.ShardIteratorType = types.ShardIteratorTypeTrimHorizon
	case inside:
		// Part of a KPL aggregate is done: the aggregate itself is still waiting.
		in.ShardIteratorType = types.ShardIteratorTypeAtSequenceNumber
		in.StartingSequenceNumber = aws.String(seq)
	default:
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.StartingSequenceNumber = aws.String(seq)
	}
	callCtx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	out, err := cfg.Client.GetShardIterator(callCtx, in)
	if err != nil {
		return "", err
	}
	if aws.ToString(out.ShardIterator) == "" {
		return "", errors.New("GetShardIterator returned no iterator")
	}
	return *out.ShardIterator, nil
}

// fillBehind records what one read after the checkpoint says about the shard.
func fillBehind(s *ShardLease, out *awskinesis.GetRecordsOutput, now time.Time) {
	s.Measured = true
	s.MillisBehindLatest = aws.ToInt64(out.MillisBehindLatest)
	if len(out.Records) == 0 {
		// AWS can answer an empty page from a position with records further on; its
		// MillisBehindLatest then still says they are there.
		s.Pending = s.MillisBehindLatest > 0
		s.BehindMillis = s.MillisBehindLatest
		return
	}
	rec := out.Records[0]
	s.Pending = true
	s.NextSequenceNumber = aws.ToString(rec.SequenceNumber)
	if rec.ApproximateArrivalTimestamp != nil {
		at := rec.ApproximateArrivalTimestamp.UTC()
		s.NextArrival = &at
		s.BehindMillis = max(0, now.Sub(at).Milliseconds())
	}
}

// leaseLook is one listing of the group's leases and member records, and when it was taken
// (on the monotonic clock).
type leaseLook struct {
	start, end time.Time
	leases     []lease.Lease
	members    []lease.Member // none when the store keeps no member records
}

// lookAtLeases lists the group's leases and, when the store keeps them, its member records.
func lookAtLeases(ctx context.Context, cfg InspectConfig) (leaseLook, error) {
	look := leaseLook{start: time.Now()}
	callCtx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	leases, err := cfg.LeaseStore.List(callCtx, cfg.ConsumerGroup, cfg.Stream)
	cancel()
	if err != nil {
		return leaseLook{}, fmt.Errorf("kinesis: listing the leases of group %q on stream %q: %w", cfg.ConsumerGroup, cfg.Stream, err)
	}
	look.leases = leases
	if ms, ok := cfg.LeaseStore.(lease.Membership); ok {
		callCtx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		members, err := ms.Members(callCtx, cfg.ConsumerGroup, cfg.Stream)
		cancel()
		if err != nil {
			return leaseLook{}, fmt.Errorf("kinesis: listing the member records of group %q on stream %q: %w", cfg.ConsumerGroup, cfg.Stream, err)
		}
		look.members = members
	}
	look.end = time.Now()
	return look, nil
}

// minLookInterval is the shortest time between two looks at the leases while they are
// watched: with a short Watch, looks closer than this would only add calls.
const minLookInterval = 250 * time.Millisecond

// watchLeases looks at the leases again every cfg.Watch/8 (at least minLookInterval), on a
// grid from the start of the first look, until cfg.Watch has passed since then, and returns
// every look that succeeded, the first one included. A look that outlasts the interval skips
// the grid's points it overran, so looks never run back to back. A failed look is left out: the
// looks on either side of it still bound a move, less closely; watchErr says how many failed.
// It returns early when ctx ends, which the caller reports.
func watchLeases(ctx context.Context, cfg InspectConfig, first leaseLook) (looks []leaseLook, watchErr string) {
	looks = []leaseLook{first}
	if cfg.Watch <= 0 {
		return looks, ""
	}
	interval := max(cfg.Watch/8, minLookInterval)
	deadline := first.start.Add(cfg.Watch)
	var tried, failed int
	var lastErr error
	for now := time.Now(); now.Before(deadline); now = time.Now() {
		next := first.start.Add((now.Sub(first.start)/interval + 1) * interval)
		if next.After(deadline) {
			next = deadline
		}
		if awscall.Sleep(ctx, next.Sub(now)) != nil {
			return looks, ""
		}
		tried++
		look, err := lookAtLeases(ctx, cfg)
		if err != nil {
			if ctx.Err() != nil {
				return looks, ""
			}
			failed, lastErr = failed+1, err
			continue
		}
		looks = append(looks, look)
	}
	if failed > 0 {
		watchErr = fmt.Sprintf("%d of %d looks at the leases after the first failed, so the owners' moves are timed less closely; the last: %v",
			failed, tried, lastErr)
	}
	return looks, watchErr
}

// ownerReports makes one OwnerReport per worker that held a lease or had a member record in
// any look, sorted by worker id: its leases among shards (the first look), and its latest move
// between two consecutive looks, counted back from the end of the last look.
func ownerReports(looks []leaseLook, shards []ShardLease) []OwnerReport {
	byOwner := map[string]*OwnerReport{}
	get := func(w string) *OwnerReport {
		o, ok := byOwner[w]
		if !ok {
			o = &OwnerReport{Owner: w}
			byOwner[w] = o
		}
		return o
	}
	for _, s := range shards {
		if s.HasLease && s.Owner != "" {
			get(s.Owner).Leases++
		}
	}
	for _, look := range looks {
		for _, l := range look.leases {
			if l.Owner != "" {
				get(l.Owner)
			}
		}
		for _, m := range look.members {
			get(m.Worker).Member = true
		}
	}
	end := looks[len(looks)-1].end
	for k := 1; k < len(looks); k++ {
		heartbeats, renewals := movesBetween(looks[k-1], looks[k])
		mark := func(w string) *OwnerReport {
			o := get(w)
			o.Moved = true
			o.MovedMinAgoMillis = end.Sub(looks[k].end).Milliseconds()
			o.MovedMaxAgoMillis = end.Sub(looks[k-1].start).Milliseconds()
			return o
		}
		for _, w := range heartbeats {
			mark(w).HeartbeatMoved = true
		}
		for _, w := range renewals {
			mark(w).LeaseMoved = true
		}
	}
	out := make([]OwnerReport, 0, len(byOwner))
	for _, o := range byOwner {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b OwnerReport) int { return strings.Compare(a.Owner, b.Owner) })
	return out
}

// movesBetween returns the workers whose member record's heartbeat moved between two looks
// (or whose record appeared: only a worker's own heartbeat creates it), and those a lease's
// counter move proves alive (leaseMover).
func movesBetween(before, after leaseLook) (heartbeats, renewals []string) {
	members := map[string]int64{}
	for _, m := range before.members {
		members[m.Worker] = m.Counter
	}
	for _, m := range after.members {
		if c, ok := members[m.Worker]; !ok || c != m.Counter {
			heartbeats = append(heartbeats, m.Worker)
		}
	}
	leases := map[string]lease.Lease{}
	for _, l := range before.leases {
		leases[l.ShardID] = l
	}
	for _, l := range after.leases {
		if prev, ok := leases[l.ShardID]; ok {
			if w := leaseMover(prev, l); w != "" {
				renewals = append(renewals, w)
			}
		}
	}
	return heartbeats, renewals
}

// leaseMover returns the worker whose write moved the lease's counter between two looks, when
// only its owner can have written it: the same owner and generation in both, and either no
// handoff asked in the later look or a moved checkpoint (a handoff request is the taker's
// write; a checkpoint is the owner's). "" when the counter stood still or the write may be
// another worker's: a take, a release, a handoff, a handoff request.
func leaseMover(before, after lease.Lease) string {
	switch {
	case after.Counter == before.Counter, after.Owner == "", after.Owner != before.Owner, after.Generation != before.Generation:
		return ""
	case after.PendingOwner != "" && after.Checkpoint == before.Checkpoint:
		return ""
	}
	return after.Owner
}

// maxBehind returns the largest BehindMillis of a measured shard with records waiting, and
// that shard (the first by shard id on a tie); 0 and "" when none has any.
func maxBehind(shards []ShardLease) (millis int64, shard string) {
	for _, s := range shards {
		if s.Measured && s.Pending && (shard == "" || s.BehindMillis > millis) {
			millis, shard = s.BehindMillis, s.ShardID
		}
	}
	return millis, shard
}
