// Command kinesis-leases prints a consumer group's leases on a Kinesis stream, one line per
// shard: its state (open, closed, gone), owner, generation, checkpoint, parents, a pending
// handoff, and how long the oldest record the group has not finished has been waiting; then one
// line per owner: how many leases it holds and when it was last seen to move a counter (a
// lease renewal or checkpoint, or its member record's heartbeat), or that it did not move while
// watched and may be dead; then a summary with the lag by time (the most any shard is behind,
// and which).
//
//	kinesis-leases -stream orders -group billing -table leases [-json] [-region us-east-1]
//	               [-endpoint-kinesis URL] [-endpoint-dynamodb URL] [-skip-behind] [-watch 4s] [-timeout 1m]
//	kinesis-leases -stream orders -table billing-app -kcl [-multi-stream] [-group billing-app] [-json] ...
//	kinesis-leases reset -stream orders -group billing -table leases -to POSITION [-shard ID] [-dry-run]
//	               [-settle] [-wait 30s] [-json] [-kcl] [-timeout 2m] ...
//
// The reset subcommand moves the group's position, live, through the lease protocol
// (admin.ResetGroup): POSITION is trim-horizon, latest, an RFC 3339 time, or, with -shard,
// at-sequence:SEQ or after-sequence:SEQ. -dry-run prints per shard its owner and checkpoint
// and where it would go, and writes nothing; the reset prints per shard what it did, and with
// -wait which worker applied it and when. Its exit status is 0 done (or dry run printed), 1
// the reset failed, 2 a bad command line. See kinesis-leases reset -help, and the runbook in
// docs/operating.md. The rest of this comment is about the inspection.
//
// To see which owners are alive, it watches the leases and member records for -watch (default
// 4s: the default lease renewal interval, 3.3 s, plus a margin), listing them again every
// -watch/8 (at least 250 ms apart) while it measures the shards: it takes -watch, or as long as
// measuring the shards takes if that is longer. -watch 0 lists them once, and then says nothing of the owners'
// liveness. A group with a longer LeaseRenewInterval and no member records (-kcl) needs a -watch
// longer than that interval.
//
// It only reads: ListShards, a Query of each of the lease table's partitions of the group's
// leases and of its member records at each look (with -kcl, a Scan of the leases, and no member
// records), and for each shard not at SHARD_END one GetShardIterator and one GetRecords with
// Limit 1 (which count against the shard's 5 reads per second, shared with the group;
// -skip-behind leaves them out). See admin.InspectLeases for what every field means.
//
// With -kcl, -table is the lease table of a Kinesis Client Library (KCL) application, or of
// subscribers on one (kcl.Store), and -group defaults to the table's name, which the KCL
// names after the application; -multi-stream says the application reads several streams. The
// leases are read with a strongly consistent Scan of that table (paged) instead of Queries, and
// only the lease table is opened (kcl.Config.LeasesOnly); the report is the same. A KCL
// checkpoint inside an aggregate reads as "seq:sub", one at TRIM_HORIZON, LATEST or
// AT_TIMESTAMP as no checkpoint.
//
// The region comes from -region, else AWS_REGION, else AWS_DEFAULT_REGION. Credentials are
// found as every AWS SDK finds them: environment variables, shared config and credentials
// files (AWS_PROFILE), then a container or instance role. So are the endpoints: -endpoint-kinesis
// and -endpoint-dynamodb, else the SDK's own AWS_ENDPOINT_URL_KINESIS and
// AWS_ENDPOINT_URL_DYNAMODB (or AWS_ENDPOINT_URL, or a profile's endpoint_url; the shell of
// scripts/with-emulators.sh sets the first two), else the region's AWS endpoints. A failure
// to reach one says which address was tried and what chose it.
//
// Exit status: 0 when the report is complete; 1 when it could not be made (stream or table
// missing, AWS unreachable), or some shard could not be measured (the report is still printed,
// and the reasons go to stderr); 2 for a bad command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/kcl"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// options is the command line.
type options struct {
	stream, group, table              string
	json, skipBehind                  bool
	kcl, multiStream                  bool
	kinesisEndpoint, dynamoDBEndpoint string
	region                            string
	timeout, watch                    time.Duration
}

// usageError is a command line that cannot run; run prints it with a hint to -help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command, with its streams and arguments passed in so that tests can run it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "reset" {
		return runReset(ctx, args[1:], stdout, stderr)
	}
	o, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var usage *usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(stderr, "kinesis-leases: %s\nRun kinesis-leases -help for the flags.\n", err)
		return exitUsage
	}
	if err != nil { // the flag package has printed the problem and the flags
		return exitUsage
	}
	awsCfg, err := awsConfig(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "kinesis-leases: %s\n", err)
		return exitUsage
	}
	o.region = awsCfg.Region // for the hints: it may come from the profile
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	report, err := inspect(ctx, o, awsCfg)
	if err != nil {
		fmt.Fprintf(stderr, "kinesis-leases: %s\n", explain(o, err))
		return exitError
	}
	if o.json {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kinesis-leases: %s\n", err)
		return exitError
	}
	noteOddities(o, report, stderr)
	if err := report.Err(); err != nil {
		fmt.Fprintf(stderr, "kinesis-leases: some shards could not be measured:\n%s\n", err)
		return exitError
	}
	return exitOK
}

var (
	streamNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)
	tableNamePattern  = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)
)

// parseOptions reads the flags and reports every problem with them at once.
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("kinesis-leases", flag.ContinueOnError)
	fs.SetOutput(stderr)
	commonFlags(fs, &o)
	fs.BoolVar(&o.skipBehind, "skip-behind", false, "do not read the shards to measure how far behind the group is")
	fs.DurationVar(&o.watch, "watch", admin.DefaultInspectWatch, "watch the leases and member records this long for moving counters, to tell live owners from dead ones (0: look once, and say nothing of liveness); the command takes this long at least")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "give up after this long (must be longer than -watch)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kinesis-leases -stream S -group G -table T [-json] [flags]\n"+
			"       kinesis-leases -stream S -table KCL_APPLICATION -kcl [-multi-stream] [-group G] [-json] [flags]\n"+
			"       kinesis-leases reset -stream S -group G -table T -to POSITION [-shard ID] [-dry-run] [flags]   (kinesis-leases reset -help)\n\n"+
			"Prints a consumer group's leases on a Kinesis stream: per shard its state, owner, generation,\n"+
			"checkpoint, parents, pending handoff and how far behind the group is; per owner its leases and\n"+
			"when it was last seen to move a counter (renewal, checkpoint or heartbeat), or that it did not\n"+
			"and may be dead; then the lag by time (the most any shard is behind, and which).\n\n"+
			"It watches the leases for -watch (default 4s) to see the owners move, so it takes 4 s, or longer\n"+
			"if measuring the shards takes longer; -watch 0 looks once and says nothing of liveness.\n\n"+
			"With -kcl it reads a KCL application's lease table instead, and\n"+
			"-group defaults to the table's name (the KCL application's name); owners are then judged by their\n"+
			"lease counters alone (KCL workers keep no member records).\n\n"+
			credentialsHelp+"\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	problems := commonProblems(fs, &o)
	switch {
	case o.watch < 0:
		problems = append(problems, fmt.Sprintf("-watch is %s; it must not be negative (-watch 0 looks once)", o.watch))
	case o.timeout > 0 && o.timeout <= o.watch:
		problems = append(problems, fmt.Sprintf("-timeout %s is not longer than -watch %s, so the command would give up before it reports: raise -timeout or shorten -watch", o.timeout, o.watch))
	}
	if len(problems) > 0 {
		return o, &usageError{msg: strings.Join(problems, "\n  ")}
	}
	return o, nil
}

// credentialsHelp ends each mode's help.
const credentialsHelp = "Credentials, region and endpoints are found as by every AWS SDK: environment (AWS_REGION,\n" +
	"AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL_DYNAMODB, ...), shared files (AWS_PROFILE), container\n" +
	"or instance role; the flags below override them."

// commonFlags are the flags of both modes: which group, where, and how to print.
func commonFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.stream, "stream", "", "Kinesis stream (required)")
	fs.StringVar(&o.group, "group", "", "consumer group, as in SubscriberConfig.Group.Name (required; with -kcl, default: the -table, as the KCL names its table after the application)")
	fs.StringVar(&o.table, "table", "", "DynamoDB lease table of the group, as in SubscriberConfig.Group.LeaseTable, or with -kcl the KCL application's (required)")
	fs.BoolVar(&o.kcl, "kcl", false, "-table is the lease table of a Kinesis Client Library (KCL) application (read with a Scan; see kcl.Store)")
	fs.BoolVar(&o.multiStream, "multi-stream", false, "with -kcl: the KCL application is a multi-stream one (its lease keys name the stream)")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	fs.StringVar(&o.kinesisEndpoint, "endpoint-kinesis", "", "Kinesis endpoint URL (default: $AWS_ENDPOINT_URL_KINESIS, else $AWS_ENDPOINT_URL, else the region's AWS endpoint)")
	fs.StringVar(&o.dynamoDBEndpoint, "endpoint-dynamodb", "", "DynamoDB endpoint URL (default: $AWS_ENDPOINT_URL_DYNAMODB, else $AWS_ENDPOINT_URL, else the region's AWS endpoint)")
	fs.StringVar(&o.region, "region", "", "AWS region (default: $AWS_REGION, else $AWS_DEFAULT_REGION, else the shared config's, e.g. of $AWS_PROFILE)")
}

// commonProblems fills in the defaults of the common flags and lists what is wrong with them.
func commonProblems(fs *flag.FlagSet, o *options) []string {
	if o.kcl && o.group == "" {
		o.group = o.table // the KCL's default table name is its application name
	}
	if o.region == "" {
		o.region = os.Getenv("AWS_REGION")
	}
	if o.region == "" {
		o.region = os.Getenv("AWS_DEFAULT_REGION")
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected argument %q: every setting is a flag", fs.Arg(0)))
	}
	required := func(flag, value, what string) bool {
		if value == "" {
			problems = append(problems, fmt.Sprintf("-%s is missing: %s", flag, what))
		}
		return value != ""
	}
	if required("stream", o.stream, "name the Kinesis stream") && !streamNamePattern.MatchString(o.stream) {
		problems = append(problems, fmt.Sprintf("-stream %q is not a Kinesis stream name (1 to 128 of a-z, A-Z, 0-9, '_', '.', '-')", o.stream))
	}
	if !o.kcl { // with -kcl it defaults to -table
		required("group", o.group, "name the consumer group (or, for a KCL application's lease table, set -kcl)")
	}
	if required("table", o.table, "name the group's DynamoDB lease table") && !tableNamePattern.MatchString(o.table) {
		problems = append(problems, fmt.Sprintf("-table %q is not a DynamoDB table name (3 to 255 of a-z, A-Z, 0-9, '_', '.', '-')", o.table))
	}
	for _, e := range []struct{ flag, value string }{{"endpoint-kinesis", o.kinesisEndpoint}, {"endpoint-dynamodb", o.dynamoDBEndpoint}} {
		if e.value == "" {
			continue
		}
		if u, err := url.Parse(e.value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("-%s %q is not an http:// or https:// URL", e.flag, e.value))
		}
	}
	if o.multiStream && !o.kcl {
		problems = append(problems, "-multi-stream is set without -kcl: it says which kind of KCL lease table -table is")
	}
	if o.timeout <= 0 {
		problems = append(problems, fmt.Sprintf("-timeout is %s; it must be positive", o.timeout))
	}
	return problems
}

// awsConfig loads the SDK config as every AWS SDK does, with -region if given.
func awsConfig(ctx context.Context, o options) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if o.region != "" {
		opts = append(opts, config.WithRegion(o.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration (environment, shared config and credentials files): %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("-region is missing: pass -region, set AWS_REGION, or give the profile a region")
	}
	return cfg, nil
}

// inspect opens the lease table (never creating it) and inspects the group. Without the
// endpoint flags, the SDK picks each client's endpoint from awsCfg (AWS_ENDPOINT_URL_KINESIS,
// AWS_ENDPOINT_URL_DYNAMODB, ..., else the region's).
func inspect(ctx context.Context, o options, awsCfg aws.Config) (admin.GroupReport, error) {
	kc, dc := clients(o, awsCfg)
	store, err := openStore(ctx, o, dc)
	if err != nil {
		return admin.GroupReport{}, fmt.Errorf("opening the lease table: %w", err)
	}
	watch := o.watch
	if watch == 0 {
		watch = admin.NoWatch
	}
	return admin.InspectLeases(ctx, admin.InspectConfig{
		Stream:        o.stream,
		ConsumerGroup: o.group,
		Client:        kc,
		LeaseStore:    store,
		SkipBehind:    o.skipBehind,
		Watch:         watch,
	})
}

// clients are the Kinesis and DynamoDB clients, at the endpoint flags if set.
func clients(o options, awsCfg aws.Config) (*awskinesis.Client, *dynamodb.Client) {
	kc := awskinesis.NewFromConfig(awsCfg, func(k *awskinesis.Options) {
		if o.kinesisEndpoint != "" {
			k.BaseEndpoint = aws.String(o.kinesisEndpoint)
		}
	})
	dc := dynamodb.NewFromConfig(awsCfg, func(d *dynamodb.Options) {
		if o.dynamoDBEndpoint != "" {
			d.BaseEndpoint = aws.String(o.dynamoDBEndpoint)
		}
	})
	return kc, dc
}

// leasesOnly is a lease.Store and nothing more: kcl.Store opened with LeasesOnly has the
// member calls, which fail, so InspectLeases must not take it for a store that keeps member
// records.
type leasesOnly struct{ lease.Store }

// openStore opens the lease table without creating it: with -kcl as a KCL application's, the
// lease table alone (KCL workers keep no member records, so owners are judged by their lease
// counters), else as this package's own, with the member records in it.
func openStore(ctx context.Context, o options, dc *dynamodb.Client) (lease.Store, error) {
	if !o.kcl {
		return lease.NewDynamoDBStore(ctx, lease.DynamoDBConfig{Client: dc, TableName: o.table})
	}
	cfg := kcl.Config{Client: dc, TableName: o.table, Application: o.group, MultiStream: o.multiStream, LeasesOnly: true}
	if !o.multiStream {
		cfg.Stream = o.stream
	}
	store, err := kcl.NewStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return leasesOnly{store}, nil
}

// explain adds to err which flags or settings to check, for the failures a wrong one causes.
func explain(o options, err error) string {
	switch {
	case errors.Is(err, lease.ErrTableNotFound):
		return fmt.Sprintf("%v\n  check -table, -region (%s) and the DynamoDB endpoint (-endpoint-dynamodb, AWS_ENDPOINT_URL_DYNAMODB); this command never creates the table",
			err, o.region)
	case errors.Is(err, kinesis.ErrStreamNotFound):
		return fmt.Sprintf("%v\n  check -stream, -region (%s) and the Kinesis endpoint (-endpoint-kinesis, AWS_ENDPOINT_URL_KINESIS)", err, o.region)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("%v\n  gave up after -timeout %s; check the endpoints (-endpoint-kinesis, -endpoint-dynamodb, AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL_DYNAMODB) and the network, or raise -timeout",
			err, o.timeout)
	case isNetworkError(err):
		return fmt.Sprintf("%v\n  %s", err, networkHint(o, err))
	case o.kcl && o.multiStream:
		return fmt.Sprintf("%v\n  if an item is said to lack streamName or shardId, the KCL application reads one stream: leave out -multi-stream", err)
	}
	return err.Error()
}

// isNetworkError reports whether err is a call that did not reach its endpoint: a host name
// that does not resolve, a connection refused, reset or timed out, or a request the SDK could
// not send. The error's types say so, whatever the words of the system's message.
func isNetworkError(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var sendErr *smithyhttp.RequestSendError
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) || errors.As(err, &sendErr)
}

// networkHint says, for a network error, which service's endpoint the call tried and what
// chose that address, so that a command run in the wrong shell (no AWS_ENDPOINT_URL_* where
// local servers were meant, or a wrong region) says what to set.
func networkHint(o options, err error) string {
	service, flag, setting := "Kinesis or DynamoDB", "-endpoint-kinesis or -endpoint-dynamodb", "AWS_ENDPOINT_URL_KINESIS or AWS_ENDPOINT_URL_DYNAMODB"
	var opErr *smithy.OperationError
	if errors.As(err, &opErr) {
		switch opErr.ServiceID {
		case awskinesis.ServiceID:
			service, flag, setting = "Kinesis", "-endpoint-kinesis", "AWS_ENDPOINT_URL_KINESIS"
		case dynamodb.ServiceID:
			service, flag, setting = "DynamoDB", "-endpoint-dynamodb", "AWS_ENDPOINT_URL_DYNAMODB"
		}
	}
	at := "its endpoint"
	var urlErr *url.Error // net/http's error names the URL the request went to
	if errors.As(err, &urlErr) {
		if u, perr := url.Parse(urlErr.URL); perr == nil && u.Host != "" {
			at = u.Scheme + "://" + u.Host
		}
	}
	return fmt.Sprintf("could not reach %s at %s (a network error): the address is %s if set, else the SDK's %s "+
		"(or AWS_ENDPOINT_URL), else AWS's endpoint for the region (-region, AWS_REGION; here %q). "+
		"For local servers set %s (scripts/with-emulators.sh does); for AWS check the region and the network",
		service, at, flag, setting, o.region, setting)
}

// noteOddities tells on stderr what a report that looks wrong most likely means: no lease at
// all (a wrong -group, -table or -stream), or, with -kcl, leases whose shard ids are a
// multi-stream table's lease keys (-multi-stream left out).
func noteOddities(o options, r admin.GroupReport, stderr io.Writer) {
	switch {
	case !hasLeases(r) && o.kcl && o.multiStream:
		fmt.Fprintf(stderr, "kinesis-leases: note: KCL lease table %q holds no leases of stream %q; check -stream and -table, or the application has not read the stream yet\n",
			o.table, o.stream)
	case !hasLeases(r) && o.kcl:
		fmt.Fprintf(stderr, "kinesis-leases: note: KCL lease table %q holds no leases; check -table, or the application has not run yet\n", o.table)
	case !hasLeases(r):
		fmt.Fprintf(stderr, "kinesis-leases: note: table %q holds no leases of group %q on stream %q; check -group (and -table), or the group has not run yet\n",
			o.table, o.group, o.stream)
	case o.kcl && !o.multiStream && hasMultiStreamKeys(r):
		fmt.Fprintf(stderr, "kinesis-leases: note: KCL lease table %q has lease keys of the form account:stream:creationEpoch:shardId; it looks like a multi-stream application's: add -multi-stream\n",
			o.table)
	}
}

// hasMultiStreamKeys reports whether a lease's shard id has a ':', as a multi-stream KCL
// table's lease keys do (a shard id never has one), which a single-stream read takes for
// shard ids.
func hasMultiStreamKeys(r admin.GroupReport) bool {
	for _, s := range r.Shards {
		if s.HasLease && strings.Contains(s.ShardID, ":") {
			return true
		}
	}
	return false
}

func hasLeases(r admin.GroupReport) bool {
	for _, s := range r.Shards {
		if s.HasLease {
			return true
		}
	}
	return false
}
