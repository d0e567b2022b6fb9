package awscall

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
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
//
// A call that never left this process (*SetupError: no credentials, no endpoint) is fatal
// whatever it wraps: a credential chain that tried the EC2 metadata service carries that
// service's network errors, and retrying them only delays the message that says what to set.
// So is an answer that cannot be decoded (*smithy.DeserializationError) or a request that
// cannot be encoded (*smithy.SerializationError), unless the decoding failed because the
// network cut the body short: that is the network's failure, and passes.
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
		setup      *SetupError
		respErr    *smithyhttp.ResponseError
		sendErr    *smithyhttp.RequestSendError
		decodeErr  *smithy.DeserializationError
		encodeErr  *smithy.SerializationError
		paramsErr  *smithy.InvalidParamsError
		opErr      *smithy.OperationError
		noRegion   *aws.MissingRegionError
		noEndpoint *aws.EndpointNotFoundError
		apiErr     smithy.APIError
		netErr     net.Error
	)
	switch {
	case err == nil:
		return Fatal
	case errors.As(err, &setup):
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
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusTooManyRequests:
		return Throttled
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() >= 500:
		return Transient
	case errors.As(err, &apiErr):
		return Fatal
	// The transport failed: connection refused or reset, DNS, a body cut short.
	case errors.As(err, &sendErr), errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF):
		return Transient
	case errors.As(err, &decodeErr), errors.As(err, &encodeErr), errors.As(err, &paramsErr),
		errors.As(err, &respErr), errors.As(err, &noRegion), errors.As(err, &noEndpoint):
		return Fatal // an answer it cannot read, a request it cannot make, a 4xx
	case errors.As(err, &opErr):
		// An SDK call that failed in no way above: the transport's own errors that are not
		// net.Errors (an HTTP/2 stream reset or GOAWAY while a body is read) end up here,
		// and they pass.
		return Transient
	}
	// An error of a client that is not the SDK's will fail the same way again.
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
