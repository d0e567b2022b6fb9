package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// KPL aggregates are unpacked into their user records, each its own message with its own
// partition key and sub-sequence number; checkpoints resume inside an aggregate.

// subAggregate packs user records (key, data) into one KPL aggregated record and writes it.
func (e *subEnv) subAggregate(keys []string, data [][]byte) string {
	e.t.Helper()
	agg := kpl.NewAggregator(0)
	for i := range keys {
		if !agg.Add(keys[i], "", data[i]) {
			e.t.Fatalf("aggregate refused user record %d", i)
		}
	}
	return aws.ToString(e.putRaw(agg.PartitionKey(), agg.Build()).SequenceNumber)
}

// subEnvelopes encodes messages "msg-<first>".. as the default marshaler does.
func subEnvelopes(t *testing.T, first, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i, m := range subMsgs(first, n) {
		b, err := kinesis.EnvelopeMarshaler{}.Marshal(subStream, m)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func TestKPL_UserRecordsAreMessages(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	seq := e.subAggregate([]string{"a", "b", "a"}, subEnvelopes(t, 0, 3))
	ch := e.subscribe(e.subscriber(e.config("")), context.Background())
	msgs := subRecvAck(t, ch, 3)
	subWantPayloads(t, msgs, "msg-0", "msg-1", "msg-2")
	for i, m := range msgs {
		info := subInfo(t, m)
		if m.UUID != fmt.Sprintf("uuid-%d", i) || !info.Aggregated || info.SubSequenceNumber != i ||
			info.SequenceNumber != seq || info.PartitionKey != []string{"a", "b", "a"}[i] || info.DecodeError != nil {
			t.Errorf("user record %d: uuid %s, facts %+v", i, m.UUID, info)
		}
	}
}

func TestKPL_RawUserRecordsGetDistinctUUIDs(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	e.subAggregate([]string{"k", "k"}, [][]byte{[]byte("x"), []byte("x")})
	ch := e.subscribe(e.subscriber(e.config("")), context.Background())
	msgs := subRecvAck(t, ch, 2)
	if msgs[0].UUID == msgs[1].UUID {
		t.Errorf("two user records of one aggregate share UUID %s", msgs[0].UUID)
	}
	if again := subRecvAckFresh(t, e); again[0].UUID != msgs[0].UUID || again[1].UUID != msgs[1].UUID {
		t.Errorf("UUIDs differ between reads: %s %s, then %s %s", msgs[0].UUID, msgs[1].UUID, again[0].UUID, again[1].UUID)
	}
}

// subRecvAckFresh reads the stream's first two messages again, with a new subscriber.
func subRecvAckFresh(t *testing.T, e *subEnv) []*message.Message {
	t.Helper()
	return subRecvAck(t, e.subscribe(e.subscriber(e.config("")), context.Background()), 2)
}

// A restart resumes inside an aggregate: only the user records not acked come again.
func TestKPL_CheckpointResumesInsideAggregate(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	seq := e.subAggregate([]string{"a", "b", "c", "d", "e"}, subEnvelopes(t, 0, 5))
	cfg := e.config(subGroup)
	sub := e.subscriber(cfg)
	ch := e.subscribe(sub, context.Background())
	subRecvAck(t, ch, 2)
	third := subRecv(t, ch) // in flight, never acked
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := e.lease(subGroup, subShard(0)).Checkpoint, seq+":1"; got != want {
		t.Fatalf("checkpoint after two of five = %q, want %q", got, want)
	}

	sub = e.subscriber(cfg)
	ch = e.subscribe(sub, context.Background())
	rest := subRecvAck(t, ch, 3)
	subWantPayloads(t, rest, "msg-2", "msg-3", "msg-4")
	if rest[0].UUID != third.UUID {
		t.Errorf("the unacked user record came back as %s, was %s", rest[0].UUID, third.UUID)
	}
	// The last user record's checkpoint keeps its sub-sequence number, as the KCL writes it; a
	// restart from there reads the aggregate once more, skips all of it, and goes on.
	e.waitLease(subGroup, subShard(0), "the whole aggregate done", func(l lease.Lease) bool { return l.Checkpoint == seq+":4" })
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	e.putRaw("k", []byte("next"))
	subWantPayloads(t, subRecvAck(t, e.subscribe(e.subscriber(cfg), context.Background()), 1), "next")
}

// A checkpoint seq:0 of a plain record (as the KCL writes one) means the record is done.
func TestKPL_CheckpointOfPlainRecordWithSubSequenceSkipsIt(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	e.putRaw("k", []byte("done"))
	e.putRaw("k", []byte("next"))
	sub := e.subscriber(e.config(subGroup))
	first := subRecvAck(t, e.subscribe(sub, context.Background()), 2)
	seq := subInfo(t, first[0]).SequenceNumber
	e.waitLease(subGroup, subShard(0), "both done", func(l lease.Lease) bool { return l.Checkpoint == subInfo(t, first[1]).SequenceNumber })
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	e.setCheckpoint(subGroup, subShard(0), seq+":0")
	subWantPayloads(t, subRecvAck(t, e.subscribe(e.subscriber(e.config(subGroup)), context.Background()), 1), "next")
}

// A record with the KPL magic that is not a valid aggregate is one raw record, as the KCL reads
// it; it is not a decode error.
func TestKPL_DamagedAggregateIsOneRawRecord(t *testing.T) {
	agg := kpl.NewAggregator(0)
	agg.Add("a", "", []byte("one"))
	agg.Add("b", "", []byte("two"))
	good := agg.Build()
	badMD5 := append([]byte(nil), good...)
	badMD5[len(badMD5)-1] ^= 0xff
	badProto := append(append([]byte(nil), good[:4]...), 0xff, 0xff, 0xff)
	for name, data := range map[string][]byte{"bad MD5": badMD5, "bad protobuf": badProto} {
		t.Run(name, func(t *testing.T) {
			e := newSubEnv(t, 1, nil)
			e.putRaw("k", data)
			e.putRaw("k", []byte("next"))
			ch := e.subscribe(e.subscriber(e.config("")), context.Background())
			msgs := subRecvAck(t, ch, 2)
			if string(msgs[0].Payload) != string(data) || subInfo(t, msgs[0]).Aggregated || subInfo(t, msgs[0]).DecodeError != nil {
				t.Errorf("damaged aggregate delivered as %q, facts %+v", msgs[0].Payload, subInfo(t, msgs[0]))
			}
			subWantPayloads(t, msgs[1:], "next")
		})
	}
}

func TestKPL_KeepAggregates(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	e.subAggregate([]string{"a", "b"}, subEnvelopes(t, 0, 2))
	cfg := e.config("")
	cfg.KeepKPLAggregates = true
	msgs := subRecvAck(t, e.subscribe(e.subscriber(cfg), context.Background()), 1)
	if !kpl.IsAggregated(msgs[0].Payload) {
		t.Errorf("KeepKPLAggregates delivered %q, want the aggregate", msgs[0].Payload)
	}
}

// subPickyUnmarshaler rejects records whose data starts with "bad", returning no message.
type subPickyUnmarshaler struct{}

var errSubPicky = errors.New("picky: cannot decode")

func (subPickyUnmarshaler) Unmarshal(stream, shardID string, rec *types.Record) (*message.Message, error) {
	if strings.HasPrefix(string(rec.Data), "bad") {
		return nil, errSubPicky
	}
	return kinesis.RawMarshaler{}.Unmarshal(stream, shardID, rec)
}

// A record the Unmarshaler rejects goes to the PoisonHandler; whatever the handler does, the
// shard goes on.
func TestPoisonHandler(t *testing.T) {
	custom := message.NewMessage("custom", []byte("replacement"))
	cases := []struct {
		name    string
		handler kinesis.PoisonHandler
		want    []string // payloads delivered
	}{
		{"default delivers raw", nil, []string{"good-1", "bad", "good-2"}},
		{"skip", func(kinesis.PoisonRecord) (*message.Message, error) { return nil, nil }, []string{"good-1", "good-2"}},
		{"replace", func(kinesis.PoisonRecord) (*message.Message, error) { return custom, nil }, []string{"good-1", "replacement", "good-2"}},
		{"handler fails", func(kinesis.PoisonRecord) (*message.Message, error) {
			return nil, errors.New("dead-letter stream down")
		},
			[]string{"good-1", "bad", "good-2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newSubEnv(t, 1, nil)
			e.putRaw("k", []byte("good-1"))
			badSeq := aws.ToString(e.putRaw("k", []byte("bad")).SequenceNumber)
			e.putRaw("k", []byte("good-2"))
			cfg := e.config(subGroup)
			cfg.Unmarshaler = subPickyUnmarshaler{}
			cfg.PoisonHandler = tc.handler
			ch := e.subscribe(e.subscriber(cfg), context.Background())
			msgs := subRecvAck(t, ch, len(tc.want))
			subWantPayloads(t, msgs, tc.want...)
			for _, m := range msgs {
				info := subInfo(t, m)
				if poisoned := info.SequenceNumber == badSeq; poisoned != errors.Is(kinesis.DecodeErrorFromContext(m.Context()), errSubPicky) {
					t.Errorf("message %q: decode error %v in its context", m.Payload, kinesis.DecodeErrorFromContext(m.Context()))
				}
			}
			// The skipped or replaced record is behind the checkpoint like any other.
			last := subSeq(t, msgs[len(msgs)-1])
			e.waitLease(subGroup, subShard(0), "checkpoint at the last record", func(l lease.Lease) bool { return l.Checkpoint == last })
		})
	}
}

// subStoredRecords reads every record of shard 0 as stored, with no de-aggregation.
func (e *subEnv) subStoredRecords() []types.Record {
	e.t.Helper()
	ctx := context.Background()
	it, err := e.log.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{
		StreamName: aws.String(e.stream), ShardId: aws.String(subShard(0)), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := e.log.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Records
}

// With AggregateKPL, messages that share a key travel in few Kinesis records, and come out
// as the same messages, in order per key.
func TestKPL_PublisherAggregates(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client: e.log, AggregateKPL: true, PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := subMsgs(0, 300)
	for i, m := range msgs {
		m.Metadata.Set("key", fmt.Sprintf("key-%d", i%3))
	}
	msgs[299].Metadata.Set("key", "alone") // an aggregate of one stays a plain record
	if err := pub.Publish(e.stream, msgs...); err != nil {
		t.Fatal(err)
	}
	stored := e.subStoredRecords()
	if len(stored) != 4 {
		t.Errorf("300 messages on 4 keys stored as %d records, want 4", len(stored))
	}
	for i, rec := range stored {
		if got := kpl.IsAggregated(rec.Data); got != (aws.ToString(rec.PartitionKey) != "alone") {
			t.Errorf("stored record %d (key %s): aggregated %v", i, aws.ToString(rec.PartitionKey), got)
		}
	}

	got := subRecvAck(t, e.subscribe(e.subscriber(e.config("")), context.Background()), 300)
	next := map[string]int{}
	for _, m := range got {
		key, idx := m.Metadata.Get("key"), 0
		fmt.Sscanf(m.Metadata.Get("index"), "%d", &idx)
		if m.UUID != fmt.Sprintf("uuid-%d", idx) || string(m.Payload) != fmt.Sprintf("msg-%d", idx) {
			t.Fatalf("message %s: payload %q", m.UUID, m.Payload)
		}
		if idx < next[key] {
			t.Errorf("key %s: message %d after %d", key, idx, next[key])
		}
		next[key] = idx + 1
		if info := subInfo(t, m); info.PartitionKey != key {
			t.Errorf("message %d: partition key %q, want %q", idx, info.PartitionKey, key)
		}
	}
}

// A rejected aggregate fails every message in it, each named in the PublishError.
func TestKPL_PublisherAggregateRejected(t *testing.T) {
	e := newSubEnv(t, 1, nil)
	e.log.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) {
		return "InvalidArgumentException", "rejected for the test"
	})
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client: e.log, AggregateKPL: true, PartitionKey: func(string, *message.Message) (string, error) { return "k", nil },
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = pub.Publish(e.stream, subMsgs(0, 3)...)
	var pe *kinesis.PublishError
	if !errors.As(err, &pe) || len(pe.Failed) != 3 {
		t.Fatalf("error %v, want a PublishError naming the 3 messages", err)
	}
	for i, f := range pe.Failed {
		if f.Index != i || f.UUID != fmt.Sprintf("uuid-%d", i) {
			t.Errorf("failed[%d] = message %d %s", i, f.Index, f.UUID)
		}
	}
}

// setCheckpoint sets the shard's checkpoint as another worker would (take, checkpoint,
// release), leaving the lease free.
func (e *subEnv) setCheckpoint(group, shardID, checkpoint string) {
	e.t.Helper()
	ctx := context.Background()
	held, err := e.store.Take(ctx, e.lease(group, shardID), "setter")
	if err == nil {
		held, err = e.store.Checkpoint(ctx, held, checkpoint)
	}
	if err == nil {
		_, err = e.store.Release(ctx, held)
	}
	if err != nil {
		e.t.Fatalf("setting the checkpoint of %s: %v", shardID, err)
	}
}

// A record with the KPL magic that is not a valid aggregate is one record: a checkpoint seq:0
// of it (as the KCL writes one after delivering it whole) means it is done.
func TestKPL_CheckpointOfDamagedAggregateSkipsIt(t *testing.T) {
	agg := kpl.NewAggregator(0)
	agg.Add("a", "", []byte("one"))
	damaged := agg.Build()
	damaged[len(damaged)-1] ^= 0xff
	e := newSubEnv(t, 1, nil)
	seq := aws.ToString(e.putRaw("k", damaged).SequenceNumber)
	e.putRaw("k", []byte("next"))
	if _, err := e.store.Create(context.Background(), lease.Lease{Group: subGroup, Stream: e.stream, ShardID: subShard(0)}); err != nil {
		t.Fatal(err)
	}
	e.setCheckpoint(subGroup, subShard(0), seq+":0")
	subWantPayloads(t, subRecvAck(t, e.subscribe(e.subscriber(e.config(subGroup)), context.Background()), 1), "next")
}
