package main

// Where the example runs. This file is the same in every example: copy it along with main.go.
//
// By default the example runs on memlog, the in-memory Kinesis, with an in-memory lease store:
// no account, no network, whatever AWS settings the shell has. It runs on Kinesis, with
// consumer groups' leases in a DynamoDB table (-lease-table, or LEASE_TABLE; created if
// missing), when KINESIS_ENDPOINT names a local server (DYNAMODB_ENDPOINT then names the lease
// table's, as scripts/with-emulators.sh exports both), or, on Amazon Kinesis itself, only with
// -aws: it creates a stream and a table there, which are billed. Region and credentials are
// found as by every AWS SDK (config.LoadDefaultConfig: environment, shared files,
// AWS_PROFILE, instance role).

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

var onAWS = flag.Bool("aws", false,
	"run on Amazon Kinesis and DynamoDB (creates a stream and a lease table there, which are billed); default: memlog, unless KINESIS_ENDPOINT names a local server")

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
	if !*onAWS && os.Getenv("KINESIS_ENDPOINT") == "" {
		fmt.Fprintln(os.Stderr, "running on memlog, the in-memory Kinesis (-aws, or KINESIS_ENDPOINT for a local server, to run on Kinesis)")
		return &backend{memlog: memlog.New(memlog.Config{}), leases: lease.NewMemoryStore()}, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("no AWS region: set AWS_REGION (for local servers any region will do, with dummy credentials: AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test)")
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
	grouped := cfg.Group.Name != ""
	if b.onMemlog() {
		cfg.Client = b.memlog
		if grouped {
			cfg.Group.LeaseStore = b.leases
		}
		if cfg.PollInterval == 0 {
			cfg.PollInterval = 50 * time.Millisecond // memlog has no read limits: poll it often
		}
		return cfg
	}
	cfg.AWSConfig, cfg.KinesisOptions = b.aws, b.kinesisOptions
	if grouped {
		cfg.Group.LeaseTable, cfg.Group.CreateLeaseTable, cfg.Group.DynamoDBOptions = *leaseTable, true, b.dynamoDBOptions
	}
	return cfg
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
