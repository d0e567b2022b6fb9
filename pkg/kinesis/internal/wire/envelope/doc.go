// Package envelope is the binary framing that carries a whole Watermill message (UUID, metadata
// and payload) inside a single Kinesis record.
//
// Kinesis records have a partition key and a data blob but no headers, so the UUID and metadata
// that Watermill promises to deliver would be lost if the publisher wrote only the payload. The
// envelope puts them in front of the payload, and a checksum after it, in a form that is cheap
// to recognise, cheap to size before encoding (PutRecords rejects records over 1 MiB) and safe
// to decode from a stream that anybody may write to.
//
// Byte layout (all lengths and counts are unsigned LEB128 varints in their shortest form):
//
//	magic      4 bytes  FF 57 4B 45 ("\xffWKE")
//	version    1 byte   01
//	uuid       uvarint length, then that many bytes
//	metadata   uvarint count, then count × (uvarint key length, key, uvarint value length, value),
//	           keys in strictly increasing byte order
//	payload    uvarint length, then that many bytes
//	checksum   4 bytes  CRC-32C (Castagnoli) of every byte before it, big-endian
//
// The first magic byte, 0xFF, never occurs in UTF-8, so no JSON, XML or other text record written
// by a foreign producer can be mistaken for an envelope, and the prefix differs from the KPL
// aggregation magic (F3 89 9A C2) in its first byte. Records without the prefix are not
// envelopes and are meant to be delivered as raw payloads.
//
// Every length is written in its shortest form and the keys are sorted, so a message has exactly
// one encoding: equal messages give equal records, and Decode accepts only that canonical
// encoding, so decoding and re-encoding any accepted record reproduces it byte for byte.
//
// # What it owns
//
// The format alone: it is pure (no goroutine, no clock, no I/O) and imports nothing of this
// module; wire and pkg/kinesis use it, and it may not know of either.
package envelope
