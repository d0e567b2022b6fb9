package shard

import (
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/envelope"
)

// BenchmarkFetchDecode is the fetch-and-decode stage's cost per record, without I/O: one
// GetRecords answer of 500 envelopes (eight keys), already deserialised, is taken by fetch
// and every record of it prepared (decoded into a message with its context) into the window,
// which is then emptied. b.N is the record count, so ns/op and allocs/op are per record, the
// Message included: a regression in fetch's bookkeeping or in prepare shows here, apart from
// settling (BenchmarkWindowSettle) and delivery to the application (BenchmarkDeliverAck).
func BenchmarkFetchDecode(b *testing.B) {
	const batch = 500
	recs := make([]types.Record, batch)
	arrival := time.Unix(1_800_000_000, 0)
	for i := range recs {
		seq := "4959033827149025660855969253836157109592157598913658" + strconv.Itoa(1000+i)
		recs[i] = types.Record{
			Data:                        envelope.Append(nil, "4b0c7b1e-7c1f-4f8e-9a55-0a1b2c3d4e5f", nil, make([]byte, 100)),
			SequenceNumber:              aws.String(seq),
			PartitionKey:                aws.String("k" + strconv.Itoa(i%8)),
			ApproximateArrivalTimestamp: &arrival,
		}
	}
	answer := &awskinesis.GetRecordsOutput{Records: recs, NextShardIterator: aws.String("next"), MillisBehindLatest: aws.Int64(0)}
	for _, ordering := range []Ordering{Unordered, OrderByKey} {
		b.Run(map[Ordering]string{Unordered: "unordered", OrderByKey: "by-key"}[ordering], func(b *testing.B) {
			cfg := &Config{
				Stream: "bench", Client: answerClient{answer},
				RequestTimeout: time.Minute, GetRecordsLimit: 10000,
				MaxBufferedRecords: 10000, MaxBufferedBytes: 1 << 30,
				MaxInFlight: batch, Ordering: ordering, Unmarshaler: envelopeUnmarshaler{},
			}
			r := testReader(b.Context(), cfg, nil, nil, time.Time{})
			r.iterator = "first"
			b.ReportAllocs()
			for done := 0; done < b.N; done += batch {
				if err := r.fetch(); err != nil {
					b.Fatal(err)
				}
				for r.buffered() > 0 {
					r.prepare()
				}
				if len(r.window) != batch {
					b.Fatalf("window holds %d records after a read of %d", len(r.window), batch)
				}
				r.windowState = windowState{window: r.window[:0], sendable: r.sendable[:0], queues: r.queues}
				clear(r.queues)
			}
		})
	}
}

// envelopeUnmarshaler decodes as pkg/kinesis.EnvelopeMarshaler does, which this package
// cannot import.
type envelopeUnmarshaler struct{}

func (envelopeUnmarshaler) Unmarshal(_, _ string, rec *types.Record) (*message.Message, error) {
	d, err := envelope.Decode(rec.Data)
	if err != nil {
		return nil, err
	}
	msg := message.NewMessage(d.UUID, d.Payload)
	if len(d.Metadata) > 0 {
		msg.Metadata = d.Metadata
	}
	return msg, nil
}
