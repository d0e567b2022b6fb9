package kinesis

import (
	"context"
	"errors"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/group"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// meterName is the instrumentation scope of every instrument here.
const meterName = "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"

// Attribute keys: OpenTelemetry's messaging semantic conventions where they have one (a shard
// is the stream's partition), the driver's own otherwise.
const (
	attrSystem      = attribute.Key("messaging.system")
	attrDestination = attribute.Key("messaging.destination.name")
	attrPartition   = attribute.Key("messaging.destination.partition.id")
	attrGroup       = attribute.Key("messaging.consumer.group.name")
	attrOperation   = attribute.Key("messaging.operation.name")
	attrLeaseReason = attribute.Key("kinesis.lease.reason")
	attrErrorType   = attribute.Key("error.type")
)

// systemName is messaging.system for Kinesis (the conventions name none; AWS's SQS is aws_sqs).
const systemName = "aws_kinesis"

// subscriberMetrics are a Subscriber's instruments. With the default no-op MeterProvider every
// call on them does nothing.
type subscriberMetrics struct {
	consumed, bytes, acks, nacks, redeliveries metric.Int64Counter
	// behind is observed, not recorded: a shard that moved to another worker must stop being
	// reported here (a recorded gauge keeps its last value for good).
	behind                               metric.Int64ObservableGauge
	meter                                metric.Meter
	throttles, iteratorRenewals          metric.Int64Counter
	checkpoints, checkpointFailures      metric.Int64Counter
	leasesHeld                           metric.Int64UpDownCounter
	acquired, handedOver, released, lost metric.Int64Counter
	// byCount are the counters above by what the readers count (shard.Count); the lease
	// counter, an up-down counter, is not among them.
	byCount [shard.NumCounts]metric.Int64Counter
}

// instruments creates the instruments of one meter and collects their errors, which make
// NewSubscriber and NewPublisher fail: nothing is measured with a broken instrument.
type instruments struct {
	m    metric.Meter
	errs []error
}

func newInstruments(mp metric.MeterProvider) *instruments {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	return &instruments{m: mp.Meter(meterName)}
}

func (in *instruments) counter(name, unit, desc string) metric.Int64Counter {
	c, err := in.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.keep(err)
	return c
}

func (in *instruments) keep(err error) {
	if err != nil {
		in.errs = append(in.errs, err)
	}
}

func (in *instruments) err() error {
	if len(in.errs) == 0 {
		return nil
	}
	return errors.Join(in.errs...)
}

func newSubscriberMetrics(mp metric.MeterProvider) (*subscriberMetrics, error) {
	in := newInstruments(mp)
	m := &subscriberMetrics{
		consumed:           in.counter("messaging.client.consumed.messages", "{message}", "Messages delivered to the application, redeliveries included"),
		bytes:              in.counter("kinesis.consumer.delivered.bytes", "By", "Payload bytes of the messages delivered, first deliveries only"),
		acks:               in.counter("kinesis.consumer.acks", "{message}", "Messages acked"),
		nacks:              in.counter("kinesis.consumer.nacks", "{message}", "Messages nacked (they are delivered again)"),
		redeliveries:       in.counter("kinesis.consumer.redeliveries", "{message}", "Messages delivered again, after a Nack or a pause"),
		throttles:          in.counter("kinesis.consumer.read.throttles", "{call}", "GetRecords calls Kinesis throttled"),
		iteratorRenewals:   in.counter("kinesis.consumer.iterator.renewals", "{iterator}", "Expired shard iterators replaced"),
		checkpoints:        in.counter("kinesis.checkpoint.writes", "{write}", "Checkpoints written to the lease store"),
		checkpointFailures: in.counter("kinesis.checkpoint.failures", "{write}", "Checkpoint writes that failed"),
		acquired:           in.counter("kinesis.lease.acquired", "{lease}", "Leases taken, by reason (free, expired, handed_over, handoff_timeout, restarted)"),
		handedOver:         in.counter("kinesis.lease.handed_over", "{lease}", "Leases handed over to a worker that asked for them"),
		released:           in.counter("kinesis.lease.released", "{lease}", "Leases released (at Close, or at a shard's end)"),
		lost:               in.counter("kinesis.lease.lost", "{lease}", "Leases lost to another worker (fencing)"),
	}
	m.byCount = [shard.NumCounts]metric.Int64Counter{
		shard.CountConsumed: m.consumed, shard.CountBytes: m.bytes, shard.CountAcks: m.acks, shard.CountNacks: m.nacks,
		shard.CountRedeliveries: m.redeliveries, shard.CountThrottles: m.throttles, shard.CountIteratorRenewals: m.iteratorRenewals,
		shard.CountCheckpoints: m.checkpoints, shard.CountCheckpointFailures: m.checkpointFailures,
		shard.CountHandedOver: m.handedOver, shard.CountReleased: m.released, shard.CountLost: m.lost,
	}
	var err error
	m.meter = in.m
	m.behind, err = in.m.Int64ObservableGauge("kinesis.consumer.millis_behind_latest", metric.WithUnit("ms"),
		metric.WithDescription("How far each shard read now is behind the shard's newest record, as its last GetRecords said"))
	in.keep(err)
	m.leasesHeld, err = in.m.Int64UpDownCounter("kinesis.lease.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases this subscriber holds"))
	in.keep(err)
	return m, in.err()
}

// observeBehind registers the callback that reports millis behind latest for the shards that
// the subscriptions subs() returns read at each collection.
func (m *subscriberMetrics) observeBehind(subs func() []*group.Subscription) (metric.Registration, error) {
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, sub := range subs() {
			for _, r := range sub.Status().Readers {
				sm, ok := r.Metrics().(*shardMetrics)
				if h := r.Health(); ok && !h.LastRead.IsZero() { // nothing to say before the first read
					o.ObserveInt64(m.behind, h.MillisBehindLatest, sm.obs...)
				}
			}
		}
		return nil
	}, m.behind)
}

// forSubscription is the group.Metrics of one subscription.
func (m *subscriberMetrics) forSubscription(stream, group string) subscriptionMetrics {
	return subscriptionMetrics{m: m, stream: stream, group: group}
}

// subscriptionMetrics makes the metrics of each shard a subscription reads.
type subscriptionMetrics struct {
	m             *subscriberMetrics
	stream, group string
}

var _ group.Metrics = subscriptionMetrics{}

// ForShard is the shard's metrics, with its attributes made once.
func (s subscriptionMetrics) ForShard(shardID string) shard.Metrics {
	set := shardAttrs(s.stream, s.group, shardID)
	opt := metric.WithAttributeSet(set)
	return &shardMetrics{subscriberMetrics: s.m, attrs: set, add: []metric.AddOption{opt}, obs: []metric.ObserveOption{opt}}
}

// shardAttrs are the attributes of a shard's measurements.
func shardAttrs(stream, group, shardID string) attribute.Set {
	kv := []attribute.KeyValue{attrSystem.String(systemName), attrDestination.String(stream), attrPartition.String(shardID)}
	if group != "" {
		kv = append(kv, attrGroup.String(group))
	}
	return attribute.NewSet(kv...)
}

// shardMetrics are the instruments with one shard's attributes: the shard.Metrics its reader
// counts with.
type shardMetrics struct {
	*subscriberMetrics
	attrs attribute.Set
	add   []metric.AddOption
	obs   []metric.ObserveOption // for the millis-behind gauge (observeBehind)
}

var _ shard.Metrics = (*shardMetrics)(nil)

// Count adds n to the instrument of c for the shard.
func (s *shardMetrics) Count(c shard.Count, n int64) {
	if c == shard.CountLeasesHeld {
		s.leasesHeld.Add(context.Background(), n, s.add...)
		return
	}
	s.byCount[c].Add(context.Background(), n, s.add...)
}

// LeaseAcquired counts a take, with its reason, and one more lease held.
func (s *shardMetrics) LeaseAcquired(reason string) {
	kv := append(s.attrs.ToSlice(), attrLeaseReason.String(reason))
	s.acquired.Add(context.Background(), 1, metric.WithAttributes(kv...))
	s.leasesHeld.Add(context.Background(), 1, s.add...)
}

// publisherMetrics are a Publisher's instruments.
type publisherMetrics struct {
	sent, batches, retries, failures metric.Int64Counter
	duration                         metric.Float64Histogram
}

func newPublisherMetrics(mp metric.MeterProvider) (*publisherMetrics, error) {
	in := newInstruments(mp)
	m := &publisherMetrics{
		sent:     in.counter("messaging.client.sent.messages", "{message}", "Messages Kinesis accepted"),
		batches:  in.counter("kinesis.producer.batches", "{call}", "PutRecords calls"),
		retries:  in.counter("kinesis.producer.retries", "{record}", "Records sent again after Kinesis rejected or throttled them"),
		failures: in.counter("kinesis.producer.failures", "{message}", "Messages a Publish call could not write"),
	}
	var err error
	m.duration, err = in.m.Float64Histogram("messaging.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a Publish call, all its PutRecords calls and retries included"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10))
	in.keep(err)
	return m, in.err()
}

// streamAttrs are a publish's attributes for one stream.
func streamAttrs(stream string) metric.MeasurementOption {
	return metric.WithAttributes(attrSystem.String(systemName), attrDestination.String(stream), attrOperation.String("send"))
}
