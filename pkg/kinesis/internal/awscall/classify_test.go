package awscall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

type fakeAPIError struct {
	code  string
	fault smithy.ErrorFault
}

func (e fakeAPIError) Error() string                 { return e.code }
func (e fakeAPIError) ErrorCode() string             { return e.code }
func (e fakeAPIError) ErrorMessage() string          { return e.code }
func (e fakeAPIError) ErrorFault() smithy.ErrorFault { return e.fault }

// op wraps err as the SDK returns it from a Kinesis call.
func op(err error) error {
	return &smithy.OperationError{ServiceID: "Kinesis", OperationName: "GetRecords", Err: err}
}

// response is err (nil for a bare status) in an HTTP answer of status.
func response(status int, err error) error {
	if err == nil {
		err = errors.New("http response error")
	}
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err}}
}

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("call: %w", err) }
	tests := []struct {
		err  error
		want Class
	}{
		{&types.ProvisionedThroughputExceededException{}, Throttled},
		{wrap(&types.LimitExceededException{}), Throttled},
		{&types.KMSThrottlingException{}, Throttled},
		{fakeAPIError{"ThrottlingException", smithy.FaultClient}, Throttled},
		{&types.InternalFailureException{}, Transient},
		{fakeAPIError{"ServiceUnavailable", smithy.FaultServer}, Transient},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, Transient},
		{wrap(&types.ExpiredIteratorException{}), ExpiredIterator},
		{&types.ResourceNotFoundException{}, NotFound},
		{&types.InvalidArgumentException{}, Fatal},
		{&types.AccessDeniedException{}, Fatal},
		{fakeAPIError{"UnrecognizedClientException", smithy.FaultClient}, Fatal},
		// A context error of a call whose caller goes on is that call's own deadline or the
		// HTTP client's timeout (net/http's matches context.DeadlineExceeded): transient.
		{wrap(context.Canceled), Transient},
		{wrap(context.DeadlineExceeded), Transient},
		{&url.Error{Op: "Post", URL: "https://kinesis", Err: context.DeadlineExceeded}, Transient},

		// Every SDK error type a call of the driver can meet, as the SDK wraps them.
		{op(&types.ResourceInUseException{}), Fatal},
		{op(&types.KMSAccessDeniedException{}), Fatal},
		{op(&types.KMSDisabledException{}), Fatal},
		{op(&types.KMSNotFoundException{}), Fatal},
		{op(&types.KMSInvalidStateException{}), Fatal},
		{op(&types.KMSOptInRequired{}), Fatal},
		{op(&types.ValidationException{}), Fatal},
		{op(&types.ExpiredNextTokenException{}), Fatal},
		{op(&types.ProvisionedThroughputExceededException{}), Throttled},
		{op(&types.LimitExceededException{}), Throttled},
		{op(&types.ExpiredIteratorException{}), ExpiredIterator},
		{op(&types.ResourceNotFoundException{}), NotFound},
		{op(&smithy.GenericAPIError{Code: "ThrottlingException"}), Throttled},
		{op(&smithy.GenericAPIError{Code: "InternalServerError", Fault: smithy.FaultServer}), Transient},
		{op(&smithy.GenericAPIError{Code: "IncompleteSignature"}), Fatal},
		// An answer with a status and no modelled error.
		{op(response(503, nil)), Transient},
		{op(response(429, nil)), Throttled},
		{op(response(403, nil)), Fatal},
		// The transport failed: the request may never have arrived, or its answer was cut short.
		{op(&smithyhttp.RequestSendError{Err: errors.New("connection reset by peer")}), Transient},
		{op(&smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}), Transient},
		{op(&smithy.DeserializationError{Err: io.ErrUnexpectedEOF}), Transient},
		{op(&smithy.DeserializationError{Err: &net.OpError{Op: "read", Err: errors.New("connection reset")}}), Transient},
		// An answer that cannot be read, a request that cannot be made.
		{op(&smithy.DeserializationError{Err: errors.New("invalid character '<' looking for beginning of value")}), Fatal},
		{op(response(200, &smithy.DeserializationError{Err: errors.New("unexpected end of JSON input")})), Fatal},
		{op(&smithy.SerializationError{Err: errors.New("bad input")}), Fatal},
		{op(&smithy.InvalidParamsError{Context: "GetRecordsInput"}), Fatal},
		{op(&aws.MissingRegionError{}), Fatal},
		{op(&aws.EndpointNotFoundError{Err: errors.New("no partition")}), Fatal},
		// Never sent: no credentials (the chain's own network errors inside), no endpoint.
		{op(&SetupError{Service: "Kinesis", Stage: StageCredentials, Err: fmt.Errorf("get identity: %w",
			&smithy.OperationError{ServiceID: "ec2imds", Err: &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial"}}})}), Fatal},
		{op(&SetupError{Service: "Kinesis", Stage: StageEndpoint, Err: errors.New("failed to resolve service endpoint")}), Fatal},
		// An SDK call that failed in no known way, like an HTTP/2 stream reset (net/http's
		// http2StreamError is no net.Error): the transport's, it passes.
		{op(errors.New("stream error: stream ID 3; INTERNAL_ERROR")), Transient},
		// An error of a client that is not the SDK's: it will fail again the same way.
		{errors.New("something new"), Fatal},
	}
	for _, tt := range tests {
		if got := Classify(context.Background(), tt.err); got != tt.want {
			t.Errorf("Classify(%T %v) = %d, want %d", tt.err, tt.err, got, tt.want)
		}
	}
	// Once the caller's own context is done, every error is fatal: the caller is stopping.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range []error{context.Canceled, &url.Error{Op: "Post", Err: context.DeadlineExceeded}, &types.InternalFailureException{}} {
		if got := Classify(done, err); got != Fatal {
			t.Errorf("Classify(done context, %v) = %d, want fatal", err, got)
		}
	}
}
