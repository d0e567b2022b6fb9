package sim_test

// The seams through which the simulation reaches into each instance: its clock rate (the
// durations it is configured with), its Kinesis client and its lease store. Each instance gets its own wrappers, so that a crash, a pause or
// a cut-off hits that instance alone while the others go on, and so that every lease-store
// write can be attributed to the instance that made it.

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

var (
	errCrashed = errors.New("sim: connection refused (instance crashed)")
	errCutOff  = errors.New("sim: lease store unreachable from this instance")
	errOutage  = errors.New("sim: lease store unavailable (503)")
)

// onClock is d as an instance whose clock runs at rate (1.02 = 2 % fast) measures it, in
// bubble time: d/rate, rounded up (and a nanosecond more, for the float), so that a timer of
// that length never fires before the instance's clock would read d.
//
// The driver reads the bubble's fake time (time.Now, time.NewTimer), which runs at one rate for
// every instance. An instance whose clock runs at rate r is the instance given every duration
// of its configuration divided by r: what it times with them (lease expiry, its stop point,
// renewals, syncs, polls, timeouts) then takes d/r of bubble time, as it would on its own
// clock. What that leaves out: the driver's hard-coded constants (retry backoffs, the
// 2 s margin on a foreign worker's lease, the minimum heartbeat interval, fan-out's
// subscription timings, the AT_TIMESTAMP skew margin) and the defaults of fields the simulation
// does not set (FanOut.RegisterTimeout) run at the bubble's rate; and the instants instances
// read agree with one another and with memlog, where drifting clocks would also drift apart by
// up to maxRateSkew of the time run. The lease protocol rests on durations measured on one
// instance's clock (a counter standing still for LeaseDuration), never on instants compared
// across instances, so the checks' reasoning about skew (overlapTolerance) is the same.
func onClock(d time.Duration, rate float64) time.Duration {
	if d <= 0 {
		return d
	}
	return time.Duration(math.Ceil(float64(d)/rate)) + 1
}

// gateMode is how an instance's calls to the outside fare.
type gateMode int

const (
	gateOpen    gateMode = iota // calls go through
	gatePaused                  // calls wait until the pause ends (or their context does)
	gateHang                    // crashed: calls wait until the run ends, then fail
	gateRefused                 // crashed: calls fail at once
)

// gate is the network link of one instance. Its mode changes close wake, so that every call
// waiting at the gate looks again.
type gate struct {
	mu       sync.Mutex
	mode     gateMode
	wake     chan struct{}
	cutUntil time.Time // the lease store is unreachable from this instance until then
}

func newGate() *gate { return &gate{wake: make(chan struct{})} }

func (g *gate) set(m gateMode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode = m
	close(g.wake)
	g.wake = make(chan struct{})
}

func (g *gate) cut(until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cutUntil = until
}

// cutOff reports whether the lease store is unreachable from this instance now.
func (g *gate) cutOff() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.Now().Before(g.cutUntil)
}

// enter blocks while the instance is paused or hung, and says whether the call may proceed.
func (g *gate) enter(ctx context.Context, store bool) error {
	for {
		g.mu.Lock()
		mode, wake, cut := g.mode, g.wake, store && time.Now().Before(g.cutUntil)
		g.mu.Unlock()
		switch {
		case mode == gateRefused:
			return errCrashed
		case mode == gateOpen && cut:
			return errCutOff
		case mode == gateOpen:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// simClient is one instance's Kinesis client: memlog behind the instance's gate. World-wide
// Kinesis faults (throttling, 5xx, expired iterators, access denied) come from memlog's own
// fault hook, which every instance's calls meet after the gate.
type simClient struct {
	g    *gate
	log  *memlog.Log
	w    *world
	inst *instance
}

var _ kinesis.KinesisAPI = (*simClient)(nil)

func (c *simClient) PutRecord(ctx context.Context, in *awskinesis.PutRecordInput, o ...func(*awskinesis.Options)) (*awskinesis.PutRecordOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	return c.log.PutRecord(ctx, in, o...)
}

func (c *simClient) PutRecords(ctx context.Context, in *awskinesis.PutRecordsInput, o ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	return c.log.PutRecords(ctx, in, o...)
}

func (c *simClient) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, o ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	return c.log.ListShards(ctx, in, o...)
}

func (c *simClient) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, o ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	c.w.iterator(c.inst, aws.ToString(in.ShardId), aws.ToString(in.StartingSequenceNumber))
	return c.log.GetShardIterator(ctx, in, o...)
}

var _ kinesis.FanOutAPI = (*simClient)(nil)

func (c *simClient) RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, o ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	return c.log.RegisterStreamConsumer(ctx, in, o...)
}

func (c *simClient) DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, o ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	return c.log.DescribeStreamConsumer(ctx, in, o...)
}

func (c *simClient) DeregisterStreamConsumer(ctx context.Context, in *awskinesis.DeregisterStreamConsumerInput, o ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	return c.log.DeregisterStreamConsumer(ctx, in, o...)
}

// SubscribeToShard goes through the gate, and so does each event of the subscription: the
// instance's context value lets the world's fault hook hold an event at this instance's gate
// (kinesisFault), so that a paused, cut-off or crashed instance receives nothing pushed either.
// A subscription from the checkpoint counts as a restart, as an iterator there does.
func (c *simClient) SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, o ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	seq := ""
	if in.StartingPosition != nil {
		seq = aws.ToString(in.StartingPosition.SequenceNumber)
	}
	c.w.iterator(c.inst, aws.ToString(in.ShardId), seq)
	return c.log.SubscribeToShard(context.WithValue(ctx, instanceKey{}, c.inst), in, o...)
}

// instanceKey carries, on a subscription's context, the instance that made it.
type instanceKey struct{}

func (c *simClient) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, o ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	return c.log.GetRecords(ctx, in, o...)
}

func (c *simClient) DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, o ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	return c.log.DescribeStreamSummary(ctx, in, o...)
}

func (c *simClient) CreateStream(ctx context.Context, in *awskinesis.CreateStreamInput, o ...func(*awskinesis.Options)) (*awskinesis.CreateStreamOutput, error) {
	if err := c.g.enter(ctx, false); err != nil {
		return nil, err
	}
	return c.log.CreateStream(ctx, in, o...)
}

// simStore is one instance's lease store: the shared MemoryStore behind the instance's gate
// and the world's store faults, recording every ownership change and checkpoint write.
type simStore struct {
	w    *world
	inst *instance
	s    lease.Store
}

var _ lease.Store = (*simStore)(nil)

// ForeignWorkers implements lease.ForeignTable: in a seed that moves in from a KCL
// application, KCL workers share the table, and List marks their leases Foreign.
func (s *simStore) ForeignWorkers() string {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.w.kcl != nil {
		return "KCL workers"
	}
	return ""
}

// call runs op through the gate and the world's store faults. A slow store delays half before
// the write and half after it, so that some writes are applied long before the caller hears.
func (s *simStore) call(ctx context.Context, op func() (lease.Lease, error)) (lease.Lease, error) {
	if err := s.inst.gate.enter(ctx, true); err != nil {
		return lease.Lease{}, err
	}
	delay, err := s.w.storeFault()
	if err != nil {
		return lease.Lease{}, err
	}
	if err := sleepCtx(ctx, delay/2); err != nil {
		return lease.Lease{}, err
	}
	l, err := op()
	if err2 := sleepCtx(ctx, delay-delay/2); err2 != nil && err == nil {
		// The write happened; the caller just never hears of it, as with a lost response.
		return lease.Lease{}, err2
	}
	return l, err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *simStore) Create(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) {
		out, err := s.s.Create(ctx, l)
		if err == nil {
			s.w.noteOwner(s.inst, "create", out) // noted as applied, even if the answer gets lost
		}
		return out, err
	})
}

func (s *simStore) List(ctx context.Context, group, stream string) ([]lease.Lease, error) {
	var out []lease.Lease
	_, err := s.call(ctx, func() (lease.Lease, error) {
		var err error
		out, err = s.s.List(ctx, group, stream)
		return lease.Lease{}, err
	})
	if s.ForeignWorkers() != "" {
		// As a kcl.Store reads them: a lease a KCL worker (kcl-*) holds is foreign.
		for i := range out {
			out[i].Foreign = strings.HasPrefix(out[i].Owner, "kcl-")
		}
	}
	return out, err
}

func (s *simStore) Take(ctx context.Context, observed lease.Lease, owner string) (lease.Lease, error) {
	out, err := s.call(ctx, func() (lease.Lease, error) {
		l, err := s.s.Take(ctx, observed, owner)
		if err == nil {
			s.w.noteOwner(s.inst, "take", l) // noted as applied, even if the answer gets lost
		}
		return l, err
	})
	return out, err
}

func (s *simStore) Renew(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) { return s.s.Renew(ctx, held) })
}

func (s *simStore) Checkpoint(ctx context.Context, held lease.Lease, checkpoint string) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) {
		l, err := s.s.Checkpoint(ctx, held, checkpoint)
		s.w.noteCheckpoint(s.inst, held, checkpoint, l, err)
		return l, err
	})
}

func (s *simStore) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) {
		l, err := s.s.Release(ctx, held)
		if err == nil {
			s.w.noteOwner(s.inst, "release", l)
		}
		return l, err
	})
}

func (s *simStore) RequestHandoff(ctx context.Context, observed lease.Lease, taker string) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) { return s.s.RequestHandoff(ctx, observed, taker) })
}

func (s *simStore) Handoff(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	return s.call(ctx, func() (lease.Lease, error) {
		l, err := s.s.Handoff(ctx, held)
		if err == nil {
			s.w.noteOwner(s.inst, "handoff", l)
		}
		return l, err
	})
}

func (s *simStore) DeleteFinished(ctx context.Context, observed lease.Lease) error {
	_, err := s.call(ctx, func() (lease.Lease, error) { return lease.Lease{}, s.s.DeleteFinished(ctx, observed) })
	return err
}

var _ lease.Membership = (*simStore)(nil)

func (s *simStore) Heartbeat(ctx context.Context, m lease.Member) (lease.Member, error) {
	var out lease.Member
	_, err := s.call(ctx, func() (lease.Lease, error) {
		var err error
		out, err = s.s.(lease.Membership).Heartbeat(ctx, m)
		return lease.Lease{}, err
	})
	return out, err
}

func (s *simStore) NotifyMember(ctx context.Context, m lease.Member) error {
	_, err := s.call(ctx, func() (lease.Lease, error) { return lease.Lease{}, s.s.(lease.Membership).NotifyMember(ctx, m) })
	return err
}

func (s *simStore) Members(ctx context.Context, group, stream string) ([]lease.Member, error) {
	var out []lease.Member
	_, err := s.call(ctx, func() (lease.Lease, error) {
		var err error
		out, err = s.s.(lease.Membership).Members(ctx, group, stream)
		return lease.Lease{}, err
	})
	return out, err
}

func (s *simStore) RemoveMember(ctx context.Context, observed lease.Member) error {
	_, err := s.call(ctx, func() (lease.Lease, error) { return lease.Lease{}, s.s.(lease.Membership).RemoveMember(ctx, observed) })
	return err
}
