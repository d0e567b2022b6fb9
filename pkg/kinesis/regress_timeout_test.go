package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"go.uber.org/goleak"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// rgHTTPTimeout is what net/http returns when its Client.Timeout fires: a net.Error whose
// Timeout() is true and which matches context.DeadlineExceeded, inside a *url.Error.
type rgHTTPTimeout struct{}

func (rgHTTPTimeout) Error() string {
	return "net/http: request canceled (Client.Timeout exceeded while awaiting headers)"
}
func (rgHTTPTimeout) Timeout() bool   { return true }
func (rgHTTPTimeout) Temporary() bool { return true }
func (rgHTTPTimeout) Is(err error) bool {
	return err == context.DeadlineExceeded
}

// rgTimeoutErrors are the shapes of a client-side timeout of one call whose caller's context
// is still live.
func rgTimeoutErrors() []error {
	return []error{
		&url.Error{Op: "Post", URL: "https://kinesis.us-east-1.example/", Err: context.DeadlineExceeded},
		&url.Error{Op: "Post", URL: "https://kinesis.us-east-1.example/", Err: rgHTTPTimeout{}},
		fmt.Errorf("operation error Kinesis: %w", &url.Error{Op: "Post", URL: "https://kinesis.us-east-1.example/", Err: rgHTTPTimeout{}}),
	}
}

// Item 3: an HTTP client timeout on GetRecords (an error that matches context.DeadlineExceeded
// while the reader's own context is live) is transient: the reader retries and delivers every
// record exactly once and in order, and logs no "Shard reader stopped" ERROR. Today the
// timeout is classified as fatal and the reader stops.
func TestRegress_HTTPTimeoutOnReadIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		w := newFltWorld(t, 2)
		wks := w.warm("w1")
		x := subShard(0)
		from := w.now()
		injected := 0
		errs := rgTimeoutErrors()
		w.kin.set(func(c memlog.Call) error {
			if c.Op == "GetRecords" && c.ShardID == x && injected < 3 {
				err := errs[injected%len(errs)]
				injected++
				return err
			}
			return nil
		})
		w.steps(5 * time.Second)
		w.kin.set(nil)
		w.drain(10 * time.Second)
		to := w.now()
		w.consumersOpen(wks...)
		w.closeAll(wks...)

		stopped := w.logs.countMsg("ERROR", "Shard reader stopped", from, to)
		s := w.stats(time.Time{}, time.Time{})
		t.Logf("injected=%d timeouts; %s; 'Shard reader stopped' ERRORs=%d takes of %s=%d",
			injected, s, stopped, x, len(wks[0].store.opsOf(lease.OpTake, x)))
		if injected != 3 {
			t.Fatalf("injected %d timeouts, want 3: the test did not test the timeouts", injected)
		}
		if stopped != 0 {
			t.Errorf("the reader of %s stopped %d times on an HTTP client timeout, want it to retry", x, stopped)
		}
		w.checkAll(s, true)
		w.noErrors("HTTP timeouts on GetRecords", from, to)
		w.finish(ignore)
	})
}

// Item 3: a PutRecords call that fails once with an HTTP client timeout (the caller's context
// live) is retried by the Publisher, and Publish succeeds with every record written once. Today
// the timeout is classified as fatal and Publish fails.
func TestRegress_HTTPTimeoutOnPutIsRetried(t *testing.T) {
	for i, terr := range rgTimeoutErrors() {
		t.Run(fmt.Sprintf("shape %d", i), func(t *testing.T) {
			l := memlog.New(memlog.Config{})
			if _, err := l.CreateStream(context.Background(), &awskinesis.CreateStreamInput{
				StreamName: aws.String(subStream), ShardCount: aws.Int32(2),
			}); err != nil {
				t.Fatalf("CreateStream: %v", err)
			}
			calls := 0
			l.SetFault(func(_ context.Context, c memlog.Call) error {
				if c.Op != "PutRecords" {
					return nil
				}
				calls++
				if calls == 1 {
					return terr
				}
				return nil
			})
			pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
				Client: l, RetryBackoff: time.Nanosecond, MaxRetryBackoff: time.Nanosecond,
			}, nil)
			if err != nil {
				t.Fatalf("NewPublisher: %v", err)
			}
			defer pub.Close()
			msgs := []*message.Message{
				message.NewMessage("m1", []byte("one")),
				message.NewMessage("m2", []byte("two")),
				message.NewMessage("m3", []byte("three")),
			}
			if err := pub.Publish(subStream, msgs...); err != nil {
				t.Fatalf("Publish after one HTTP client timeout (%v): %v; want it retried", terr, err)
			}
			if calls != 2 {
				t.Errorf("PutRecords called %d times, want 2 (the timeout, then the retry)", calls)
			}
			got := pubReadAll(t, l, subStream)
			if len(got) != len(msgs) {
				t.Errorf("%d records in the stream, want %d", len(got), len(msgs))
			}
			if !errors.Is(terr, context.DeadlineExceeded) {
				t.Fatalf("test error %v does not match context.DeadlineExceeded", terr)
			}
		})
	}
}
