// Package group is a subscription's coordinator: for one Subscribe call, the goroutine that
// lists shards and leases, decides which shards this member reads, starts and stops the
// readers, heartbeats the member's record in the lease table, cleans up the leases of finished
// shards, and finds or registers the stream consumer of enhanced fan-out. Without a consumer
// group it starts a reader per shard and follows reshards, with no leases.
//
// The decisions are pure functions of what the coordinator knows at one lease sync, with table
// tests: decide (which leases to take, ask for, hand over, release or give up), listDue (whether
// to list the leases first), nextExpiry (when the next lease expires), planShare (the fair
// share). One rule decides who may take a lease, and it rests on the lease alone (decide.go);
// membership only counts the workers for the shares and says when to look (members.go).
//
// What it owns: the Subscription and its reader table (at most one reader per shard, by
// construction: the table refuses a second and takes an exit only from the reader it holds),
// all of it on the coordinator goroutine (Start, then Run, then shutdown), except the
// heartbeat goroutine's member record and what Status publishes through atomics. It closes
// quit when it takes no more exit reports, then the message channel once every reader has
// finished, then done.
//
// How it is told things: readers report through the Links it hands them (an exit channel, the
// reader count); the heartbeat goroutine wakes the coordinator through a channel when another
// worker sends a notice; pkg/kinesis drives it only through the methods of
// subscription_api.go (New, Start, Run, Shutdown, Cancel, Context, Done, Messages, Stream,
// LogFields, Started, Status).
//
// What it may not touch: a reader's state (only the shard.Reader methods), and pkg/kinesis,
// which it never imports: its Config is built by pkg/kinesis from the public configuration.
package group
