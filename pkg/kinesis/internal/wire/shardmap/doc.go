// Package shardmap says which open shard of a stream a partition key goes to, as Kinesis routes
// a record without an explicit hash key: the MD5 digest of the key, read as a 128-bit number,
// falls in one open shard's hash key range. The publisher packs KPL aggregates by it.
//
// It is pure: no goroutine, no clock, no I/O; it imports only the AWS SDK's types, and
// nothing of this module.
package shardmap
