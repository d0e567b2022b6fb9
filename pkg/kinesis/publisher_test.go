package kinesis_test

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// Kinesis limits the publisher must respect.
const (
	pubMaxRecord   = 1 << 20 // data + partition key of one record
	pubMaxPutBytes = 5 << 20 // data + keys of one PutRecords call
	pubMaxPutCount = 500     // entries of one PutRecords call
)

// pubPromptly bounds how long a test waits for something that should happen at once; it is a
// failure deadline, never a synchronisation.
const pubPromptly = 10 * time.Second

// pubNewLog returns a memlog.Log holding stream with the given number of shards.
func pubNewLog(t *testing.T, stream string, shards int32) *memlog.Log {
	t.Helper()
	l := memlog.New(memlog.Config{})
	if stream != "" {
		if _, err := l.CreateStream(context.Background(), &awskinesis.CreateStreamInput{StreamName: &stream, ShardCount: &shards}); err != nil {
			t.Fatalf("creating stream %q: %v", stream, err)
		}
	}
	return l
}

// pubNewPublisher returns a Publisher closed when the test ends.
func pubNewPublisher(t *testing.T, cfg kinesis.PublisherConfig) *kinesis.Publisher {
	t.Helper()
	p, err := kinesis.NewPublisher(cfg, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// pubCalls counts the calls a memlog.Log receives, by operation, through its fault hook.
type pubCalls struct {
	mu sync.Mutex
	n  map[string]int
}

// pubCountCalls installs a fault hook on l that counts every call and then runs next (if any),
// whose result becomes the call's.
func pubCountCalls(l *memlog.Log, next memlog.FaultFunc) *pubCalls {
	c := &pubCalls{n: map[string]int{}}
	l.SetFault(func(ctx context.Context, call memlog.Call) error {
		c.mu.Lock()
		c.n[call.Op]++
		c.mu.Unlock()
		if next != nil {
			return next(ctx, call)
		}
		return nil
	})
	return c
}

func (c *pubCalls) get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

func (c *pubCalls) all() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// pubBatch is what one PutRecords call that passed validation carried.
type pubBatch struct {
	entries int
	bytes   int // data + partition keys
	keys    []string
}

// pubBatches records every PutRecords call that reaches the per-entry hook.
type pubBatches struct {
	mu    sync.Mutex
	calls []pubBatch
}

// pubRecordBatches installs a per-entry hook on l that records each call's entries and then
// runs next (if any), whose result becomes the entry's. Entry 0 starts a new call; calls must
// not run concurrently.
func pubRecordBatches(l *memlog.Log, next memlog.EntryFaultFunc) *pubBatches {
	b := &pubBatches{}
	l.SetPutRecordsEntryFault(func(stream string, i int, e types.PutRecordsRequestEntry) (string, string) {
		b.mu.Lock()
		if i == 0 {
			b.calls = append(b.calls, pubBatch{})
		}
		cur := &b.calls[len(b.calls)-1]
		cur.entries++
		cur.bytes += len(e.Data) + len(*e.PartitionKey)
		cur.keys = append(cur.keys, *e.PartitionKey)
		b.mu.Unlock()
		if next != nil {
			return next(stream, i, e)
		}
		return "", ""
	})
	return b
}

func (b *pubBatches) get() []pubBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]pubBatch(nil), b.calls...)
}

// pubRecord is a record read back from memlog, with its decoded message.
type pubRecord struct {
	shardID string
	record  types.Record
	msg     *message.Message
}

// pubShards lists the stream's shards.
func pubShards(t *testing.T, l *memlog.Log, stream string) []types.Shard {
	t.Helper()
	out, err := l.ListShards(context.Background(), &awskinesis.ListShardsInput{StreamName: &stream})
	if err != nil {
		t.Fatalf("ListShards %q: %v", stream, err)
	}
	if out.NextToken != nil {
		t.Fatalf("ListShards %q: more than one page of shards", stream)
	}
	return out.Shards
}

// pubReadAll reads every shard of the stream from TRIM_HORIZON and decodes each record with
// the envelope marshaler. Records come shard by shard, in sequence order within a shard.
func pubReadAll(t *testing.T, l *memlog.Log, stream string) []pubRecord {
	t.Helper()
	ctx := context.Background()
	var all []pubRecord
	for _, sh := range pubShards(t, l, stream) {
		it, err := l.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{
			StreamName: &stream, ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatalf("GetShardIterator %s: %v", *sh.ShardId, err)
		}
		iter := it.ShardIterator
		for iter != nil {
			out, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatalf("GetRecords %s: %v", *sh.ShardId, err)
			}
			for _, rec := range out.Records {
				msg, err := kinesis.EnvelopeMarshaler{}.Unmarshal(stream, *sh.ShardId, &rec)
				if err != nil {
					t.Fatalf("decoding record %s of shard %s: %v", *rec.SequenceNumber, *sh.ShardId, err)
				}
				all = append(all, pubRecord{shardID: *sh.ShardId, record: rec, msg: msg})
			}
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return all
}

func pubStr(s string) *string { return &s }

// pubMessages returns n messages with distinct payloads; key, if not nil, gives message i
// metadata "key".
func pubMessages(n int, key func(i int) string) []*message.Message {
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("payload %d", i)))
		if key != nil {
			msgs[i].Metadata.Set("key", key(i))
		}
	}
	return msgs
}

// pubMessageErrors returns every *MessageError in err's tree, in order.
func pubMessageErrors(err error) []*kinesis.MessageError {
	var out []*kinesis.MessageError
	var walk func(error)
	walk = func(e error) {
		if me, ok := e.(*kinesis.MessageError); ok {
			out = append(out, me)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			if c := u.Unwrap(); c != nil {
				walk(c)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// pubWantContains fails the test unless s contains every one of subs.
func pubWantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s %q does not mention %q", what, s, sub)
		}
	}
}

// pubLargestPayload is the largest payload that fits one record with the envelope's overhead
// for a message of this UUID, no metadata, and this partition key.
func pubLargestPayload(t *testing.T, uuid, key string) int {
	t.Helper()
	n := pubMaxRecord - len(key)
	for {
		data, err := kinesis.EnvelopeMarshaler{}.Marshal("s", message.NewMessage(uuid, make([]byte, n)))
		if err != nil {
			t.Fatal(err)
		}
		over := len(data) + len(key) - pubMaxRecord
		if over <= 0 {
			return n
		}
		n -= over
	}
}

func TestPublish_InvalidInputIsRejectedBeforeAnyCall(t *testing.T) {
	const stream = "orders"
	byKey := kinesis.PartitionKeyFromMetadata("key")
	good := func(i int) *message.Message {
		m := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("good %d", i)))
		m.Metadata.Set("key", "customer-1")
		return m
	}
	// withBad returns three good messages with bad in the middle (index 2 of 4).
	withBad := func(bad *message.Message) []*message.Message {
		return []*message.Message{good(0), good(1), bad, good(3)}
	}
	keyed := func(key string) *message.Message {
		m := message.NewMessage(watermill.NewUUID(), []byte("x"))
		m.Metadata.Set("key", key)
		return m
	}
	noKey := message.NewMessage(watermill.NewUUID(), []byte("x"))
	huge := keyed("customer-1")
	huge.Payload = make([]byte, 1<<20)

	cases := []struct {
		name   string
		stream string
		msgs   []*message.Message
		// badIndex is the message the error is about; -1 when it is not about a message.
		badIndex int
		want     []string
	}{
		{name: "empty stream name", stream: "", msgs: pubMessages(2, nil), badIndex: -1,
			want: []string{"stream name", "empty"}},
		{name: "stream name with a bad character", stream: "bad name!", msgs: pubMessages(2, nil), badIndex: -1,
			want: []string{`"bad name!"`, "' '", "letters, digits"}},
		{name: "stream name of 129 characters", stream: strings.Repeat("s", 129), msgs: pubMessages(2, nil), badIndex: -1,
			want: []string{strings.Repeat("s", 129), "129", "at most 128"}},
		{name: "empty partition key", stream: stream, msgs: withBad(keyed("")), badIndex: 2,
			want: []string{"partition key is empty"}},
		{name: "partition key of 257 characters", stream: stream, msgs: withBad(keyed(strings.Repeat("k", 257))), badIndex: 2,
			want: []string{"partition key", "257 characters", "at most 256"}},
		{name: "partition key of 257 multi-byte characters", stream: stream, msgs: withBad(keyed(strings.Repeat("é", 257))), badIndex: 2,
			want: []string{"257 characters"}},
		{name: "record over 1 MiB", stream: stream, msgs: withBad(huge), badIndex: 2,
			want: []string{"record is", "bytes", "payload 1048576", "allows 1048576"}},
		{name: "nil message", stream: stream, msgs: withBad(nil), badIndex: 2,
			want: []string{"message is nil"}},
		{name: "partition key metadata field missing", stream: stream, msgs: withBad(noKey), badIndex: 2,
			want: []string{`metadata field "key"`, "missing"}},
		{name: "bad first message", stream: stream, msgs: []*message.Message{keyed(""), good(1)}, badIndex: 0,
			want: []string{"partition key is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := pubNewLog(t, stream, 2)
			calls := pubCountCalls(l, nil)
			p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, PartitionKey: byKey})

			err := p.Publish(tc.stream, tc.msgs...)
			if err == nil {
				t.Fatal("Publish accepted bad input")
			}
			pubWantContains(t, "error", err.Error(), tc.want...)
			if got := calls.all(); len(got) != 0 {
				t.Errorf("Publish called Kinesis (%v) before rejecting its input", got)
			}

			if tc.badIndex < 0 {
				if errors.Is(err, kinesis.ErrInvalidMessage) || len(pubMessageErrors(err)) != 0 {
					t.Errorf("a bad stream name is reported as a bad message: %v", err)
				}
				if !errors.Is(err, kinesis.ErrInvalidStreamName) {
					t.Errorf("errors.Is(%v, ErrInvalidStreamName) = false", err)
				}
			} else {
				if !errors.Is(err, kinesis.ErrInvalidMessage) {
					t.Errorf("errors.Is(%v, ErrInvalidMessage) = false", err)
				}
				var me *kinesis.MessageError
				if !errors.As(err, &me) {
					t.Fatalf("error %v (%T) is not a *MessageError", err, err)
				}
				bad := tc.msgs[tc.badIndex]
				wantUUID := ""
				if bad != nil {
					wantUUID = bad.UUID
				}
				if me.Index != tc.badIndex || me.UUID != wantUUID || me.Stream != tc.stream {
					t.Errorf("MessageError names message %d (uuid %q) of stream %q; want %d (uuid %q) of %q",
						me.Index, me.UUID, me.Stream, tc.badIndex, wantUUID, tc.stream)
				}
				if !errors.Is(me, kinesis.ErrInvalidMessage) {
					t.Errorf("MessageError %v does not wrap ErrInvalidMessage", me)
				}
				pubWantContains(t, "error", err.Error(), fmt.Sprintf("message %d", tc.badIndex), fmt.Sprintf("%q", wantUUID), fmt.Sprintf("%q", tc.stream))
				if n := len(pubMessageErrors(err)); n != 1 {
					t.Errorf("%d messages reported, want only the bad one: %v", n, err)
				}
				if recs := pubReadAll(t, l, stream); len(recs) != 0 {
					t.Errorf("%d record(s) written although one message was bad", len(recs))
				}
			}
		})
	}
}

func TestPublish_EveryBadMessageIsReported(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	calls := pubCountCalls(l, nil)
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, PartitionKey: kinesis.PartitionKeyFromMetadata("key")})

	msgs := pubMessages(5, func(i int) string { return fmt.Sprintf("k%d", i) })
	msgs[1].Metadata.Set("key", "")
	delete(msgs[3].Metadata, "key")
	msgs[4] = nil

	err := p.Publish(stream, msgs...)
	if !errors.Is(err, kinesis.ErrInvalidMessage) {
		t.Fatalf("Publish: %v, want ErrInvalidMessage", err)
	}
	mes := pubMessageErrors(err)
	if len(mes) != 3 {
		t.Fatalf("%d message errors, want 3 (messages 1, 3, 4): %v", len(mes), err)
	}
	for i, want := range []struct {
		index int
		uuid  string
		text  string
	}{{1, msgs[1].UUID, "empty"}, {3, msgs[3].UUID, "missing"}, {4, "", "nil"}} {
		if mes[i].Index != want.index || mes[i].UUID != want.uuid {
			t.Errorf("error %d names message %d (uuid %q), want %d (uuid %q)", i, mes[i].Index, mes[i].UUID, want.index, want.uuid)
		}
		pubWantContains(t, "message error", mes[i].Error(), want.text)
	}
	if got := calls.all(); len(got) != 0 {
		t.Errorf("Publish called Kinesis (%v) before rejecting its input", got)
	}
}

func TestPublish_StreamNotFound(t *testing.T) {
	l := pubNewLog(t, "", 0)
	calls := pubCountCalls(l, nil)
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l})

	msgs := pubMessages(3, nil)
	err := p.Publish("no-such-stream", msgs...)
	if !errors.Is(err, kinesis.ErrStreamNotFound) {
		t.Fatalf("Publish to a missing stream: %v, want ErrStreamNotFound", err)
	}
	var rnf *types.ResourceNotFoundException
	if !errors.As(err, &rnf) {
		t.Errorf("error %v does not keep the ResourceNotFoundException", err)
	}
	pubWantContains(t, "error", err.Error(), `"no-such-stream"`, "CreateStream")
	var pe *kinesis.PublishError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *PublishError", err)
	}
	if len(pe.Failed) != len(msgs) {
		t.Errorf("PublishError lists %d messages, want all %d", len(pe.Failed), len(msgs))
	}
	if n := calls.get("PutRecords"); n != 1 {
		t.Errorf("%d PutRecords calls for a missing stream, want 1 (no retries)", n)
	}
	if n := calls.get("CreateStream"); n != 0 {
		t.Errorf("stream created with CreateStream off")
	}
}

func TestPublish_CloseAndEmpty(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	calls := pubCountCalls(l, nil)
	p, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: l}, nil)
	if err != nil {
		t.Fatal(err)
	}

	if err := p.Publish(stream); err != nil {
		t.Errorf("Publish with no messages: %v", err)
	}
	if err := p.Publish("no-such-stream"); err != nil {
		t.Errorf("Publish with no messages to a missing stream: %v", err)
	}
	if got := calls.all(); len(got) != 0 {
		t.Errorf("Publish with no messages called Kinesis: %v", got)
	}

	if err := p.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	err = p.Publish(stream, pubMessages(1, nil)...)
	if !errors.Is(err, kinesis.ErrPublisherClosed) {
		t.Fatalf("Publish after Close: %v, want ErrPublisherClosed", err)
	}
	if err := p.Publish(stream); !errors.Is(err, kinesis.ErrPublisherClosed) {
		t.Errorf("Publish of no messages after Close: %v, want ErrPublisherClosed", err)
	}
	if got := calls.all(); len(got) != 0 {
		t.Errorf("Publish after Close called Kinesis: %v", got)
	}
}

func TestPublish_BatchesByCount(t *testing.T) {
	const stream = "orders"
	for _, tc := range []struct{ msgs, calls int }{
		{1, 1}, {100, 1}, {500, 1}, {501, 2}, {1200, 3},
	} {
		t.Run(fmt.Sprint(tc.msgs), func(t *testing.T) {
			l := pubNewLog(t, stream, 4)
			calls := pubCountCalls(l, nil)
			batches := pubRecordBatches(l, nil)
			p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l})

			if err := p.Publish(stream, pubMessages(tc.msgs, nil)...); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if n := calls.get("PutRecords"); n != tc.calls {
				t.Errorf("%d messages took %d PutRecords calls, want %d", tc.msgs, n, tc.calls)
			}
			for i, b := range batches.get() {
				if b.entries > pubMaxPutCount {
					t.Errorf("call %d carried %d entries; Kinesis allows %d", i, b.entries, pubMaxPutCount)
				}
			}
			if n := len(pubReadAll(t, l, stream)); n != tc.msgs {
				t.Errorf("%d records in the stream, want %d", n, tc.msgs)
			}
		})
	}
}

func TestPublish_RoundTrip(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 3)
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l})

	msgs := []*message.Message{
		message.NewMessage(watermill.NewUUID(), []byte(`{"order":1}`)),
		message.NewMessage(watermill.NewUUID(), []byte{}),
		message.NewMessage(watermill.NewUUID(), []byte{0xff, 0x00, 0xfe}),
		message.NewMessage("not-a-uuid", []byte("custom uuid")),
	}
	msgs[0].Metadata.Set("type", "OrderPlaced")
	msgs[0].Metadata.Set("trace_id", "abc")
	msgs[1].Metadata.Set("", "empty key")
	msgs[2].Metadata.Set("unicode", "žluťoučký kůň")
	for i := range 40 {
		msgs[2].Metadata.Set(fmt.Sprintf("k%02d", i), strings.Repeat("v", i))
	}

	if err := p.Publish(stream, msgs...); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got := map[string]*message.Message{}
	for _, r := range pubReadAll(t, l, stream) {
		if got[r.msg.UUID] != nil {
			t.Errorf("message %s read twice", r.msg.UUID)
		}
		got[r.msg.UUID] = r.msg
	}
	if len(got) != len(msgs) {
		t.Errorf("%d messages read back, want %d", len(got), len(msgs))
	}
	for _, want := range msgs {
		m := got[want.UUID]
		if m == nil {
			t.Errorf("message %s not found in the stream", want.UUID)
			continue
		}
		if string(m.Payload) != string(want.Payload) {
			t.Errorf("message %s: payload %q, want %q", want.UUID, m.Payload, want.Payload)
		}
		if !maps.Equal(m.Metadata, want.Metadata) {
			t.Errorf("message %s: metadata %v, want %v", want.UUID, m.Metadata, want.Metadata)
		}
	}
}

func TestPublish_LargestRecordFits(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l})

	uuid := watermill.NewUUID()
	n := pubLargestPayload(t, uuid, uuid)
	if overhead := pubMaxRecord - len(uuid) - n; overhead > 64 {
		t.Fatalf("envelope overhead of %d bytes is implausibly large", overhead)
	}
	fits := message.NewMessage(uuid, make([]byte, n))
	for i := range fits.Payload {
		fits.Payload[i] = byte(i)
	}
	if err := p.Publish(stream, fits); err != nil {
		t.Fatalf("Publish of a %d-byte payload that fits exactly: %v", n, err)
	}
	recs := pubReadAll(t, l, stream)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	if size := len(recs[0].record.Data) + len(*recs[0].record.PartitionKey); size != pubMaxRecord {
		t.Errorf("record is %d bytes, want exactly %d", size, pubMaxRecord)
	}
	if string(recs[0].msg.Payload) != string(fits.Payload) {
		t.Error("payload changed on the way")
	}

	tooBig := message.NewMessage(uuid, make([]byte, n+1))
	err := p.Publish(stream, tooBig)
	if !errors.Is(err, kinesis.ErrInvalidMessage) {
		t.Fatalf("Publish one byte over the limit: %v, want ErrInvalidMessage", err)
	}
	pubWantContains(t, "error", err.Error(), fmt.Sprintf("record is %d bytes", pubMaxRecord+1))
}

func TestPublish_BatchesBySize(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 2)
	calls := pubCountCalls(l, nil)
	batches := pubRecordBatches(l, nil)
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l})

	msgs := make([]*message.Message, 12)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), make([]byte, 500<<10))
	}
	if err := p.Publish(stream, msgs...); err != nil {
		t.Fatalf("Publish of 12 × 500 KiB: %v", err)
	}
	got := batches.get()
	if len(got) < 2 || calls.get("PutRecords") != len(got) {
		t.Fatalf("%d PutRecords calls (%d reached storage), want at least 2, all accepted", calls.get("PutRecords"), len(got))
	}
	total := 0
	for i, b := range got {
		if b.bytes > pubMaxPutBytes {
			t.Errorf("call %d carried %d bytes; Kinesis allows %d", i, b.bytes, pubMaxPutBytes)
		}
		total += b.entries
	}
	if total != len(msgs) {
		t.Errorf("calls carried %d entries, want %d", total, len(msgs))
	}
	if n := len(pubReadAll(t, l, stream)); n != len(msgs) {
		t.Errorf("%d records in the stream, want %d", n, len(msgs))
	}
}

// pubCheckOrder checks that the stream holds each published message exactly once and, for each
// partition key, in the order published.
func pubCheckOrder(t *testing.T, l *memlog.Log, stream string, msgs []*message.Message) {
	t.Helper()
	want := map[string][]string{} // key -> UUIDs in publish order
	for _, m := range msgs {
		k := m.Metadata.Get("key")
		want[k] = append(want[k], m.UUID)
	}
	got := map[string][]string{}
	seen := map[string]int{}
	shardOf := map[string]string{}
	for _, r := range pubReadAll(t, l, stream) {
		k := *r.record.PartitionKey
		got[k] = append(got[k], r.msg.UUID)
		seen[r.msg.UUID]++
		if s, ok := shardOf[k]; ok && s != r.shardID {
			t.Errorf("key %q found in shards %s and %s", k, s, r.shardID)
		}
		shardOf[k] = r.shardID
	}
	for _, m := range msgs {
		if seen[m.UUID] != 1 {
			t.Errorf("message %s found %d times, want once", m.UUID, seen[m.UUID])
		}
	}
	if len(seen) != len(msgs) {
		t.Errorf("%d distinct messages in the stream, want %d", len(seen), len(msgs))
	}
	for k, w := range want {
		if strings.Join(got[k], ",") != strings.Join(w, ",") {
			t.Errorf("key %q: messages out of publish order:\n got %v\nwant %v", k, got[k], w)
		}
	}
}

func TestPublish_RetriesKeepPerKeyOrder(t *testing.T) {
	const stream = "orders"
	for _, code := range []string{"ProvisionedThroughputExceededException", "InternalFailure"} {
		t.Run(code, func(t *testing.T) {
			l := pubNewLog(t, stream, 4)
			calls := pubCountCalls(l, nil)
			// Reject every third entry of the first 450 that reach storage: about a third of
			// the entries of the early attempts, different keys each time.
			var seen, rejected atomic.Int64
			l.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) {
				if n := seen.Add(1); n <= 450 && n%3 == 0 {
					rejected.Add(1)
					return code, ""
				}
				return "", ""
			})
			p := pubNewPublisher(t, kinesis.PublisherConfig{
				Client:       l,
				PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
				RetryBackoff: time.Millisecond,
			})

			msgs := pubMessages(300, func(i int) string { return fmt.Sprintf("customer-%d", i%5) })
			if err := p.Publish(stream, msgs...); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if rejected.Load() < 50 {
				t.Fatalf("only %d entries rejected; the test did not exercise retries", rejected.Load())
			}
			if n := calls.get("PutRecords"); n <= 60 {
				t.Errorf("%d PutRecords calls; want retries on top of 60 rounds", n)
			}
			pubCheckOrder(t, l, stream, msgs)
		})
	}
}

// Messages of one key in a single Publish call that a whole-call throttle interrupts still
// land in order, and none is lost or duplicated.
func TestPublish_WholeCallFailureIsRetried(t *testing.T) {
	const stream = "orders"
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"throttled", &types.ProvisionedThroughputExceededException{Message: pubStr("Rate exceeded")}},
		{"internal failure", &types.InternalFailureException{Message: pubStr("Internal service failure.")}},
		{"limit exceeded", &types.LimitExceededException{Message: pubStr("Rate exceeded")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := pubNewLog(t, stream, 2)
			var failures atomic.Int64
			calls := pubCountCalls(l, func(_ context.Context, c memlog.Call) error {
				if c.Op == "PutRecords" && failures.Add(1) <= 2 {
					return tc.err
				}
				return nil
			})
			p := pubNewPublisher(t, kinesis.PublisherConfig{
				Client:       l,
				PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
				RetryBackoff: time.Millisecond,
			})
			msgs := pubMessages(4, func(i int) string { return fmt.Sprintf("k%d", i%2) })
			if err := p.Publish(stream, msgs...); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			// Round 1 takes 3 calls (2 refused), round 2 one.
			if n := calls.get("PutRecords"); n != 4 {
				t.Errorf("%d PutRecords calls, want 4", n)
			}
			pubCheckOrder(t, l, stream, msgs)
		})
	}
}

func TestPublish_GivesUpAfterMaxRetries(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 2)
	calls := pubCountCalls(l, nil)
	l.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) {
		return "ProvisionedThroughputExceededException", ""
	})
	p := pubNewPublisher(t, kinesis.PublisherConfig{
		Client:       l,
		PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
		MaxRetries:   3,
		RetryBackoff: time.Millisecond,
	})

	// Keys a, a, b: round 1 holds messages 0 and 2, round 2 message 1.
	msgs := pubMessages(3, func(i int) string { return []string{"a", "a", "b"}[i] })
	err := p.Publish(stream, msgs...)
	var pe *kinesis.PublishError
	if !errors.As(err, &pe) {
		t.Fatalf("Publish: %v (%T), want a *PublishError", err, err)
	}
	if pe.Stream != stream {
		t.Errorf("PublishError.Stream = %q, want %q", pe.Stream, stream)
	}
	if n := calls.get("PutRecords"); n != 4 {
		t.Errorf("%d PutRecords calls, want 4 (1 + MaxRetries 3)", n)
	}
	if len(pe.Failed) != 3 {
		t.Fatalf("PublishError lists %d messages, want all 3: %v", len(pe.Failed), err)
	}
	for i, f := range pe.Failed {
		if f.Index != i || f.UUID != msgs[i].UUID || f.Stream != stream {
			t.Errorf("Failed[%d] names message %d (uuid %q, stream %q), want %d (uuid %q, stream %q)",
				i, f.Index, f.UUID, f.Stream, i, msgs[i].UUID, stream)
		}
	}
	pubWantContains(t, "rejected message error", pe.Failed[0].Error(), "ProvisionedThroughputExceededException", "Rate exceeded")
	pubWantContains(t, "rejected message error", pe.Failed[2].Error(), "ProvisionedThroughputExceededException")
	pubWantContains(t, "unsent message error", pe.Failed[1].Error(), "not sent", "3 retries")
	pubWantContains(t, "error", err.Error(), `"orders"`, "3 message(s) not written", msgs[0].UUID, msgs[1].UUID, msgs[2].UUID)
	var me *kinesis.MessageError
	if !errors.As(err, &me) || me.UUID != msgs[0].UUID {
		t.Errorf("errors.As finds no *MessageError for the first failed message in %v", err)
	}
	if recs := pubReadAll(t, l, stream); len(recs) != 0 {
		t.Errorf("%d records written, want none", len(recs))
	}
}

func TestPublish_PartialFailureListsOnlyUnwritten(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 2)
	l.SetPutRecordsEntryFault(func(_ string, _ int, e types.PutRecordsRequestEntry) (string, string) {
		if *e.PartitionKey == "a" {
			return "InternalFailure", ""
		}
		return "", ""
	})
	p := pubNewPublisher(t, kinesis.PublisherConfig{
		Client:       l,
		PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
		MaxRetries:   2,
		RetryBackoff: time.Millisecond,
	})

	// Round 1: messages 0 (a) and 1 (b); round 2: messages 2 (a) and 3 (b).
	msgs := pubMessages(4, func(i int) string { return []string{"a", "b"}[i%2] })
	err := p.Publish(stream, msgs...)
	var pe *kinesis.PublishError
	if !errors.As(err, &pe) {
		t.Fatalf("Publish: %v, want a *PublishError", err)
	}
	var got []int
	for _, f := range pe.Failed {
		got = append(got, f.Index)
	}
	if fmt.Sprint(got) != "[0 2 3]" {
		t.Fatalf("PublishError lists messages %v, want [0 2 3] (message 1 was written): %v", got, err)
	}
	pubWantContains(t, "rejected message error", pe.Failed[0].Error(), "InternalFailure")
	pubWantContains(t, "unsent message error", pe.Failed[1].Error(), "not sent")
	pubWantContains(t, "unsent message error", pe.Failed[2].Error(), "not sent")
	recs := pubReadAll(t, l, stream)
	if len(recs) != 1 || recs[0].msg.UUID != msgs[1].UUID {
		t.Errorf("stream holds %d records, want only message 1", len(recs))
	}
}

// AWS documents only ProvisionedThroughputExceededException and InternalFailure as entry error
// codes; any other code will not go away by sending the entry again.
func TestPublish_NonRetryableEntryErrorIsNotRetried(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	calls := pubCountCalls(l, nil)
	l.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) {
		return "KMSAccessDeniedException", "User is not authorized to use the key"
	})
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, MaxRetries: 5, RetryBackoff: time.Millisecond})

	msgs := pubMessages(2, nil)
	err := p.Publish(stream, msgs...)
	var pe *kinesis.PublishError
	if !errors.As(err, &pe) {
		t.Fatalf("Publish: %v, want a *PublishError", err)
	}
	if len(pe.Failed) != 2 {
		t.Errorf("PublishError lists %d messages, want 2", len(pe.Failed))
	}
	for _, f := range pe.Failed {
		pubWantContains(t, "message error", f.Error(), "KMSAccessDeniedException", "not authorized")
	}
	if n := calls.get("PutRecords"); n != 1 {
		t.Errorf("%d PutRecords calls for entries rejected with a non-retryable code, want 1", n)
	}
}

func TestPublish_FatalCallErrorIsNotRetried(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	calls := pubCountCalls(l, func(_ context.Context, c memlog.Call) error {
		if c.Op == "PutRecords" {
			return &types.InvalidArgumentException{Message: pubStr("nope")}
		}
		return nil
	})
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, RetryBackoff: time.Millisecond})

	err := p.Publish(stream, pubMessages(2, nil)...)
	var iae *types.InvalidArgumentException
	if !errors.As(err, &iae) {
		t.Fatalf("Publish: %v, want the InvalidArgumentException", err)
	}
	pubWantContains(t, "error", err.Error(), `"orders"`, "nope")
	if n := calls.get("PutRecords"); n != 1 {
		t.Errorf("%d PutRecords calls, want 1", n)
	}
}

func TestPublish_WholeCallThrottleGivesUp(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	calls := pubCountCalls(l, func(_ context.Context, c memlog.Call) error {
		if c.Op == "PutRecords" {
			return &types.ProvisionedThroughputExceededException{Message: pubStr("Rate exceeded")}
		}
		return nil
	})
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, MaxRetries: 2, RetryBackoff: time.Millisecond})

	msgs := pubMessages(2, nil)
	err := p.Publish(stream, msgs...)
	var pe *kinesis.PublishError
	if !errors.As(err, &pe) || len(pe.Failed) != 2 {
		t.Fatalf("Publish: %v, want a *PublishError listing both messages", err)
	}
	var thr *types.ProvisionedThroughputExceededException
	if !errors.As(err, &thr) {
		t.Errorf("error %v does not keep the throttling error", err)
	}
	if n := calls.get("PutRecords"); n != 3 {
		t.Errorf("%d PutRecords calls, want 3 (1 + MaxRetries 2)", n)
	}
}

func TestPublish_UsesMessageContext(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	entered := make(chan struct{})
	var once sync.Once
	pubCountCalls(l, func(ctx context.Context, c memlog.Call) error {
		if c.Op != "PutRecords" {
			return nil
		}
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return ctx.Err()
	})
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msg := message.NewMessage(watermill.NewUUID(), []byte("x"))
	msg.SetContext(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Publish(stream, msg) }()

	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("Publish returned %v before calling PutRecords", err)
	case <-time.After(pubPromptly):
		t.Fatal("PutRecords was never called")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Publish: %v, want an error wrapping context.Canceled", err)
		}
		pubWantContains(t, "error", err.Error(), msg.UUID)
	case <-time.After(pubPromptly):
		t.Fatal("Publish did not return after its message's context was cancelled")
	}
}

func TestPublish_AlreadyCancelledContext(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msg := message.NewMessage(watermill.NewUUID(), []byte("x"))
	msg.SetContext(ctx)
	if err := p.Publish(stream, msg); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with a cancelled context: %v, want context.Canceled", err)
	}
	if n := len(pubReadAll(t, l, stream)); n != 0 {
		t.Errorf("%d records written with a cancelled context", n)
	}
}

// Cancelling the message's context while Publish waits to retry rejected entries ends the wait
// at once, and the error says the context was cancelled.
func TestPublish_ContextCancelledDuringRetryBackoff(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	rejected := make(chan struct{})
	var once sync.Once
	l.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) {
		once.Do(func() { close(rejected) })
		return "ProvisionedThroughputExceededException", ""
	})
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, RetryBackoff: time.Hour, MaxRetryBackoff: time.Hour})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msg := message.NewMessage(watermill.NewUUID(), []byte("x"))
	msg.SetContext(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Publish(stream, msg) }()

	select {
	case <-rejected:
	case err := <-done:
		t.Fatalf("Publish returned %v before its entry was rejected", err)
	case <-time.After(pubPromptly):
		t.Fatal("PutRecords was never called")
	}
	cancel()
	select {
	case err := <-done:
		var pe *kinesis.PublishError
		if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Failed[0].UUID != msg.UUID {
			t.Errorf("Publish: %v, want a *PublishError naming the message", err)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Publish: %v, want an error wrapping context.Canceled", err)
		}
	case <-time.After(pubPromptly):
		t.Fatal("Publish kept waiting to retry after its message's context was cancelled")
	}
}

// When a retry of rejected entries then fails for another reason, the error reports that
// reason (here: the context was cancelled, the stream was deleted), not only the earlier
// rejection.
func TestPublish_RetryFailureReportsLatestReason(t *testing.T) {
	const stream = "orders"
	for _, tc := range []struct {
		name string
		// second is what the second PutRecords call does; cancel says whether the test then
		// cancels the message's context. (Only where that is the reason: a cancel racing the
		// stream-deleted answer may end the call first, as "context canceled while its
		// PutRecords request was out", which is right too.)
		second func(ctx context.Context, entered chan<- struct{}) error
		cancel bool
		check  func(t *testing.T, err error)
	}{
		{
			name:   "context cancelled",
			cancel: true,
			second: func(ctx context.Context, entered chan<- struct{}) error {
				close(entered)
				<-ctx.Done()
				return ctx.Err()
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Publish: %v, want an error wrapping context.Canceled", err)
				}
			},
		},
		{
			name: "stream deleted",
			second: func(_ context.Context, entered chan<- struct{}) error {
				close(entered)
				return &types.ResourceNotFoundException{Message: pubStr("Stream orders under account 000000000000 not found.")}
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, kinesis.ErrStreamNotFound) {
					t.Errorf("Publish: %v, want an error wrapping ErrStreamNotFound", err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := pubNewLog(t, stream, 1)
			entered := make(chan struct{})
			var calls atomic.Int64
			l.SetFault(func(ctx context.Context, c memlog.Call) error {
				if c.Op == "PutRecords" && calls.Add(1) == 2 {
					return tc.second(ctx, entered)
				}
				return nil
			})
			l.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) {
				return "ProvisionedThroughputExceededException", ""
			})
			p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, RetryBackoff: time.Millisecond})

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			msg := message.NewMessage(watermill.NewUUID(), []byte("x"))
			msg.SetContext(ctx)
			done := make(chan error, 1)
			go func() { done <- p.Publish(stream, msg) }()
			select {
			case <-entered:
			case err := <-done:
				t.Fatalf("Publish returned %v before its retry", err)
			case <-time.After(pubPromptly):
				t.Fatal("the rejected entry was never retried")
			}
			if tc.cancel {
				cancel()
			}
			select {
			case err := <-done:
				var pe *kinesis.PublishError
				if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Failed[0].UUID != msg.UUID {
					t.Errorf("Publish: %v, want a *PublishError naming the message", err)
				}
				tc.check(t, err)
			case <-time.After(pubPromptly):
				t.Fatal("Publish did not return")
			}
		})
	}
}

func TestPublish_CreateStream(t *testing.T) {
	const stream = "created-by-publisher"
	l := pubNewLog(t, "", 0)
	calls := pubCountCalls(l, nil)
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, CreateStream: true, CreateStreamShards: 3})

	first := pubMessages(1, nil)
	if err := p.Publish(stream, first...); err != nil {
		t.Fatalf("Publish to a new stream with CreateStream: %v", err)
	}
	out, err := l.DescribeStreamSummary(context.Background(), &awskinesis.DescribeStreamSummaryInput{StreamName: pubStr(stream)})
	if err != nil {
		t.Fatalf("DescribeStreamSummary: %v", err)
	}
	if got := *out.StreamDescriptionSummary.OpenShardCount; got != 3 {
		t.Errorf("created stream has %d shards, want 3", got)
	}
	second := pubMessages(1, nil)
	if err := p.Publish(stream, second...); err != nil {
		t.Fatalf("second Publish: %v", err)
	}
	if n := calls.get("CreateStream"); n != 1 {
		t.Errorf("%d CreateStream calls, want 1", n)
	}
	// One describe before creating, one to see it ACTIVE, and none on the second Publish
	// (DescribeStreamSummary above is the test's own).
	if n := calls.get("DescribeStreamSummary"); n > 3 {
		t.Errorf("%d DescribeStreamSummary calls; the second Publish should not check the stream again", n)
	}
	recs := pubReadAll(t, l, stream)
	if len(recs) != 2 || recs[0].msg.UUID == recs[1].msg.UUID {
		t.Fatalf("%d records read back, want the 2 published", len(recs))
	}
	for _, r := range recs {
		if r.msg.UUID != first[0].UUID && r.msg.UUID != second[0].UUID {
			t.Errorf("unexpected message %s", r.msg.UUID)
		}
	}
}

func TestPublish_CreateStreamKeepsExistingStream(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 2)
	calls := pubCountCalls(l, nil)
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l, CreateStream: true, CreateStreamShards: 5})
	if err := p.Publish(stream, pubMessages(1, nil)...); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if n := calls.get("CreateStream"); n != 0 {
		t.Errorf("CreateStream called %d times for an existing stream", n)
	}
	if n := len(pubShards(t, l, stream)); n != 2 {
		t.Errorf("stream has %d shards, want its original 2", n)
	}
}

func TestPublish_DefaultPartitionKeyIsUUID(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 4)
	p := pubNewPublisher(t, kinesis.PublisherConfig{Client: l})

	msgs := pubMessages(200, nil)
	if err := p.Publish(stream, msgs[:2]...); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if err := p.Publish(stream, msgs[2:]...); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	ranges := map[string][2]*big.Int{}
	for _, sh := range pubShards(t, l, stream) {
		lo, _ := new(big.Int).SetString(*sh.HashKeyRange.StartingHashKey, 10)
		hi, _ := new(big.Int).SetString(*sh.HashKeyRange.EndingHashKey, 10)
		ranges[*sh.ShardId] = [2]*big.Int{lo, hi}
	}
	perShard := map[string]int{}
	recs := pubReadAll(t, l, stream)
	if len(recs) != len(msgs) {
		t.Fatalf("%d records, want %d", len(recs), len(msgs))
	}
	for _, r := range recs {
		if *r.record.PartitionKey != r.msg.UUID {
			t.Errorf("message %s has partition key %q, want its UUID", r.msg.UUID, *r.record.PartitionKey)
		}
		sum := md5.Sum([]byte(r.msg.UUID))
		h := new(big.Int).SetBytes(sum[:])
		rg := ranges[r.shardID]
		if h.Cmp(rg[0]) < 0 || h.Cmp(rg[1]) > 0 {
			t.Errorf("message %s (hash %s) is in shard %s, which holds [%s, %s]", r.msg.UUID, h, r.shardID, rg[0], rg[1])
		}
		perShard[r.shardID]++
	}
	if len(perShard) != 4 {
		t.Errorf("200 messages keyed by UUID reached %d of 4 shards: %v", len(perShard), perShard)
	}
}

func TestPublish_ConcurrentPublishers(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 4)
	var n atomic.Int64
	l.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) {
		if n.Add(1)%7 == 0 {
			return "ProvisionedThroughputExceededException", ""
		}
		return "", ""
	})
	p := pubNewPublisher(t, kinesis.PublisherConfig{
		Client:       l,
		PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
		RetryBackoff: time.Millisecond,
	})

	const workers, perWorker = 8, 50
	all := make([][]*message.Message, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		all[w] = pubMessages(perWorker, func(i int) string { return fmt.Sprintf("w%d-k%d", w, i%3) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.Publish(stream, all[w]...)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Publish: %v", err)
		}
	}
	var msgs []*message.Message
	for _, m := range all {
		msgs = append(msgs, m...)
	}
	pubCheckOrder(t, l, stream, msgs)
}

// Publishing with a nil logger must not panic on the paths that log (retries).
func TestPublish_NilLoggerOnRetry(t *testing.T) {
	const stream = "orders"
	l := pubNewLog(t, stream, 1)
	var n atomic.Int64
	l.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) {
		if n.Add(1) == 1 {
			return "InternalFailure", ""
		}
		return "", ""
	})
	p, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: l, RetryBackoff: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Publish(stream, pubMessages(1, nil)...); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}
