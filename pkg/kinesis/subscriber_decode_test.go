package kinesis_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// A damaged envelope is delivered as a raw payload with the reason in its context, and the
// shard goes on with the next record: nothing stalls, nothing vanishes.
func TestSubscriber_CorruptEnvelope(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 1, nil)
	good := message.NewMessage("good-uuid", []byte("good payload"))
	good.Metadata.Set("k", "v")
	data, err := kinesis.EnvelopeMarshaler{}.Marshal(e.stream, good)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(data)
	corrupt[len(corrupt)/2] ^= 0x5a // magic and version intact, checksum broken
	put := e.putRaw("key-1", corrupt)
	e.publish(subMsgs(0, 1)...)

	s := e.subscriber(e.config(""))
	ch := e.subscribe(s, context.Background())

	bad := subRecv(t, ch)
	if !bytes.Equal(bad.Payload, corrupt) {
		t.Errorf("payload of the damaged record = %x, want the record's bytes %x", bad.Payload, corrupt)
	}
	wantUUID := kinesis.RecordUUID(e.stream, *put.ShardId, *put.SequenceNumber)
	if bad.UUID != wantUUID {
		t.Errorf("UUID of the damaged record = %s, want RecordUUID = %s", bad.UUID, wantUUID)
	}
	if len(bad.Metadata) != 0 {
		t.Errorf("damaged record has metadata %v, want none", bad.Metadata)
	}
	decErr := kinesis.DecodeErrorFromContext(bad.Context())
	var corruptErr *kinesis.CorruptRecordError
	if !errors.As(decErr, &corruptErr) {
		t.Fatalf("DecodeErrorFromContext = %v (%T), want a *kinesis.CorruptRecordError", decErr, decErr)
	}
	if corruptErr.Stream != e.stream || corruptErr.ShardID != *put.ShardId || corruptErr.SequenceNumber != *put.SequenceNumber {
		t.Errorf("CorruptRecordError names %s/%s/%s, want %s/%s/%s", corruptErr.Stream, corruptErr.ShardID,
			corruptErr.SequenceNumber, e.stream, *put.ShardId, *put.SequenceNumber)
	}
	if info := subInfo(t, bad); info.DecodeError == nil || info.SequenceNumber != *put.SequenceNumber {
		t.Errorf("RecordInfo = %+v, want DecodeError set and sequence number %s", info, *put.SequenceNumber)
	}
	bad.Ack()

	next := subRecv(t, ch)
	if next.UUID != "uuid-0" || string(next.Payload) != "msg-0" || next.Metadata.Get("index") != "0" {
		t.Errorf("record after the damaged one = %s %q %v, want uuid-0 msg-0 index=0", next.UUID, next.Payload, next.Metadata)
	}
	if err := kinesis.DecodeErrorFromContext(next.Context()); err != nil {
		t.Errorf("DecodeErrorFromContext of a good record = %v, want nil", err)
	}
	next.Ack()

	// The shard keeps going.
	e.publish(subMsgs(1, 1)...)
	subWantPayloads(t, subRecvAck(t, ch, 1), "msg-1")
}

// A record another producer wrote as plain text is a raw payload with a UUID derived from its
// position, the same on every read.
func TestSubscriber_ForeignRecord(t *testing.T) {
	t.Parallel()
	e := newSubEnv(t, 1, nil)
	put := e.putRaw("some-key", []byte(`{"order":42}`))
	wantUUID := kinesis.RecordUUID(e.stream, *put.ShardId, *put.SequenceNumber)

	var uuids []string
	for i := 0; i < 2; i++ { // two subscribers without a group: each reads the record
		s := e.subscriber(e.config(""))
		ch := e.subscribe(s, context.Background())
		m := subRecv(t, ch)
		if string(m.Payload) != `{"order":42}` {
			t.Errorf("payload = %q, want the record's data", m.Payload)
		}
		if err := kinesis.DecodeErrorFromContext(m.Context()); err != nil {
			t.Errorf("a foreign record is not a decoding failure, got %v", err)
		}
		if len(m.Metadata) != 0 {
			t.Errorf("foreign record has metadata %v", m.Metadata)
		}
		m.Ack()
		uuids = append(uuids, m.UUID)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if uuids[0] != wantUUID || uuids[1] != wantUUID {
		t.Errorf("UUIDs = %v, want both %s", uuids, wantUUID)
	}
}

// The record's facts travel in the message context, and the getters agree with them.
func TestSubscriber_RecordFacts(t *testing.T) {
	t.Parallel()
	clock := subFixedClock()
	e := newSubEnv(t, 2, clock)
	arrival1 := clock.Now()
	put1 := e.putRaw("partition-1", []byte("first"))
	clock.Advance(1500 * time.Millisecond)
	arrival2 := clock.Now()
	// The same key lands on the same shard, after the first.
	put2 := e.putRaw("partition-1", []byte("second"))

	cfg := e.config("")
	cfg.GetRecordsLimit = 1 // so the first read is behind the shard's tip
	s := e.subscriber(cfg)
	ch := e.subscribe(s, context.Background())
	got := subRecvAck(t, ch, 2)

	type want struct {
		shard, seq string
		arrival    time.Time
	}
	for i, tc := range []want{
		{*put1.ShardId, *put1.SequenceNumber, arrival1},
		{*put2.ShardId, *put2.SequenceNumber, arrival2},
	} {
		m := got[i]
		ctx := m.Context()
		info := subInfo(t, m)
		if info.Stream != e.stream || info.ShardID != tc.shard || info.SequenceNumber != tc.seq ||
			info.PartitionKey != "partition-1" || !info.ArrivalTime.Equal(tc.arrival) || info.DecodeError != nil {
			t.Errorf("message %d: RecordInfo = %+v, want stream %s shard %s seq %s key partition-1 arrival %s",
				i, info, e.stream, tc.shard, tc.seq, tc.arrival)
		}
		if v, ok := kinesis.StreamFromContext(ctx); !ok || v != info.Stream {
			t.Errorf("StreamFromContext = %q, %v", v, ok)
		}
		if v, ok := kinesis.ShardIDFromContext(ctx); !ok || v != info.ShardID {
			t.Errorf("ShardIDFromContext = %q, %v", v, ok)
		}
		if v, ok := kinesis.SequenceNumberFromContext(ctx); !ok || v != info.SequenceNumber {
			t.Errorf("SequenceNumberFromContext = %q, %v", v, ok)
		}
		if v, ok := kinesis.PartitionKeyFromContext(ctx); !ok || v != info.PartitionKey {
			t.Errorf("PartitionKeyFromContext = %q, %v", v, ok)
		}
		if v, ok := kinesis.ArrivalTimeFromContext(ctx); !ok || !v.Equal(info.ArrivalTime) {
			t.Errorf("ArrivalTimeFromContext = %s, %v", v, ok)
		}
		if m.UUID != kinesis.RecordUUID(e.stream, tc.shard, tc.seq) {
			t.Errorf("message %d: UUID %s is not the record's derived UUID", i, m.UUID)
		}
	}
	if b := subInfo(t, got[0]).MillisBehindLatest; b < 1 {
		t.Errorf("MillisBehindLatest of a read that left a record behind = %d, want >= 1", b)
	}
	if b := subInfo(t, got[1]).MillisBehindLatest; b != 0 {
		t.Errorf("MillisBehindLatest of a read that reached the tip = %d, want 0", b)
	}

	// A context that did not come from the Subscriber carries no facts.
	if _, ok := kinesis.RecordFromContext(context.Background()); ok {
		t.Error("RecordFromContext(Background) reported facts")
	}
	if _, ok := kinesis.ShardIDFromContext(context.Background()); ok {
		t.Error("ShardIDFromContext(Background) reported a shard")
	}
	if err := kinesis.DecodeErrorFromContext(context.Background()); err != nil {
		t.Errorf("DecodeErrorFromContext(Background) = %v", err)
	}
}
