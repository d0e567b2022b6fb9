// Command firstdelivery measures how soon a fresh consumer group starts delivering a backlog.
//
// Each run creates a fresh 4-shard stream, publishes a backlog of 200 messages to it with
// kinesis.NewPublisher, then opens a grouped kinesis.NewSubscriber with a fresh Group.Name
// (InitialPosition at its default, TRIM_HORIZON; every group setting at its default:
// LeaseDuration, LeaseSyncInterval, HandoffTimeout, PollInterval, ...) and measures:
//
//	subscribe: how long the Subscribe call itself takes;
//	first:     the time from calling Subscribe to receiving the first message on the
//	           returned channel;
//	all:       the time from calling Subscribe to receiving all 200 messages (extra figure).
//
// Every message is acked. The subscriber is closed after each run (not timed). It repeats this
// -runs times (default 5), with fresh stream and group names each time, and prints each run and
// the median of each figure.
//
// Backends (-backend):
//
//	memlog     memlog.New(memlog.Config{}) as the Kinesis client and lease.NewMemoryStore() as
//	           Group.LeaseStore (one of each for the whole program, fresh names per run).
//	emulators  the AWS SDK against $KINESIS_ENDPOINT (kinesalite) and $DYNAMODB_ENDPOINT
//	           (dynalite), static credentials, region us-east-1; leases in a DynamoDB table
//	           opened through Group.LeaseTable with Group.CreateLeaseTable (one table per
//	           program invocation; it is created by the first run's NewSubscriber, which is not
//	           timed). Run it with the servers up:
//
//	go run ./tests/firstdelivery -backend memlog
//	scripts/with-emulators.sh go run ./tests/firstdelivery -backend emulators
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

const (
	shards  = 4
	backlog = 200
)

var (
	backendFlag = flag.String("backend", "memlog", "memlog or emulators")
	runs        = flag.Int("runs", 5, "how many runs, each on a fresh stream and group")
	timeout     = flag.Duration("timeout", 2*time.Minute, "how long a run may wait for the backlog")
	verbose     = flag.Bool("v", false, "log the driver's Info lines to stderr")
)

// backend completes publisher and subscriber configs with their connection.
type backend struct {
	// memlog
	log    *memlog.Log
	leases lease.Store
	// emulators
	awsCfg     *aws.Config
	kinesisOpt func(*awskinesis.Options)
	dynamoOpt  func(*dynamodb.Options)
	leaseTable string
}

func newBackend(name string) (*backend, error) {
	switch name {
	case "memlog":
		return &backend{log: memlog.New(memlog.Config{}), leases: lease.NewMemoryStore()}, nil
	case "emulators":
		k, d := os.Getenv("KINESIS_ENDPOINT"), os.Getenv("DYNAMODB_ENDPOINT")
		if k == "" || d == "" {
			return nil, fmt.Errorf("KINESIS_ENDPOINT and DYNAMODB_ENDPOINT must be set: run under scripts/with-emulators.sh")
		}
		cfg := aws.Config{
			Region:      "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		}
		return &backend{
			awsCfg:     &cfg,
			kinesisOpt: func(o *awskinesis.Options) { o.BaseEndpoint = aws.String(k) },
			dynamoOpt:  func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(d) },
			leaseTable: "firstdelivery-" + watermill.NewShortUUID(),
		}, nil
	}
	return nil, fmt.Errorf("unknown -backend %q: memlog or emulators", name)
}

func (b *backend) publisherConfig() kinesis.PublisherConfig {
	cfg := kinesis.PublisherConfig{CreateStream: true, CreateStreamShards: shards}
	if b.log != nil {
		cfg.Client = b.log
	} else {
		cfg.AWSConfig, cfg.KinesisOptions = b.awsCfg, []func(*awskinesis.Options){b.kinesisOpt}
	}
	return cfg
}

// subscriberConfig is a grouped subscriber with every setting at its default.
func (b *backend) subscriberConfig(group string) kinesis.SubscriberConfig {
	cfg := kinesis.SubscriberConfig{Group: kinesis.GroupConfig{Name: group}}
	if b.log != nil {
		cfg.Client = b.log
		cfg.Group.LeaseStore = b.leases
	} else {
		cfg.AWSConfig, cfg.KinesisOptions = b.awsCfg, []func(*awskinesis.Options){b.kinesisOpt}
		cfg.Group.LeaseTable, cfg.Group.CreateLeaseTable = b.leaseTable, true
		cfg.Group.DynamoDBOptions = []func(*dynamodb.Options){b.dynamoOpt}
	}
	return cfg
}

type result struct {
	subscribe, first, all time.Duration
}

func run(b *backend, i int, logger watermill.LoggerAdapter) (result, error) {
	id := watermill.NewShortUUID()
	stream, group := fmt.Sprintf("firstdelivery-%d-%s", i, id), "group-"+id

	pub, err := kinesis.NewPublisher(b.publisherConfig(), logger)
	if err != nil {
		return result{}, fmt.Errorf("NewPublisher: %w", err)
	}
	defer pub.Close()
	msgs := make([]*message.Message, backlog)
	for j := range msgs {
		msgs[j] = message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("message %d", j)))
	}
	if err := pub.Publish(stream, msgs...); err != nil {
		return result{}, fmt.Errorf("publishing the backlog: %w", err)
	}

	sub, err := kinesis.NewSubscriber(b.subscriberConfig(group), logger)
	if err != nil {
		return result{}, fmt.Errorf("NewSubscriber: %w", err)
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var r result
	start := time.Now()
	ch, err := sub.Subscribe(ctx, stream)
	r.subscribe = time.Since(start)
	if err != nil {
		return r, fmt.Errorf("Subscribe: %w", err)
	}
	deadline := time.After(*timeout)
	seen := map[string]bool{}
	for len(seen) < backlog {
		select {
		case msg, ok := <-ch:
			if !ok {
				return r, fmt.Errorf("channel closed after %d of %d messages", len(seen), backlog)
			}
			if len(seen) == 0 {
				r.first = time.Since(start)
			}
			seen[msg.UUID] = true
			msg.Ack()
		case <-deadline:
			return r, fmt.Errorf("%d of %d messages within %s", len(seen), backlog, *timeout)
		}
	}
	r.all = time.Since(start)
	return r, nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func main() {
	flag.Parse()
	b, err := newBackend(*backendFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "firstdelivery:", err)
		os.Exit(2)
	}
	var logger watermill.LoggerAdapter = watermill.NopLogger{}
	if *verbose {
		logger = watermill.NewStdLoggerWithOut(os.Stderr, false, false)
	}
	fmt.Printf("first delivery of a fresh consumer group: backend=%s, %d shards, backlog %d messages, default group settings, %d runs\n",
		*backendFlag, shards, backlog, *runs)
	var subs, firsts, alls []time.Duration
	failed := 0
	for i := 1; i <= *runs; i++ {
		r, err := run(b, i, logger)
		if err != nil {
			failed++
			fmt.Printf("run %d: FAILED: %v (subscribe %s, first %s)\n", i, err, ms(r.subscribe), ms(r.first))
			continue
		}
		subs, firsts, alls = append(subs, r.subscribe), append(firsts, r.first), append(alls, r.all)
		fmt.Printf("run %d: subscribe %s, first message %s, all %d messages %s\n", i, ms(r.subscribe), ms(r.first), backlog, ms(r.all))
	}
	fmt.Println(strings.Repeat("-", 60))
	fmt.Printf("median of %d runs: subscribe %s, first message %s, all %d messages %s\n",
		len(subs), ms(median(subs)), ms(median(firsts)), backlog, ms(median(alls)))
	if failed > 0 {
		fmt.Printf("%d of %d runs failed\n", failed, *runs)
		os.Exit(1)
	}
}
