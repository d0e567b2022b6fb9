package kinesis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.opentelemetry.io/otel/metric"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/group"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Subscriber reads Kinesis streams; the topic is the stream name. See SubscriberConfig for the
// two modes (consumer group or not). It is safe for concurrent use.
type Subscriber struct {
	config  SubscriberConfig
	logger  watermill.LoggerAdapter
	metrics *subscriberMetrics
	// behindReg is the millis-behind gauge's callback, unregistered by Close.
	behindReg metric.Registration

	// mu guards closed, subs and members: Subscribe registers a subscription and Close
	// cancels every registered one, so none can slip past Close.
	mu     sync.Mutex
	closed bool
	subs   map[*group.Subscription]int // each live subscription, with its member slot (0 without a group)
	// members holds, per stream, the member slots of the live grouped subscriptions (1 is
	// WorkerID itself, n > 1 is WorkerID#n); a slot is free again once its subscription has
	// released its leases.
	members map[string]map[int]bool
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

// NewSubscriber checks the config, fills in defaults and returns a Subscriber. A nil logger
// logs nothing.
func NewSubscriber(config SubscriberConfig, logger watermill.LoggerAdapter) (*Subscriber, error) {
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, err
	}
	config.Client = oneRetryLayer(config.Client)
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	if config.Group.Name != "" && config.Group.LeaseStore == nil {
		store, err := openLeaseTable(config)
		if err != nil {
			return nil, err
		}
		config.Group.LeaseStore = store
	}
	metrics, err := newSubscriberMetrics(config.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("kinesis: creating the subscriber's metrics (MeterProvider): %w", err)
	}
	s := &Subscriber{config: config, logger: logger, metrics: metrics, subs: map[*group.Subscription]int{}, members: map[string]map[int]bool{}}
	if s.behindReg, err = metrics.observeBehind(s.liveSubscriptions); err != nil {
		return nil, fmt.Errorf("kinesis: registering the subscriber's millis-behind gauge (MeterProvider): %w", err)
	}
	return s, nil
}

// openLeaseTable opens (and with CreateLeaseTable, creates) the DynamoDB lease table.
func openLeaseTable(config SubscriberConfig) (lease.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), config.CloseTimeout+2*time.Minute)
	defer cancel()
	store, err := lease.NewDynamoDBStore(ctx, lease.DynamoDBConfig{
		Client:      dynamodb.NewFromConfig(*config.AWSConfig, append(append(dynamoDBPooled(*config.AWSConfig), explainDynamoDBSetup), config.Group.DynamoDBOptions...)...),
		TableName:   config.Group.LeaseTable,
		CreateTable: config.Group.CreateLeaseTable,
	})
	if missing := (*lease.TableNotFoundError)(nil); errors.As(err, &missing) {
		// The store names its own setting; the user set this one.
		named := *missing
		named.CreateSetting = "SubscriberConfig.Group.CreateLeaseTable"
		err = &named
	}
	if err != nil {
		return nil, fmt.Errorf("kinesis: opening the lease table of consumer group %q: %w", config.Group.Name, err)
	}
	return store, nil
}

// Subscribe starts reading the stream named topic and returns the channel of its messages.
// It returns once every shard reader it started holds its iterator, so a record published
// after Subscribe returns is one this subscription will read. The channel is closed when ctx
// is cancelled or the Subscriber is closed, after acked progress is checkpointed and leases
// are released.
//
// Each shard's messages arrive in sequence order; the next is sent once the previous is
// acked (see MaxInFlight). A nacked message is sent again after NackResendSleep.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("%w: not subscribing to stream %q", ErrSubscriberClosed, topic)
	}
	if err := validateStreamName(topic); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: Subscribe to stream %q needs a context (context.Background() reads until Close)", ErrNilContext, topic)
	}
	sub, ok := s.register(ctx, topic)
	if !ok {
		return nil, fmt.Errorf("%w: not subscribing to stream %q", ErrSubscriberClosed, topic)
	}
	err := s.ensureStream(sub.Context(), topic)
	if err == nil {
		err = sub.Start()
	}
	if err != nil {
		sub.Shutdown()
		s.unregister(sub)
		if s.isClosed() {
			return nil, fmt.Errorf("%w (while subscribing to stream %q: %w)", ErrSubscriberClosed, topic, err)
		}
		return nil, err
	}
	shards, reading, consumer := sub.Started()
	fields := sub.LogFields().Add(watermill.LogFields{"shards": shards, "reading": reading})
	if consumer != "" {
		fields["fan_out_consumer"] = consumer
	}
	s.logger.Info("Subscribed", fields)
	go func() {
		sub.Run()
		s.unregister(sub)
	}()
	return sub.Messages(), nil
}

// SubscribeInitialize creates the stream if it is missing and CreateStream is set; otherwise
// it checks that the stream exists.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	if s.isClosed() {
		return fmt.Errorf("%w: not initializing stream %q", ErrSubscriberClosed, topic)
	}
	if err := validateStreamName(topic); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.config.CloseTimeout)
	defer cancel()
	return ensureStream(ctx, s.config.Client, topic, s.config.CreateStream, s.config.CreateStreamShards, s.config.RequestTimeout)
}

func (s *Subscriber) ensureStream(ctx context.Context, stream string) error {
	if !s.config.CreateStream {
		return nil // a missing stream shows up in ListShards, with no extra call
	}
	return ensureStream(ctx, s.config.Client, stream, true, s.config.CreateStreamShards, s.config.RequestTimeout)
}

// register makes the subscription of one Subscribe call, as a member of the group of its own,
// and records it so that Close stops it; false once the Subscriber is closed.
func (s *Subscriber) register(ctx context.Context, stream string) (*group.Subscription, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	cfg := s.config
	slot := 0
	if cfg.Group.Name != "" {
		slot = s.takeMemberSlot(stream)
		cfg.Group.WorkerID = memberID(s.config.Group.WorkerID, slot)
	}
	sub := group.New(ctx, cfg.internal(stream, s.logger, s.metrics))
	s.subs[sub] = slot
	return sub, true
}

// takeMemberSlot returns the lowest member slot free on stream and marks it taken.
//
// Each grouped subscription is its own member of the group, as in Kafka's consumer groups: two
// Subscribe calls on one stream (a Watermill router with two handlers on one topic does this)
// split the shards between them, and each message reaches one of them. Sharing one owner name,
// each took the other's leases as its own with no reader: 20 messages gave 240 deliveries in
// 3 s and no checkpoint was written. Slot 1 keeps WorkerID itself, so that an instance that
// restarts with the same WorkerID takes its leases back at once.
func (s *Subscriber) takeMemberSlot(stream string) int {
	taken := s.members[stream]
	if taken == nil {
		taken = map[int]bool{}
		s.members[stream] = taken
	}
	slot := 1
	for taken[slot] {
		slot++
	}
	taken[slot] = true
	return slot
}

func (s *Subscriber) freeMemberSlot(sub *group.Subscription, slot int) {
	if taken := s.members[sub.Stream()]; taken != nil && slot > 0 {
		delete(taken, slot)
		if len(taken) == 0 {
			delete(s.members, sub.Stream())
		}
	}
}

// memberID is the owner name of a subscription in the lease table: WorkerID for the first
// grouped subscription of a stream, WorkerID#2, WorkerID#3, ... for the ones open beside it.
func memberID(workerID string, slot int) string {
	if slot <= 1 {
		return workerID
	}
	return workerID + "#" + strconv.Itoa(slot)
}

// unregister forgets a subscription that has stopped (its leases released) and frees its
// member slot.
func (s *Subscriber) unregister(sub *group.Subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.subs[sub]
	if !ok {
		return
	}
	delete(s.subs, sub)
	s.freeMemberSlot(sub, slot)
}

func (s *Subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops every subscription: each reader stops delivering, checkpoints what was acked
// and releases its lease, and every output channel is closed before Close returns. Messages
// delivered and not acked are redelivered to the shard's next reader. Close waits at most
// CloseTimeout and is idempotent.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	subs := s.subscriptions()
	s.mu.Unlock()
	_ = s.behindReg.Unregister() // fails only for a provider shut down already

	for _, sub := range subs {
		sub.Cancel()
	}
	deadline, cancel := context.WithTimeout(context.Background(), s.config.CloseTimeout)
	defer cancel()
	var errs []error
	for _, sub := range subs {
		select {
		case <-sub.Done():
		case <-deadline.Done():
			errs = append(errs, fmt.Errorf("kinesis: subscription to stream %q did not stop within CloseTimeout (%s)", sub.Stream(), s.config.CloseTimeout))
		}
	}
	return errors.Join(errs...)
}

// subscriptions are the live subscriptions; s.mu is held.
func (s *Subscriber) subscriptions() []*group.Subscription {
	subs := make([]*group.Subscription, 0, len(s.subs))
	for sub := range s.subs {
		subs = append(subs, sub)
	}
	return subs
}

// liveSubscriptions are the live subscriptions, for Health and the metrics' callback.
func (s *Subscriber) liveSubscriptions() []*group.Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subscriptions()
}
