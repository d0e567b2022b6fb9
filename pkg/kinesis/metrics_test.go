package kinesis_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// metricPoints is what a manual reader collected, by instrument name: the points' values
// (a sum, a gauge's last value, or a histogram's count) with their attributes.
type metricPoints map[string][]metricPoint

type metricPoint struct {
	value float64
	attrs attribute.Set
}

func collect(t *testing.T, r *sdkmetric.ManualReader) metricPoints {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := metricPoints{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], metricPoint{float64(p.Value), p.Attributes})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], metricPoint{float64(p.Value), p.Attributes})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], metricPoint{float64(p.Count), p.Attributes})
				}
			default:
				t.Errorf("instrument %s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// total sums an instrument's points whose attributes have every pair of want.
func (mp metricPoints) total(name string, want ...attribute.KeyValue) float64 {
	var sum float64
	for _, p := range mp[name] {
		ok := true
		for _, kv := range want {
			if v, has := p.attrs.Value(kv.Key); !has || v != kv.Value {
				ok = false
			}
		}
		if ok {
			sum += p.value
		}
	}
	return sum
}

// TestMetrics reads every instrument through the SDK's manual reader after a scripted run on
// memlog: two instances of a group share 4 shards (takes and a handoff), reads are throttled
// and an iterator expires, messages are nacked and redelivered, the lease store fails for a
// while (failed checkpoints) and then cuts one instance off until the other takes its shards
// (leases lost), and Close releases the rest. The publisher writes through rejected entries
// (retries) and fails on a stream that does not exist.
func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		reader := sdkmetric.NewManualReader()
		provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = provider.Shutdown(context.Background()) }()

		w := newGrpWorld(t, 4)
		w.meter = provider
		stream := w.e.stream
		var throttle, expire atomic.Int32
		throttle.Store(2)
		expire.Store(1)
		w.e.log.SetFault(func(_ context.Context, c memlog.Call) error {
			if c.Op != "GetRecords" {
				return nil
			}
			if c.ShardID == "shardId-000000000000" && throttle.Add(-1) >= 0 {
				return &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}
			}
			if c.ShardID == "shardId-000000000001" && expire.Add(-1) >= 0 {
				return &types.ExpiredIteratorException{Message: aws.String("Iterator expired")}
			}
			return nil
		})
		defer w.e.log.SetFault(nil)

		w.publishing = true
		w1 := w.start("w1")
		w.steps(grpSyncInterval / 2)
		w2 := w.start("w2")
		w.runUntil("spread over w1 and w2", 4*grpSyncInterval+grpHandoffTimeout, func() bool { return w.spread("w1", "w2") })

		// Nack what w1 holds of one of its shards: each is delivered again.
		victims := w.owned("w1")
		held := victims[0]
		w1.setHold(func(shard string) bool { return shard == held })
		w.steps(3 * grpStep)
		w1.setHold(nil)
		nacked := w1.heldMsgs()
		if len(nacked) == 0 {
			t.Fatalf("w1 held no message of %s", held)
		}
		for _, d := range nacked {
			d.msg.Nack()
		}
		w.steps(grpCheckpointEvery)

		// The store refuses w1 for a moment (its checkpoints fail), then cuts it off until w2
		// has taken its shards (w1 loses them).
		w1.store.setMode(grpFail)
		w.steps(grpCheckpointEvery + grpStep)
		w1.store.setMode(grpHang)
		w.runUntil("w2 takes w1's shards", 2*grpLeaseDuration, func() bool { return len(w.owned("w2")) == 4 })
		w1.store.setMode(grpPass)
		w.runUntil("w1 stops reading them", 2*grpSyncInterval, func() bool {
			return collect(t, reader).total("kinesis.lease.lost") >= float64(len(victims))
		})

		// The publisher: one write through rejected entries, one to a stream that is not there.
		// Its retries do not wait: a backoff would let the bubble's time move during Publish,
		// and the readers would deliver these messages, which the world did not publish.
		pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
			Client: w.e.log, MeterProvider: provider,
			RetryBackoff: time.Nanosecond, MaxRetryBackoff: time.Nanosecond,
		}, watermill.NopLogger{})
		if err != nil {
			t.Fatal(err)
		}
		var reject atomic.Int32
		reject.Store(2)
		w.e.log.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) {
			if reject.Add(-1) >= 0 {
				return "ProvisionedThroughputExceededException", ""
			}
			return "", ""
		})
		defer w.e.log.SetPutRecordsEntryFault(nil)
		batch := make([]*message.Message, 5)
		for i := range batch {
			batch[i] = message.NewMessage(watermill.NewUUID(), []byte("metrics"))
		}
		if err := pub.Publish(stream, batch...); err != nil {
			t.Fatalf("Publish through rejected entries: %v", err)
		}
		if err := pub.Publish("no-such-stream", message.NewMessage(watermill.NewUUID(), nil)); !errors.Is(err, kinesis.ErrStreamNotFound) {
			t.Fatalf("Publish to a missing stream: %v, want ErrStreamNotFound", err)
		}
		_ = pub.Close()

		// Millis behind is observed for the shards read now: all four, by w2.
		if behind := collect(t, reader)["kinesis.consumer.millis_behind_latest"]; len(behind) != 4 {
			t.Errorf("millis behind latest while w2 reads 4 shards: %d points %v, want 4", len(behind), behind)
		}

		w.publishing = false
		w.close(w1)
		w.close(w2)

		got := collect(t, reader)
		if behind := got["kinesis.consumer.millis_behind_latest"]; len(behind) != 0 {
			t.Errorf("millis behind latest after Close: %v, want no shard reported", behind)
		}
		var names []string
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("instruments: %s", strings.Join(names, ", "))
		for _, n := range names {
			for _, p := range got[n] {
				var kv []string
				for _, a := range p.attrs.ToSlice() {
					kv = append(kv, string(a.Key)+"="+a.Value.Emit())
				}
				t.Logf("%s{%s} %v", n, strings.Join(kv, ","), p.value)
			}
		}
		dest := attribute.String("messaging.destination.name", stream)
		system := attribute.String("messaging.system", "aws_kinesis")
		group := attribute.String("messaging.consumer.group.name", subGroup)
		shard0 := attribute.String("messaging.destination.partition.id", "shardId-000000000000")
		shard1 := attribute.String("messaging.destination.partition.id", "shardId-000000000001")
		checks := []struct {
			name string
			want func(v float64) bool
			what string
			kv   []attribute.KeyValue
		}{
			{"messaging.client.consumed.messages", func(v float64) bool { return v >= float64(len(w.delivered())) }, ">= the messages delivered", []attribute.KeyValue{dest, system, group}},
			{"kinesis.consumer.delivered.bytes", func(v float64) bool { return v > 0 }, "> 0", []attribute.KeyValue{dest}},
			{"kinesis.consumer.acks", func(v float64) bool { return v > 0 }, "> 0", []attribute.KeyValue{dest, group}},
			{"kinesis.consumer.nacks", func(v float64) bool { return v == float64(len(nacked)) }, "the messages nacked", []attribute.KeyValue{dest}},
			{"kinesis.consumer.redeliveries", func(v float64) bool { return v >= float64(len(nacked)) }, ">= the messages nacked", []attribute.KeyValue{dest}},
			{"kinesis.consumer.read.throttles", func(v float64) bool { return v == 2 }, "2 (the throttled reads)", []attribute.KeyValue{dest, shard0}},
			{"kinesis.consumer.iterator.renewals", func(v float64) bool { return v == 1 }, "1 (the expired iterator)", []attribute.KeyValue{dest, shard1}},
			{"kinesis.checkpoint.writes", func(v float64) bool { return v > 0 }, "> 0", []attribute.KeyValue{dest, group}},
			{"kinesis.checkpoint.failures", func(v float64) bool { return v > 0 }, "> 0 (the store refused w1)", []attribute.KeyValue{dest, group}},
			{"kinesis.lease.held", func(v float64) bool { return v == 0 }, "0 once both closed", []attribute.KeyValue{dest, group}},
			{"kinesis.lease.acquired", func(v float64) bool { return v >= 4 }, ">= 4 free takes", []attribute.KeyValue{dest, attribute.String("kinesis.lease.reason", "free")}},
			{"kinesis.lease.acquired", func(v float64) bool { return v >= 1 }, ">= 1 by handoff", []attribute.KeyValue{dest, attribute.String("kinesis.lease.reason", "handed_over")}},
			{"kinesis.lease.acquired", func(v float64) bool { return v == float64(len(victims)) }, "w1's shards, expired", []attribute.KeyValue{dest, attribute.String("kinesis.lease.reason", "expired")}},
			{"kinesis.lease.handed_over", func(v float64) bool { return v >= 1 }, ">= 1", []attribute.KeyValue{dest}},
			{"kinesis.lease.released", func(v float64) bool { return v == 4 }, "4 (w2's, at Close)", []attribute.KeyValue{dest}},
			{"kinesis.lease.lost", func(v float64) bool { return v == float64(len(victims)) }, "w1's shards", []attribute.KeyValue{dest}},
			{"messaging.client.sent.messages", func(v float64) bool { return v == 5 }, "5", []attribute.KeyValue{dest, system, attribute.String("messaging.operation.name", "send")}},
			{"kinesis.producer.batches", func(v float64) bool { return v >= 2 }, ">= 2 (a retry)", []attribute.KeyValue{dest}},
			{"kinesis.producer.retries", func(v float64) bool { return v == 2 }, "2 (the rejected entries)", []attribute.KeyValue{dest}},
			{"kinesis.producer.failures", func(v float64) bool { return v == 1 }, "1 (the missing stream)", []attribute.KeyValue{attribute.String("messaging.destination.name", "no-such-stream"), attribute.String("error.type", "stream_not_found")}},
			{"messaging.client.operation.duration", func(v float64) bool { return v == 1 }, "1 Publish", []attribute.KeyValue{dest}},
		}
		for _, c := range checks {
			if len(got[c.name]) == 0 {
				t.Errorf("%s: no data", c.name)
				continue
			}
			if v := got.total(c.name, c.kv...); !c.want(v) {
				t.Errorf("%s %v: %v, want %s", c.name, c.kv, v, c.what)
			}
		}
		_ = w.pub.Close()
		_ = w.e.pub.Close()
		goleak.VerifyNone(t, ignore)
	})
}
