package kinesis

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

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
)

// ErrConsumerLimit is matched by the error (logged at ERROR, then the subscription reads by
// polling) of a stream consumer that could not be registered because the stream has as many
// consumers as Kinesis allows (20 per stream by default). Deregister one that is no longer
// used (DeregisterConsumer), or ask AWS for a higher quota.
var ErrConsumerLimit = errors.New("kinesis: the stream has as many registered consumers as Kinesis allows")

// maxConsumerNameLength is the longest stream consumer name Kinesis accepts.
const maxConsumerNameLength = 128

// validConsumerName reports whether Kinesis accepts name as a stream consumer name: 1 to 128
// characters of a-z, A-Z, 0-9, '_', '.' and '-', as a stream name.
func validConsumerName(name string) bool {
	if name == "" || len(name) > maxConsumerNameLength {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch ch := name[i]; {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '_', ch == '.', ch == '-':
		default:
			return false
		}
	}
	return true
}

// validateFanOut is Validate's part for FanOut, on a config with its defaults filled in.
func (c SubscriberConfig) validateFanOut() []error {
	f := c.FanOut
	if !f.Enabled {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kinesis: SubscriberConfig.FanOut."+format, args...))
	}
	if c.Group.Name == "" {
		add("Enabled is set but Group.Name is empty; enhanced fan-out reads through one stream consumer per consumer group, whose leases keep one reader per shard on it (without them, every subscription would take the others' SubscribeToShard subscriptions over): name the group")
	} else if !validConsumerName(f.ConsumerName) {
		if f.ConsumerName == c.Group.Name {
			add("ConsumerName defaults to Group.Name %q, which Kinesis does not accept as a stream consumer name (1 to 128 characters of a-z, A-Z, 0-9, '_', '.', '-'); set FanOut.ConsumerName", f.ConsumerName)
		} else {
			add("ConsumerName %q is not a name Kinesis accepts for a stream consumer (1 to 128 characters of a-z, A-Z, 0-9, '_', '.', '-')", f.ConsumerName)
		}
	}
	if c.Client != nil && !isNil(c.Client) {
		if _, ok := c.Client.(FanOutAPI); !ok {
			add("Enabled is set but Client, a %T, lacks RegisterStreamConsumer, DescribeStreamConsumer, DeregisterStreamConsumer or SubscribeToShard (FanOutAPI); pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log", c.Client)
		}
	}
	if f.RegisterTimeout < 0 {
		add("RegisterTimeout is %s; it must not be negative", f.RegisterTimeout)
	}
	return errs
}

// fanOutConsumer is a subscription's stream consumer. Its readers read the ARN at each
// subscription (current, from any goroutine, without waiting); one that finds the consumer gone
// (deregistered, perhaps registered again under a new ARN by another instance) finds or
// registers it again through refresh, once for all of them.
type fanOutConsumer struct {
	arn atomic.Pointer[string]
	// refreshing holds a token through a refresh, so that readers that find the consumer
	// gone at the same time wait for its outcome instead of registering it each; a channel,
	// so that a reader that stops meanwhile does not wait on.
	refreshing chan struct{}
}

func newFanOutConsumer(arn string) *fanOutConsumer {
	f := &fanOutConsumer{refreshing: make(chan struct{}, 1)}
	f.arn.Store(&arn)
	return f
}

// current is the consumer's ARN.
func (f *fanOutConsumer) current() string { return *f.arn.Load() }

// refresh finds or registers the consumer again after a subscription through stale found it
// gone, and returns its ARN; a refresh that another reader made meanwhile is taken as it is.
func (f *fanOutConsumer) refresh(ctx context.Context, c *subscription, stale string) (string, error) {
	select {
	case f.refreshing <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-f.refreshing }()
	if cur := f.current(); cur != stale {
		return cur, nil
	}
	arn, err := ensureConsumer(ctx, c.cfg, c.stream, c.logger, c.logFields())
	if err != nil {
		return "", err
	}
	f.arn.Store(&arn)
	return arn, nil
}

// startFanOut finds or registers the group's stream consumer before the readers start, and
// sets fanOut, which makes them read with SubscribeToShard. A stream at its consumer limit
// falls back to polling, with an ERROR that says what to do; any other failure fails Subscribe.
func (c *subscription) startFanOut() error {
	if !c.cfg.FanOut.Enabled {
		return nil
	}
	arn, err := ensureConsumer(c.ctx, c.cfg, c.stream, c.logger, c.logFields())
	switch {
	case errors.Is(err, ErrConsumerLimit):
		c.logger.Error("Enhanced fan-out is unavailable; reading by polling (GetRecords) instead", err, c.logFields().Add(watermill.LogFields{
			"consumer": c.cfg.FanOut.ConsumerName,
			"what_to_do": "deregister a consumer of the stream that is no longer used (kinesis.DeregisterConsumer), or ask AWS for a higher quota; " +
				"restart the subscription to read with enhanced fan-out again"}))
		return nil
	case err != nil:
		return err
	}
	c.fanOut = newFanOutConsumer(arn)
	return nil
}

// consumerPoll is the wait between two looks at a stream consumer that is being created or
// deleted, and the first wait after a throttled call.
const consumerPoll = time.Second

// maxStreamConsumers is how many consumers Kinesis lets a stream have registered at once.
const maxStreamConsumers = 20

// ensureConsumer returns the ARN of the ACTIVE stream consumer cfg.FanOut.ConsumerName of
// stream, registering it if it does not exist and waiting (up to FanOut.RegisterTimeout) while
// it is being created. Several instances of a group may run it at once: a registration that
// finds the consumer registered by another instance just goes on waiting for it.
func ensureConsumer(ctx context.Context, cfg SubscriberConfig, stream string, logger watermill.LoggerAdapter, fields watermill.LogFields) (string, error) {
	api := cfg.Client.(FanOutAPI) // Validate checked it
	name := cfg.FanOut.ConsumerName
	fail := func(format string, args ...any) error {
		return fmt.Errorf("kinesis: enhanced fan-out on stream %q, consumer %q: "+format, append([]any{stream, name}, args...)...)
	}
	summary, err := describeStream(ctx, cfg, stream)
	if err != nil {
		return "", fail("%w", err)
	}
	streamARN := *summary.StreamARN
	deadline := cfg.Clock.Now().Add(cfg.FanOut.RegisterTimeout)
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
				if s, err := describeStream(ctx, cfg, stream); err == nil && aws.ToInt32(s.ConsumerCount) >= maxStreamConsumers {
					return "", fail("%w (%d consumers registered; RegisterStreamConsumer: %w)", ErrConsumerLimit, aws.ToInt32(s.ConsumerCount), rerr)
				}
			default:
				return "", fail("registering the stream consumer (IAM needs kinesis:RegisterStreamConsumer and kinesis:DescribeStreamConsumer on the stream): %w", rerr)
			}
		default:
			if c := classify(ctx, err); c != classThrottled && c != classTransient {
				return "", fail("describing the stream consumer (IAM needs kinesis:DescribeStreamConsumer): %w", err)
			}
			throttled++
		}
		if !cfg.Clock.Now().Before(deadline) {
			if lastLimit != nil && status == "" {
				return "", fail("%w (RegisterStreamConsumer kept failing with LimitExceededException for FanOut.RegisterTimeout, %s: %w)", ErrConsumerLimit, cfg.FanOut.RegisterTimeout, lastLimit)
			}
			return "", fail("the consumer is still %q after FanOut.RegisterTimeout (%s); raise it, or check the consumer in the AWS console", status, cfg.FanOut.RegisterTimeout)
		}
		wait := consumerPoll
		if limited > 0 || throttled > 0 {
			wait = backoff(max(limited, throttled)-1, consumerPoll, 8*consumerPoll)
		}
		if err := sleepOn(ctx, cfg.Clock, wait); err != nil {
			return "", fail("waiting for the consumer to become ACTIVE: %w", err)
		}
	}
}

// registerConsumer registers the stream consumer name, bounded by RequestTimeout.
func registerConsumer(ctx context.Context, cfg SubscriberConfig, api FanOutAPI, streamARN, name string) (*types.Consumer, error) {
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
func describeStream(ctx context.Context, cfg SubscriberConfig, stream string) (*types.StreamDescriptionSummary, error) {
	for attempt := 0; ; attempt++ {
		var out *awskinesis.DescribeStreamSummaryOutput
		err := callWithTimeout(ctx, cfg, func(ctx context.Context) (err error) {
			out, err = cfg.Client.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: &stream})
			return err
		})
		if err == nil {
			if out.StreamDescriptionSummary == nil || out.StreamDescriptionSummary.StreamARN == nil {
				return nil, errors.New("DescribeStreamSummary returned no stream ARN")
			}
			return out.StreamDescriptionSummary, nil
		}
		switch classify(ctx, err) {
		case classNotFound:
			return nil, fmt.Errorf("%w: %w", ErrStreamNotFound, err)
		case classThrottled, classTransient:
			if attempt+1 < readFailuresBeforeError {
				if err := sleepOn(ctx, cfg.Clock, backoff(attempt, 100*time.Millisecond, 5*time.Second)); err == nil {
					continue
				}
			}
		}
		return nil, fmt.Errorf("describing the stream (IAM needs kinesis:DescribeStreamSummary): %w", err)
	}
}

// callWithTimeout makes one call bounded by RequestTimeout on the config's clock.
func callWithTimeout(ctx context.Context, cfg SubscriberConfig, call func(context.Context) error) error {
	callCtx, cancel := clock.WithTimeout(ctx, cfg.Clock, cfg.RequestTimeout)
	defer cancel()
	return call(callCtx)
}

// DeregisterConsumer deregisters the stream consumer that a consumer group reads through with
// enhanced fan-out (SubscriberConfig.FanOut; its ConsumerName, by default the group's name).
// Close never does this, since the group's other instances read through the same consumer:
// call it when the group is gone for good, to stop the consumer's hourly charge on AWS and to
// free its place among the stream's consumers. Subscriptions still reading through it stop
// receiving records. A consumer that does not exist is not an error. IAM needs
// kinesis:DeregisterStreamConsumer.
func DeregisterConsumer(ctx context.Context, client KinesisAPI, stream, consumerName string) error {
	fail := func(err error) error {
		return fmt.Errorf("kinesis: deregistering consumer %q of stream %q: %w", consumerName, stream, err)
	}
	api, ok := client.(FanOutAPI)
	if !ok || isNil(client) {
		return fail(fmt.Errorf("the client, a %T, lacks the stream consumer calls (FanOutAPI)", client))
	}
	if err := validateStreamName(stream); err != nil {
		return fail(err)
	}
	if !validConsumerName(consumerName) {
		return fail(errors.New("not a name Kinesis accepts for a stream consumer (1 to 128 characters of a-z, A-Z, 0-9, '_', '.', '-')"))
	}
	out, err := client.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: &stream})
	if err != nil {
		return fail(err)
	}
	if out.StreamDescriptionSummary == nil || out.StreamDescriptionSummary.StreamARN == nil {
		return fail(errors.New("DescribeStreamSummary returned no stream ARN"))
	}
	_, err = api.DeregisterStreamConsumer(ctx, &awskinesis.DeregisterStreamConsumerInput{
		StreamARN: out.StreamDescriptionSummary.StreamARN, ConsumerName: &consumerName,
	})
	var notFound *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &notFound) {
		return fail(err)
	}
	return nil
}
