// Package kpl reads and writes the aggregated record format of the Kinesis Producer Library
// (KPL), which packs many small user records into one Kinesis record. Aggregation matters
// because Kinesis limits a shard to 1,000 records a second whatever their size, so a producer of
// small messages runs out of records long before it runs out of bytes; the Kinesis Client Library
// (KCL) and other consumers undo it transparently.
//
// An aggregated record is laid out as
//
//	magic      4 bytes  F3 89 9A C2
//	message    a protobuf (proto2) AggregatedRecord, see below
//	checksum   16 bytes, the MD5 digest of the message bytes
//
// and the message is
//
//	message AggregatedRecord {
//	  repeated string partition_key_table     = 1;
//	  repeated string explicit_hash_key_table = 2;
//	  repeated Record records                 = 3;
//	}
//	message Record {
//	  required uint64 partition_key_index     = 1;
//	  optional uint64 explicit_hash_key_index = 2;
//	  required bytes  data                    = 3;
//	  repeated Tag    tags                    = 4;
//	}
//	message Tag {
//	  required string key   = 1;
//	  optional string value = 2;
//	}
//
// The key tables let records that share a key store it once; the indices are zero-based. Tags
// are defined but used by neither the KPL nor the KCL, so Deaggregate checks that they are well
// formed and otherwise ignores them, and Aggregator never writes them.
//
// The protobuf wire format is handled by google.golang.org/protobuf/encoding/protowire, which
// checks every length against the bytes actually present, rather than by generated code: three
// tiny messages do not justify a code generator, and reading the wire format directly lets
// Deaggregate keep each record's data as a sub-slice of the input instead of copying it.
//
// # Why the checksum is verified
//
// Kinesis records are opaque bytes, and a stream may carry records from producers that never
// aggregate. Four magic bytes are a weak marker: a binary payload can start with them by
// chance, and a truncated or half-written aggregate also starts with them. Only a record whose
// MD5 digest matches is unpacked, so an ordinary payload that happens to start with the magic is
// delivered whole instead of being misread as garbage records or dropped. The KCL makes the same
// check and, like it, a consumer should deliver any record that Deaggregate rejects as one raw
// record. MD5 is no defence against a malicious producer, which could compute a valid digest; it
// only tells "meant as an aggregate" from "happens to look like one", so Deaggregate still
// treats the message as untrusted input.
//
// # What it owns
//
// The format alone: it is pure (no goroutine, no clock, no I/O) and imports nothing of this
// module; wire and pkg/kinesis use it, and it may not know of either.
package kpl
