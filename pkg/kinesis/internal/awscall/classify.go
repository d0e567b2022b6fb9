package awscall

import (
	"context"
	"errors"
	"net"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Class says what a reader or publisher does about an error from Kinesis.
type Class int

const (
	// Fatal: retrying the same request will not help (bad request, no permission, stream
	// gone, our own shutdown).
	Fatal Class = iota
	// Throttled: over a rate limit; back off and retry the same request.
	Throttled
	// Transient: the service or the network failed; back off and retry.
	Transient
	// ExpiredIterator: the iterator is older than five minutes; get a new one.
	ExpiredIterator
	// NotFound: the stream or shard does not exist.
	NotFound
)

// Classify sorts the error of a call made with ctx, by its type, never by its text.
//
// A context error is fatal only when ctx itself is done: the caller is shutting down. Otherwise
// it is the call's own deadline (RequestTimeout), or the HTTP client's timeout, which net/http
// reports as context.DeadlineExceeded: the network was slow, and a retry may pass.
func Classify(ctx context.Context, err error) Class {
	if err != nil && ctx.Err() != nil {
		return Fatal
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
		return Fatal
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Transient
	case errors.As(err, &expired):
		return ExpiredIterator
	case errors.As(err, &notFound):
		return NotFound
	case errors.As(err, &throttled), errors.As(err, &limit), errors.As(err, &kmsThrottl):
		return Throttled
	case errors.As(err, &internal):
		return Transient
	case errors.As(err, &apiErr) && isThrottleCode(apiErr.ErrorCode()):
		return Throttled
	case errors.As(err, &apiErr) && apiErr.ErrorFault() == smithy.FaultServer:
		return Transient
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() >= 500:
		return Transient
	case errors.As(err, &apiErr):
		return Fatal
	case errors.As(err, &netErr):
		return Transient
	}
	// Connection resets and refusals that are not net.Errors still arrive wrapped in the
	// SDK's RequestSendError; an error with no API code came from the transport.
	var sendErr *smithy.OperationError
	if errors.As(err, &sendErr) {
		return Transient
	}
	return Fatal
}

// Passes reports a class that a later try of the same call may get past.
func (c Class) Passes() bool { return c == Throttled || c == Transient }

// isThrottleCode reports the error codes AWS uses for throttling that have no typed error in
// the Kinesis SDK (they come from the protocol layer).
func isThrottleCode(code string) bool {
	switch code {
	case "ThrottlingException", "Throttling", "RequestLimitExceeded", "SlowDown":
		return true
	}
	return false
}

// RetryableEntryCode reports whether a failed PutRecords entry may succeed when sent again.
// AWS documents only these two codes for entries.
func RetryableEntryCode(code string) bool {
	return code == "ProvisionedThroughputExceededException" || code == "InternalFailure"
}
