// Package awscall is how the driver calls the AWS SDK and what a failed call means: one retry
// layer (every Kinesis call with the SDK's retries off, OneRetryLayer), the stage a call that
// never left the process failed at (SetupError, saying what to set), the classification of
// errors by type (never by text), jittered backoff, interruptible sleeps, and the errors that
// name the stream and shard a call failed on.
//
// It owns no state and starts no goroutine. It may import the AWS SDK and smithy, and nothing
// of this module: every other package of the driver may import it.
package awscall
