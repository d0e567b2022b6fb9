package group

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// ErrConsumerLimit is pkg/kinesis.ErrConsumerLimit: a stream consumer could not be registered
// because the stream has as many consumers as Kinesis allows.
var ErrConsumerLimit = errors.New("kinesis: the stream has as many registered consumers as Kinesis allows")

// fanOutConsumer is a subscription's stream consumer. Its readers read the ARN at each
// subscription (current, from any goroutine, without waiting); one that finds the consumer gone
// (deregistered, perhaps registered again under a new ARN by another instance) finds or
// registers it again through refresh, once for all of them.
type fanOutConsumer struct {
	arn atomic.Pointer[string]
	// ensure finds or registers the consumer (ensureConsumer with the subscription's config).
	ensure func(ctx context.Context) (string, error)
	// refreshing holds a token through a refresh, so that readers that find the consumer
	// gone at the same time wait for its outcome instead of registering it each; a channel,
	// so that a reader that stops meanwhile does not wait on.
	refreshing chan struct{}
}

func newFanOutConsumer(arn string, ensure func(ctx context.Context) (string, error)) *fanOutConsumer {
	f := &fanOutConsumer{refreshing: make(chan struct{}, 1), ensure: ensure}
	f.arn.Store(&arn)
	return f
}

// ARN is the consumer's current ARN; safe from any goroutine.
func (f *fanOutConsumer) ARN() string { return *f.arn.Load() }

// Refresh finds or registers the consumer again after a subscription through stale found it
// gone, and returns its ARN; a refresh that another reader made meanwhile is taken as it is.
func (f *fanOutConsumer) Refresh(ctx context.Context, stale string) (string, error) {
	select {
	case f.refreshing <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-f.refreshing }()
	if cur := f.ARN(); cur != stale {
		return cur, nil
	}
	arn, err := f.ensure(ctx)
	if err != nil {
		return "", err
	}
	f.arn.Store(&arn)
	return arn, nil
}

// startFanOut finds or registers the group's stream consumer before the readers start, and
// sets readerCfg.FanOut, which makes them read with SubscribeToShard. A stream at its consumer limit
// falls back to polling, with an ERROR that says what to do; any other failure fails Subscribe.
func (c *Subscription) startFanOut() error {
	if !c.cfg.FanOutEnabled {
		return nil
	}
	ensure := func(ctx context.Context) (string, error) {
		return ensureConsumer(ctx, &c.cfg, c.cfg.Logger, c.logFields())
	}
	arn, err := ensure(c.ctx)
	switch {
	case errors.Is(err, ErrConsumerLimit):
		c.cfg.Logger.Error("Enhanced fan-out is unavailable; reading by polling (GetRecords) instead", err, c.logFields().Add(watermill.LogFields{
			"consumer": c.cfg.FanOutConsumer,
			"what_to_do": "deregister a consumer of the stream that is no longer used (kinesis.DeregisterConsumer), or ask AWS for a higher quota; " +
				"restart the subscription to read with enhanced fan-out again"}))
		return nil
	case err != nil:
		return err
	}
	c.readerCfg.FanOut = newFanOutConsumer(arn, ensure)
	return nil
}

// consumerPoll is the wait between two looks at a stream consumer that is being created or
// deleted, and the first wait after a throttled call.
const consumerPoll = time.Second

// maxStreamConsumers is how many consumers Kinesis lets a stream have registered at once.
const maxStreamConsumers = 20

// ensureConsumer returns the ARN of the ACTIVE stream consumer cfg.FanOutConsumer of
// stream, registering it if it does not exist and waiting (up to FanOut.RegisterTimeout) while
// it is being created. Several instances of a group may run it at once: a registration that
// finds the consumer registered by another instance just goes on waiting for it.
func ensureConsumer(ctx context.Context, cfg *Config, logger watermill.LoggerAdapter, fields watermill.LogFields) (string, error) {
	api := cfg.Consumers // Validate checked it
	name := cfg.FanOutConsumer
	fail := func(format string, args ...any) error {
		return fmt.Errorf("kinesis: enhanced fan-out on stream %q, consumer %q: "+format, append([]any{cfg.Stream, name}, args...)...)
	}
	summary, err := describeStream(ctx, cfg)
	if err != nil {
		return "", fail("%w", err)
	}
	streamARN := *summary.StreamARN
	deadline := time.Now().Add(cfg.FanOutRegister)
	var limited, throttled int
	var lastLimit error
	status := types.ConsumerStatus("")
	for {
		var d *awskinesis.DescribeStreamConsumerOutput
		err := callWithTimeout(ctx, cfg, func(ctx context.Context) (err error) {
			d, err = api.DescribeStreamConsumer(ctx, &awskinesis.DescribeStreamConsumerInput{StreamARN: &streamARN, ConsumerName: &name})
			return err
		})
		var notFound *types.ResourceNotFoundException
		switch {
		case err == nil && d.ConsumerDescription == nil:
			return "", fail("DescribeStreamConsumer returned no consumer description")
		case err == nil:
			status = d.ConsumerDescription.ConsumerStatus
			if status == types.ConsumerStatusActive {
				return aws.ToString(d.ConsumerDescription.ConsumerARN), nil
			}
		case errors.As(err, &notFound):
			status = ""
			reg, rerr := registerConsumer(ctx, cfg, api, streamARN, name)
			var inUse *types.ResourceInUseException
			var limit *types.LimitExceededException
			switch {
			case rerr == nil:
				logger.Info("Registered the stream consumer for enhanced fan-out", fields.Add(watermill.LogFields{"consumer": name, "consumer_arn": aws.ToString(reg.ConsumerARN)}))
				limited = 0
				if reg.ConsumerStatus == types.ConsumerStatusActive {
					return aws.ToString(reg.ConsumerARN), nil
				}
			case errors.As(rerr, &inUse):
				// Registered by another instance meanwhile, or still being deleted: look again.
			case errors.As(rerr, &limit):
				// The same error says the stream has its most consumers, or that
				// registrations come too fast (5 a second per account) or too many are
				// being created at once (5): the stream's consumer count tells which.
				limited++
				lastLimit = rerr
				if s, err := describeStream(ctx, cfg); err == nil && aws.ToInt32(s.ConsumerCount) >= maxStreamConsumers {
					return "", fail("%w (%d consumers registered; RegisterStreamConsumer: %w)", ErrConsumerLimit, aws.ToInt32(s.ConsumerCount), rerr)
				}
			default:
				return "", fail("registering the stream consumer (IAM needs kinesis:RegisterStreamConsumer and kinesis:DescribeStreamConsumer on the stream): %w", rerr)
			}
		default:
			if c := awscall.Classify(ctx, err); c != awscall.Throttled && c != awscall.Transient {
				return "", fail("describing the stream consumer (IAM needs kinesis:DescribeStreamConsumer): %w", err)
			}
			throttled++
		}
		if !time.Now().Before(deadline) {
			if lastLimit != nil && status == "" {
				return "", fail("%w (RegisterStreamConsumer kept failing with LimitExceededException for FanOut.RegisterTimeout, %s: %w)", ErrConsumerLimit, cfg.FanOutRegister, lastLimit)
			}
			return "", fail("the consumer is still %q after FanOut.RegisterTimeout (%s); raise it, or check the consumer in the AWS console", status, cfg.FanOutRegister)
		}
		wait := consumerPoll
		if limited > 0 || throttled > 0 {
			wait = awscall.Backoff(max(limited, throttled)-1, consumerPoll, 8*consumerPoll)
		}
		if err := awscall.Sleep(ctx, wait); err != nil {
			return "", fail("waiting for the consumer to become ACTIVE: %w", err)
		}
	}
}

// registerConsumer registers the stream consumer name, bounded by RequestTimeout.
func registerConsumer(ctx context.Context, cfg *Config, api ConsumerClient, streamARN, name string) (*types.Consumer, error) {
	var out *awskinesis.RegisterStreamConsumerOutput
	err := callWithTimeout(ctx, cfg, func(ctx context.Context) (err error) {
		out, err = api.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{StreamARN: &streamARN, ConsumerName: &name})
		return err
	})
	if err != nil {
		return nil, err
	}
	if out.Consumer == nil {
		return nil, errors.New("RegisterStreamConsumer returned no consumer")
	}
	return out.Consumer, nil
}

// describeStream returns the summary of stream: its ARN, which the consumer calls name it by,
// and its consumer count.
func describeStream(ctx context.Context, cfg *Config) (*types.StreamDescriptionSummary, error) {
	for attempt := 0; ; attempt++ {
		var out *awskinesis.DescribeStreamSummaryOutput
		err := callWithTimeout(ctx, cfg, func(ctx context.Context) (err error) {
			out, err = cfg.Kinesis.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: &cfg.Stream})
			return err
		})
		if err == nil {
			if out.StreamDescriptionSummary == nil || out.StreamDescriptionSummary.StreamARN == nil {
				return nil, errors.New("DescribeStreamSummary returned no stream ARN")
			}
			return out.StreamDescriptionSummary, nil
		}
		switch class := awscall.Classify(ctx, err); class {
		case awscall.NotFound:
			return nil, fmt.Errorf("%w: %w", awscall.ErrStreamNotFound, err)
		case awscall.Throttled, awscall.Transient:
			wait := awscall.Backoff(attempt, 100*time.Millisecond, 5*time.Second)
			if class == awscall.Throttled {
				wait = awscall.QuotaBackoff(attempt) // 20 calls a second per account
			}
			if attempt+1 < awscall.FailuresBeforeError {
				if err := awscall.Sleep(ctx, wait); err == nil {
					continue
				}
			}
		}
		return nil, fmt.Errorf("describing the stream (IAM needs kinesis:DescribeStreamSummary): %w", err)
	}
}

// callWithTimeout makes one call bounded by RequestTimeout.
func callWithTimeout(ctx context.Context, cfg *Config, call func(context.Context) error) error {
	callCtx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	return call(callCtx)
}
