package kinesis

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// isNil reports a nil interface or one holding a nil pointer (a "typed nil", which would panic
// on first use).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// checkEndpoint refuses an SDK client that can never reach Kinesis: no region, no endpoint and
// the SDK's own endpoint resolver, which needs a region. Every call would fail (the SDK's
// "Invalid Configuration: Missing Region"), so the constructor says so instead, naming the
// settings. The client is the config's, or the one the config's AWSConfig and KinesisOptions
// build (with the endpoint the SDK reads from AWS_ENDPOINT_URL_KINESIS or AWS_ENDPOINT_URL).
// Clients that are not the SDK's have no endpoint to check.
func checkEndpoint(config string, client KinesisAPI, awsConfig *aws.Config, opts []func(*awskinesis.Options)) error {
	if client == nil && awsConfig != nil {
		client = awskinesis.NewFromConfig(*awsConfig, opts...)
	}
	c, ok := client.(*awskinesis.Client)
	if !ok || isNil(c) {
		return nil
	}
	o := c.Options()
	if o.Region != "" || aws.ToString(o.BaseEndpoint) != "" || o.EndpointResolver != nil || //nolint:staticcheck // a legacy resolver may need no region
		reflect.TypeOf(o.EndpointResolverV2) != reflect.TypeOf(awskinesis.NewDefaultEndpointResolverV2()) {
		return nil
	}
	return fmt.Errorf("kinesis: %s: the Kinesis client has no region and no endpoint, so no call can reach Kinesis; "+
		"set AWS_REGION (or region in the AWS profile, or aws.Config.Region), or, for a local Kinesis, AWS_ENDPOINT_URL_KINESIS", config)
}

// Validate reports every problem of the config at once. Fields left at zero are judged at
// their defaults, as NewSubscriber uses them.
func (c SubscriberConfig) Validate() error {
	unnamed := c.Group.storeWithoutName()
	c.setValueDefaults()
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kinesis: SubscriberConfig."+format, args...))
	}
	if c.Client == nil && c.AWSConfig == nil {
		add("Client and AWSConfig are both nil; pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log as Client, or an aws.Config (config.LoadDefaultConfig) as AWSConfig")
	} else if c.Client != nil && isNil(c.Client) {
		add("Client is a nil %T; pass an aws-sdk-go-v2 client (kinesis.NewFromConfig) or memlog.New(...), or leave Client nil and set AWSConfig", c.Client)
	} else if err := checkEndpoint("SubscriberConfig", c.Client, c.AWSConfig, c.KinesisOptions); err != nil {
		errs = append(errs, err)
	}
	c.validateGroup(unnamed, add, &errs)
	c.validateReading(add)
	g := c.Group
	if g.LeaseDuration > 0 && g.LeaseRenewInterval >= g.LeaseDuration {
		add("Group.LeaseRenewInterval (%s) must be shorter than Group.LeaseDuration (%s), or the lease expires between renewals", g.LeaseRenewInterval, g.LeaseDuration)
	}
	errs = append(errs, c.validateFanOut()...)
	if c.CreateStreamShards < 0 {
		add("CreateStreamShards is %d; it must be at least 1", c.CreateStreamShards)
	}
	return errors.Join(errs...)
}

// validateGroup is Validate's part for the consumer group's identity and lease store.
func (c SubscriberConfig) validateGroup(unnamed []string, add func(format string, args ...any), errs *[]error) {
	g := c.Group
	if len(unnamed) > 0 {
		add("Group.Name is empty but %s set; these lease settings serve a consumer group: name the group in Group.Name, or leave them unset to read every shard without leases", joinAnd(unnamed))
	}
	// The store's own checks would only add advice about a store that is refused anyway.
	if len(unnamed) == 0 && g.LeaseStore != nil && isNil(g.LeaseStore) {
		add("Group.LeaseStore is a nil %T; pass lease.NewMemoryStore() or a store made with lease.NewDynamoDBStore, or leave it nil and set Group.LeaseTable", g.LeaseStore)
	}
	if g.Name != "" && g.LeaseStore == nil && g.LeaseTable == "" {
		add("Group.LeaseStore is nil and Group.LeaseTable is empty but Group.Name %q is set; a group keeps its leases in a store (LeaseTable for DynamoDB, lease.NewMemoryStore for one process)", g.Name)
	}
	if len(unnamed) == 0 && g.LeaseStore == nil && g.LeaseTable != "" && c.AWSConfig == nil {
		add("Group.LeaseTable %q is set but AWSConfig is nil; the DynamoDB client is built from AWSConfig (or pass Group.LeaseStore: lease.NewDynamoDBStore)", g.LeaseTable)
	}
	if err := validateGroupName(g.Name); err != nil {
		*errs = append(*errs, err)
	}
	switch {
	case strings.Contains(g.WorkerID, "#"):
		add("Group.WorkerID %q contains '#', which names the subscriptions of one Subscriber in the lease table (WorkerID#2, ...); choose an ID without it", g.WorkerID)
	case !utf8.ValidString(g.WorkerID):
		add("Group.WorkerID %q is not valid UTF-8; the lease table keys the worker's member record by it, and DynamoDB keys are UTF-8 strings", g.WorkerID)
	case len(g.WorkerID) > maxWorkerIDBytes:
		add("Group.WorkerID is %d bytes long (%.40q...); at most %d fit the sort key of its member record in the lease table", len(g.WorkerID), g.WorkerID, maxWorkerIDBytes)
	}
}

// validateReading is Validate's part for how shards are read and delivered.
func (c SubscriberConfig) validateReading(add func(format string, args ...any)) {
	g := c.Group
	if c.GetRecordsLimit < 1 || c.GetRecordsLimit > 10000 {
		add("GetRecordsLimit is %d; Kinesis allows 1 to 10000", c.GetRecordsLimit)
	}
	if c.MaxInFlight < 1 {
		add("MaxInFlight is %d; it must be at least 1", c.MaxInFlight)
	}
	switch {
	case c.Ordering < OrderDefault || c.Ordering > Unordered:
		add("Ordering is %s; use OrderByShard, OrderByKey or Unordered", c.Ordering)
	case c.Ordering == OrderByShard && c.MaxInFlight > 1:
		add("Ordering is OrderByShard, which has one message of a shard out at a time, but MaxInFlight is %d; set MaxInFlight to 1, or choose OrderByKey (one at a time per partition key) or Unordered", c.MaxInFlight)
	}
	if c.MaxBufferedRecords < 1 {
		add("MaxBufferedRecords is %d; it must be at least 1", c.MaxBufferedRecords)
	}
	if c.MaxBufferedBytes < 1 {
		add("MaxBufferedBytes is %d; it must be at least 1", c.MaxBufferedBytes)
	}
	if c.InitialPosition.Type < TrimHorizon || c.InitialPosition.Type > AtTimestamp {
		add("InitialPosition.Type is %s; use TrimHorizon, Latest or AtTimestamp", c.InitialPosition.Type)
	}
	if c.InitialPosition.Type == AtTimestamp && c.InitialPosition.Timestamp.IsZero() {
		add("InitialPosition is AtTimestamp but Timestamp is zero")
	}
	if c.NackResendSleep < 0 && c.NackResendSleep != NoSleep {
		add("NackResendSleep is %s; use NoSleep to resend at once", c.NackResendSleep)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"PollInterval", c.PollInterval}, {"MinReadInterval", c.MinReadInterval},
		{"ShardSyncInterval", c.ShardSyncInterval}, {"CloseTimeout", c.CloseTimeout}, {"RequestTimeout", c.RequestTimeout},
		{"Group.CheckpointInterval", g.CheckpointInterval}, {"Group.LeaseDuration", g.LeaseDuration},
		{"Group.LeaseRenewInterval", g.LeaseRenewInterval}, {"Group.LeaseSyncInterval", g.LeaseSyncInterval},
		{"Group.HandoffTimeout", g.HandoffTimeout},
	} {
		if d.value < 0 {
			add("%s is %s; it must not be negative", d.name, d.value)
		}
	}
}
