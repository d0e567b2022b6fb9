// Command worker is one instance of a Kinesis consumer group, for the multi-process failover
// test (tests/live_failover_test.go). It subscribes to a stream through a DynamoDB lease table,
// and for every message it receives it prints one JSON line to stdout, then acks:
//
//	{"worker":"w1","shard":"shardId-000000000002","seq":"4959...","key":"key-07","uuid":"...","payload":"key-07:12","t":1700000000123}
//
// t is when the message was received, in Unix milliseconds. Shard ownership changes are printed
// as events, from the subscriber's hooks:
//
//	{"event":"acquired|revoked|lost","worker":"w1","shard":"shardId-000000000002","t":...}
//
// and the life of the process as {"event":"ready"} once Subscribe returned, {"event":"closed"}
// after Close (with "err" if Close failed, and "close_ms") and {"event":"error"} if it could not
// start. SIGTERM (or SIGINT) closes the subscriber, which checkpoints what was acked and releases
// the leases, and the process exits with status 0 (1 if Close failed). With -stdin-lifeline the
// end of stdin does the same, so that a worker whose parent died (a test binary killed by its
// timeout) does not outlive it. The driver's own log goes to stderr.
//
// Every setting is a flag; the region and credentials fall back to the environment that
// scripts/with-emulators.sh exports (AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), and
// without -kinesis-endpoint and -dynamodb-endpoint the SDK finds the endpoints itself, in
// AWS_ENDPOINT_URL_KINESIS and AWS_ENDPOINT_URL_DYNAMODB (which the script exports too). Durations left at 0 take the driver's defaults,
// which are the production settings: -lease-duration 10s, -lease-renew-interval 3.3s (a third
// of the lease duration), -lease-sync-interval 2s, -checkpoint-interval 5s, -poll-interval
// 400ms, -handoff-timeout 10s. The failover test passes shorter ones (3s, 1s, 500ms, 500ms,
// 100ms, 3s) so that it runs in well under a minute.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/uuid"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// options are the command line.
type options struct {
	stream, group, leaseTable, workerID string
	kinesisEndpoint, dynamoDBEndpoint   string
	region, accessKey, secretKey        string
	maxInFlight                         int
	leaseDuration, leaseRenewInterval   time.Duration
	leaseSyncInterval                   time.Duration
	checkpointInterval, pollInterval    time.Duration
	minReadInterval, handoffTimeout     time.Duration
	closeTimeout                        time.Duration
	debug, stdinLifeline                bool
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.StringVar(&o.stream, "stream", os.Getenv("WORKER_STREAM"), "Kinesis stream to consume (env WORKER_STREAM)")
	fs.StringVar(&o.group, "group", os.Getenv("WORKER_GROUP"), "consumer group (env WORKER_GROUP)")
	fs.StringVar(&o.leaseTable, "lease-table", os.Getenv("WORKER_LEASE_TABLE"), "DynamoDB lease table, created if missing (env WORKER_LEASE_TABLE)")
	fs.StringVar(&o.workerID, "worker-id", os.Getenv("WORKER_ID"), "this instance's name in the leases (env WORKER_ID; default: host name and a UUID)")
	fs.StringVar(&o.kinesisEndpoint, "kinesis-endpoint", "", "Kinesis endpoint URL (empty: the SDK's, AWS_ENDPOINT_URL_KINESIS, else the region's)")
	fs.StringVar(&o.dynamoDBEndpoint, "dynamodb-endpoint", "", "DynamoDB endpoint URL (empty: the SDK's, AWS_ENDPOINT_URL_DYNAMODB, else the region's)")
	fs.StringVar(&o.region, "region", envOr("AWS_REGION", "us-east-1"), "AWS region (env AWS_REGION)")
	fs.StringVar(&o.accessKey, "access-key-id", envOr("AWS_ACCESS_KEY_ID", "test"), "static access key id (env AWS_ACCESS_KEY_ID)")
	fs.StringVar(&o.secretKey, "secret-access-key", envOr("AWS_SECRET_ACCESS_KEY", "test"), "static secret key (env AWS_SECRET_ACCESS_KEY)")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 0, "messages of one shard delivered and not yet acked (0: driver default, 1)")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 0, "LeaseDuration (0: driver default, 10s)")
	fs.DurationVar(&o.leaseRenewInterval, "lease-renew-interval", 0, "LeaseRenewInterval (0: driver default, LeaseDuration/3)")
	fs.DurationVar(&o.leaseSyncInterval, "lease-sync-interval", 0, "LeaseSyncInterval (0: driver default, 2s)")
	fs.DurationVar(&o.checkpointInterval, "checkpoint-interval", 0, "CheckpointInterval (0: driver default, 5s)")
	fs.DurationVar(&o.pollInterval, "poll-interval", 0, "PollInterval (0: driver default, 400ms)")
	fs.DurationVar(&o.minReadInterval, "min-read-interval", 0, "MinReadInterval (0: driver default, 200ms)")
	fs.DurationVar(&o.handoffTimeout, "handoff-timeout", 0, "HandoffTimeout (0: driver default, 10s)")
	fs.DurationVar(&o.closeTimeout, "close-timeout", 0, "CloseTimeout (0: driver default, 30s)")
	fs.BoolVar(&o.debug, "debug", false, "log the driver's debug messages to stderr")
	fs.BoolVar(&o.stdinLifeline, "stdin-lifeline", false, "close and exit, as on SIGTERM, when stdin reaches its end (the parent died)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.stream == "":
		return o, fmt.Errorf("-stream (or WORKER_STREAM) is required")
	case o.group == "":
		return o, fmt.Errorf("-group (or WORKER_GROUP) is required")
	case o.leaseTable == "":
		return o, fmt.Errorf("-lease-table (or WORKER_LEASE_TABLE) is required")
	}
	if o.workerID == "" {
		// The driver's own default, chosen here so that every line names the worker.
		host, _ := os.Hostname()
		o.workerID = host + "-" + uuid.NewString()
	}
	return o, nil
}

// out writes JSON lines to stdout, one Write per line, from any goroutine.
type out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *out) print(v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "worker: writing to stdout: %v\n", err)
	}
}

// delivery is the line printed for each message.
type delivery struct {
	Worker  string `json:"worker"`
	Shard   string `json:"shard"`
	Seq     string `json:"seq"`
	Key     string `json:"key"`
	UUID    string `json:"uuid"`
	Payload string `json:"payload"`
	T       int64  `json:"t"`
}

// event is the line printed for a hook or a change in the life of the process.
type event struct {
	Event   string `json:"event"`
	Worker  string `json:"worker"`
	Shard   string `json:"shard,omitempty"`
	Err     string `json:"err,omitempty"`
	CloseMS int64  `json:"close_ms,omitempty"`
	T       int64  `json:"t"`
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	o, err := parseOptions(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		return 2
	}
	w := &out{enc: json.NewEncoder(os.Stdout)}
	logger := watermill.NewStdLoggerWithOut(os.Stderr, o.debug, false)
	hook := func(name string) func(kinesis.ShardEvent) {
		return func(e kinesis.ShardEvent) {
			w.print(event{Event: name, Worker: e.WorkerID, Shard: e.ShardID, T: time.Now().UnixMilli()})
		}
	}
	cfg, err := subscriberConfig(o)
	if err != nil {
		w.print(event{Event: "error", Worker: o.workerID, Err: err.Error(), T: time.Now().UnixMilli()})
		return 1
	}
	cfg.Group.Hooks.OnAcquired, cfg.Group.Hooks.OnRevoked, cfg.Group.Hooks.OnLost = hook("acquired"), hook("revoked"), hook("lost")

	sub, err := kinesis.NewSubscriber(cfg, logger)
	if err != nil {
		w.print(event{Event: "error", Worker: o.workerID, Err: err.Error(), T: time.Now().UnixMilli()})
		return 1
	}
	// Signals are caught before Subscribe, so a SIGTERM during start-up also closes cleanly.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	msgs, err := sub.Subscribe(context.Background(), o.stream)
	if err != nil {
		w.print(event{Event: "error", Worker: o.workerID, Err: err.Error(), T: time.Now().UnixMilli()})
		_ = sub.Close()
		return 1
	}
	w.print(event{Event: "ready", Worker: o.workerID, T: time.Now().UnixMilli()})

	stop := make(chan struct{})
	var stopOnce sync.Once
	go func() {
		<-signals
		stopOnce.Do(func() { close(stop) })
	}()
	if o.stdinLifeline {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			fmt.Fprintln(os.Stderr, "worker: stdin closed; closing")
			stopOnce.Do(func() { close(stop) })
		}()
	}
	closed := make(chan event, 1)
	go func() {
		<-stop
		start := time.Now()
		cerr := sub.Close()
		e := event{Event: "closed", Worker: o.workerID, CloseMS: time.Since(start).Milliseconds()}
		if cerr != nil {
			e.Err = cerr.Error()
		}
		closed <- e
	}()

	// Close closes msgs, after every reader stopped; messages received until then are printed
	// and acked (an ack after the reader stopped is ignored, and the record redelivered).
	for msg := range msgs {
		d := delivery{Worker: o.workerID, UUID: msg.UUID, Payload: string(msg.Payload), T: time.Now().UnixMilli()}
		if info, ok := kinesis.RecordFromContext(msg.Context()); ok {
			d.Shard, d.Seq, d.Key = info.ShardID, info.SequenceNumber, info.PartitionKey
		}
		w.print(d)
		msg.Ack()
	}
	e := <-closed
	e.T = time.Now().UnixMilli()
	w.print(e)
	if e.Err != "" {
		return 1
	}
	return 0
}

// subscriberConfig builds the group member: Kinesis and DynamoDB clients from one aws.Config
// with static credentials, each at its endpoint (the flag's, else the SDK's setting), and the
// lease table created on demand. The config is loaded as every SDK user's is, so that the
// SDK's own endpoint settings apply.
func subscriberConfig(o options) (kinesis.SubscriberConfig, error) {
	awsCfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(o.region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.accessKey, o.secretKey, "")))
	if err != nil {
		return kinesis.SubscriberConfig{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	cfg := kinesis.SubscriberConfig{
		AWSConfig: &awsCfg,
		Group: kinesis.GroupConfig{
			Name:               o.group,
			LeaseTable:         o.leaseTable,
			CreateLeaseTable:   true,
			WorkerID:           o.workerID,
			LeaseDuration:      o.leaseDuration,
			LeaseRenewInterval: o.leaseRenewInterval,
			LeaseSyncInterval:  o.leaseSyncInterval,
			CheckpointInterval: o.checkpointInterval,
			HandoffTimeout:     o.handoffTimeout,
		},
		MaxInFlight:     o.maxInFlight,
		PollInterval:    o.pollInterval,
		MinReadInterval: o.minReadInterval,
		CloseTimeout:    o.closeTimeout,
	}
	if o.kinesisEndpoint != "" {
		cfg.KinesisOptions = []func(*awskinesis.Options){func(k *awskinesis.Options) { k.BaseEndpoint = aws.String(o.kinesisEndpoint) }}
	}
	if o.dynamoDBEndpoint != "" {
		cfg.Group.DynamoDBOptions = []func(*dynamodb.Options){func(d *dynamodb.Options) { d.BaseEndpoint = aws.String(o.dynamoDBEndpoint) }}
	}
	return cfg, nil
}
