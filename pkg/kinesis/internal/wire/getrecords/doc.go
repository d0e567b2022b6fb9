// Package getrecords decodes the answer to Kinesis GetRecords (awsJson 1.1) without the SDK's
// deserializer, and plugs that decoder into a call as a deserialize middleware.
//
// # Why it exists
//
// aws-sdk-go-v2's deserializer is reflection-free but allocation-heavy: about ten allocations
// and 1.4–2 µs per record (a *string per string, a big.Float per timestamp, a copy per Data
// blob, a token-by-token parse). In the B3 benchmark that was about a quarter of a
// subscriber's CPU, and per record more than the whole rest of the reader. Decode does the same
// work in about 0.5 µs per record and nine allocations per answer, a few more for the largest
// (BenchmarkDecode).
//
// # What it owns
//
// Decoding the body of a GetRecords answer (Decode), and the middleware that takes the SDK's
// deserializer's place for one call (WithFastDecode, an optFn for Client.GetRecords). Decode
// returns what the SDK returns for the same body, field for field (reflect.DeepEqual): the
// tests run every body both ways through a real client, and FuzzDecode keeps doing so on
// random bodies, against the SDK in go.mod (kinesis v1.56.13, smithy-go v1.28.9): an upgrade
// that changes what the SDK returns fails them. Where the two differ:
//
//   - A timestamp given as the string "NaN" makes the SDK panic; Decode returns an error.
//   - Decode's error messages are its own (what is wrong, at which byte offset); the type,
//     *smithy.DeserializationError, is the SDK's.
//   - The middleware does not record the SDK's client.call.deserialization_duration metric.
//
// Decode is never looser than the SDK: a body the SDK refuses, Decode refuses too. It keeps
// the SDK's own leniencies, so as not to refuse what the SDK accepts: nothing after the
// top-level object's closing brace is read, a member that is null is left unset, "Infinity"
// and "-Infinity" are timestamps, and a negative integer whose digits reach
// 9223372036854775808 reads as math.MinInt64 whatever follows (see parseInt).
//
// # Memory
//
// Decode keeps nothing of the body it is given: what it returns lives in buffers of its own.
// All the Data slices of one answer share one buffer, so a Data kept alive (a message's payload
// aliases its record's Data) keeps all its answer's Data alive, as memlog's answers, which also
// share one buffer each, already do. Each Data slice is capped to its length, so appending to
// one record's Data reallocates instead of writing over the next.
//
// The strings (SequenceNumber, PartitionKey, NextShardIterator, ChildShards') are carved from
// another buffer, a text arena that holds strings only, in chunks of at most 256 KiB (the first
// made at the first string, a quarter of the body left then, the next ones sized from the
// strings read so far; a string longer than that gets a chunk of its own size): a string kept alive
// (a sequence number for a checkpoint) keeps its chunk alive, some of its answer's strings,
// never its Data. The *string fields point into shared chunks of string headers, which lead
// to the arena only. EncryptionType "KMS" and "NONE" are the SDK's constants and keep nothing
// alive.
//
// The middleware reads a body into a pooled buffer that Decode does not retain; a buffer goes
// back to the pool only if it is at most 16 MiB and at most 4 times the body it held plus 64 KiB
// (putBuf), so that a large answer's buffer does not stay to serve small ones.
//
// # What it may not touch
//
// It is pure apart from reading (to EOF) and closing the response body it is handed: no
// goroutine, no clock, no state but a pool of read buffers. It imports the SDK's kinesis client
// and types and smithy-go (errors, middleware, logging, tracing, HTTP transport), and nothing of
// this module.
package getrecords
