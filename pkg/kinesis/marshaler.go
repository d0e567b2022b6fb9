package kinesis

import (
	"fmt"
	"strconv"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/uuid"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/envelope"
)

// Marshaler turns a Watermill message into the data of one Kinesis record.
type Marshaler interface {
	Marshal(stream string, msg *message.Message) ([]byte, error)
}

// Unmarshaler turns a Kinesis record into a Watermill message. It must not keep rec; the
// message may share rec.Data (the reader hands each record to exactly one Unmarshal call).
type Unmarshaler interface {
	Unmarshal(stream, shardID string, rec *types.Record) (*message.Message, error)
}

// MarshalerUnmarshaler is both.
type MarshalerUnmarshaler interface {
	Marshaler
	Unmarshaler
}

// EnvelopeMarshaler is the default encoding. Kinesis records carry no headers, so the
// message's UUID and metadata travel with the payload in a compact binary envelope (a magic
// prefix no UTF-8 text and no KPL record starts with, a version, the UUID, the metadata, the
// payload and a CRC-32C). On reading, a record that is not an envelope is some other
// producer's raw payload: it is delivered as it is, with a UUID derived from stream, shard id
// and sequence number, so that a redelivery keeps its UUID.
type EnvelopeMarshaler struct{}

var _ MarshalerUnmarshaler = EnvelopeMarshaler{}

// Marshal encodes msg in the envelope.
func (EnvelopeMarshaler) Marshal(_ string, msg *message.Message) ([]byte, error) {
	if msg == nil {
		return nil, errNilMessage
	}
	size := envelope.Size(msg.UUID, msg.Metadata, msg.Payload)
	return envelope.Append(make([]byte, 0, size), msg.UUID, msg.Metadata, msg.Payload), nil
}

// Unmarshal decodes an envelope, or wraps a foreign record as a raw payload. A record that has
// the envelope's magic but fails to decode is returned as a raw payload together with a
// *CorruptRecordError, so the caller can deliver it and report the problem.
func (EnvelopeMarshaler) Unmarshal(stream, shardID string, rec *types.Record) (*message.Message, error) {
	if !envelope.IsEnvelope(rec.Data) {
		return rawMessage(stream, shardID, rec), nil
	}
	d, err := envelope.Decode(rec.Data)
	if err != nil {
		return rawMessage(stream, shardID, rec), &CorruptRecordError{
			Stream: stream, ShardID: shardID, SequenceNumber: deref(rec.SequenceNumber), Err: err,
		}
	}
	msg := message.NewMessage(d.UUID, d.Payload)
	if len(d.Metadata) > 0 {
		msg.Metadata = d.Metadata
	}
	return msg, nil
}

// RawMarshaler writes only the payload, for consumers in other languages that expect plain
// records. UUID and metadata are not kept: on reading, the UUID is derived from the record's
// position, as for any foreign record.
type RawMarshaler struct{}

var _ MarshalerUnmarshaler = RawMarshaler{}

// Marshal returns the payload as it is.
func (RawMarshaler) Marshal(_ string, msg *message.Message) ([]byte, error) {
	if msg == nil {
		return nil, errNilMessage
	}
	return msg.Payload, nil
}

var errNilMessage = fmt.Errorf("%w: message is nil", ErrInvalidMessage)

// Unmarshal wraps the record's data as the payload.
func (RawMarshaler) Unmarshal(stream, shardID string, rec *types.Record) (*message.Message, error) {
	return rawMessage(stream, shardID, rec), nil
}

// CorruptRecordError reports a record that looks like an envelope but is damaged (bad
// checksum, truncated, unknown version). The record is still delivered, as a raw payload.
type CorruptRecordError struct {
	Stream         string
	ShardID        string
	SequenceNumber string
	Err            error
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("kinesis: record %s of stream %q shard %q is a damaged envelope, delivered as a raw payload: %v",
		e.SequenceNumber, e.Stream, e.ShardID, e.Err)
}

func (e *CorruptRecordError) Unwrap() error { return e.Err }

// recordUUIDSpace is the name space of the UUIDs derived for records that carry none.
var recordUUIDSpace = uuid.MustParse("6f1c7c52-5a0e-4d4c-9a3e-2b7d1e0c9f41")

// RecordUUID is the UUID given to a record that carries none: a name-based UUID of stream,
// shard id and sequence number, the same on every read of the record.
func RecordUUID(stream, shardID, sequenceNumber string) string {
	return uuid.NewSHA1(recordUUIDSpace, []byte(stream+"/"+shardID+"/"+sequenceNumber)).String()
}

func rawMessage(stream, shardID string, rec *types.Record) *message.Message {
	return message.NewMessage(RecordUUID(stream, shardID, deref(rec.SequenceNumber)), rec.Data)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// PoisonRecord is a record the Unmarshaler rejected, as a PoisonHandler sees it.
type PoisonRecord struct {
	// Info is where the record came from; Info.DecodeError is Err.
	Info RecordInfo
	// Data is the record's data (a user record's, for a KPL aggregate). It may be kept.
	Data []byte
	// Err is the Unmarshaler's error.
	Err error
	// Decoded is the message the Unmarshaler returned along with its error, if any
	// (EnvelopeMarshaler returns a damaged envelope as a raw payload).
	Decoded *message.Message
}

// PoisonHandler decides what becomes of a record the Unmarshaler rejected. It runs on the
// shard's reader goroutine, so it should be quick. It returns the message to deliver (the
// reader puts the record's facts, with the decode error, in its context), or nil to skip the
// record: it then counts as done and is checkpointed like an acked message, with a log line.
// If it returns an error, the record is delivered as by DeliverPoisonRaw: a handler cannot
// stall the shard, and no record is lost without a log line.
//
// A reader decodes a few records ahead of what it has sent (8 at a time; with OrderByKey, as
// far as it takes to find a record whose key is free, within the shard's hold limit), so the
// Unmarshaler, and the PoisonHandler for a rejected record, may run for a record this worker
// never delivers: when the subscription stops or the shard's lease moves on first, the next
// reader decodes it again, and calls the PoisonHandler again. A handler that writes elsewhere (a
// dead-letter queue) should make that write idempotent, for instance keyed by the record's
// sequence number.
type PoisonHandler func(PoisonRecord) (*message.Message, error)

// DeliverPoisonRaw is the default PoisonHandler: the message the Unmarshaler returned, or
// else the record's data as a raw payload with a UUID derived from its position (the same on
// every read of the record).
func DeliverPoisonRaw(p PoisonRecord) (*message.Message, error) {
	if p.Decoded != nil {
		return p.Decoded, nil
	}
	name := p.Info.SequenceNumber
	if p.Info.Aggregated {
		name += ":" + strconv.Itoa(p.Info.SubSequenceNumber)
	}
	return message.NewMessage(RecordUUID(p.Info.Stream, p.Info.ShardID, name), p.Data), nil
}
