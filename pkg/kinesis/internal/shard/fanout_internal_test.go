package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// TestPushErrorKindOf: which failures of a subscription pushFailed handles itself. A stream
// cut by its connection (the SDK's decode error wraps no API error) passes, as a failed read
// does; only an API error goes to classify.
func TestPushErrorKindOf(t *testing.T) {
	inUse := &types.ResourceInUseException{Message: aws.String("Another active subscription exists")}
	internal := &types.InternalFailureException{Message: aws.String("Internal service failure.")}
	notFound := &types.ResourceNotFoundException{Message: aws.String("Consumer not found")}
	cut := fmt.Errorf("decode event: %w", io.ErrUnexpectedEOF)
	for _, tc := range []struct {
		name             string
		err              error
		inStream, leased bool
		want             pushErrorKind
	}{
		{"refused at subscribe", inUse, false, true, pushInUse},
		{"taken over, lease held", inUse, true, true, pushTakenOver},
		{"taken over, no lease", inUse, true, false, pushInUse},
		{"connection cut in the stream", cut, true, true, pushConnectionFailed},
		{"GOAWAY in the stream", errors.New("decode event: http2: server sent GOAWAY and closed the connection"), true, true, pushConnectionFailed},
		{"connection error at subscribe: classify's", cut, false, true, pushOtherError},
		{"API error in the stream: classify's", internal, true, true, pushOtherError},
		{"consumer gone in the stream: classify's", notFound, true, true, pushOtherError},
		{"reader stopping", context.Canceled, true, true, pushOtherError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pushErrorKindOf(tc.err, tc.inStream, tc.leased); got != tc.want {
				t.Errorf("pushErrorKindOf(%v, inStream %v, leased %v) = %d, want %d", tc.err, tc.inStream, tc.leased, got, tc.want)
			}
		})
	}
}
