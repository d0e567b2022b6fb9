// Package awscall says what a failed call to Kinesis means and how to wait before the next:
// the classification of errors by type (never by text), jittered backoff, interruptible sleeps,
// and the errors that name the stream and shard a call failed on.
//
// It owns no state and starts no goroutine. It may import the AWS SDK and smithy, and nothing
// of this module: every other package of the driver may import it.
package awscall
