// Package wire is what a Kinesis record looks like on the wire and how it turns into what a
// reader delivers: the binary envelope (package envelope), KPL aggregation (package kpl), the
// shard a partition key goes to (package shardmap, by which the publisher packs), and
// user records, the unit a reader delivers and checkpoints (a Kinesis record, or one user
// record of a KPL aggregate, with its position "sequence:sub").
//
// It is pure: no goroutine, no clock, no I/O. It may import only the AWS SDK's types and its
// own subpackages; every layer above may import it. The subpackage getrecords, which decodes a
// GetRecords answer faster than the SDK and swaps that decoder into a call as a middleware,
// also imports the SDK's kinesis client and smithy-go's middleware and HTTP transport, and
// reads (only) the response body it is handed.
package wire
