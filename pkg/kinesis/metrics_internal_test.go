package kinesis

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestPublishErrorType: the error.type of a failed Publish, for each class of error.
func TestPublishErrorType(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: not publishing", ErrPublisherClosed), "publisher_closed"},
		{fmt.Errorf("%w: %q", ErrInvalidStreamName, "a b"), "invalid_stream_name"},
		{&MessageError{Stream: "s", Err: fmt.Errorf("%w: too big", ErrInvalidMessage)}, "invalid_message"},
		{&PublishError{Stream: "s", Failed: []*MessageError{{Stream: "s", Err: fmt.Errorf("%w: %q", ErrStreamNotFound, "s")}}}, "stream_not_found"},
		{fmt.Errorf("waiting to retry: %w", context.Canceled), "canceled"},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), "timeout"},
		{errors.New("kinesis: 3 record(s) still rejected after 10 retries"), "_OTHER"},
	}
	for _, tt := range tests {
		if got := publishErrorType(tt.err); got != tt.want {
			t.Errorf("publishErrorType(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
