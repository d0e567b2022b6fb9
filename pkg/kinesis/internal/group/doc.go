// Package group is a subscription's coordinator: for one Subscribe call, the goroutine that
// lists shards and leases, decides which shards this member reads (fair share, handoff
// requests, expired leases, children after a reshard), starts and fences the readers, keeps
// the member's heartbeat in the lease table (and, as the group's leader or deputy, reads and
// summarises every member's: roster.go), cleans up the leases of finished shards, and
// finds or registers the stream consumer of enhanced fan-out. Without a consumer group it
// starts a reader per shard and follows reshards, with no leases.
//
// What it owns: the Subscription and its reader table (at most one reader per shard, by
// construction: the table refuses a second and takes an exit only from the reader it holds),
// all of it on the coordinator goroutine (Start, then Run, then shutdown), except the
// heartbeat goroutine's member record and what Status publishes through atomics. It closes
// quit when it takes no more exit reports, then the message channel once every reader has
// finished, then done.
//
// How it is told things: readers report through the Links it hands them (an exit channel,
// the Changes nudge); pkg/kinesis drives it only through the methods of subscription_api.go
// (New, Start, Run, Shutdown, Cancel, Context, Done, Messages, Stream, LogFields, Started,
// Status).
//
// What it may not touch: a reader's state (only the shard.Reader methods), and pkg/kinesis,
// which it never imports: its Config is built by pkg/kinesis from the public configuration.
package group
