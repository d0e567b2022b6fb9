// Package kclref is a test-only reference model of how the Amazon Kinesis
// Client Library (KCL for Java, 2.x and 3.x) keeps leases in its DynamoDB
// lease table and how a KCL worker resumes a shard from a checkpoint. It is
// written from the KCL's source, independently of this module's lease store,
// so that store's tests can check the store against it: load rows written
// "as the KCL would" (Encode, CreateWrite...), read what the store wrote "as
// the KCL would" (Decode, CheckAsWritten), let a modelled KCL worker act on a
// row (Write, Apply) and predict what a KCL worker would deliver after taking
// over a checkpoint (Resume). Nothing outside tests may import it.
//
// The rules were read from these KCL classes, at tag v2.7.3 (the last 2.x),
// v2.3.0, v2.0.0, v3.0.0, v3.4.0 and v3.5.1 (the newest 3.x):
//
//   - leases.dynamodb.DynamoDBLeaseSerializer: attribute names, toDynamoRecord
//     (what a created row holds and which attributes are omitted),
//     fromDynamoRecord (how rows are read, and from 3.5 which are skipped),
//     and the update and expectation builders behind every write;
//   - leases.dynamodb.DynamoDBMultiStreamLeaseSerializer and
//     leases.MultiStreamLease: the streamName and shardId attributes and the
//     "streamIdentifier:shardId" lease key; common.StreamIdentifier for the
//     "account:stream:creationEpoch" form;
//   - leases.Lease: which fields are persisted and which setters refuse null;
//   - leases.DynamoUtils: the attribute types and how a value of the wrong
//     type reads (null for S, an empty list for SS, an exception for N and B);
//   - retrieval.kpl.ExtendedSequenceNumber and checkpoint.SentinelCheckpoint:
//     sentinel names and the comparison order;
//   - common.HashKeyRangeForLease: hash keys as decimal strings, start < end;
//   - leases.EntityType (3.5): the entityType discriminator;
//   - leases.dynamodb.DynamoDBLeaseRefresher: table creation, the 3.x
//     LeaseOwnerToLeaseKeyIndex, and the conditions of create, renew, take,
//     update, evict, assign and graceful handoff;
//   - checkpoint.dynamodb.DynamoDBCheckpointer and
//     checkpoint.ShardRecordProcessorCheckpointer: what a checkpoint writes,
//     which sub-sequence number each checkpoint call stores;
//   - leases.HierarchicalShardSyncer: what a newly created lease holds;
//   - lifecycle.InitializeTask, lifecycle.ProcessTask, retrieval.IteratorBuilder,
//     retrieval.AggregatorUtil: where a worker starts reading after a
//     checkpoint and which deaggregated user records it drops;
//   - leases.dynamodb.DynamoDBLeaseRenewer, DynamoDBLeaseDiscoverer and
//     lifecycle.LeaseGracefulShutdownHandler: the 3.x checkpointOwner handoff.
//
// Version differences the model keeps (Version): pendingCheckpointState,
// childShardIds and the hash key range appear in 2.3 (multi-stream leases
// too); checkpointOwner and throughputKBps in 3.0; entityType = "LEASE" on
// created leases, and other entity types in the same table, in 3.5. Every
// KCL ignores attributes it does not know. Attribute names and types did not
// change between versions.
package kclref
