package awscall

import (
	"errors"
	"fmt"
)

// ErrStreamNotFound means the stream does not exist. pkg/kinesis exports it under the same
// name: one value, so errors.Is matches it whichever layer wrapped it.
var ErrStreamNotFound = errors.New("kinesis: stream not found")

// ShardError names the shard a reader failed on. pkg/kinesis exports it as ShardError.
type ShardError struct {
	Stream  string
	ShardID string
	Err     error
}

// Error names the stream and shard, then the cause.
func (e *ShardError) Error() string {
	return fmt.Sprintf("kinesis: stream %q shard %q: %v", e.Stream, e.ShardID, e.Err)
}

// Unwrap returns the cause.
func (e *ShardError) Unwrap() error { return e.Err }
