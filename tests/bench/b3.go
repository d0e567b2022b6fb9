package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// B3 measures the CPU time of this process (getrusage: user + system) while it drains 50,000
// stored 100-byte records from a 4-shard kinesalite stream: (a) a plain aws-sdk-go-v2 loop,
// one goroutine per shard from TRIM_HORIZON with GetRecords (Limit 10000), which counts
// records and decodes nothing, against (b) our Subscriber (no group, TrimHorizon) receiving
// and acking every message. Both pace reads alike: MinReadInterval 1 ms after a read that
// returned records, PollInterval 50 ms after an empty one, timed from the read's start as our
// reader does. kinesalite's own CPU (a separate node process) is not counted. A third drain,
// by harlow/kinesis-consumer (b3_harlow.go), is the Go peer to beat. The goals: ours at most
// 1.2x the plain loop's CPU, and below harlow's in every run.

const (
	b3Records       = 50000
	b3Shards        = 4
	b3MinReadPacing = time.Millisecond
	b3PollPacing    = 50 * time.Millisecond
)

type drainCost struct{ cpu, wall time.Duration }

func init() {
	register(rowSpec{"B3", "CPU draining 50,000 records from kinesalite, 4 shards", 3 * time.Minute, runB3})
}

func runB3(ctx context.Context, e *env) (result, error) {
	if e.kinesisEndpoint == "" {
		return result{}, errNeedsEmulators
	}
	client := kinesaliteClient(e.kinesisEndpoint)
	stream := streamName("b3")
	putStart := time.Now()
	if err := backlog(ctx, client, stream, b3Shards, b3Records, kinesis.PublisherConfig{}); err != nil {
		return result{}, fmt.Errorf("putting the records: %w", err)
	}
	putTook := time.Since(putStart)
	shards, err := client.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		return result{}, fmt.Errorf("ListShards: %w", err)
	}
	harlowBin, cleanup, err := buildHarlowDrain(ctx)
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	runs := e.runsOr(5)
	var plainCPU, oursCPU, harlowCPU, plainWall, oursWall, harlowWall, ratios, vsHarlow []float64
	for i := range runs {
		p, err := plainDrain(ctx, client, stream, shards.Shards, b3Records)
		if err != nil {
			return result{}, fmt.Errorf("plain loop, run %d: %w", i+1, err)
		}
		o, err := subscriberDrain(ctx, client, stream, b3Records)
		if err != nil {
			return result{}, fmt.Errorf("our subscriber, run %d: %w", i+1, err)
		}
		h, err := harlowDrain(ctx, harlowBin, e.kinesisEndpoint, stream, b3Records)
		if err != nil {
			return result{}, fmt.Errorf("harlow/kinesis-consumer, run %d: %w", i+1, err)
		}
		plainCPU, oursCPU, harlowCPU = append(plainCPU, p.cpu.Seconds()), append(oursCPU, o.cpu.Seconds()), append(harlowCPU, h.cpu.Seconds())
		plainWall, oursWall, harlowWall = append(plainWall, p.wall.Seconds()), append(oursWall, o.wall.Seconds()), append(harlowWall, h.wall.Seconds())
		ratios = append(ratios, o.cpu.Seconds()/p.cpu.Seconds())
		vsHarlow = append(vsHarlow, o.cpu.Seconds()/h.cpu.Seconds())
	}
	if e.cpuProfile != "" {
		if err := profileSubscriberDrain(ctx, e.cpuProfile, client, stream); err != nil {
			return result{}, err
		}
	}
	all := make([]string, len(ratios))
	for i, r := range ratios {
		all[i] = fmtRatio(r)
	}
	allHarlow := make([]string, len(vsHarlow))
	belowHarlow := true
	for i, r := range vsHarlow {
		allHarlow[i] = fmtRatio(r)
		belowHarlow = belowHarlow && r < 1
	}
	ratio := median(oursCPU) / median(plainCPU)
	return result{
		lines: []line{
			{"B3", "CPU (user+sys) draining 50k records, kinesalite 4 shards; median of " + count(runs, "run"),
				fmt.Sprintf("%.2f s CPU", median(oursCPU)), fmt.Sprintf("%.2f s CPU (plain SDK loop)", median(plainCPU)),
				fmt.Sprintf("%s (%s)", fmtRatio(ratio), strings.Join(all, ", ")), "<= 1.2x", met(ratio <= 1.2)},
			{"B3", "the same drains against harlow/kinesis-consumer v0.5.0 (the plain loop's: " +
				fmtRatio(median(harlowCPU)/median(plainCPU)) + ")",
				fmt.Sprintf("%.2f s CPU", median(oursCPU)), fmt.Sprintf("%.2f s CPU (harlow)", median(harlowCPU)),
				fmt.Sprintf("%s (%s)", fmtRatio(median(oursCPU)/median(harlowCPU)), strings.Join(allHarlow, ", ")), "< 1x in every run", met(belowHarlow)},
			{"B3", "wall time of the same drains", fmt.Sprintf("%.2f s", median(oursWall)),
				fmt.Sprintf("%.2f s (plain SDK loop), %.2f s (harlow)", median(plainWall), median(harlowWall)),
				fmtRatio(median(oursWall) / median(plainWall)), "-", "-"},
		},
		notes: []string{
			fmt.Sprintf("records put through our Publisher (envelopes) in calls of 500 before measuring: %s (%s).", fmtDuration(putTook), fmtRate(rate(b3Records, putTook))),
			"plain: one goroutine per shard, GetShardIterator TRIM_HORIZON, GetRecords Limit 10000 until all 50,000 are counted, no decoding; ours: Subscribe (no group, TrimHorizon, MinReadInterval 1 ms, PollInterval 50 ms, other settings default) through the last Ack; harlow: consumer.Scan (all shards, TRIM_HORIZON, MaxRecords 10000, ScanInterval 1 ms, no store) counting records, in a process of its own (tests/bench/harlowdrain) that times its own CPU from Scan's start, built with the same AWS SDK versions as the driver (kinesis v1.56.13, smithy-go v1.28.9): with the older ones harlow v0.5.0 asks for at least (kinesis v1.43.2, smithy-go v1.24.2) its CPU was 0.34-0.40 s, over twice as much, as the SDK's deserialiser was slower then; each run drains plain, ours, then harlow, all from the same stream.",
		},
	}, nil
}

// costMeter times a drain: start it just before the drain begins, stop it at the last record.
type costMeter struct {
	cpu0  time.Duration
	start time.Time
}

// startMeter collects the garbage of what ran before, so that its GC is not charged to the
// drain, and starts timing.
func startMeter() (costMeter, error) {
	runtime.GC()
	cpu, err := cpuTime()
	return costMeter{cpu0: cpu, start: time.Now()}, err
}

func (m costMeter) stop() (drainCost, error) {
	wall := time.Since(m.start)
	cpu, err := cpuTime()
	return drainCost{cpu: cpu - m.cpu0, wall: wall}, err
}

// plainDrain reads every shard from TRIM_HORIZON, one goroutine each, until n records have
// been read in all, and returns what that cost up to the n-th record.
func plainDrain(ctx context.Context, client *awskinesis.Client, stream string, shards []types.Shard, n int64) (drainCost, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var total atomic.Int64
	all := make(chan struct{}) // closed by the reader whose records make n
	var wg sync.WaitGroup
	errs := make([]error, len(shards))
	meter, err := startMeter()
	if err != nil {
		return drainCost{}, err
	}
	for i, sh := range shards {
		wg.Go(func() {
			errs[i] = plainReadShard(ctx, client, stream, aws.ToString(sh.ShardId), &total, n, all)
			if errs[i] != nil {
				cancel()
			}
		})
	}
	var cost drainCost
	select {
	case <-all:
		cost, err = meter.stop()
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	if err := errors.Join(append(errs, err)...); err != nil {
		return drainCost{}, err
	}
	if got := total.Load(); got != n {
		return drainCost{}, fmt.Errorf("read %d records, want %d", got, n)
	}
	return cost, nil
}

// plainReadShard reads one shard until the readers have n records in all, pacing its reads
// as our reader does; the reader whose records make n closes all.
func plainReadShard(ctx context.Context, client *awskinesis.Client, stream, shardID string, total *atomic.Int64, n int64, all chan struct{}) error {
	it, err := client.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{
		StreamName: aws.String(stream), ShardId: aws.String(shardID), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		return fmt.Errorf("GetShardIterator %s: %w", shardID, err)
	}
	iterator := it.ShardIterator
	for iterator != nil {
		started := time.Now()
		out, err := client.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iterator, Limit: aws.Int32(10000)})
		if err != nil {
			if total.Load() >= n {
				return nil // the drain is complete; the call was cut short
			}
			return fmt.Errorf("GetRecords %s: %w", shardID, err)
		}
		got := int64(len(out.Records))
		if now := total.Add(got); now >= n {
			if now-got < n {
				close(all)
			}
			return nil
		}
		iterator = out.NextShardIterator
		pause := b3MinReadPacing
		if got == 0 {
			pause = b3PollPacing
		}
		if err := sleepUntil(ctx, started.Add(pause)); err != nil {
			if total.Load() >= n {
				return nil
			}
			return fmt.Errorf("shard %s: %d of %d records read: %w", shardID, total.Load(), n, err)
		}
	}
	return nil
}

// sleepUntil waits until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// subscriberDrain subscribes to stream with a new Subscriber (no group), receives and acks n
// messages, and returns what that cost from Subscribe to the last Ack (Close comes after).
func subscriberDrain(ctx context.Context, client *awskinesis.Client, stream string, n int) (cost drainCost, err error) {
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client:          client,
		InitialPosition: kinesis.Position{Type: kinesis.TrimHorizon},
		MinReadInterval: b3MinReadPacing,
		PollInterval:    b3PollPacing,
	}, nil)
	if err != nil {
		return cost, err
	}
	defer func() { err = errors.Join(err, sub.Close()) }()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	meter, err := startMeter()
	if err != nil {
		return cost, err
	}
	msgs, err := sub.Subscribe(ctx, stream)
	if err != nil {
		return cost, err
	}
	if err := receive(ctx, msgs, n, nil); err != nil {
		return cost, err
	}
	return meter.stop()
}

// b3ProfiledDrains is how many drains by our subscriber the CPU profile covers: one gives too
// few samples (about 60) to read.
const b3ProfiledDrains = 5

// profileSubscriberDrain runs b3ProfiledDrains more drains by our subscriber under the CPU
// profiler.
func profileSubscriberDrain(ctx context.Context, path string, client *awskinesis.Client, stream string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return errors.Join(err, f.Close())
	}
	for range b3ProfiledDrains {
		if _, err = subscriberDrain(ctx, client, stream, b3Records); err != nil {
			break
		}
	}
	pprof.StopCPUProfile()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("profiled drain: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: B3: CPU profile of %d drains by our subscriber written to %s\n", b3ProfiledDrains, path)
	return nil
}
