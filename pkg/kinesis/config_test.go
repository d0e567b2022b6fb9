package kinesis_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// cfgJoined returns the errors joined in err (errors.Join), or err alone.
func cfgJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// cfgWantProblems checks that err reports exactly one problem per entry of want, each problem
// containing every substring of its entry, in order.
func cfgWantProblems(t *testing.T, err error, want [][]string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error; want problems %q", want)
	}
	got := cfgJoined(err)
	if len(got) != len(want) {
		t.Fatalf("%d problem(s) reported, want %d: %v", len(got), len(want), err)
	}
	for i, subs := range want {
		for _, s := range subs {
			if !strings.Contains(got[i].Error(), s) {
				t.Errorf("problem %d %q does not mention %q", i, got[i], s)
			}
		}
	}
}

func TestPublisherConfig_Validate(t *testing.T) {
	client := memlog.New(memlog.Config{})
	cases := []struct {
		name string
		cfg  kinesis.PublisherConfig
		want [][]string
	}{
		{name: "defaults", cfg: kinesis.PublisherConfig{Client: client}},
		{name: "nil client", cfg: kinesis.PublisherConfig{},
			want: [][]string{{"PublisherConfig.Client", "nil"}}},
		{name: "negative CreateStreamShards", cfg: kinesis.PublisherConfig{Client: client, CreateStreamShards: -1},
			want: [][]string{{"CreateStreamShards", "-1", "at least 1"}}},
		{name: "negative MaxRetries", cfg: kinesis.PublisherConfig{Client: client, MaxRetries: -1},
			want: [][]string{{"MaxRetries", "-1", "negative"}}},
		{name: "negative RetryBackoff", cfg: kinesis.PublisherConfig{Client: client, RetryBackoff: -time.Millisecond},
			want: [][]string{{"RetryBackoff", "-1ms", "positive"}}},
		{name: "negative MaxRetryBackoff", cfg: kinesis.PublisherConfig{Client: client, MaxRetryBackoff: -time.Millisecond},
			want: [][]string{{"MaxRetryBackoff", "-1ms"}}},
		{name: "RetryBackoff above MaxRetryBackoff",
			cfg:  kinesis.PublisherConfig{Client: client, RetryBackoff: 2 * time.Second, MaxRetryBackoff: time.Second},
			want: [][]string{{"RetryBackoff (2s)", "MaxRetryBackoff (1s)"}}},
		{name: "several problems at once",
			cfg: kinesis.PublisherConfig{CreateStreamShards: -2, MaxRetries: -3},
			want: [][]string{
				{"Client", "nil"},
				{"CreateStreamShards", "-2"},
				{"MaxRetries", "-3"},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := kinesis.NewPublisher(tc.cfg, watermill.NopLogger{})
			cfgWantProblems(t, err, tc.want)
			if err != nil && p != nil {
				t.Errorf("NewPublisher returned a publisher together with error %v", err)
			}
			if err == nil {
				if p == nil {
					t.Fatal("NewPublisher returned neither a publisher nor an error")
				}
				if cerr := p.Close(); cerr != nil {
					t.Errorf("Close: %v", cerr)
				}
			}
		})
	}
}

func TestPublisherConfig_NilLoggerIsAccepted(t *testing.T) {
	p, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: memlog.New(memlog.Config{})}, nil)
	if err != nil {
		t.Fatalf("NewPublisher with a nil logger: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestSubscriberConfig_Validate(t *testing.T) {
	client := memlog.New(memlog.Config{})
	valid := func(change func(c *kinesis.SubscriberConfig)) kinesis.SubscriberConfig {
		c := kinesis.SubscriberConfig{Client: client}
		if change != nil {
			change(&c)
		}
		return c
	}
	cases := []struct {
		name string
		cfg  kinesis.SubscriberConfig
		want [][]string
	}{
		{name: "defaults", cfg: valid(nil)},
		{name: "consumer group with lease store", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.Name, c.Group.LeaseStore = "billing", lease.NewMemoryStore()
		})},
		{name: "AtTimestamp with timestamp", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.InitialPosition = kinesis.Position{Type: kinesis.AtTimestamp, Timestamp: time.Unix(1700000000, 0)}
		})},
		{name: "NoSleep", cfg: valid(func(c *kinesis.SubscriberConfig) { c.NackResendSleep = kinesis.NoSleep })},
		{name: "GetRecordsLimit 10000", cfg: valid(func(c *kinesis.SubscriberConfig) { c.GetRecordsLimit = 10000 })},
		{name: "LeaseRenewInterval just below LeaseDuration", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.LeaseDuration, c.Group.LeaseRenewInterval = time.Second, time.Second-time.Nanosecond
		})},

		{name: "nil client", cfg: valid(func(c *kinesis.SubscriberConfig) { c.Client = nil }),
			want: [][]string{{"SubscriberConfig.Client", "nil"}}},
		{name: "group name at the lease key's limit", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.Name, c.Group.LeaseStore = strings.Repeat("g", 1916), lease.NewMemoryStore()
		})},
		{name: "group name not UTF-8", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.Name, c.Group.LeaseStore = "billing\xff", lease.NewMemoryStore()
		}),
			want: [][]string{{"SubscriberConfig.Group.Name", `"billing\xff"`, "not valid UTF-8"}}},
		{name: "group name too long for the lease key", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.Name, c.Group.LeaseStore = strings.Repeat("g", 1917), lease.NewMemoryStore()
		}),
			want: [][]string{{"SubscriberConfig.Group.Name", "1917 bytes", "at most 1916"}}},
		{name: "WorkerID of 1000 bytes", cfg: valid(func(c *kinesis.SubscriberConfig) { c.Group.WorkerID = strings.Repeat("w", 1000) })},
		{name: "WorkerID too long for its member record", cfg: valid(func(c *kinesis.SubscriberConfig) { c.Group.WorkerID = strings.Repeat("w", 1001) }),
			want: [][]string{{"Group.WorkerID", "1001 bytes", "at most 1000"}}},
		{name: "WorkerID not UTF-8", cfg: valid(func(c *kinesis.SubscriberConfig) { c.Group.WorkerID = "host\xff" }),
			want: [][]string{{"Group.WorkerID", "not valid UTF-8"}}},
		{name: "WorkerID with '#'", cfg: valid(func(c *kinesis.SubscriberConfig) { c.Group.WorkerID = "host#2" }),
			want: [][]string{{"Group.WorkerID", `"host#2"`, "'#'"}}},
		{name: "negative RequestTimeout", cfg: valid(func(c *kinesis.SubscriberConfig) { c.RequestTimeout = -time.Second }),
			want: [][]string{{"RequestTimeout", "-1s", "negative"}}},
		{name: "consumer group without lease store", cfg: valid(func(c *kinesis.SubscriberConfig) { c.Group.Name = "billing" }),
			want: [][]string{{"Group.LeaseStore", "nil", `Group.Name "billing"`}}},
		{name: "lease store without a group name", cfg: valid(func(c *kinesis.SubscriberConfig) { c.Group.LeaseStore = lease.NewMemoryStore() }),
			want: [][]string{{"Group.Name is empty", "Group.LeaseStore is set", "name the group"}}},
		{name: "lease table settings without a group name", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.AWSConfig = &aws.Config{}
			c.Group.LeaseTable, c.Group.CreateLeaseTable = "leases", true
		}),
			want: [][]string{{"Group.Name is empty", "Group.LeaseTable and Group.CreateLeaseTable are set"}}},
		{name: "lease table without a group name or AWSConfig: one problem, no advice on the store", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.LeaseTable = "leases"
		}),
			want: [][]string{{"Group.Name is empty", "Group.LeaseTable is set"}}},
		{name: "group timings, hooks and DynamoDBOptions without a group name are unused, not refused", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.LeaseDuration, c.Group.CheckpointInterval = time.Minute, time.Second
			c.Group.Hooks.OnLost = func(kinesis.ShardEvent) {}
			c.Group.DynamoDBOptions = []func(*dynamodb.Options){func(*dynamodb.Options) {}}
		})},
		{name: "GetRecordsLimit 10001", cfg: valid(func(c *kinesis.SubscriberConfig) { c.GetRecordsLimit = 10001 }),
			want: [][]string{{"GetRecordsLimit", "10001", "1 to 10000"}}},
		{name: "GetRecordsLimit negative", cfg: valid(func(c *kinesis.SubscriberConfig) { c.GetRecordsLimit = -1 }),
			want: [][]string{{"GetRecordsLimit", "-1", "1 to 10000"}}},
		{name: "MaxInFlight -1", cfg: valid(func(c *kinesis.SubscriberConfig) { c.MaxInFlight = -1 }),
			want: [][]string{{"MaxInFlight", "-1", "at least 1"}}},
		{name: "AtTimestamp without timestamp", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.InitialPosition = kinesis.Position{Type: kinesis.AtTimestamp}
		}),
			want: [][]string{{"InitialPosition", "AtTimestamp", "Timestamp is zero"}}},
		{name: "unknown position type", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.InitialPosition = kinesis.Position{Type: kinesis.PositionType(7)}
		}),
			want: [][]string{{"InitialPosition.Type", "PositionType(7)"}}},
		{name: "LeaseRenewInterval equal to LeaseDuration", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.LeaseDuration, c.Group.LeaseRenewInterval = 3*time.Second, 3*time.Second
		}),
			want: [][]string{{"LeaseRenewInterval (3s)", "LeaseDuration (3s)", "shorter"}}},
		{name: "LeaseRenewInterval above LeaseDuration", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.LeaseDuration, c.Group.LeaseRenewInterval = time.Second, 2*time.Second
		}),
			want: [][]string{{"LeaseRenewInterval (2s)", "LeaseDuration (1s)"}}},
		{name: "LeaseRenewInterval above default LeaseDuration", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.Group.LeaseRenewInterval = time.Minute
		}),
			want: [][]string{{"LeaseRenewInterval (1m0s)", "LeaseDuration (10s)"}}},
		{name: "negative NackResendSleep other than NoSleep", cfg: valid(func(c *kinesis.SubscriberConfig) {
			c.NackResendSleep = -5 * time.Millisecond
		}),
			want: [][]string{{"NackResendSleep", "-5ms", "NoSleep"}}},
		{name: "negative CreateStreamShards", cfg: valid(func(c *kinesis.SubscriberConfig) { c.CreateStreamShards = -1 }),
			want: [][]string{{"CreateStreamShards", "-1"}}},
		{name: "several problems at once", cfg: kinesis.SubscriberConfig{
			Group: kinesis.GroupConfig{
				Name: "billing",
			},
			GetRecordsLimit: 10001,
			MaxInFlight:     -1,
			InitialPosition: kinesis.Position{Type: kinesis.AtTimestamp},
			PollInterval:    -time.Second,
		},
			want: [][]string{
				{"Client"},
				{"LeaseStore"},
				{"GetRecordsLimit", "10001"},
				{"MaxInFlight", "-1"},
				{"AtTimestamp", "Timestamp"},
				{"PollInterval", "-1s"},
			}},
	}
	// Every duration must be refused when negative, each under its own name.
	for _, d := range []struct {
		name string
		set  func(c *kinesis.SubscriberConfig)
	}{
		{"PollInterval", func(c *kinesis.SubscriberConfig) { c.PollInterval = -time.Second }},
		{"MinReadInterval", func(c *kinesis.SubscriberConfig) { c.MinReadInterval = -time.Second }},
		{"Group.CheckpointInterval", func(c *kinesis.SubscriberConfig) { c.Group.CheckpointInterval = -time.Second }},
		{"Group.LeaseRenewInterval", func(c *kinesis.SubscriberConfig) { c.Group.LeaseRenewInterval = -time.Second }},
		{"Group.LeaseSyncInterval", func(c *kinesis.SubscriberConfig) { c.Group.LeaseSyncInterval = -time.Second }},
		{"ShardSyncInterval", func(c *kinesis.SubscriberConfig) { c.ShardSyncInterval = -time.Second }},
		{"CloseTimeout", func(c *kinesis.SubscriberConfig) { c.CloseTimeout = -time.Second }},
	} {
		cases = append(cases, struct {
			name string
			cfg  kinesis.SubscriberConfig
			want [][]string
		}{
			name: "negative " + d.name,
			cfg:  valid(d.set),
			want: [][]string{{"SubscriberConfig." + d.name, "-1s", "negative"}},
		})
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := kinesis.NewSubscriber(tc.cfg, watermill.NopLogger{})
			cfgWantProblems(t, err, tc.want)
			if err != nil && s != nil {
				t.Errorf("NewSubscriber returned a subscriber together with error %v", err)
			}
			if err == nil {
				if s == nil {
					t.Fatal("NewSubscriber returned neither a subscriber nor an error")
				}
				if cerr := s.Close(); cerr != nil {
					t.Errorf("Close: %v", cerr)
				}
			}
		})
	}
}

// A negative LeaseDuration is reported under its own name (LeaseRenewInterval, defaulted from
// it, may be reported as well).
func TestSubscriberConfig_NegativeLeaseDuration(t *testing.T) {
	_, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: memlog.New(memlog.Config{}),
		Group: kinesis.GroupConfig{
			LeaseDuration: -time.Second,
		},
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "SubscriberConfig.Group.LeaseDuration is -1s") {
		t.Fatalf("error %v does not report the negative LeaseDuration", err)
	}
}

func TestSubscriberConfig_NilLoggerIsAccepted(t *testing.T) {
	s, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{Client: memlog.New(memlog.Config{})}, nil)
	if err != nil {
		t.Fatalf("NewSubscriber with a nil logger: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// Validate can be called on a config by hand (before NewPublisher fills in defaults) and then
// reports the same problems.
func TestConfig_ValidateWithoutDefaults(t *testing.T) {
	if err := (kinesis.PublisherConfig{Client: memlog.New(memlog.Config{})}).Validate(); err != nil {
		t.Errorf("zero PublisherConfig with a client: %v", err)
	}
	err := (kinesis.PublisherConfig{MaxRetries: -1}).Validate()
	cfgWantProblems(t, err, [][]string{{"Client"}, {"MaxRetries", "-1"}})
}
