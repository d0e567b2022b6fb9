package sim_test

// The world of one seed: one memlog stream, one lease.MemoryStore, a publisher, the instances
// of one consumer group, the faults in force, and the log of everything that was delivered,
// acked and written to the lease table. Everything runs inside one synctest bubble, so time is
// fake and advances only when every goroutine of the run waits.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

const (
	simStream = "sim"
	simGroup  = "sim-group"

	// Driver timing: the defaults' proportions, shrunk so that a seed covers many lease
	// lifetimes in a minute of fake time.
	leaseDuration      = 5 * time.Second
	leaseSyncInterval  = time.Second
	shardSyncInterval  = 5 * time.Second
	handoffTimeout     = leaseDuration
	checkpointInterval = time.Second
	pollInterval       = 200 * time.Millisecond
	requestTimeout     = 2 * time.Second
	minReadInterval    = 50 * time.Millisecond
	nackResendSleep    = 100 * time.Millisecond
	closeTimeout       = 10 * time.Second
	// renewInterval is the driver's default, LeaseDuration/3.
	renewInterval = leaseDuration / 3

	// maxRateSkew is how far from the bubble's rate an instance's clock may run.
	maxRateSkew = 0.02
)

// slotNames are the WorkerIDs. None is a prefix of another, so that an owner name in the lease
// table (WorkerID, or WorkerID with a suffix once each subscription is its own member) tells
// which instance wrote it.
var slotNames = []string{"alpha", "bravo", "charlie", "delta"}

type world struct {
	seed  uint64
	mix   mix
	start time.Time
	log   *memlog.Log
	store *lease.MemoryStore
	pub   *kinesis.Publisher
	// end is closed when the run is over: crashed instances' hung calls fail, and the
	// goroutines of crashed handlers return.
	end chan struct{}
	wg  sync.WaitGroup // every goroutine of the harness

	mu          sync.Mutex
	frand       *rand.Rand // for faults that hit calls at random
	ord         int        // orders deliveries, acks and hooks as they happened
	kf          kinesisFaults
	sf          storeFaults
	insts       []*instance          // every incarnation ever started
	live        map[string]*instance // slot name -> current incarnation, if it is not crashed
	published   []pubRec
	deliveries  []*delivery
	hooks       []hookRec
	checkpoints []ckptRec
	owners      map[string]map[leaseKey]ownerRec // shard -> incarnation and generation -> who got it
	// incarn counts, per shard, the times its lease was created again: a reset creates again
	// a lease the group deleted once it was read to its end, and its generations start over.
	incarn    map[string]int
	notes     []string     // the schedule as applied
	disrupt   []disruption // events that may explain duplicates
	closeErrs []string
	kcl       *kclWorld  // a seed that moves in from a KCL application (kcl_test.go); nil if not
	rs        resetWorld // the resets of the run (reset_test.go)
}

type kinesisFaults struct {
	throttleUntil time.Time
	internalUntil time.Time
	expireNext    map[string]bool      // shard -> its next GetRecords fails once, expired
	deniedUntil   map[string]time.Time // shard -> GetRecords is refused until then
	slowUntil     time.Time            // reads answer up to slowBy late until then
	slowBy        time.Duration
}

type storeFaults struct {
	outageUntil time.Time
	slowUntil   time.Time
	slowBy      time.Duration
}

func newWorld(seed uint64, m mix) (*world, error) {
	w := &world{
		seed: seed, mix: m, start: time.Now(),
		log:    memlog.New(memlog.Config{}),
		store:  lease.NewMemoryStore(),
		end:    make(chan struct{}),
		frand:  rand.New(rand.NewPCG(seed, 0xfa17)),
		live:   map[string]*instance{},
		owners: map[string]map[leaseKey]ownerRec{},
		incarn: map[string]int{},
		kf:     kinesisFaults{expireNext: map[string]bool{}, deniedUntil: map[string]time.Time{}},
	}
	ctx := context.Background()
	shards := int32(2 + seed%3)
	if _, err := w.log.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(simStream), ShardCount: aws.Int32(shards)}); err != nil {
		return nil, err
	}
	w.log.SetFault(w.kinesisFault)
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client: w.log, PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
		RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond,
	}, nil)
	if err != nil {
		return nil, err
	}
	w.pub = pub
	return w, nil
}

// since is fake time since the run started, for the printed schedule.
func (w *world) since() time.Duration { return time.Since(w.start) }

func (w *world) notef(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notes = append(w.notes, fmt.Sprintf("%9s  ", w.since().Round(time.Millisecond))+fmt.Sprintf(format, args...))
	if traceNotes {
		fmt.Fprintf(os.Stderr, "seed %d: %s\n", w.seed, w.notes[len(w.notes)-1])
	}
}

// kinesisFault is memlog's fault hook: what AWS does to every instance on a bad day. Writes
// are left alone, so that a publish either is acked or fails for reasons of its own.
func (w *world) kinesisFault(ctx context.Context, c memlog.Call) error {
	if ctx.Value(harnessKey{}) != nil {
		return nil
	}
	if in, ok := ctx.Value(instanceKey{}).(*instance); ok && c.Op == "SubscribeToShardEvent" {
		// A pushed event crosses the instance's network link as a call does.
		if err := in.gate.enter(ctx, false); err != nil {
			return err
		}
	}
	if d := w.readDelay(c.Op); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	switch c.Op {
	case "GetRecords":
		if until, ok := w.kf.deniedUntil[c.ShardID]; ok && now.Before(until) {
			return &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User is not authorized to perform: kinesis:GetRecords", Fault: smithy.FaultClient}
		}
		if w.kf.expireNext[c.ShardID] {
			delete(w.kf.expireNext, c.ShardID)
			return &types.ExpiredIteratorException{Message: aws.String("Iterator expired.")}
		}
		if now.Before(w.kf.throttleUntil) && w.frand.IntN(2) == 0 {
			return &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard " + c.ShardID)}
		}
		fallthrough
	case "SubscribeToShard", "SubscribeToShardEvent":
		if now.Before(w.kf.throttleUntil) && c.Op == "SubscribeToShard" && w.frand.IntN(2) == 0 {
			return &types.LimitExceededException{Message: aws.String("Rate exceeded for consumer and shard " + c.ShardID)}
		}
		fallthrough
	case "GetShardIterator", "ListShards":
		if now.Before(w.kf.internalUntil) && w.frand.IntN(3) == 0 {
			return &types.InternalFailureException{Message: aws.String("Internal service failure.")}
		}
	}
	return nil
}

// readDelay is how late a read answers now: a slow-reads event delays GetRecords and
// GetShardIterator by up to its slowBy.
func (w *world) readDelay(op string) time.Duration {
	if op != "GetRecords" && op != "GetShardIterator" && op != "SubscribeToShardEvent" {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !time.Now().Before(w.kf.slowUntil) || w.kf.slowBy <= 0 {
		return 0
	}
	return time.Duration(w.frand.Int64N(int64(w.kf.slowBy) + 1))
}

// traceNotes (SIM_TRACE=1) prints the schedule as it is applied, to follow a run that hangs.
var traceNotes = os.Getenv("SIM_TRACE") != ""

type harnessKey struct{}

// harnessCtx marks the harness's own Kinesis calls (listing, resharding), which no fault hits.
func harnessCtx() context.Context { return context.WithValue(context.Background(), harnessKey{}, true) }

// storeFault is what the lease table does to every instance: fail (an outage) or answer late.
func (w *world) storeFault() (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Before(w.sf.outageUntil) {
		return 0, errOutage
	}
	if now.Before(w.sf.slowUntil) {
		return time.Duration(w.frand.Int64N(int64(w.sf.slowBy) + 1)), nil
	}
	return 0, nil
}

// quiet lifts every fault: the tail of the run, in which everything must drain.
func (w *world) quiet() {
	w.mu.Lock()
	w.kf = kinesisFaults{expireNext: map[string]bool{}, deniedUntil: map[string]time.Time{}}
	w.sf = storeFaults{}
	insts := append([]*instance(nil), w.insts...)
	w.mu.Unlock()
	for _, in := range insts {
		in.gate.cut(time.Time{})
		in.resume()
	}
}

// ownerOf says which instance slot an owner name in the lease table belongs to.
func ownerOf(owner string) string {
	for _, n := range slotNames {
		if strings.HasPrefix(owner, n) {
			return n
		}
	}
	return ""
}

// publish writes one batch and records what was acked (Publish returned nil).
func (w *world) publish(msgs []pubRec) {
	batch := make([]*kinesisMessage, 0, len(msgs))
	for _, m := range msgs {
		batch = append(batch, newSimMessage(m))
	}
	if err := w.pub.Publish(simStream, batch...); err != nil {
		w.notef("publish of %d failed: %v", len(msgs), err)
		return
	}
	w.mu.Lock()
	w.published = append(w.published, msgs...)
	w.mu.Unlock()
}
