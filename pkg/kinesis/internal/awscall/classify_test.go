package awscall

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
)

type fakeAPIError struct {
	code  string
	fault smithy.ErrorFault
}

func (e fakeAPIError) Error() string                 { return e.code }
func (e fakeAPIError) ErrorCode() string             { return e.code }
func (e fakeAPIError) ErrorMessage() string          { return e.code }
func (e fakeAPIError) ErrorFault() smithy.ErrorFault { return e.fault }

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
