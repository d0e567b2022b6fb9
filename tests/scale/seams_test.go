package scale_test

// The seams through which the scale run reaches into each instance: its Kinesis client and its
// lease store, each behind the instance's gate, so that a crash cuts that instance alone off
// from memlog and the lease table (as tests/sim's gate does), and so that every lease-table
// call that reaches the table is counted for the instance that made it and priced with the
// DynamoDB cost model (cost_test.go).

import (
	"context"
	"errors"
	"sync"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

var errCrashed = errors.New("scale: connection refused (instance crashed)")

// gateMode is how an instance's calls to the outside fare.
type gateMode int

const (
	gateOpen    gateMode = iota // calls go through
	gateHang                    // crashed: calls wait until their context ends (or the run ends), then fail
	gateRefused                 // after the run: calls fail at once, so that Close returns
)

// gate is the network link of one instance (copied in spirit from tests/sim). A crashed
// instance's goroutines keep running on their timers, but none of their calls reaches memlog or
// the lease store again: they hang here, as calls to a host that black-holes its packets do.
type gate struct {
	mu   sync.Mutex
	mode gateMode
	wake chan struct{}
}

func newGate() *gate { return &gate{wake: make(chan struct{})} }

func (g *gate) set(m gateMode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode = m
	close(g.wake)
	g.wake = make(chan struct{})
}

// enter blocks while the instance is crashed, and says whether the call may proceed.
func (g *gate) enter(ctx context.Context) error {
	for {
		g.mu.Lock()
		mode, wake := g.mode, g.wake
		g.mu.Unlock()
		switch mode {
		case gateOpen:
			return nil
		case gateRefused:
			return errCrashed
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// gatedClient is one instance's Kinesis client: memlog behind the instance's gate.
type gatedClient struct {
	g   *gate
	log *memlog.Log
}

var _ kinesis.KinesisAPI = (*gatedClient)(nil)

func (c *gatedClient) PutRecord(ctx context.Context, in *awskinesis.PutRecordInput, o ...func(*awskinesis.Options)) (*awskinesis.PutRecordOutput, error) {
	if err := c.g.enter(ctx); err != nil {
		return nil, err
	}
	return c.log.PutRecord(ctx, in, o...)
}

func (c *gatedClient) PutRecords(ctx context.Context, in *awskinesis.PutRecordsInput, o ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	if err := c.g.enter(ctx); err != nil {
		return nil, err
	}
	return c.log.PutRecords(ctx, in, o...)
}

func (c *gatedClient) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, o ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	if err := c.g.enter(ctx); err != nil {
		return nil, err
	}
	return c.log.ListShards(ctx, in, o...)
}

func (c *gatedClient) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, o ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	if err := c.g.enter(ctx); err != nil {
		return nil, err
	}
	return c.log.GetShardIterator(ctx, in, o...)
}

func (c *gatedClient) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, o ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	if err := c.g.enter(ctx); err != nil {
		return nil, err
	}
	return c.log.GetRecords(ctx, in, o...)
}

func (c *gatedClient) DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, o ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	if err := c.g.enter(ctx); err != nil {
		return nil, err
	}
	return c.log.DescribeStreamSummary(ctx, in, o...)
}

func (c *gatedClient) CreateStream(ctx context.Context, in *awskinesis.CreateStreamInput, o ...func(*awskinesis.Options)) (*awskinesis.CreateStreamOutput, error) {
	if err := c.g.enter(ctx); err != nil {
		return nil, err
	}
	return c.log.CreateStream(ctx, in, o...)
}

// countingStore is one instance's lease store: the shared MemoryStore behind the instance's
// gate, every call that reaches the table counted (and priced) in the world's meter for this
// instance. It implements every method of lease.Store itself, on purpose: embedding the
// interface would let a method added to lease.Store later pass the gate and the meter
// unnoticed; as it is, such a method fails to compile here (as in tests/sim) until it is
// counted too.
type countingStore struct {
	g   *gate
	m   *meter
	who int // the instance's index in the meter
	s   *lease.MemoryStore
}

var _ lease.Store = (*countingStore)(nil)

func (s *countingStore) Create(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	if err := s.g.enter(ctx); err != nil {
		return lease.Lease{}, err
	}
	out, err := s.s.Create(ctx, l)
	s.m.write(s.who, lease.OpCreate, err, writeCost{key: l.Key(), size: sizeOf(l, withCounter(l, 1))})
	return out, err
}

func (s *countingStore) List(ctx context.Context, group, stream string) ([]lease.Lease, error) {
	if err := s.g.enter(ctx); err != nil {
		return nil, err
	}
	out, err := s.s.List(ctx, group, stream)
	s.m.list(s.who, group, stream, out, err)
	return out, err
}

func (s *countingStore) Take(ctx context.Context, observed lease.Lease, owner string) (lease.Lease, error) {
	if err := s.g.enter(ctx); err != nil {
		return lease.Lease{}, err
	}
	out, err := s.s.Take(ctx, observed, owner)
	// A failed take is read back (GetItem) to tell a lease that is gone from one that moved.
	s.m.write(s.who, lease.OpTake, err, writeCost{key: observed.Key(), size: sizeOf(observed, out), readBack: true})
	return out, err
}

func (s *countingStore) Renew(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	if err := s.g.enter(ctx); err != nil {
		return lease.Lease{}, err
	}
	out, err := s.s.Renew(ctx, held)
	s.m.write(s.who, lease.OpRenew, err, ownerWrite(held, out))
	return out, err
}

func (s *countingStore) Checkpoint(ctx context.Context, held lease.Lease, checkpoint string) (lease.Lease, error) {
	if err := s.g.enter(ctx); err != nil {
		return lease.Lease{}, err
	}
	out, err := s.s.Checkpoint(ctx, held, checkpoint)
	after := held
	after.Checkpoint = checkpoint
	s.m.write(s.who, lease.OpCheckpoint, err, ownerWrite(held, out, after))
	return out, err
}

func (s *countingStore) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	if err := s.g.enter(ctx); err != nil {
		return lease.Lease{}, err
	}
	out, err := s.s.Release(ctx, held)
	s.m.write(s.who, lease.OpRelease, err, ownerWrite(held, out))
	return out, err
}

func (s *countingStore) RequestHandoff(ctx context.Context, observed lease.Lease, taker string) (lease.Lease, error) {
	if err := s.g.enter(ctx); err != nil {
		return lease.Lease{}, err
	}
	out, err := s.s.RequestHandoff(ctx, observed, taker)
	after := observed
	after.PendingOwner = taker
	s.m.write(s.who, lease.OpRequestHandoff, err, writeCost{key: observed.Key(), size: sizeOf(observed, out, after), readBack: true})
	return out, err
}

func (s *countingStore) Handoff(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	if err := s.g.enter(ctx); err != nil {
		return lease.Lease{}, err
	}
	out, err := s.s.Handoff(ctx, held)
	c := ownerWrite(held, out)
	c.readBack = true // a failed handoff is read back to tell "nobody asked" from "lost"
	s.m.write(s.who, lease.OpHandoff, err, c)
	return out, err
}

func (s *countingStore) DeleteFinished(ctx context.Context, observed lease.Lease) error {
	if err := s.g.enter(ctx); err != nil {
		return err
	}
	err := s.s.DeleteFinished(ctx, observed)
	s.m.write(s.who, lease.OpDeleteFinished, err, writeCost{key: observed.Key(), size: sizeOf(observed)})
	return err
}

var _ lease.Membership = (*countingStore)(nil)

// Heartbeat counts as a write of the member record.
func (s *countingStore) Heartbeat(ctx context.Context, m lease.Member) (lease.Member, error) {
	if err := s.g.enter(ctx); err != nil {
		return lease.Member{}, err
	}
	out, err := s.s.Heartbeat(ctx, m)
	written := out
	if err != nil {
		written = m
		written.Counter = 1
	}
	s.m.write(s.who, lease.OpHeartbeat, err, memberWrite(written))
	return out, err
}

func (s *countingStore) NotifyMember(ctx context.Context, m lease.Member) error {
	if err := s.g.enter(ctx); err != nil {
		return err
	}
	err := s.s.NotifyMember(ctx, m)
	m.Counter, m.Notices = 1, 1
	s.m.write(s.who, lease.OpNotifyMember, err, memberWrite(m))
	return err
}

func (s *countingStore) Members(ctx context.Context, group, stream string) ([]lease.Member, error) {
	if err := s.g.enter(ctx); err != nil {
		return nil, err
	}
	out, err := s.s.Members(ctx, group, stream)
	s.m.members(s.who, lease.OpMembers, group, stream, out, err)
	return out, err
}

func (s *countingStore) RemoveMember(ctx context.Context, observed lease.Member) error {
	if err := s.g.enter(ctx); err != nil {
		return err
	}
	err := s.s.RemoveMember(ctx, observed)
	s.m.write(s.who, lease.OpRemoveMember, err, memberWrite(observed))
	return err
}
