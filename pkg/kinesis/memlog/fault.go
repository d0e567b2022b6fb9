package memlog

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Call describes an operation about to run, so a FaultFunc can pick which calls to disturb.
type Call struct {
	// Op is the SDK operation name: "PutRecord", "PutRecords", "GetRecords", "GetShardIterator",
	// "ListShards", "DescribeStreamSummary", "CreateStream", "DeleteStream", "SplitShard",
	// "MergeShards", "UpdateShardCount", "RegisterStreamConsumer", "DescribeStreamConsumer",
	// "DeregisterStreamConsumer", "ListStreamConsumers", "SubscribeToShard".
	//
	// It is also "SubscribeToShardEvent" before each event of a SubscribeToShard stream is sent
	// (not the initial-response the protocol opens with), with ctx the subscription's (it ends
	// when the caller's does or the SDK's stream is closed). There an error ends the stream
	// after the events already sent: with that exception if it is one the stream models
	// (ResourceNotFoundException, ResourceInUseException, InternalFailureException, the KMS
	// ones), as an InternalFailureException carrying its text otherwise, and, for a context
	// error, by breaking the stream, so the SDK's Err reports it as a broken connection's. A hook
	// that blocks delays the event, which then carries what was stored meanwhile.
	Op string
	// Stream is the stream the request names (by StreamName, StreamARN, ConsumerARN, iterator or
	// NextToken); "" if it names none that can be read.
	Stream string
	// ShardID is the shard the call targets, for calls that target one: GetShardIterator and
	// SubscribeToShard (the requested ShardId), GetRecords (the iterator's shard),
	// SubscribeToShardEvent (the subscription's), PutRecord (the shard its key routes to),
	// SplitShard (ShardToSplit) and MergeShards (ShardToMerge). "" otherwise, and when the
	// request is too broken to tell.
	ShardID string
}

// FaultFunc scripts what AWS does on a bad day. It runs before every call does anything else; a
// non-nil error is returned as the call's error, unchanged (return the SDK's typed errors, e.g.
// &types.ProvisionedThroughputExceededException{...}, to look like AWS). It may block to delay
// the call, and should then watch ctx, which is the call's context. It runs concurrently for
// concurrent calls.
type FaultFunc func(ctx context.Context, call Call) error

// EntryFaultFunc fails single entries of a PutRecords call, the way AWS reports partial failure:
// a non-empty errorCode (AWS uses "ProvisionedThroughputExceededException" and "InternalFailure")
// marks entry index (0-based) of the request as failed with that ErrorCode and errorMessage; the
// record is not stored and counts in FailedRecordCount. An empty errorMessage is replaced by
// AWS's usual one for the code. It runs after the request is validated, for each entry in order.
type EntryFaultFunc func(stream string, index int, entry types.PutRecordsRequestEntry) (errorCode, errorMessage string)

// SetFault installs f as the fault hook for every later call, replacing any other; nil removes
// it. It is safe to call while calls run: each call uses the hook installed when it starts.
func (l *Log) SetFault(f FaultFunc) {
	if f == nil {
		l.fault.Store(nil)
		return
	}
	l.fault.Store(&f)
}

// SetPutRecordsEntryFault installs f as the per-entry fault hook of PutRecords, replacing any
// other; nil removes it. It is safe to call while calls run.
func (l *Log) SetPutRecordsEntryFault(f EntryFaultFunc) {
	if f == nil {
		l.entryFault.Store(nil)
		return
	}
	l.entryFault.Store(&f)
}

// entryFaultMessage is AWS's message for a failed PutRecords entry of the given code.
func (l *Log) entryFaultMessage(code, stream, shardID string) string {
	switch code {
	case "ProvisionedThroughputExceededException":
		return "Rate exceeded for shard " + shardID + " in stream " + stream + " under account " + l.account + "."
	case "InternalFailure":
		return "Internal service failure."
	}
	return code
}
