package kinesis

import (
	"context"
	"errors"
	"fmt"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/group"
)

// ErrConsumerLimit is matched by the error (logged at ERROR, then the subscription reads by
// polling) of a stream consumer that could not be registered because the stream has as many
// consumers as Kinesis allows (20 per stream by default). Deregister one that is no longer
// used (DeregisterConsumer), or ask AWS for a higher quota.
var ErrConsumerLimit = group.ErrConsumerLimit

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
