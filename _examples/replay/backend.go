package main

// Where the example runs. This file is the same in every example: copy it along with main.go.
//
// Without AWS_REGION (or AWS_DEFAULT_REGION) in the environment, the example runs on memlog,
// the in-memory Kinesis, with an in-memory lease store: no account, no network. With it, on
// Amazon Kinesis, with consumer groups' leases in a DynamoDB table (-lease-table, or
// LEASE_TABLE; created if missing) and credentials found as by every AWS SDK
// (config.LoadDefaultConfig: environment, shared files, AWS_PROFILE, instance role).
// KINESIS_ENDPOINT and DYNAMODB_ENDPOINT point the clients at local servers, such as the
// kinesalite and dynalite that scripts/with-emulators.sh starts.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	wmkinesis "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

var leaseTable = flag.String("lease-table", envOr("LEASE_TABLE", "watermill-kinesis-examples"),
	"DynamoDB table of the consumer groups' leases, created if missing (env LEASE_TABLE; AWS only)")

// backend completes publisher and subscriber configs with their connection: memlog, or AWS.
type backend struct {
	memlog *memlog.Log // nil on AWS
	leases lease.Store // memlog's lease store

	aws             *aws.Config
	kinesisOptions  []func(*kinesis.Options)
	dynamoDBOptions []func(*dynamodb.Options)
}

func newBackend(ctx context.Context) (*backend, error) {
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		fmt.Fprintln(os.Stderr, "running on memlog, the in-memory Kinesis (set AWS_REGION to run on Kinesis)")
		return &backend{memlog: memlog.New(memlog.Config{}), leases: lease.NewMemoryStore()}, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	b := &backend{aws: &cfg}
	where := "Kinesis in " + cfg.Region
	if endpoint := os.Getenv("KINESIS_ENDPOINT"); endpoint != "" {
		b.kinesisOptions = append(b.kinesisOptions, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(endpoint) })
		where = "Kinesis at " + endpoint
	}
	if endpoint := os.Getenv("DYNAMODB_ENDPOINT"); endpoint != "" {
		b.dynamoDBOptions = append(b.dynamoDBOptions, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	}
	fmt.Fprintf(os.Stderr, "running on %s (leases in DynamoDB table %s)\n", where, *leaseTable)
	return b, nil
}

func (b *backend) onMemlog() bool { return b.memlog != nil }

// publisher returns cfg with its connection to Kinesis.
func (b *backend) publisher(cfg wmkinesis.PublisherConfig) wmkinesis.PublisherConfig {
	if b.onMemlog() {
		cfg.Client = b.memlog
		return cfg
	}
	cfg.AWSConfig, cfg.KinesisOptions = b.aws, b.kinesisOptions
	return cfg
}

// subscriber returns cfg with its connection to Kinesis and, for a consumer group, to the
// lease store.
func (b *backend) subscriber(cfg wmkinesis.SubscriberConfig) wmkinesis.SubscriberConfig {
	grouped := cfg.ConsumerGroup != ""
	if b.onMemlog() {
		cfg.Client = b.memlog
		if grouped {
			cfg.LeaseStore = b.leases
		}
		if cfg.PollInterval == 0 {
			cfg.PollInterval = 50 * time.Millisecond // memlog has no read limits: poll it often
		}
		return cfg
	}
	cfg.AWSConfig, cfg.KinesisOptions = b.aws, b.kinesisOptions
	if grouped {
		cfg.LeaseTable, cfg.CreateLeaseTable, cfg.DynamoDBOptions = *leaseTable, true, b.dynamoDBOptions
	}
	return cfg
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
