package envelope_test

import (
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/envelope"
)

var (
	benchUUID     = "4b0c7b1e-7c1f-4f8e-9a55-0a1b2c3d4e5f"
	benchMetadata = map[string]string{"name": "order_created", "trace_id": "7f3a9c2e1b4d"}
	benchPayload  = make([]byte, 100)
)

func BenchmarkAppend(b *testing.B) {
	buf := make([]byte, 0, envelope.Size(benchUUID, benchMetadata, benchPayload))
	b.SetBytes(int64(cap(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = envelope.Append(buf[:0], benchUUID, benchMetadata, benchPayload)
	}
}

func BenchmarkSize(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = envelope.Size(benchUUID, benchMetadata, benchPayload)
	}
}

func BenchmarkDecode(b *testing.B) {
	enc := envelope.Append(nil, benchUUID, benchMetadata, benchPayload)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}
