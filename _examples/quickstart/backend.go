package main

// Where the example runs. This file is the same in every example: copy it along with main.go.
//
// By default the example runs on memlog, the in-memory Kinesis, with an in-memory lease store:
// no account, no network, whatever AWS settings the shell has (AWS_REGION and AWS_PROFILE
// included). It runs on Kinesis, with consumer groups' leases in a DynamoDB table
// (-lease-table, or LEASE_TABLE; created if missing), in two cases:
//
//   - an endpoint for Kinesis is set: AWS_ENDPOINT_URL_KINESIS (or AWS_ENDPOINT_URL, for every
//     service), the AWS SDKs' own settings, as scripts/with-emulators.sh exports them for its
//     local servers. The SDK sends the calls there by itself, and the lease table's to
//     AWS_ENDPOINT_URL_DYNAMODB;
//   - -aws: on Amazon Kinesis itself. It creates a stream and a table there, which are billed.
//
// Region and credentials are found as by every AWS SDK (config.LoadDefaultConfig:
// environment, shared files, AWS_PROFILE, instance role).

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
	"run on Amazon Kinesis and DynamoDB (creates a stream and a lease table there, which are billed); default: memlog, unless AWS_ENDPOINT_URL_KINESIS (or AWS_ENDPOINT_URL) names a server")

var leaseTable = flag.String("lease-table", envOr("LEASE_TABLE", "watermill-kinesis-examples"),
	"DynamoDB table of the consumer groups' leases, created if missing (env LEASE_TABLE; not used on memlog)")

// backend completes publisher and subscriber configs with their connection: memlog, or AWS.
type backend struct {
	memlog *memlog.Log // nil on AWS
	leases lease.Store // memlog's lease store

	aws *aws.Config
}

func newBackend(ctx context.Context) (*backend, error) {
	if !*onAWS && os.Getenv("AWS_ENDPOINT_URL_KINESIS") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		fmt.Fprintln(os.Stderr, "running on memlog, the in-memory Kinesis (-aws, or AWS_ENDPOINT_URL_KINESIS for a local server, to run on Kinesis)")
		return &backend{memlog: memlog.New(memlog.Config{}), leases: lease.NewMemoryStore()}, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("no AWS region: set AWS_REGION (for local servers any region will do, with dummy credentials: AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test)")
	}
	// The clients the driver builds from cfg resolve their endpoints as these do; building
	// them here (no call is made) only tells where that is.
	where := "Amazon Kinesis in " + cfg.Region
	if endpoint := kinesis.NewFromConfig(cfg).Options().BaseEndpoint; endpoint != nil {
		where = "Kinesis at " + *endpoint
	}
	table := "DynamoDB table " + *leaseTable
	if endpoint := dynamodb.NewFromConfig(cfg).Options().BaseEndpoint; endpoint != nil {
		table += " at " + *endpoint
	}
	fmt.Fprintf(os.Stderr, "running on %s (leases in %s)\n", where, table)
	return &backend{aws: &cfg}, nil
}

func (b *backend) onMemlog() bool { return b.memlog != nil }

// publisher returns cfg with its connection to Kinesis.
func (b *backend) publisher(cfg wmkinesis.PublisherConfig) wmkinesis.PublisherConfig {
	if b.onMemlog() {
		cfg.Client = b.memlog
		return cfg
	}
	cfg.AWSConfig = b.aws
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
	cfg.AWSConfig = b.aws
	if grouped {
		cfg.Group.LeaseTable, cfg.Group.CreateLeaseTable = *leaseTable, true
	}
	return cfg
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
