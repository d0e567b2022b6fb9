package kinesis_test

// The bad input table: every invalid input the public API can receive, and the exact error it
// gets. Every name here starts with "bi" so that nothing collides with the helpers of other test
// files of package kinesis_test.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

const (
	biStream = "orders"
	biShard  = "shardId-000000000000"
	// biStall is how long one row may take before it counts as stalled.
	biStall = 20 * time.Second
	// biMiB is Kinesis's limit on one record: data + partition key.
	biMiB = 1 << 20
)

// biNow is memlog's clock: fixed, so that errors quoting Kinesis's time are exact.
var biNow = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// biWorld is one row's world: a memlog with the one-shard stream "orders".
type biWorld struct {
	t   *testing.T
	log *memlog.Log
}

func newBIWorld(t *testing.T) *biWorld {
	t.Helper()
	l := memlog.New(memlog.Config{Now: func() time.Time { return biNow }})
	if _, err := l.CreateStream(context.Background(), &awskinesis.CreateStreamInput{
		StreamName: aws.String(biStream), ShardCount: aws.Int32(1),
	}); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	return &biWorld{t: t, log: l}
}

// publisher is a Publisher on the world's memlog; change adjusts its config.
func (w *biWorld) publisher(change func(c *kinesis.PublisherConfig)) *kinesis.Publisher {
	w.t.Helper()
	cfg := kinesis.PublisherConfig{Client: w.log}
	if change != nil {
		change(&cfg)
	}
	p, err := kinesis.NewPublisher(cfg, nil)
	if err != nil {
		w.t.Fatalf("NewPublisher: %v", err)
	}
	w.t.Cleanup(func() { _ = p.Close() })
	return p
}

// subscriber is a Subscriber on the world's memlog, with no consumer group.
func (w *biWorld) subscriber(change func(c *kinesis.SubscriberConfig)) *kinesis.Subscriber {
	w.t.Helper()
	cfg := kinesis.SubscriberConfig{
		Client:          w.log,
		PollInterval:    10 * time.Millisecond,
		MinReadInterval: time.Millisecond,
		CloseTimeout:    biStall / 2,
	}
	if change != nil {
		change(&cfg)
	}
	s, err := kinesis.NewSubscriber(cfg, nil)
	if err != nil {
		w.t.Fatalf("NewSubscriber: %v", err)
	}
	w.t.Cleanup(func() { _ = s.Close() })
	return s
}

// records reads every record of the stream "orders", oldest first.
func (w *biWorld) records() []types.Record {
	w.t.Helper()
	ctx := context.Background()
	it, err := w.log.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{
		StreamName: aws.String(biStream), ShardId: aws.String(biShard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		w.t.Fatalf("GetShardIterator: %v", err)
	}
	var recs []types.Record
	for iter := it.ShardIterator; iter != nil; {
		out, err := w.log.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			w.t.Fatalf("GetRecords: %v", err)
		}
		recs = append(recs, out.Records...)
		if len(out.Records) == 0 {
			break
		}
		iter = out.NextShardIterator
	}
	return recs
}

// wantNothingWritten checks that a rejected Publish wrote no record.
func (w *biWorld) wantNothingWritten() {
	w.t.Helper()
	if recs := w.records(); len(recs) != 0 {
		w.t.Errorf("%d record(s) written although Publish failed", len(recs))
	}
}

// wantWritten checks that exactly msgs were written, in order, and decode to the same UUID,
// metadata and payload; keys, when not nil, checks each record's partition key.
func (w *biWorld) wantWritten(msgs []*message.Message, keys func(i int, key string) error) {
	w.t.Helper()
	recs := w.records()
	if len(recs) != len(msgs) {
		w.t.Fatalf("%d record(s) written, want %d", len(recs), len(msgs))
	}
	for i, rec := range recs {
		got, err := kinesis.EnvelopeMarshaler{}.Unmarshal(biStream, biShard, &rec)
		if err != nil {
			w.t.Fatalf("record %d does not decode: %v", i, err)
		}
		want := msgs[i]
		if got.UUID != want.UUID || string(got.Payload) != string(want.Payload) || !biSameMetadata(got.Metadata, want.Metadata) {
			w.t.Errorf("record %d decodes to uuid %q, %d-byte payload, metadata %d keys; want uuid %q, %d-byte payload, metadata %d keys (or they differ)",
				i, got.UUID, len(got.Payload), len(got.Metadata), want.UUID, len(want.Payload), len(want.Metadata))
		}
		if keys != nil {
			if err := keys(i, aws.ToString(rec.PartitionKey)); err != nil {
				w.t.Errorf("record %d: %v", i, err)
			}
		}
	}
}

func biSameMetadata(a, b message.Metadata) bool {
	return len(a) == len(b) && (len(a) == 0 || maps.Equal(a, b))
}

// biMsg is a message with the given UUID and payload and metadata pairs key, value, ...
func biMsg(uuid string, payload []byte, kv ...string) *message.Message {
	m := message.NewMessage(uuid, payload)
	for i := 0; i+1 < len(kv); i += 2 {
		m.Metadata.Set(kv[i], kv[i+1])
	}
	return m
}

func biMsgs(msgs ...*message.Message) []*message.Message { return msgs }

// biCloseTwice closes c twice; both must return nil.
func biCloseTwice(c interface{ Close() error }) error {
	first, second := c.Close(), c.Close()
	if first != nil || second != nil {
		return fmt.Errorf("first Close: %v; second Close: %v", first, second)
	}
	return nil
}

// The long config messages, once.
const (
	biPubNoClient = "kinesis: PublisherConfig.Client and AWSConfig are both nil; pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log as Client, or an aws.Config (config.LoadDefaultConfig) as AWSConfig"
	biSubNoClient = "kinesis: SubscriberConfig.Client and AWSConfig are both nil; pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log as Client, or an aws.Config (config.LoadDefaultConfig) as AWSConfig"
	biNoStore     = `kinesis: SubscriberConfig.Group.LeaseStore is nil and Group.LeaseTable is empty but Group.Name "billing" is set; a group keeps its leases in a store (LeaseTable for DynamoDB, lease.NewMemoryStore for one process)`
	biBadChars    = "; Kinesis allows only letters, digits, '_', '.' and '-'"
	biNotFound    = `kinesis: stream not found: "nope" (create it, or set CreateStream in the config): ResourceNotFoundException: Stream nope under account 000000000000 not found.`
)

// biRow is one bad input: the call that receives it and the exact error it gets.
type biRow struct {
	name string
	// call makes the call under test and returns its error. It runs on the test goroutine.
	call func(t *testing.T, w *biWorld) error
	// want is the exact Error() of the error; empty (with lines nil) means no error.
	want string
	// lines, for errors joined with errors.Join (config problems, several bad messages), is
	// the exact list of their lines, in order.
	lines []string
	// is lists what errors.Is must match; as, when not nil, is a pointer to a typed error
	// that errors.As must fill.
	is []error
	as any
	// after checks what was and was not written.
	after func(t *testing.T, w *biWorld)
}

// biNewPublisher is a config row of NewPublisher: the error it returns, and no Publisher with it.
func biNewPublisher(cfg func(w *biWorld) kinesis.PublisherConfig) func(t *testing.T, w *biWorld) error {
	return func(t *testing.T, w *biWorld) error {
		p, err := kinesis.NewPublisher(cfg(w), nil)
		if err != nil && p != nil {
			t.Errorf("NewPublisher returned a Publisher together with its error")
		}
		if p != nil {
			_ = p.Close()
		}
		return err
	}
}

func biNewSubscriber(cfg func(w *biWorld) kinesis.SubscriberConfig) func(t *testing.T, w *biWorld) error {
	return func(t *testing.T, w *biWorld) error {
		s, err := kinesis.NewSubscriber(cfg(w), nil)
		if err != nil && s != nil {
			t.Errorf("NewSubscriber returned a Subscriber together with its error")
		}
		if s != nil {
			_ = s.Close()
		}
		return err
	}
}

// biSub is a SubscriberConfig on w's memlog, changed by change.
func biSub(change func(c *kinesis.SubscriberConfig)) func(w *biWorld) kinesis.SubscriberConfig {
	return func(w *biWorld) kinesis.SubscriberConfig {
		c := kinesis.SubscriberConfig{Client: w.log}
		if change != nil {
			change(&c)
		}
		return c
	}
}

func biPub(change func(c *kinesis.PublisherConfig)) func(w *biWorld) kinesis.PublisherConfig {
	return func(w *biWorld) kinesis.PublisherConfig {
		c := kinesis.PublisherConfig{Client: w.log}
		if change != nil {
			change(&c)
		}
		return c
	}
}

// biPublish publishes msgs to stream with a default Publisher, PartitionKey set by key when
// not nil.
func biPublish(stream string, key kinesis.PartitionKeyFunc, msgs ...*message.Message) func(t *testing.T, w *biWorld) error {
	return func(t *testing.T, w *biWorld) error {
		p := w.publisher(func(c *kinesis.PublisherConfig) { c.PartitionKey = key })
		return p.Publish(stream, msgs...)
	}
}

func biNothingWritten(t *testing.T, w *biWorld) { w.wantNothingWritten() }

// biMessageErr is the text of a *MessageError about message 0 "m-0" of "orders".
func biMessageErr(i int, uuid, text string) string {
	return fmt.Sprintf("kinesis: message %d (uuid %q) to stream %q: %s", i, uuid, biStream, text)
}

var (
	errBINoTenant = errors.New("no tenant for this message")
	errBIEncode   = errors.New("payload is not valid protobuf")
)

// biFailingMarshaler fails every message.
type biFailingMarshaler struct{}

func (biFailingMarshaler) Marshal(string, *message.Message) ([]byte, error) { return nil, errBIEncode }

func biRows() []biRow {
	byCustomer := kinesis.PartitionKeyFromMetadata("customer_id")
	keyFunc := func(key string) kinesis.PartitionKeyFunc {
		return func(string, *message.Message) (string, error) { return key, nil }
	}
	// Payload sizes for the 1 MiB limit: an envelope of UUID "m-0", no metadata and an n-byte
	// payload (n between 16 KiB and 2 MiB) is n+17 bytes; with the 3-byte key "m-0", n+20.
	atLimit := make([]byte, biMiB-20)
	overLimit := make([]byte, biMiB-19)
	var sixAtLimit []*message.Message
	for i := range 6 {
		sixAtLimit = append(sixAtLimit, biMsg(fmt.Sprintf("m-%d", i), atLimit))
	}
	oddMetadata := biMsg("m-0", []byte("x"), "", "empty key", "binary", "\xff\x00\xfe", "long", strings.Repeat("v", 64<<10))
	emptyUUID := biMsg("", []byte("no uuid"))
	s129 := strings.Repeat("s", 129)
	s128 := strings.Repeat("s", 128)

	rows := []biRow{
		// PublisherConfig, through NewPublisher.
		{name: "PublisherConfig: no Client and no AWSConfig",
			call:  biNewPublisher(func(*biWorld) kinesis.PublisherConfig { return kinesis.PublisherConfig{} }),
			lines: []string{biPubNoClient}},
		{name: "PublisherConfig: Client is a typed nil *memlog.Log",
			call:  biNewPublisher(func(*biWorld) kinesis.PublisherConfig { return kinesis.PublisherConfig{Client: (*memlog.Log)(nil)} }),
			lines: []string{"kinesis: PublisherConfig.Client is a nil *memlog.Log; pass an aws-sdk-go-v2 client (kinesis.NewFromConfig) or memlog.New(...), or leave Client nil and set AWSConfig"}},
		{name: "PublisherConfig: Client is a typed nil *kinesis.Client, AWSConfig set",
			call: biNewPublisher(func(*biWorld) kinesis.PublisherConfig {
				return kinesis.PublisherConfig{Client: (*awskinesis.Client)(nil), AWSConfig: &aws.Config{}}
			}),
			lines: []string{"kinesis: PublisherConfig.Client is a nil *kinesis.Client; pass an aws-sdk-go-v2 client (kinesis.NewFromConfig) or memlog.New(...), or leave Client nil and set AWSConfig"}},
		{name: "PublisherConfig: CreateStreamShards -1",
			call:  biNewPublisher(biPub(func(c *kinesis.PublisherConfig) { c.CreateStreamShards = -1 })),
			lines: []string{"kinesis: PublisherConfig.CreateStreamShards is -1; it must be at least 1"}},
		{name: "PublisherConfig: MaxRetries -1",
			call:  biNewPublisher(biPub(func(c *kinesis.PublisherConfig) { c.MaxRetries = -1 })),
			lines: []string{"kinesis: PublisherConfig.MaxRetries is -1; it must not be negative"}},
		{name: "PublisherConfig: RetryBackoff -1ms",
			call:  biNewPublisher(biPub(func(c *kinesis.PublisherConfig) { c.RetryBackoff = -time.Millisecond })),
			lines: []string{"kinesis: PublisherConfig.RetryBackoff is -1ms; it must be positive"}},
		{name: "PublisherConfig: MaxRetryBackoff -1ms",
			call:  biNewPublisher(biPub(func(c *kinesis.PublisherConfig) { c.MaxRetryBackoff = -time.Millisecond })),
			lines: []string{"kinesis: PublisherConfig.MaxRetryBackoff is -1ms; it must be positive"}},
		{name: "PublisherConfig: RetryBackoff 2s above MaxRetryBackoff 1s",
			call: biNewPublisher(biPub(func(c *kinesis.PublisherConfig) {
				c.RetryBackoff, c.MaxRetryBackoff = 2*time.Second, time.Second
			})),
			lines: []string{"kinesis: PublisherConfig.RetryBackoff (2s) must be at most MaxRetryBackoff (1s)"}},
		{name: "PublisherConfig: RetryBackoff 10s above the default MaxRetryBackoff",
			call:  biNewPublisher(biPub(func(c *kinesis.PublisherConfig) { c.RetryBackoff = 10 * time.Second })),
			lines: []string{"kinesis: PublisherConfig.RetryBackoff (10s) must be at most MaxRetryBackoff (5s)"}},
		{name: "PublisherConfig: several problems at once",
			call: biNewPublisher(func(*biWorld) kinesis.PublisherConfig {
				return kinesis.PublisherConfig{CreateStreamShards: -2, MaxRetries: -3, RetryBackoff: -time.Second}
			}),
			lines: []string{
				biPubNoClient,
				"kinesis: PublisherConfig.CreateStreamShards is -2; it must be at least 1",
				"kinesis: PublisherConfig.MaxRetries is -3; it must not be negative",
				"kinesis: PublisherConfig.RetryBackoff is -1s; it must be positive",
			}},
		{name: "PublisherConfig: every number zero means its default (no error)",
			call: biNewPublisher(biPub(nil))},
		{name: "PublisherConfig.Validate by hand: AWSConfig and no Client (no error)",
			call: func(*testing.T, *biWorld) error {
				return kinesis.PublisherConfig{AWSConfig: &aws.Config{Region: "eu-west-1"}}.Validate()
			}},
		{name: "PublisherConfig.Validate by hand: AWSConfig with no region and no endpoint",
			call:  func(*testing.T, *biWorld) error { return kinesis.PublisherConfig{AWSConfig: &aws.Config{}}.Validate() },
			lines: []string{"kinesis: PublisherConfig: the Kinesis client has no region and no endpoint, so no call can reach Kinesis; set AWS_REGION (or region in the AWS profile, or aws.Config.Region), or, for a local Kinesis, AWS_ENDPOINT_URL_KINESIS"}},
		{name: "PublisherConfig.Validate by hand: nothing set",
			call:  func(*testing.T, *biWorld) error { return kinesis.PublisherConfig{}.Validate() },
			lines: []string{biPubNoClient}},

		// SubscriberConfig, through NewSubscriber.
		{name: "SubscriberConfig: no Client and no AWSConfig",
			call:  biNewSubscriber(func(*biWorld) kinesis.SubscriberConfig { return kinesis.SubscriberConfig{} }),
			lines: []string{biSubNoClient}},
		{name: "SubscriberConfig: Client is a typed nil *memlog.Log",
			call:  biNewSubscriber(func(*biWorld) kinesis.SubscriberConfig { return kinesis.SubscriberConfig{Client: (*memlog.Log)(nil)} }),
			lines: []string{"kinesis: SubscriberConfig.Client is a nil *memlog.Log; pass an aws-sdk-go-v2 client (kinesis.NewFromConfig) or memlog.New(...), or leave Client nil and set AWSConfig"}},
		{name: "SubscriberConfig: Group.Name without LeaseStore or LeaseTable",
			call:  biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.Group.Name = "billing" })),
			lines: []string{biNoStore}},
		{name: "SubscriberConfig: Group.LeaseTable without AWSConfig",
			call: biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) {
				c.Group.Name, c.Group.LeaseTable = "billing", "leases"
			})),
			lines: []string{`kinesis: SubscriberConfig.Group.LeaseTable "leases" is set but AWSConfig is nil; the DynamoDB client is built from AWSConfig (or pass Group.LeaseStore: lease.NewDynamoDBStore)`}},
		{name: "SubscriberConfig: Group.LeaseStore is a typed nil *lease.MemoryStore",
			call: biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) {
				c.Group.Name, c.Group.LeaseStore = "billing", (*lease.MemoryStore)(nil)
			})),
			lines: []string{"kinesis: SubscriberConfig.Group.LeaseStore is a nil *lease.MemoryStore; pass lease.NewMemoryStore() or a store made with lease.NewDynamoDBStore, or leave it nil and set Group.LeaseTable"}},
		{name: "SubscriberConfig: Group.LeaseStore without Group.Name",
			call:  biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.Group.LeaseStore = lease.NewMemoryStore() })),
			lines: []string{"kinesis: SubscriberConfig.Group.Name is empty but Group.LeaseStore is set; these lease settings serve a consumer group: name the group in Group.Name, or leave them unset to read every shard without leases"}},
		{name: "SubscriberConfig: GetRecordsLimit -1",
			call:  biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.GetRecordsLimit = -1 })),
			lines: []string{"kinesis: SubscriberConfig.GetRecordsLimit is -1; Kinesis allows 1 to 10000"}},
		{name: "SubscriberConfig: GetRecordsLimit 10001",
			call:  biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.GetRecordsLimit = 10001 })),
			lines: []string{"kinesis: SubscriberConfig.GetRecordsLimit is 10001; Kinesis allows 1 to 10000"}},
		{name: "SubscriberConfig: GetRecordsLimit 0 means the default 10000 (no error)",
			call: biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.GetRecordsLimit = 0 }))},
		{name: "SubscriberConfig: MaxInFlight -1",
			call:  biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.MaxInFlight = -1 })),
			lines: []string{"kinesis: SubscriberConfig.MaxInFlight is -1; it must be at least 1"}},
		{name: "SubscriberConfig: MaxInFlight 0 means the default 1 (no error)",
			call: biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.MaxInFlight = 0 }))},
		{name: "SubscriberConfig: InitialPosition.Type 7",
			call: biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) {
				c.InitialPosition = kinesis.Position{Type: kinesis.PositionType(7)}
			})),
			lines: []string{"kinesis: SubscriberConfig.InitialPosition.Type is PositionType(7); use TrimHorizon, Latest or AtTimestamp"}},
		{name: "SubscriberConfig: InitialPosition.Type -1",
			call: biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) {
				c.InitialPosition = kinesis.Position{Type: kinesis.PositionType(-1)}
			})),
			lines: []string{"kinesis: SubscriberConfig.InitialPosition.Type is PositionType(-1); use TrimHorizon, Latest or AtTimestamp"}},
		{name: "SubscriberConfig: AtTimestamp with a zero Timestamp",
			call: biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) {
				c.InitialPosition = kinesis.Position{Type: kinesis.AtTimestamp}
			})),
			lines: []string{"kinesis: SubscriberConfig.InitialPosition is AtTimestamp but Timestamp is zero"}},
		{name: "SubscriberConfig: NackResendSleep -5ms (not NoSleep)",
			call:  biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.NackResendSleep = -5 * time.Millisecond })),
			lines: []string{"kinesis: SubscriberConfig.NackResendSleep is -5ms; use NoSleep to resend at once"}},
		{name: "SubscriberConfig: NackResendSleep NoSleep (no error)",
			call: biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.NackResendSleep = kinesis.NoSleep }))},
		{name: "SubscriberConfig: LeaseRenewInterval equal to LeaseDuration",
			call: biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) {
				c.Group.LeaseDuration, c.Group.LeaseRenewInterval = 3*time.Second, 3*time.Second
			})),
			lines: []string{"kinesis: SubscriberConfig.Group.LeaseRenewInterval (3s) must be shorter than Group.LeaseDuration (3s), or the lease expires between renewals"}},
		{name: "SubscriberConfig: LeaseRenewInterval 1m above the default LeaseDuration",
			call:  biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.Group.LeaseRenewInterval = time.Minute })),
			lines: []string{"kinesis: SubscriberConfig.Group.LeaseRenewInterval (1m0s) must be shorter than Group.LeaseDuration (10s), or the lease expires between renewals"}},
		{name: "SubscriberConfig: CreateStreamShards -1",
			call:  biNewSubscriber(biSub(func(c *kinesis.SubscriberConfig) { c.CreateStreamShards = -1 })),
			lines: []string{"kinesis: SubscriberConfig.CreateStreamShards is -1; it must be at least 1"}},
		{name: "SubscriberConfig: several problems at once",
			call: biNewSubscriber(func(*biWorld) kinesis.SubscriberConfig {
				return kinesis.SubscriberConfig{
					Group: kinesis.GroupConfig{
						Name:          "billing",
						LeaseDuration: -time.Second,
					},
					GetRecordsLimit:    10001,
					MaxInFlight:        -1,
					InitialPosition:    kinesis.Position{Type: kinesis.AtTimestamp},
					NackResendSleep:    -2 * time.Millisecond,
					CreateStreamShards: -1,
				}
			}),
			lines: []string{
				biSubNoClient,
				biNoStore,
				"kinesis: SubscriberConfig.GetRecordsLimit is 10001; Kinesis allows 1 to 10000",
				"kinesis: SubscriberConfig.MaxInFlight is -1; it must be at least 1",
				"kinesis: SubscriberConfig.InitialPosition is AtTimestamp but Timestamp is zero",
				"kinesis: SubscriberConfig.NackResendSleep is -2ms; use NoSleep to resend at once",
				"kinesis: SubscriberConfig.Group.LeaseDuration is -1s; it must not be negative",
				"kinesis: SubscriberConfig.CreateStreamShards is -1; it must be at least 1",
			}},
		{name: "SubscriberConfig.Validate by hand: only Client set (no error)",
			call: func(_ *testing.T, w *biWorld) error { return kinesis.SubscriberConfig{Client: w.log}.Validate() }},
		{name: "SubscriberConfig.Validate by hand: AWSConfig and no Client (no error)",
			call: func(*testing.T, *biWorld) error {
				return kinesis.SubscriberConfig{AWSConfig: &aws.Config{Region: "eu-west-1"}}.Validate()
			}},

		// Partition keys.
		{name: "partition key: empty (metadata field set to \"\")",
			call: biPublish(biStream, byCustomer, biMsg("m-0", []byte("x"), "customer_id", "")),
			want: biMessageErr(0, "m-0", "kinesis: invalid message: partition key is empty; Kinesis needs 1 to 256 characters"),
			is:   []error{kinesis.ErrInvalidMessage}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "partition key: 257 characters",
			call: biPublish(biStream, keyFunc(strings.Repeat("k", 257)), biMsg("m-0", []byte("x"))),
			want: biMessageErr(0, "m-0", "kinesis: invalid message: partition key is 257 characters long; Kinesis allows at most 256"),
			is:   []error{kinesis.ErrInvalidMessage}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "partition key: 256 two-byte characters (no error)",
			call: biPublish(biStream, keyFunc(strings.Repeat("é", 256)), biMsg("m-0", []byte("x"))),
			after: func(t *testing.T, w *biWorld) {
				w.wantWritten(biMsgs(biMsg("m-0", []byte("x"))), nil)
			}},
		{name: "partition key: not UTF-8",
			call: biPublish(biStream, keyFunc("k\xff"), biMsg("m-0", []byte("x"))),
			want: biMessageErr(0, "m-0", `kinesis: invalid message: partition key "k\xff" is not valid UTF-8`),
			is:   []error{kinesis.ErrInvalidMessage}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "partition key: PartitionKeyFromMetadata, field missing",
			call: biPublish(biStream, byCustomer, biMsg("m-0", []byte("x"))),
			want: biMessageErr(0, "m-0", `kinesis: invalid message: metadata field "customer_id", the partition key, is missing`),
			is:   []error{kinesis.ErrInvalidMessage}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "partition key: PartitionKeyFunc returns an error",
			call: biPublish(biStream, func(string, *message.Message) (string, error) { return "", errBINoTenant }, biMsg("m-0", []byte("x"))),
			want: biMessageErr(0, "m-0", "kinesis: invalid message: PartitionKeyFunc: no tenant for this message"),
			is:   []error{kinesis.ErrInvalidMessage, errBINoTenant}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "empty UUID with the default key (PartitionKeyFromUUID): a random key, delivered with the empty UUID",
			call: biPublish(biStream, nil, emptyUUID),
			after: func(t *testing.T, w *biWorld) {
				w.wantWritten(biMsgs(emptyUUID), func(_ int, key string) error {
					if len(key) != 36 {
						return fmt.Errorf("partition key %q is not a random UUID", key)
					}
					return nil
				})
			}},
		{name: "empty UUID with a metadata key (no error)",
			call: biPublish(biStream, byCustomer, biMsg("", []byte("x"), "customer_id", "c-1")),
			after: func(t *testing.T, w *biWorld) {
				w.wantWritten(biMsgs(biMsg("", []byte("x"), "customer_id", "c-1")), nil)
			}},

		// Sizes.
		{name: "size: record of exactly 1 MiB (no error)",
			call: biPublish(biStream, nil, biMsg("m-0", atLimit)),
			after: func(t *testing.T, w *biWorld) {
				w.wantWritten(biMsgs(biMsg("m-0", atLimit)), func(_ int, key string) error {
					if key != "m-0" {
						return fmt.Errorf("partition key %q, want m-0", key)
					}
					return nil
				})
				if n := len(w.records()[0].Data) + len("m-0"); n != biMiB {
					t.Errorf("record is %d bytes, want exactly %d", n, biMiB)
				}
			}},
		{name: "size: record of 1 MiB + 1 byte",
			call: biPublish(biStream, nil, biMsg("m-0", overLimit)),
			want: biMessageErr(0, "m-0", "kinesis: invalid message: record is 1048577 bytes (data 1048574 + partition key 3, payload 1048557, metadata and envelope the rest); Kinesis allows 1048576"),
			is:   []error{kinesis.ErrInvalidMessage}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "size: six records of exactly 1 MiB in one call (over 5 MiB: two PutRecords calls, no error)",
			call: biPublish(biStream, nil, sixAtLimit...),
			after: func(t *testing.T, w *biWorld) {
				// A call's requests go one after another: stored in the order given.
				w.wantWritten(sixAtLimit, nil)
			}},

		// Metadata: the envelope encodes any metadata (any bytes, an empty key); only its size
		// can be wrong.
		{name: "metadata: 1 MiB value",
			call: biPublish(biStream, nil, biMsg("m-0", []byte("p"), "blob", strings.Repeat("x", biMiB))),
			want: biMessageErr(0, "m-0", "kinesis: invalid message: record is 1048603 bytes (data 1048600 + partition key 3, payload 1, metadata and envelope the rest); Kinesis allows 1048576"),
			is:   []error{kinesis.ErrInvalidMessage}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "metadata: empty key, non-UTF-8 bytes, NUL, 64 KiB value (no error, delivered intact)",
			call: biPublish(biStream, nil, oddMetadata),
			after: func(t *testing.T, w *biWorld) {
				w.wantWritten(biMsgs(oddMetadata), nil)
			}},
		{name: "marshaling: the Marshaler returns an error",
			call: func(t *testing.T, w *biWorld) error {
				p := w.publisher(func(c *kinesis.PublisherConfig) { c.Marshaler = biFailingMarshaler{} })
				return p.Publish(biStream, biMsg("m-0", []byte("x")))
			},
			want: biMessageErr(0, "m-0", "kinesis: invalid message: marshaling: payload is not valid protobuf"),
			is:   []error{kinesis.ErrInvalidMessage, errBIEncode}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "marshaling: EnvelopeMarshaler.Marshal of a nil message",
			call: func(*testing.T, *biWorld) error {
				_, err := kinesis.EnvelopeMarshaler{}.Marshal(biStream, nil)
				return err
			},
			want: "kinesis: invalid message: message is nil", is: []error{kinesis.ErrInvalidMessage}},
		{name: "marshaling: RawMarshaler.Marshal of a nil message",
			call: func(*testing.T, *biWorld) error { _, err := kinesis.RawMarshaler{}.Marshal(biStream, nil); return err },
			want: "kinesis: invalid message: message is nil", is: []error{kinesis.ErrInvalidMessage}},

		// Messages in the slice.
		{name: "messages: nil message among good ones (none is written)",
			call: biPublish(biStream, nil, biMsg("m-0", []byte("x")), nil, biMsg("m-2", []byte("x"))),
			want: biMessageErr(1, "", "kinesis: invalid message: message is nil"),
			is:   []error{kinesis.ErrInvalidMessage}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "messages: two bad messages, every one reported, none written",
			call: biPublish(biStream, byCustomer, biMsg("m-0", []byte("x"), "customer_id", "c-1"), nil, biMsg("m-2", []byte("x"))),
			lines: []string{
				biMessageErr(1, "", "kinesis: invalid message: message is nil"),
				biMessageErr(2, "m-2", `kinesis: invalid message: metadata field "customer_id", the partition key, is missing`),
			},
			is: []error{kinesis.ErrInvalidMessage}, as: new(*kinesis.MessageError), after: biNothingWritten},
		{name: "messages: the message context is cancelled",
			call: func(t *testing.T, w *biWorld) error {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				m := biMsg("m-0", []byte("x"))
				m.SetContext(ctx)
				return w.publisher(nil).Publish(biStream, m)
			},
			want: `kinesis: 1 message(s) not written to stream "orders"; message 0 (uuid "m-0"): not sent: the context of the call's first message ended before publishing: context canceled`,
			is:   []error{context.Canceled}, as: new(*kinesis.PublishError), after: biNothingWritten},

		// Publish with zero messages: as Watermill's other publishers (GoChannel, Kafka), no
		// error and no call; the stream name is still checked.
		{name: "zero messages (no error, nothing written)",
			call: biPublish(biStream, nil), after: biNothingWritten},
		{name: "zero messages, empty slice (no error)",
			call: biPublish(biStream, nil, []*message.Message{}...), after: biNothingWritten},
		{name: "zero messages to a missing stream (no error, no call)",
			call: biPublish("nope", nil)},
		{name: "zero messages to an invalid stream name",
			call: biPublish("", nil),
			want: "kinesis: invalid stream name: the stream name (the topic) is empty",
			is:   []error{kinesis.ErrInvalidStreamName}},

		// Streams that do not exist.
		{name: "Publish to a missing stream",
			call: biPublish("nope", nil, biMsg("m-0", []byte("x"))),
			want: `kinesis: 1 message(s) not written to stream "nope"; message 0 (uuid "m-0"): kinesis: stream not found: "nope" (create it, or set PublisherConfig.CreateStream): ResourceNotFoundException: Stream nope under account 000000000000 not found.`,
			is:   []error{kinesis.ErrStreamNotFound}, as: new(*kinesis.PublishError)},
		{name: "Publish to a missing stream of 128 characters (the longest valid name)",
			call: biPublish(s128, nil, biMsg("m-0", []byte("x"))),
			want: fmt.Sprintf(`kinesis: 1 message(s) not written to stream %q; message 0 (uuid "m-0"): kinesis: stream not found: %q (create it, or set PublisherConfig.CreateStream): ResourceNotFoundException: Stream %s under account 000000000000 not found.`, s128, s128, s128),
			is:   []error{kinesis.ErrStreamNotFound}, as: new(*types.ResourceNotFoundException)},
		{name: "Subscribe to a missing stream",
			call: func(t *testing.T, w *biWorld) error {
				_, err := w.subscriber(nil).Subscribe(context.Background(), "nope")
				return err
			},
			want: biNotFound, is: []error{kinesis.ErrStreamNotFound}, as: new(*types.ResourceNotFoundException)},
		{name: "SubscribeInitialize of a missing stream",
			call: func(t *testing.T, w *biWorld) error { return w.subscriber(nil).SubscribeInitialize("nope") },
			want: biNotFound, is: []error{kinesis.ErrStreamNotFound}},

		// Positions.
		{name: "position: AtTimestamp an hour after Kinesis's clock",
			call: func(t *testing.T, w *biWorld) error {
				s := w.subscriber(func(c *kinesis.SubscriberConfig) {
					c.InitialPosition = kinesis.Position{Type: kinesis.AtTimestamp, Timestamp: biNow.Add(time.Hour)}
				})
				_, err := s.Subscribe(context.Background(), biStream)
				return err
			},
			want: `kinesis: stream "orders" shard "shardId-000000000000": getting a shard iterator: InvalidArgumentException: The timestampInMillis parameter cannot be greater than the currentTimestampInMillis. timestampInMillis: 1709298000000, currentTimestampInMillis: 1709294400000`,
			as:   new(*kinesis.ShardError)},
		{name: "position: AtTimestamp before 1970 (no error: reads from the oldest record)",
			call: func(t *testing.T, w *biWorld) error {
				if err := w.publisher(nil).Publish(biStream, biMsg("m-0", []byte("x"))); err != nil {
					return err
				}
				s := w.subscriber(func(c *kinesis.SubscriberConfig) {
					c.InitialPosition = kinesis.Position{Type: kinesis.AtTimestamp, Timestamp: time.Unix(-100, 0)}
				})
				ch, err := s.Subscribe(context.Background(), biStream)
				if err != nil {
					return err
				}
				select {
				case m := <-ch:
					m.Ack()
					if m.UUID != "m-0" {
						t.Errorf("read %q, want m-0", m.UUID)
					}
				case <-time.After(biStall / 2):
					t.Errorf("nothing read from before 1970")
				}
				return nil
			}},

		// Lifecycle.
		{name: "Publish after Close",
			call: func(t *testing.T, w *biWorld) error {
				p := w.publisher(nil)
				_ = p.Close()
				return p.Publish(biStream, biMsg("m-0", []byte("x")))
			},
			want: `kinesis: publisher is closed: not publishing 1 message(s) to stream "orders"`,
			is:   []error{kinesis.ErrPublisherClosed}, after: biNothingWritten},
		{name: "Publish of zero messages after Close",
			call: func(t *testing.T, w *biWorld) error {
				p := w.publisher(nil)
				_ = p.Close()
				return p.Publish(biStream)
			},
			want: `kinesis: publisher is closed: not publishing 0 message(s) to stream "orders"`,
			is:   []error{kinesis.ErrPublisherClosed}},
		{name: "Publish after Close to an invalid stream name (closed wins)",
			call: func(t *testing.T, w *biWorld) error {
				p := w.publisher(nil)
				_ = p.Close()
				return p.Publish("bad name", biMsg("m-0", []byte("x")))
			},
			want: `kinesis: publisher is closed: not publishing 1 message(s) to stream "bad name"`,
			is:   []error{kinesis.ErrPublisherClosed}},
		{name: "Publisher: Close twice (both nil)",
			call: func(t *testing.T, w *biWorld) error { return biCloseTwice(w.publisher(nil)) }},
		{name: "Subscribe after Close",
			call: func(t *testing.T, w *biWorld) error {
				s := w.subscriber(nil)
				_ = s.Close()
				_, err := s.Subscribe(context.Background(), biStream)
				return err
			},
			want: `kinesis: subscriber is closed: not subscribing to stream "orders"`,
			is:   []error{kinesis.ErrSubscriberClosed}},
		{name: "Subscribe after Close to an invalid stream name (closed wins)",
			call: func(t *testing.T, w *biWorld) error {
				s := w.subscriber(nil)
				_ = s.Close()
				_, err := s.Subscribe(context.Background(), "bad name")
				return err
			},
			want: `kinesis: subscriber is closed: not subscribing to stream "bad name"`,
			is:   []error{kinesis.ErrSubscriberClosed}},
		{name: "SubscribeInitialize after Close",
			call: func(t *testing.T, w *biWorld) error {
				s := w.subscriber(nil)
				_ = s.Close()
				return s.SubscribeInitialize(biStream)
			},
			want: `kinesis: subscriber is closed: not initializing stream "orders"`,
			is:   []error{kinesis.ErrSubscriberClosed}},
		{name: "Subscriber: Close twice with a subscription open (both nil, channel closed after the first)",
			call: func(t *testing.T, w *biWorld) error {
				s := w.subscriber(nil)
				ch, err := s.Subscribe(context.Background(), biStream)
				if err != nil {
					return err
				}
				if err := s.Close(); err != nil {
					return fmt.Errorf("first Close: %w", err)
				}
				select {
				case _, open := <-ch:
					if open {
						t.Errorf("a message arrived after Close")
					}
				default:
					t.Errorf("the channel is not closed when Close returns")
				}
				if err := s.Close(); err != nil {
					return fmt.Errorf("second Close: %w", err)
				}
				return nil
			}},
		{name: "Subscribe with a nil context",
			call: func(t *testing.T, w *biWorld) error {
				var ctx context.Context // a nil context, as a caller might pass by mistake
				_, err := w.subscriber(nil).Subscribe(ctx, biStream)
				return err
			},
			want: `kinesis: nil context: Subscribe to stream "orders" needs a context (context.Background() reads until Close)`,
			is:   []error{kinesis.ErrNilContext}},
		{name: "Subscribe with a cancelled context",
			call: func(t *testing.T, w *biWorld) error {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				_, err := w.subscriber(nil).Subscribe(ctx, biStream)
				return err
			},
			want: `kinesis: listing the shards of stream "orders": context canceled`,
			is:   []error{context.Canceled}},
		{name: "RecordFromContext(nil) (no panic: not found)",
			call: func(t *testing.T, w *biWorld) error {
				var ctx context.Context
				if info, ok := kinesis.RecordFromContext(ctx); ok || info != (kinesis.RecordInfo{}) {
					t.Errorf("RecordFromContext(nil) = %+v, %v", info, ok)
				}
				return kinesis.DecodeErrorFromContext(ctx)
			}},
	}

	// Every duration of SubscriberConfig, negative, is reported under its own name, alone.
	for _, d := range []struct {
		name string
		set  func(c *kinesis.SubscriberConfig)
	}{
		{"PollInterval", func(c *kinesis.SubscriberConfig) { c.PollInterval = -time.Second }},
		{"MinReadInterval", func(c *kinesis.SubscriberConfig) { c.MinReadInterval = -time.Second }},
		{"Group.CheckpointInterval", func(c *kinesis.SubscriberConfig) { c.Group.CheckpointInterval = -time.Second }},
		{"Group.LeaseDuration", func(c *kinesis.SubscriberConfig) { c.Group.LeaseDuration = -time.Second }},
		{"Group.LeaseRenewInterval", func(c *kinesis.SubscriberConfig) { c.Group.LeaseRenewInterval = -time.Second }},
		{"Group.LeaseSyncInterval", func(c *kinesis.SubscriberConfig) { c.Group.LeaseSyncInterval = -time.Second }},
		{"ShardSyncInterval", func(c *kinesis.SubscriberConfig) { c.ShardSyncInterval = -time.Second }},
		{"Group.HandoffTimeout", func(c *kinesis.SubscriberConfig) { c.Group.HandoffTimeout = -time.Second }},
		{"CloseTimeout", func(c *kinesis.SubscriberConfig) { c.CloseTimeout = -time.Second }},
	} {
		rows = append(rows, biRow{
			name:  "SubscriberConfig: " + d.name + " -1s",
			call:  biNewSubscriber(biSub(d.set)),
			lines: []string{"kinesis: SubscriberConfig." + d.name + " is -1s; it must not be negative"},
		})
	}

	// Stream names, for each call that takes one.
	for _, name := range []struct{ name, stream, want string }{
		{"empty", "", "kinesis: invalid stream name: the stream name (the topic) is empty"},
		{"129 characters", s129, fmt.Sprintf("kinesis: invalid stream name: %q is 129 characters long; Kinesis allows at most 128", s129)},
		{"a space", "bad name!", `kinesis: invalid stream name: "bad name!" has ' ' at byte 3` + biBadChars},
		{"a slash", "orders/eu", `kinesis: invalid stream name: "orders/eu" has '/' at byte 6` + biBadChars},
		{"a non-ASCII letter", "ordérs", `kinesis: invalid stream name: "ordérs" has 'é' at byte 3` + biBadChars},
		{"a byte that is not UTF-8", "orders\xff", `kinesis: invalid stream name: "orders\xff" has '�' at byte 6` + biBadChars},
	} {
		for _, call := range []struct {
			name string
			call func(t *testing.T, w *biWorld) error
		}{
			{"Publish", func(t *testing.T, w *biWorld) error {
				return w.publisher(nil).Publish(name.stream, biMsg("m-0", []byte("x")))
			}},
			{"Subscribe", func(t *testing.T, w *biWorld) error {
				ch, err := w.subscriber(nil).Subscribe(context.Background(), name.stream)
				if ch != nil {
					t.Errorf("Subscribe returned a channel together with its error")
				}
				return err
			}},
			{"SubscribeInitialize", func(t *testing.T, w *biWorld) error {
				return w.subscriber(nil).SubscribeInitialize(name.stream)
			}},
		} {
			rows = append(rows, biRow{
				name: fmt.Sprintf("stream name with %s: %s", name.name, call.name),
				call: call.call, want: name.want, is: []error{kinesis.ErrInvalidStreamName},
				after: biNothingWritten,
			})
		}
	}
	return rows
}

// TestBadInput is the bad input table: for every row, the call must return at once (no stall,
// no panic) with exactly the error given, matching its sentinels and type, and write nothing it
// should not.
func TestBadInput(t *testing.T) {
	for _, row := range biRows() {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			w := newBIWorld(t)
			stall := time.AfterFunc(biStall, func() {
				panic(fmt.Sprintf("bad input row %q stalled for %s", row.name, biStall))
			})
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v\n%s", r, debug.Stack())
					}
				}()
				err = row.call(t, w)
			}()
			stall.Stop()

			switch {
			case row.want == "" && row.lines == nil:
				if err != nil {
					t.Fatalf("error %q, want none", err)
				}
			case err == nil:
				t.Fatalf("no error, want %q", append([]string{row.want}, row.lines...))
			case row.lines != nil:
				got := strings.Split(err.Error(), "\n")
				if strings.Join(got, "\n") != strings.Join(row.lines, "\n") {
					t.Errorf("error lines:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(row.lines, "\n  "))
				}
			default:
				if err.Error() != row.want {
					t.Errorf("error:\n  %s\nwant:\n  %s", err, row.want)
				}
			}
			for _, target := range row.is {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(err, %v) = false for %q", target, err)
				}
			}
			if row.as != nil && !errors.As(err, row.as) {
				t.Errorf("errors.As(err, %T) = false for %q (%T)", row.as, err, err)
			}
			if row.after != nil {
				row.after(t, w)
			}
		})
	}
}
