package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// payloadSize is the size of every benchmark message's payload.
const payloadSize = 100

// kinesaliteClient is an SDK client for kinesalite, built as tests/live_test.go builds its
// clients: static credentials, us-east-1, BaseEndpoint set to the endpoint.
func kinesaliteClient(endpoint string) *awskinesis.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("x", "x", "")}
	return awskinesis.NewFromConfig(cfg, func(o *awskinesis.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// memlogSubscriberConfig is a subscriber of log with memlog's pacing (memlog has no rate
// limit): PollInterval 1 ms, MinReadInterval 1 µs; with group set, a consumer group with an
// in-memory lease store.
func memlogSubscriberConfig(log *memlog.Log, group string) kinesis.SubscriberConfig {
	cfg := kinesis.SubscriberConfig{Client: log, PollInterval: time.Millisecond, MinReadInterval: time.Microsecond}
	if group != "" {
		cfg.Group.Name, cfg.Group.LeaseStore = group, lease.NewMemoryStore()
	}
	return cfg
}

// newMessages makes n messages with 100-byte payloads; meta, when set, gives message i its
// metadata.
func newMessages(n int, meta func(i int, m message.Metadata)) []*message.Message {
	payload := make([]byte, payloadSize)
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), payload)
		if meta != nil {
			meta(i, msgs[i].Metadata)
		}
	}
	return msgs
}

// publishAll publishes msgs in Publish calls of batch messages, stopping at ctx's end.
func publishAll(ctx context.Context, pub message.Publisher, topic string, msgs []*message.Message, batch int) error {
	for i := 0; i < len(msgs); i += batch {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("publishing to %s: %d of %d published: %w", topic, i, len(msgs), err)
		}
		if err := pub.Publish(topic, msgs[i:min(i+batch, len(msgs))]...); err != nil {
			return fmt.Errorf("publishing to %s: %w", topic, err)
		}
	}
	return nil
}

// backlog creates stream on client with shards shards and publishes n 100-byte messages into
// it through our Publisher (so our Subscriber decodes them), in calls of 500.
func backlog(ctx context.Context, client kinesis.KinesisAPI, stream string, shards int32, n int, cfg kinesis.PublisherConfig) error {
	cfg.Client, cfg.CreateStream, cfg.CreateStreamShards = client, true, shards
	pub, err := kinesis.NewPublisher(cfg, nil)
	if err != nil {
		return err
	}
	err = publishAll(ctx, pub, stream, newMessages(n, nil), 500)
	return errors.Join(err, pub.Close())
}

// receive takes n messages from msgs and acks each after calling each (when set) with it and
// the count received so far, including it.
func receive(ctx context.Context, msgs <-chan *message.Message, n int, each func(msg *message.Message, received int)) error {
	for received := 0; received < n; {
		select {
		case msg, ok := <-msgs:
			if !ok {
				return fmt.Errorf("the subscription's channel closed after %d of %d messages", received, n)
			}
			received++
			if each != nil {
				each(msg, received)
			}
			msg.Ack()
		case <-ctx.Done():
			return fmt.Errorf("received %d of %d messages: %w", received, n, ctx.Err())
		}
	}
	return nil
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank-1, 0)]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// fmtRate formats msgs/s: 123,456 msgs/s.
func fmtRate(r float64) string { return thousands(int64(math.Round(r))) + " msgs/s" }

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func fmtRatio(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) + "x" }

func fmtMiB(bytes float64) string { return strconv.FormatFloat(bytes/(1<<20), 'f', 1, 64) + " MiB" }

func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
	default:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
	}
}

// count is "1 pair", "5 pairs".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// met is "yes" or "no".
func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// closeAll closes each closer and joins their errors.
func closeAll(closers ...interface{ Close() error }) error {
	var errs []error
	for _, c := range closers {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

func streamName(row string) string { return "bench-" + row + "-" + watermill.NewShortUUID() }
