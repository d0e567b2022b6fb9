package kinesis_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

func record(seq string, data []byte) *types.Record {
	return &types.Record{SequenceNumber: &seq, Data: data}
}

func TestEnvelopeMarshalerRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		uuid     string
		metadata message.Metadata
		payload  []byte
	}{
		{"plain", "a0c3c1f4-6f0e-4d4f-9d8e-1b2c3d4e5f60", nil, []byte("hello")},
		{"metadata", "id-1", message.Metadata{"correlation_id": "c-1", "test": "ünïcode"}, []byte(`{"n":1}`)},
		{"empty payload", "id-2", message.Metadata{"k": ""}, nil},
		{"binary payload", "id-3", nil, []byte{0xff, 0x00, 0xf3, 0x89}},
	}
	m := kinesis.EnvelopeMarshaler{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := message.NewMessage(tt.uuid, tt.payload)
			for k, v := range tt.metadata {
				msg.Metadata.Set(k, v)
			}
			data, err := m.Marshal("stream", msg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Unmarshal("stream", "shardId-000000000000", record("1", data))
			if err != nil {
				t.Fatal(err)
			}
			if got.UUID != tt.uuid || !bytes.Equal(got.Payload, tt.payload) {
				t.Fatalf("got uuid %q payload %q, want %q %q", got.UUID, got.Payload, tt.uuid, tt.payload)
			}
			if len(got.Metadata) != len(tt.metadata) {
				t.Fatalf("metadata %v, want %v", got.Metadata, tt.metadata)
			}
			for k, v := range tt.metadata {
				if got.Metadata.Get(k) != v {
					t.Fatalf("metadata %q = %q, want %q", k, got.Metadata.Get(k), v)
				}
			}
		})
	}
}

func TestEnvelopeMarshalerForeignRecordIsRawPayload(t *testing.T) {
	for _, data := range [][]byte{[]byte("plain text"), []byte(`{"json":true}`), {0xf3, 0x89, 0x9a, 0xc2, 1, 2}, {}} {
		got, err := kinesis.EnvelopeMarshaler{}.Unmarshal("s", "shardId-000000000001", record("42", data))
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		if !bytes.Equal(got.Payload, data) {
			t.Fatalf("payload %q, want %q", got.Payload, data)
		}
		if want := kinesis.RecordUUID("s", "shardId-000000000001", "42"); got.UUID != want {
			t.Fatalf("uuid %q, want the derived %q", got.UUID, want)
		}
	}
}

func TestEnvelopeMarshalerCorruptEnvelopeIsDeliveredAndReported(t *testing.T) {
	data, err := kinesis.EnvelopeMarshaler{}.Marshal("s", message.NewMessage("id", []byte("payload")))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	got, err := kinesis.EnvelopeMarshaler{}.Unmarshal("s", "shardId-000000000000", record("7", data))
	var corrupt *kinesis.CorruptRecordError
	if !errors.As(err, &corrupt) {
		t.Fatalf("error %v, want a *CorruptRecordError", err)
	}
	if corrupt.Stream != "s" || corrupt.ShardID != "shardId-000000000000" || corrupt.SequenceNumber != "7" {
		t.Fatalf("error names %+v", corrupt)
	}
	if got == nil || !bytes.Equal(got.Payload, data) {
		t.Fatal("a corrupt envelope must still come back as a raw payload")
	}
}

func TestRecordUUIDIsStableAndDistinct(t *testing.T) {
	a := kinesis.RecordUUID("s", "shardId-000000000000", "1")
	if a != kinesis.RecordUUID("s", "shardId-000000000000", "1") {
		t.Fatal("same record, different UUIDs")
	}
	for _, other := range []string{
		kinesis.RecordUUID("s", "shardId-000000000000", "2"),
		kinesis.RecordUUID("s", "shardId-000000000001", "1"),
		kinesis.RecordUUID("t", "shardId-000000000000", "1"),
	} {
		if other == a {
			t.Fatal("different records share a UUID")
		}
	}
}

func TestRawMarshalerKeepsOnlyThePayload(t *testing.T) {
	msg := message.NewMessage("id", []byte("raw"))
	msg.Metadata.Set("k", "v")
	data, err := kinesis.RawMarshaler{}.Marshal("s", msg)
	if err != nil || string(data) != "raw" {
		t.Fatalf("Marshal = %q, %v", data, err)
	}
	got, err := kinesis.RawMarshaler{}.Unmarshal("s", "shardId-000000000000", record("9", data))
	if err != nil || string(got.Payload) != "raw" || got.UUID != kinesis.RecordUUID("s", "shardId-000000000000", "9") {
		t.Fatalf("Unmarshal = %+v, %v", got, err)
	}
}
