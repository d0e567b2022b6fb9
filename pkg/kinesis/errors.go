package kinesis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

var (
	// ErrPublisherClosed is matched by the error of Publish after Close.
	ErrPublisherClosed = errors.New("kinesis: publisher is closed")
	// ErrSubscriberClosed is matched by the error of Subscribe and SubscribeInitialize after
	// Close.
	ErrSubscriberClosed = errors.New("kinesis: subscriber is closed")
	// ErrNilContext is matched by the error of Subscribe with a nil context.
	ErrNilContext = errors.New("kinesis: nil context")
	// ErrLeaseLost means this instance no longer owns a shard's lease: another instance took it
	// or it could not be renewed in time. The shard's reader stops at once, without a
	// checkpoint; its unacked messages are redelivered by the shard's next owner.
	ErrLeaseLost = lease.ErrLeaseLost
	// ErrStreamNotFound means the stream does not exist. Create it, or set the CreateStream
	// option so that the driver creates it.
	ErrStreamNotFound = errors.New("kinesis: stream not found")
	// ErrInvalidStreamName is matched by errors about a topic that is not a valid Kinesis
	// stream name ([a-zA-Z0-9_.-], 1 to 128 characters).
	ErrInvalidStreamName = errors.New("kinesis: invalid stream name")
	// ErrInvalidMessage is matched by every error about a message that cannot be published
	// as it is (bad partition key, record too large, nil message).
	ErrInvalidMessage = errors.New("kinesis: invalid message")
)

// MessageError names a message that could not be published and why.
type MessageError struct {
	Stream string
	// UUID is the message's UUID; Index its position in the Publish call.
	UUID  string
	Index int
	Err   error
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("kinesis: message %d (uuid %q) to stream %q: %v", e.Index, e.UUID, e.Stream, e.Err)
}

func (e *MessageError) Unwrap() error { return e.Err }

// PublishError is returned by Publish when some messages were not written. Messages not listed
// in Failed were written; Publish is not atomic. errors.As finds each *MessageError through
// Unwrap.
type PublishError struct {
	Stream string
	Failed []*MessageError
}

func (e *PublishError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kinesis: %d message(s) not written to stream %q", len(e.Failed), e.Stream)
	const shown = 5
	for i, f := range e.Failed {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(e.Failed)-shown)
			break
		}
		fmt.Fprintf(&b, "; message %d (uuid %q): %v", f.Index, f.UUID, f.Err)
	}
	return b.String()
}

// Unwrap returns the per-message errors, so errors.Is and errors.As see each of them.
func (e *PublishError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f
	}
	return errs
}

// ShardError names the shard a reader failed on.
type ShardError struct {
	Stream  string
	ShardID string
	Err     error
}

func (e *ShardError) Error() string {
	return fmt.Sprintf("kinesis: stream %q shard %q: %v", e.Stream, e.ShardID, e.Err)
}

func (e *ShardError) Unwrap() error { return e.Err }

// errorClass says what a reader or publisher does about an error from Kinesis.
type errorClass int

const (
	// classFatal: retrying the same request will not help (bad request, no permission,
	// stream gone, our own shutdown).
	classFatal errorClass = iota
	// classThrottled: over a rate limit; back off and retry the same request.
	classThrottled
	// classTransient: the service or the network failed; back off and retry.
	classTransient
	// classExpiredIterator: the iterator is older than five minutes; get a new one.
	classExpiredIterator
	// classNotFound: the stream or shard does not exist.
	classNotFound
)

// classify sorts the error of a call made with ctx, by its type, never by its text.
//
// A context error is fatal only when ctx itself is done: the caller is shutting down. Otherwise
// it is the call's own deadline (RequestTimeout), or the HTTP client's timeout, which net/http
// reports as context.DeadlineExceeded: the network was slow, and a retry may pass.
func classify(ctx context.Context, err error) errorClass {
	if err != nil && ctx.Err() != nil {
		return classFatal
	}
	var (
		throttled  *types.ProvisionedThroughputExceededException
		limit      *types.LimitExceededException
		kmsThrottl *types.KMSThrottlingException
		internal   *types.InternalFailureException
		expired    *types.ExpiredIteratorException
		notFound   *types.ResourceNotFoundException
		respErr    *smithyhttp.ResponseError
		apiErr     smithy.APIError
		netErr     net.Error
	)
	switch {
	case err == nil:
		return classFatal
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return classTransient
	case errors.As(err, &expired):
		return classExpiredIterator
	case errors.As(err, &notFound):
		return classNotFound
	case errors.As(err, &throttled), errors.As(err, &limit), errors.As(err, &kmsThrottl):
		return classThrottled
	case errors.As(err, &internal):
		return classTransient
	case errors.As(err, &apiErr) && isThrottleCode(apiErr.ErrorCode()):
		return classThrottled
	case errors.As(err, &apiErr) && apiErr.ErrorFault() == smithy.FaultServer:
		return classTransient
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() >= 500:
		return classTransient
	case errors.As(err, &apiErr):
		return classFatal
	case errors.As(err, &netErr):
		return classTransient
	}
	// Connection resets and refusals that are not net.Errors still arrive wrapped in the
	// SDK's RequestSendError; an error with no API code came from the transport.
	var sendErr *smithy.OperationError
	if errors.As(err, &sendErr) {
		return classTransient
	}
	return classFatal
}

// isThrottleCode reports the error codes AWS uses for throttling that have no typed error in
// the Kinesis SDK (they come from the protocol layer).
func isThrottleCode(code string) bool {
	switch code {
	case "ThrottlingException", "Throttling", "RequestLimitExceeded", "SlowDown":
		return true
	}
	return false
}

// retryableEntryCode reports whether a failed PutRecords entry may succeed when sent again.
// AWS documents only these two codes for entries.
func retryableEntryCode(code string) bool {
	return code == "ProvisionedThroughputExceededException" || code == "InternalFailure"
}
