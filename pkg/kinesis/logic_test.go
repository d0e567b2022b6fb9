package kinesis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
)

func keyed(keys ...string) []*pendingRecord {
	out := make([]*pendingRecord, len(keys))
	for i, k := range keys {
		out[i] = &pendingRecord{index: i, entry: types.PutRecordsRequestEntry{PartitionKey: &k}, size: 10}
	}
	return out
}

func indexes(round []*pendingRecord) string {
	var b strings.Builder
	for _, r := range round {
		fmt.Fprint(&b, r.index)
	}
	return b.String()
}

func TestRounds(t *testing.T) {
	tests := []struct {
		keys []string
		want []string // record indexes per round
	}{
		{nil, nil},
		{[]string{"a", "b", "c"}, []string{"012"}},
		{[]string{"a", "a", "a"}, []string{"0", "1", "2"}},
		{[]string{"a", "b", "a", "c", "b", "a"}, []string{"013", "24", "5"}},
	}
	for _, tt := range tests {
		var got []string
		for _, round := range rounds(keyed(tt.keys...)) {
			got = append(got, indexes(round))
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("rounds(%v) = %v, want %v", tt.keys, got, tt.want)
		}
	}
}

func TestBatchesRespectCountAndSize(t *testing.T) {
	many := keyed(make([]string, 1201)...)
	if got := batches(many); len(got) != 3 || len(got[0]) != 500 || len(got[2]) != 201 {
		t.Fatalf("1201 records: %d batches", len(got))
	}
	big := keyed("a", "b", "c", "d", "e", "f")
	for _, r := range big {
		r.size = 2 << 20 // 2 MiB each: two fit under 5 MiB
	}
	got := batches(big)
	if len(got) != 3 {
		t.Fatalf("6 x 2 MiB: %d batches, want 3", len(got))
	}
	for _, b := range got {
		size := 0
		for _, r := range b {
			size += r.size
		}
		if size > maxPutRecordsSize {
			t.Fatalf("batch of %d bytes exceeds 5 MiB", size)
		}
	}
}

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
		want errorClass
	}{
		{&types.ProvisionedThroughputExceededException{}, classThrottled},
		{wrap(&types.LimitExceededException{}), classThrottled},
		{&types.KMSThrottlingException{}, classThrottled},
		{fakeAPIError{"ThrottlingException", smithy.FaultClient}, classThrottled},
		{&types.InternalFailureException{}, classTransient},
		{fakeAPIError{"ServiceUnavailable", smithy.FaultServer}, classTransient},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, classTransient},
		{wrap(&types.ExpiredIteratorException{}), classExpiredIterator},
		{&types.ResourceNotFoundException{}, classNotFound},
		{&types.InvalidArgumentException{}, classFatal},
		{&types.AccessDeniedException{}, classFatal},
		{fakeAPIError{"UnrecognizedClientException", smithy.FaultClient}, classFatal},
		// A context error of a call whose caller goes on is that call's own deadline or the
		// HTTP client's timeout (net/http's matches context.DeadlineExceeded): transient.
		{wrap(context.Canceled), classTransient},
		{wrap(context.DeadlineExceeded), classTransient},
		{&url.Error{Op: "Post", URL: "https://kinesis", Err: context.DeadlineExceeded}, classTransient},
	}
	for _, tt := range tests {
		if got := classify(context.Background(), tt.err); got != tt.want {
			t.Errorf("classify(%T %v) = %d, want %d", tt.err, tt.err, got, tt.want)
		}
	}
	// Once the caller's own context is done, every error is fatal: the caller is stopping.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range []error{context.Canceled, &url.Error{Op: "Post", Err: context.DeadlineExceeded}, &types.InternalFailureException{}} {
		if got := classify(done, err); got != classFatal {
			t.Errorf("classify(done context, %v) = %d, want fatal", err, got)
		}
	}
}
