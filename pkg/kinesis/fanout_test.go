package kinesis_test

// Enhanced fan-out (SubscriberConfig.FanOut) on memlog, in the fault suite's world (fake time,
// a steady load, every record accounted for): the group reads with SubscribeToShard only,
// renews its subscriptions before Kinesis ends them, resumes after stream errors without loss
// or repeats, waits out a subscription still in use, falls back to polling at the consumer
// limit, and fences a paused instance exactly as polling does.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// newFanOutWorld is the fault suite's world with every instance reading with enhanced fan-out.
func newFanOutWorld(t *testing.T) *fltWorld {
	w := newFltWorld(t, fltShards)
	w.fanOut = true
	return w
}

// streamARN is the ARN of the world's stream.
func (w *fltWorld) streamARN() string {
	w.t.Helper()
	out, err := w.e.log.DescribeStreamSummary(context.Background(), &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(w.e.stream)})
	if err != nil {
		w.t.Fatalf("DescribeStreamSummary: %v", err)
	}
	return aws.ToString(out.StreamDescriptionSummary.StreamARN)
}

// subscriptions counts the SubscribeToShard calls of [from, to) by shard, and the failed ones.
func (w *fltWorld) subscriptions(from, to time.Time) (byShard map[string]int, failed int) {
	byShard = map[string]int{}
	for _, o := range w.kin.outcomesOf(func(o fltOutcome) bool {
		return o.op == "SubscribeToShard" && !o.at.Before(from) && o.at.Before(to)
	}) {
		if o.err != nil {
			failed++
			continue
		}
		byShard[o.shard]++
	}
	return byShard, failed
}

// Two instances read a steady load with enhanced fan-out for 12 minutes of fake time: every
// record arrives once and in order, nothing polls, the group's consumer is registered once and
// ACTIVE, and each shard's subscription is made again before memlog ends it at 5 minutes.
func TestFanOutGroupReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFanOutWorld(t)
		wks := w.warm("w1", "w2")
		from := w.now()
		w.stepsBy(12*time.Minute, time.Second)
		to := w.now()
		w.drain(10 * time.Second)
		// An event counts as a read; a silent subscription is made again within 35 s and a
		// RequestTimeout, which the read limit allows for.
		for _, wk := range wks {
			if h := wk.sub.Health(); !h.Healthy || h.ReadWithin != 45*time.Second {
				t.Errorf("%s: Health: healthy %v, ReadWithin %s (want 45s), problems %q", wk.id, h.Healthy, h.ReadWithin, h.Problems)
			}
		}
		w.consumersOpen(wks...)
		w.closeAll(wks...)

		s := w.stats(time.Time{}, time.Time{})
		reads, _ := w.kin.count("GetRecords", time.Time{}, w.now())
		iters, _ := w.kin.count("GetShardIterator", time.Time{}, w.now())
		subs, failed := w.subscriptions(from, to)
		w.report("fan-out: 2 instances, 12 minutes", s, fmt.Sprintf("GetRecords=%d GetShardIterator=%d subscriptions_per_shard=%v failed=%d", reads, iters, subs, failed))
		w.checkAll(s, true)
		if reads != 0 || iters != 0 {
			t.Errorf("%d GetRecords and %d GetShardIterator calls: a group with FanOut must not poll", reads, iters)
		}
		for i := range fltShards {
			id := subShard(i)
			// 12 minutes at one subscription per 4m40s: at least 2 renewals.
			if subs[id] < 2 {
				t.Errorf("shard %s: %d subscriptions in 12 minutes; each lasts at most 5", id, subs[id])
			}
		}
		d, err := w.e.log.DescribeStreamConsumer(context.Background(), &awskinesis.DescribeStreamConsumerInput{StreamARN: aws.String(w.streamARN()), ConsumerName: aws.String(subGroup)})
		if err != nil {
			t.Fatalf("the group's consumer %q: %v", subGroup, err)
		}
		if got := d.ConsumerDescription.ConsumerStatus; got != types.ConsumerStatusActive {
			t.Errorf("consumer status %s, want ACTIVE", got)
		}
		w.noErrors("fan-out", time.Time{}, w.now())
		w.noDecodeErrors()
		w.finish(ignore)

		// Close leaves the consumer for the group's other instances; DeregisterConsumer removes it,
		// and a second call finds nothing to do.
		for i := range 2 {
			if err := kinesis.DeregisterConsumer(context.Background(), w.e.log, w.e.stream, subGroup); err != nil {
				t.Fatalf("DeregisterConsumer #%d: %v", i+1, err)
			}
		}
		var notFound *types.ResourceNotFoundException
		if _, err := w.e.log.DescribeStreamConsumer(context.Background(), &awskinesis.DescribeStreamConsumerInput{StreamARN: aws.String(w.streamARN()), ConsumerName: aws.String(subGroup)}); !errors.As(err, &notFound) {
			t.Errorf("DescribeStreamConsumer after DeregisterConsumer: %v, want ResourceNotFoundException", err)
		}
	})
}

// For a minute, 30 % of the events pushed end their subscription with InternalFailure and every
// other SubscribeToShard call is refused with LimitExceeded: each reader subscribes again from
// the last event's continuation, so every record still arrives once and in order.
func TestFanOutStreamErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFanOutWorld(t)
		wks := w.warm("w1", "w2")
		rng := rand.New(rand.NewPCG(15, 1))
		subscribes := 0
		from := w.now()
		w.kin.set(func(c memlog.Call) error {
			switch c.Op {
			case "SubscribeToShardEvent":
				if rng.IntN(10) < 3 {
					return &types.InternalFailureException{Message: aws.String("Internal service failure.")}
				}
			case "SubscribeToShard":
				if subscribes++; subscribes%2 == 1 {
					return &types.LimitExceededException{Message: aws.String("Rate exceeded for consumer and shard " + c.ShardID + ".")}
				}
			}
			return nil
		})
		w.steps(time.Minute)
		w.kin.set(nil)
		to := w.now()
		w.steps(5 * time.Second)
		w.drain(15 * time.Second)
		w.consumersOpen(wks...)
		w.closeAll(wks...)

		s := w.stats(from, to)
		events, broken := w.kin.count("SubscribeToShardEvent", from, to)
		calls, refused := w.kin.count("SubscribeToShard", from, to)
		w.report("fan-out: 30% of events fail, every other SubscribeToShard refused, 1m", s, fmt.Sprintf(
			"events=%d failed=%d SubscribeToShard=%d refused=%d errors_logged=%d", events, broken, calls, refused, len(w.logs.of("ERROR", from, to))))
		w.checkAll(w.stats(time.Time{}, time.Time{}), true)
		if broken == 0 || refused == 0 {
			t.Errorf("nothing injected (%d events failed, %d subscriptions refused): the test did not test it", broken, refused)
		}
		w.noDecodeErrors()
		w.finish(ignore)
	})
}

// A subscription of the group's consumer to shard 0, made just before the instance starts,
// stands for the one of the shard's previous reader: Kinesis refuses a new one within 5 s with
// ResourceInUseException. The instance waits it out and then reads the shard, missing nothing.
func TestFanOutSubscriptionInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFanOutWorld(t)
		ctx, cancel := context.WithCancel(context.Background())
		reg, err := w.e.log.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{StreamARN: aws.String(w.streamARN()), ConsumerName: aws.String(subGroup)})
		if err != nil {
			t.Fatalf("RegisterStreamConsumer: %v", err)
		}
		first := subShard(0)
		prev, err := w.e.log.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{
			ConsumerARN: reg.Consumer.ConsumerARN, ShardId: aws.String(first),
			StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeLatest},
		})
		if err != nil {
			t.Fatalf("SubscribeToShard: %v", err)
		}
		from := w.now()
		wks := w.warm("w1")
		w.steps(10 * time.Second)
		w.drain(10 * time.Second)
		w.closeAll(wks...)
		cancel()
		_ = prev.GetStream().Close()

		inUse := w.kin.outcomesOf(func(o fltOutcome) bool {
			var e *types.ResourceInUseException
			return o.op == "SubscribeToShard" && o.shard == first && errors.As(o.err, &e)
		})
		s := w.stats(time.Time{}, time.Time{})
		w.report("fan-out: shard 0's subscription in use at start", s, fmt.Sprintf("refused_in_use=%d", len(inUse)))
		w.checkAll(s, true)
		if len(inUse) == 0 {
			t.Errorf("no SubscribeToShard of %s was refused with ResourceInUseException: the test did not test it", first)
		} else if last := inUse[len(inUse)-1].at; last.Sub(from) > 6*time.Second {
			t.Errorf("refused until %s after the other subscription; Kinesis lets a new one take over after 5 s", last.Sub(from))
		}
		w.noErrors("subscription in use", time.Time{}, w.now())
		w.finish(ignore)
	})
}

// The stream has as many consumers as Kinesis allows: Subscribe says so at ERROR, with
// ErrConsumerLimit, and the group reads by polling instead, missing nothing.
func TestFanOutConsumerLimitFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFanOutWorld(t)
		for i := range 20 {
			if _, err := w.e.log.RegisterStreamConsumer(context.Background(), &awskinesis.RegisterStreamConsumerInput{
				StreamARN: aws.String(w.streamARN()), ConsumerName: aws.String(fmt.Sprintf("other-%d", i)),
			}); err != nil {
				t.Fatalf("RegisterStreamConsumer #%d: %v", i+1, err)
			}
		}
		wks := w.warm("w1")
		w.steps(5 * time.Second)
		w.drain(10 * time.Second)
		w.closeAll(wks...)

		s := w.stats(time.Time{}, time.Time{})
		w.checkAll(s, true)
		reads, _ := w.kin.count("GetRecords", time.Time{}, w.now())
		if reads == 0 {
			t.Errorf("no GetRecords: the group should read by polling when fan-out is unavailable")
		}
		var said bool
		for _, e := range w.logs.of("ERROR", time.Time{}, w.now()) {
			if strings.Contains(e.msg, "Enhanced fan-out is unavailable") && errors.Is(e.err, kinesis.ErrConsumerLimit) {
				said = true
			}
		}
		if !said {
			t.Errorf("no ERROR line with ErrConsumerLimit; logged at ERROR: %v", w.logs.of("ERROR", time.Time{}, w.now()))
		}
		w.finish(ignore)
	})
}

// The group's consumer is deregistered under two fan-out instances, as DeregisterConsumer does:
// the subscriptions end with ResourceNotFoundException, the readers register the consumer again
// (once, for all of them: it gets one new ARN) and subscribe through it from where they were,
// so every record still arrives once and in order.
func TestFanOutConsumerDeregistered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFanOutWorld(t)
		wks := w.warm("w1", "w2")
		describe := func() (*types.ConsumerDescription, error) {
			d, err := w.e.log.DescribeStreamConsumer(context.Background(), &awskinesis.DescribeStreamConsumerInput{StreamARN: aws.String(w.streamARN()), ConsumerName: aws.String(subGroup)})
			if err != nil {
				return nil, err
			}
			return d.ConsumerDescription, nil
		}
		before, err := describe()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // a consumer's ARN names the second it was registered in
		if err := kinesis.DeregisterConsumer(context.Background(), w.e.log, w.e.stream, subGroup); err != nil {
			t.Fatal(err)
		}
		from := w.now()
		w.steps(20 * time.Second)
		w.drain(10 * time.Second)
		w.closeAll(wks...)

		s := w.stats(time.Time{}, time.Time{})
		regs, _ := w.kin.count("RegisterStreamConsumer", from, w.now())
		w.report("fan-out: consumer deregistered under the group", s, fmt.Sprintf("registrations_after=%d", regs))
		w.checkAll(s, true)
		after, err := describe()
		if err != nil {
			t.Fatalf("the consumer after the readers found it gone: %v; they should have registered it again", err)
		}
		if aws.ToString(after.ConsumerARN) == aws.ToString(before.ConsumerARN) || after.ConsumerStatus != types.ConsumerStatusActive {
			t.Errorf("consumer %s %s, before %s: want a new ARN, ACTIVE", aws.ToString(after.ConsumerARN), after.ConsumerStatus, aws.ToString(before.ConsumerARN))
		}
		// Each instance's readers share one refresh, and an instance that finds the consumer
		// registered by the other only waits for it: one call, two if both were first.
		if regs < 1 || regs > 2 {
			t.Errorf("%d RegisterStreamConsumer calls after the deregistration, want 1 or 2 (not one per reader)", regs)
		}
		w.noErrors("consumer deregistered", from, w.now())
		w.finish(ignore)
	})
}

// The lease store is down for 15 s under two fan-out instances: each reader pauses (it takes no
// event and sends nothing) before its lease could expire, and what comes twice is at most what
// was acked after the last checkpoint, exactly as with polling.
func TestFanOutPausedInstanceFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leaseStoreLongOutage(t, true)
	})
}

// Validate refuses FanOut without a group, with a name Kinesis does not accept, and with a
// client that cannot subscribe, saying what to set.
func TestFanOutConfigErrors(t *testing.T) {
	base := func() kinesis.SubscriberConfig {
		return kinesis.SubscriberConfig{
			Client: memlog.New(memlog.Config{}),
			Group:  kinesis.GroupConfig{Name: "billing", LeaseStore: lease.NewMemoryStore()},
			FanOut: kinesis.FanOutConfig{Enabled: true},
		}
	}
	for _, tc := range []struct {
		name  string
		tweak func(*kinesis.SubscriberConfig)
		want  string // "" for no error
	}{
		{"defaults", func(*kinesis.SubscriberConfig) {}, ""},
		{"no group", func(c *kinesis.SubscriberConfig) { c.Group = kinesis.GroupConfig{} }, "FanOut.Enabled is set but Group.Name is empty"},
		{"group name not a consumer name", func(c *kinesis.SubscriberConfig) { c.Group.Name = "billing/eu" },
			`FanOut.ConsumerName defaults to Group.Name "billing/eu", which Kinesis does not accept`},
		{"consumer name given", func(c *kinesis.SubscriberConfig) { c.Group.Name = "billing/eu"; c.FanOut.ConsumerName = "billing-eu" }, ""},
		{"consumer name too long", func(c *kinesis.SubscriberConfig) { c.FanOut.ConsumerName = strings.Repeat("c", 129) }, "is not a name Kinesis accepts"},
		{"client without FanOutAPI", func(c *kinesis.SubscriberConfig) { c.Client = pollOnly{c.Client} }, "lacks RegisterStreamConsumer"},
		{"negative RegisterTimeout", func(c *kinesis.SubscriberConfig) { c.FanOut.RegisterTimeout = -time.Second }, "FanOut.RegisterTimeout is -1s"},
		{"off: nothing checked", func(c *kinesis.SubscriberConfig) {
			c.FanOut = kinesis.FanOutConfig{ConsumerName: "a b"}
			c.Client = pollOnly{c.Client}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.tweak(&cfg)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// pollOnly is a KinesisAPI without the fan-out calls.
type pollOnly struct{ kinesis.KinesisAPI }
