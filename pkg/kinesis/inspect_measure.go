package kinesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire"
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
	switch {
	case checkpoint == "":
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
