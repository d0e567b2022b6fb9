// Package kcl is a lease.Store on the lease table of a Kinesis Client Library (KCL 2.x or 3.x)
// application: Store, opened with NewStore. A consumer group pointed at it resumes every shard
// where the KCL checkpointed, and KCL workers started on the table resume where the group
// stopped (docs/kcl.md).
//
// What it owns: the KCL lease table's items, read and written as the KCL does, with a few
// attributes of its own that KCL workers ignore (Store says which), and the translation
// between the KCL's checkpoints and lease.Lease's. The group's member records are kept apart,
// in a member table that is a lease.DynamoDBStore: KCL workers read every item of their lease
// table as a lease.
//
// What it may not touch: pkg/lease's unexported code. It uses pkg/lease's exported API alone
// (the Store, Membership and ForeignTable contracts, Lease, the sentinel errors and operation
// names, and DynamoDBStore for the member table), plus pkg/lease/internal/dynamo for what the
// two DynamoDB stores share (preparing a table, reading an item back after a failed
// condition). The checks every store makes before it asks the table (a key with an empty part,
// a handoff request with no taker, by the owner itself or of a free lease) it makes itself,
// with the same errors as pkg/lease's stores. So it is also the proof that lease.Store can be implemented outside
// pkg/lease: it passes the conformance suite of package leasetest as MemoryStore and
// DynamoDBStore do (TestStoreConformance, on dynalite).
package kcl
