package getrecords_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/getrecords"
)

// inTurn answers each request with the next of its answers (the last one over and over).
type inTurn struct {
	answers []*answer
	sent    atomic.Int64
}

func (s *inTurn) Do(req *http.Request) (*http.Response, error) {
	i := int(s.sent.Add(1)) - 1
	a := s.answers[min(i, len(s.answers)-1)]
	return fakeHTTP{}.Do(req.WithContext(context.WithValue(req.Context(), answerKey{}, a)))
}

// withRetries gives the call the SDK's standard retryer, without its backoff, on h.
func withRetries(h *inTurn) func(*kinesis.Options) {
	return func(o *kinesis.Options) {
		o.HTTPClient = h
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	}
}

// TestRetriedAnswer: with the SDK's standard retryer, an error answer that it retries (a 500,
// a 503, a throttled 400) and then a 200 make one call that returns the 200 body's decoding,
// after two requests; each attempt's answer is read and closed once, the stale one never
// decoded, with and without the option.
func TestRetriedAnswer(t *testing.T) {
	body := genBody(20, bodyOpts{tricky: true, children: true, encryption: true})
	want, err := getrecords.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, first := range []struct {
		name, errType, body string
		status              int
	}{
		{"500", "InternalFailure", `{"__type":"InternalFailure"}`, 500},
		{"503", "ServiceUnavailable", `{"__type":"ServiceUnavailable","message":"try again"}`, 503},
		{"throttled", "ProvisionedThroughputExceededException",
			`{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for shard shardId-000000000000"}`, 400},
	} {
		for _, fast := range []bool{false, true} {
			var bodies []*tracked
			track := func(r io.Reader) io.ReadCloser { b := &tracked{r: r}; bodies = append(bodies, b); return b }
			h := &inTurn{answers: []*answer{
				{status: first.status, body: []byte(first.body), header: map[string]string{"X-Amzn-ErrorType": first.errType}, wrap: track},
				{status: 200, body: body, wrap: track},
			}}
			opts := []func(*kinesis.Options){withRetries(h)}
			if fast {
				opts = append(opts, getrecords.WithFastDecode)
			}
			out, err := client.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: aws.String("it")}, opts...)
			if err != nil {
				t.Fatalf("%s (fast: %v): %v", first.name, fast, err)
			}
			requireEqualOutputs(t, first.name, want, out)
			if n := h.sent.Load(); n != 2 || len(bodies) != 2 {
				t.Fatalf("%s (fast: %v): %d requests, %d bodies, want 2", first.name, fast, n, len(bodies))
			}
			for i, b := range bodies {
				if !b.shut {
					t.Errorf("%s (fast: %v): body %d not closed", first.name, fast, i)
				}
			}
			if !bodies[1].eof {
				t.Errorf("%s (fast: %v): the 200 body not read to EOF", first.name, fast)
			}
		}
	}
}

// TestRetriesExhausted: when every attempt is a retried error, the call fails with the SDK's
// typed error after the retryer's three attempts, with and without the option.
func TestRetriesExhausted(t *testing.T) {
	for _, fast := range []bool{false, true} {
		h := &inTurn{answers: []*answer{{status: 400, header: map[string]string{"X-Amzn-ErrorType": "ProvisionedThroughputExceededException"},
			body: []byte(`{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded"}`)}}}
		opts := []func(*kinesis.Options){withRetries(h)}
		if fast {
			opts = append(opts, getrecords.WithFastDecode)
		}
		_, err := client.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: aws.String("it")}, opts...)
		var e *types.ProvisionedThroughputExceededException
		if !errors.As(err, &e) || h.sent.Load() != 3 {
			t.Fatalf("fast: %v: error %v (%T) after %d requests", fast, err, err, h.sent.Load())
		}
	}
}
