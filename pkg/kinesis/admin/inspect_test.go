package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Hash keys that route to the shards of a 2-shard memlog stream, and to the children of shard 1
// once it is split at inspectSplitKey.
const (
	inspectKeyShard0 = "0"
	inspectKeyShard1 = "170141183460469231731687303715884105728" // 2^127: shard 1, then shard 2
	inspectSplitKey  = "255211775190703847597530955573826158592" // 2^127 + 2^126
	inspectKeyShard3 = "340282366920938463463374607431768211455" // 2^128 - 1
)

var inspectT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// inspectClock is the one clock of memlog (arrival times) and of InspectLeases (BehindMillis),
// moved by the test.
type inspectClock struct{ ms atomic.Int64 }

func (c *inspectClock) now() time.Time     { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *inspectClock) at(d time.Duration) { c.ms.Store(inspectT0.Add(d).UnixMilli()) }

// inspectFixture is a scripted group "billing" on stream "orders":
//
//	shard 0  open    worker-a, gen 1, checkpoint r0a of r0a r0b r0c (two waiting)
//	shard 1  closed  split into 2 and 3; SHARD_END, released (gen 2)
//	shard 2  open    child of 1; worker-b, checkpoint its only record r2a, handoff to worker-a asked
//	shard 3  open    child of 1; one record r3a, no lease yet
//	shard 9  gone    a lease for a shard the stream does not have (aged out), worker-c
type inspectFixture struct {
	log                               *memlog.Log
	store                             *lease.MemoryStore
	clock                             *inspectClock
	r0a, r0b, r0c, r1a, r1b, r2a, r3a string
}

func newInspectFixture(t *testing.T) *inspectFixture {
	t.Helper()
	ctx := context.Background()
	f := &inspectFixture{clock: &inspectClock{}, store: lease.NewMemoryStore()}
	f.clock.at(0)
	f.log = memlog.New(memlog.Config{Now: f.clock.now})
	if _, err := f.log.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String("orders"), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	put := func(at time.Duration, hashKey string) string {
		t.Helper()
		f.clock.at(at)
		out, err := f.log.PutRecord(ctx, &awskinesis.PutRecordInput{
			StreamName: aws.String("orders"), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(hashKey), Data: []byte("x"),
		})
		if err != nil {
			t.Fatal(err)
		}
		return *out.SequenceNumber
	}
	f.r0a, f.r0b, f.r0c = put(0, inspectKeyShard0), put(time.Second, inspectKeyShard0), put(2*time.Second, inspectKeyShard0)
	f.r1a, f.r1b = put(2*time.Second, inspectKeyShard1), put(2*time.Second, inspectKeyShard1)
	if _, err := f.log.SplitShard(ctx, &awskinesis.SplitShardInput{
		StreamName: aws.String("orders"), ShardToSplit: aws.String(shardID(1)), NewStartingHashKey: aws.String(inspectSplitKey),
	}); err != nil {
		t.Fatal(err)
	}
	f.r2a, f.r3a = put(3*time.Second, inspectKeyShard1), put(4*time.Second, inspectKeyShard3)

	f.lease(t, shardID(0), nil, "worker-a", f.r0a, "")
	f.lease(t, shardID(1), nil, "worker-b", lease.ShardEnd, "")
	l1 := f.get(t, shardID(1))
	if _, err := f.store.Release(ctx, l1); err != nil {
		t.Fatal(err)
	}
	f.lease(t, shardID(2), []string{shardID(1)}, "worker-b", f.r2a, "worker-a")
	f.lease(t, shardID(9), nil, "worker-c", "", "")
	f.clock.at(10 * time.Second)
	return f
}

func shardID(i int) string { return "shardId-00000000000" + string(rune('0'+i)) }

// lease creates a lease, lets owner take it, checkpoints it and asks for a handoff, as a group
// does.
func (f *inspectFixture) lease(t *testing.T, shard string, parents []string, owner, checkpoint, taker string) {
	t.Helper()
	ctx := context.Background()
	l, err := f.store.Create(ctx, lease.Lease{Group: "billing", Stream: "orders", ShardID: shard, Parents: parents})
	if err != nil {
		t.Fatal(err)
	}
	if l, err = f.store.Take(ctx, l, owner); err != nil {
		t.Fatal(err)
	}
	if checkpoint != "" {
		if l, err = f.store.Checkpoint(ctx, l, checkpoint); err != nil {
			t.Fatal(err)
		}
	}
	if taker != "" {
		if _, err = f.store.RequestHandoff(ctx, l, taker); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *inspectFixture) get(t *testing.T, shard string) lease.Lease {
	t.Helper()
	leases, err := f.store.List(context.Background(), "billing", "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if l.ShardID == shard {
			return l
		}
	}
	t.Fatalf("no lease for %s", shard)
	return lease.Lease{}
}

func (f *inspectFixture) config() admin.InspectConfig {
	return admin.InspectConfig{Stream: "orders", ConsumerGroup: "billing", Client: f.log, LeaseStore: f.store, Now: f.clock.now, Watch: admin.NoWatch}
}

func timeAt(d time.Duration) *time.Time { t := inspectT0.Add(d); return &t }

// expectedShards is the report of the fixture at T0+10s.
func (f *inspectFixture) expectedShards() []admin.ShardLease {
	return []admin.ShardLease{
		{
			ShardID: shardID(0), State: admin.ShardOpen, HasLease: true, Owner: "worker-a", Generation: 1, Counter: 3,
			Checkpoint: f.r0a, Parents: []string{}, Measured: true, Pending: true,
			NextSequenceNumber: f.r0b, NextArrival: timeAt(time.Second),
			BehindMillis:       9000, // r0b arrived at T0+1s
			MillisBehindLatest: 8000, // memlog: r0c, the oldest record the read did not return, arrived at T0+2s
		},
		{
			ShardID: shardID(1), State: admin.ShardClosed, EndingSequenceNumber: f.r1b, HasLease: true,
			Generation: 2, Counter: 4, Checkpoint: lease.ShardEnd, Parents: []string{}, Finished: true, Measured: true,
		},
		{
			ShardID: shardID(2), State: admin.ShardOpen, HasLease: true, Owner: "worker-b", Generation: 1, Counter: 4,
			Checkpoint: f.r2a, Parents: []string{shardID(1)}, PendingOwner: "worker-a", Measured: true,
		},
		{
			ShardID: shardID(3), State: admin.ShardOpen, Parents: []string{shardID(1)}, Measured: true, Pending: true,
			NextSequenceNumber: f.r3a, NextArrival: timeAt(4 * time.Second), BehindMillis: 6000,
		},
		{
			ShardID: shardID(9), State: admin.ShardGone, HasLease: true, Owner: "worker-c", Generation: 1, Counter: 2,
			Parents: []string{},
		},
	}
}

func TestInspectLeases_ReportsEveryShard(t *testing.T) {
	f := newInspectFixture(t)
	r, err := admin.InspectLeases(context.Background(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	if r.Stream != "orders" || r.ConsumerGroup != "billing" || !r.InspectedAt.Equal(inspectT0.Add(10*time.Second)) {
		t.Errorf("report header = %q %q %v, want orders billing %v", r.Stream, r.ConsumerGroup, r.InspectedAt, inspectT0.Add(10*time.Second))
	}
	assertShards(t, r.Shards, f.expectedShards())
	if err := r.Err(); err != nil {
		t.Errorf("Err() = %v, want nil", err)
	}
}

func assertShards(t *testing.T, got, want []admin.ShardLease) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d shards, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("shard %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// tableCells cuts each line of a table at the columns of its header, so a cell that is not
// aligned under its header shows up as a wrong value.
func tableCells(t *testing.T, lines []string) [][]string {
	t.Helper()
	header := lines[0]
	var starts []int
	for i := range header {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	var rows [][]string
	for _, line := range lines {
		var row []string
		for c, start := range starts {
			end := len(line)
			if c+1 < len(starts) {
				end = min(starts[c+1], len(line))
				if end > 0 && end < len(line) && line[end-1] != ' ' {
					t.Errorf("line %q: column %d runs into column %d", line, c, c+1)
				}
			}
			if start > len(line) {
				row = append(row, "")
				continue
			}
			row = append(row, strings.TrimSpace(line[start:end]))
		}
		if strings.TrimRight(line, " ") != line {
			t.Errorf("line %q ends in spaces", line)
		}
		rows = append(rows, row)
	}
	return rows
}

func TestInspectLeases_Table(t *testing.T) {
	f := newInspectFixture(t)
	r, err := admin.InspectLeases(context.Background(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("table:\n%s", out.String())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 12 || lines[6] != "" {
		t.Fatalf("table has %d lines, want 12 (header, 5 shards, a blank line, header, 3 owners, summary):\n%s", len(lines), out.String())
	}
	got := tableCells(t, lines[:6])
	want := [][]string{
		{"SHARD", "STATE", "OWNER", "GEN", "CHECKPOINT", "PARENTS", "PENDING-OWNER", "BEHIND"},
		{shardID(0), "open", "worker-a", "1", f.r0a, "-", "-", "9s"},
		{shardID(1), "closed", "(free)", "2", "SHARD_END", "-", "-", "finished"},
		{shardID(2), "open", "worker-b", "1", f.r2a, shardID(1), "worker-a", "caught up"},
		{shardID(3), "open", "(no lease yet)", "-", "-", shardID(1), "-", "6s"},
		{shardID(9), "gone", "worker-c", "1", "-", "-", "-", "-"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("table cells:\n got %q\nwant %q\ntable:\n%s", got, want, out.String())
	}
	gotOwners := tableCells(t, lines[7:11])
	wantOwners := [][]string{
		{"OWNER", "LEASES", "LAST-MOVE"},
		{"worker-a", "1", "not watched (one look)"},
		{"worker-b", "1", "not watched (one look)"},
		{"worker-c", "1", "not watched (one look)"},
	}
	if !reflect.DeepEqual(gotOwners, wantOwners) {
		t.Errorf("owner cells:\n got %q\nwant %q\ntable:\n%s", gotOwners, wantOwners, out.String())
	}
	wantSummary := "5 shards (3 open, 1 closed, 1 gone); 4 leases (1 free); 1 shard without a lease; 1 handoff pending; max 9s behind (shardId-000000000000); 3 owners"
	if lines[11] != wantSummary {
		t.Errorf("summary\n got %q\nwant %q", lines[11], wantSummary)
	}
}

func TestInspectLeases_JSON(t *testing.T) {
	f := newInspectFixture(t)
	r, err := admin.InspectLeases(context.Background(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	// The field names are an interface scripts use (jq): check them as text.
	var raw struct {
		Stream        string           `json:"stream"`
		ConsumerGroup string           `json:"consumer_group"`
		InspectedAt   string           `json:"inspected_at"`
		Shards        []map[string]any `json:"shards"`
		Owners        []map[string]any `json:"owners"`
	}
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if raw.Stream != "orders" || raw.ConsumerGroup != "billing" || raw.InspectedAt != "2026-01-02T03:04:15Z" {
		t.Errorf("header = %q %q %q", raw.Stream, raw.ConsumerGroup, raw.InspectedAt)
	}
	var top map[string]any
	if err := json.Unmarshal(out.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"max_behind_millis": 9000.0, "max_behind_shard": shardID(0), "looks": 1.0,
		"watched_millis": 0.0, "members_kept": true} {
		if top[k] != want {
			t.Errorf("%s = %v, want %v", k, top[k], want)
		}
	}
	if _, ok := top["watch_error"]; ok {
		t.Errorf("watch_error present with no failed look: %v", top["watch_error"])
	}
	wantOwner := map[string]any{"owner": "worker-a", "leases": 1.0, "member": false, "moved": false,
		"moved_min_ago_millis": 0.0, "moved_max_ago_millis": 0.0, "heartbeat_moved": false, "lease_moved": false}
	if len(raw.Owners) != 3 || !reflect.DeepEqual(raw.Owners[0], wantOwner) {
		t.Errorf("owners JSON = %v, want 3, the first %v", raw.Owners, wantOwner)
	}
	wantShard0 := map[string]any{
		"shard_id": shardID(0), "state": "open", "has_lease": true, "owner": "worker-a", "generation": 1.0, "counter": 3.0,
		"checkpoint": f.r0a, "parents": []any{}, "pending_owner": "", "finished": false, "measured": true, "pending": true,
		"next_sequence_number": f.r0b, "next_arrival": "2026-01-02T03:04:06Z", "behind_millis": 9000.0, "millis_behind_latest": 8000.0,
	}
	if !reflect.DeepEqual(raw.Shards[0], wantShard0) {
		t.Errorf("shard 0 JSON\n got %v\nwant %v", raw.Shards[0], wantShard0)
	}
	if got := raw.Shards[1]["ending_sequence_number"]; got != f.r1b {
		t.Errorf("shard 1 ending_sequence_number = %v, want %s", got, f.r1b)
	}
	if _, ok := raw.Shards[2]["next_arrival"]; ok {
		t.Errorf("shard 2 has next_arrival with nothing waiting: %v", raw.Shards[2])
	}
	// And the whole report survives a round trip.
	var back admin.GroupReport
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !back.InspectedAt.Equal(r.InspectedAt) {
		t.Errorf("InspectedAt after round trip = %v, want %v", back.InspectedAt, r.InspectedAt)
	}
	assertShards(t, back.Shards, f.expectedShards())
	if !reflect.DeepEqual(back.Owners, r.Owners) {
		t.Errorf("Owners after round trip = %+v, want %+v", back.Owners, r.Owners)
	}
}

func TestInspectLeases_ExpiredCheckpoint(t *testing.T) {
	f := newInspectFixture(t)
	// Retention drops r0a and r0b; the group checkpointed r0a, so its reader resumes at
	// TRIM_HORIZON (r0c), and so does the measurement.
	if _, err := f.log.ExpireRecords("orders", inspectT0.Add(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	r, err := admin.InspectLeases(context.Background(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	s := r.Shards[0]
	if !s.CheckpointExpired || !s.Pending || s.NextSequenceNumber != f.r0c || s.BehindMillis != 8000 || s.Error != "" {
		t.Errorf("shard 0 = %+v, want checkpoint expired, r0c next, 8000 ms behind", s)
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "8s (checkpoint expired)") {
		t.Errorf("table does not show the expired checkpoint:\n%s", out.String())
	}
}

func TestInspectLeases_ThrottledReadIsRetried(t *testing.T) {
	f := newInspectFixture(t)
	var throttled atomic.Int32
	f.log.SetFault(func(_ context.Context, c memlog.Call) error {
		if c.Op == "GetRecords" && c.ShardID == shardID(0) && throttled.Add(1) <= 2 {
			return &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}
		}
		return nil
	})
	r, err := admin.InspectLeases(context.Background(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	assertShards(t, r.Shards, f.expectedShards())
	if n := throttled.Load(); n != 3 {
		t.Errorf("shard 0 read %d times, want 3 (two throttled)", n)
	}
}

func TestInspectLeases_FailedShardIsReportedNotFatal(t *testing.T) {
	f := newInspectFixture(t)
	f.log.SetFault(func(_ context.Context, c memlog.Call) error {
		if c.Op == "GetShardIterator" && c.ShardID == shardID(3) {
			return &types.KMSAccessDeniedException{Message: aws.String("no key for you")}
		}
		return nil
	})
	r, err := admin.InspectLeases(context.Background(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	want := f.expectedShards()
	want[3] = admin.ShardLease{ShardID: shardID(3), State: admin.ShardOpen, Parents: []string{shardID(1)}}
	wantErr := `kinesis: measuring shard "shardId-000000000003" of stream "orders": getting a shard iterator: KMSAccessDeniedException: no key for you`
	got := r.Shards
	if got[3].Error != wantErr {
		t.Errorf("shard 3 Error = %q, want %q", got[3].Error, wantErr)
	}
	want[3].Error = got[3].Error
	// Compare through JSON: the entry also keeps the error itself, for Err.
	if a, b := mustJSON(t, got), mustJSON(t, want); a != b {
		t.Errorf("shards\n got %s\nwant %s", a, b)
	}
	var denied *types.KMSAccessDeniedException
	if err := r.Err(); !errors.As(err, &denied) || err.Error() != wantErr {
		t.Errorf("Err() = %v, want the shard's error", err)
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "error (below)") || !strings.HasSuffix(out.String(), "\n"+shardID(3)+": "+wantErr+"\n") {
		t.Errorf("table does not report the failure:\n%s", out.String())
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInspectLeases_SkipBehindReadsNothing(t *testing.T) {
	f := newInspectFixture(t)
	var mu sync.Mutex
	var reads []string
	f.log.SetFault(func(_ context.Context, c memlog.Call) error {
		if c.Op == "GetRecords" || c.Op == "GetShardIterator" {
			mu.Lock()
			reads = append(reads, c.Op+" "+c.ShardID)
			mu.Unlock()
		}
		return nil
	})
	cfg := f.config()
	cfg.SkipBehind = true
	r, err := admin.InspectLeases(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(reads) != 0 {
		t.Errorf("SkipBehind still read: %v", reads)
	}
	for i, s := range f.expectedShards() {
		if !s.Finished { // a finished shard is known to be done without a read
			s.Measured, s.Pending, s.NextSequenceNumber, s.NextArrival, s.BehindMillis, s.MillisBehindLatest = false, false, "", nil, 0, 0
		}
		if !reflect.DeepEqual(r.Shards[i], s) {
			t.Errorf("shard %d:\n got %+v\nwant %+v", i, r.Shards[i], s)
		}
	}
}

func TestInspectLeases_GroupWithoutLeases(t *testing.T) {
	f := newInspectFixture(t)
	cfg := f.config()
	cfg.ConsumerGroup = "nobody"
	r, err := admin.InspectLeases(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range r.Shards {
		ids = append(ids, s.ShardID)
		if s.HasLease || s.Owner != "" || s.Checkpoint != "" {
			t.Errorf("shard %s of a group without leases = %+v", s.ShardID, s)
		}
	}
	if want := []string{shardID(0), shardID(1), shardID(2), shardID(3)}; !reflect.DeepEqual(ids, want) {
		t.Errorf("shards = %v, want %v", ids, want)
	}
	// With no checkpoint the group would start at TRIM_HORIZON: shard 0 waits since r0a.
	if s := r.Shards[0]; s.NextSequenceNumber != f.r0a || s.BehindMillis != 10000 {
		t.Errorf("shard 0 = %+v, want r0a next, 10000 ms behind", s)
	}
}

func TestInspectLeases_Errors(t *testing.T) {
	f := newInspectFixture(t)
	cfg := f.config()
	cfg.Stream = "no-such-stream"
	if _, err := admin.InspectLeases(context.Background(), cfg); !errors.Is(err, kinesis.ErrStreamNotFound) || !strings.Contains(err.Error(), `"no-such-stream"`) {
		t.Errorf("missing stream: err = %v, want ErrStreamNotFound naming the stream", err)
	}

	storeErr := errors.New("table on fire")
	f.store.SetFault(func(context.Context, string, lease.Key) error { return storeErr })
	_, err := admin.InspectLeases(context.Background(), f.config())
	if !errors.Is(err, storeErr) || !strings.Contains(err.Error(), `group "billing" on stream "orders"`) {
		t.Errorf("failing store: err = %v, want it wrapped, naming group and stream", err)
	}
	f.store.SetFault(nil)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := admin.InspectLeases(ctx, f.config()); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v, want context.Canceled", err)
	}
}

func TestInspectConfig_Validate(t *testing.T) {
	log, store := memlog.New(memlog.Config{}), lease.NewMemoryStore()
	ok := admin.InspectConfig{Stream: "orders", ConsumerGroup: "billing", Client: log, LeaseStore: store}
	var nilLog *memlog.Log
	tests := []struct {
		name   string
		change func(*admin.InspectConfig)
		want   []string // every line of the joined error; nil for valid
	}{
		{"valid", func(*admin.InspectConfig) {}, nil},
		{"everything missing", func(c *admin.InspectConfig) { *c = admin.InspectConfig{} }, []string{
			"kinesis: InspectConfig.Stream: kinesis: invalid stream name: the stream name (the topic) is empty",
			"kinesis: InspectConfig.ConsumerGroup is empty; name the group whose leases to show (SubscriberConfig.Group.Name of its subscribers)",
			"kinesis: InspectConfig.Client is nil; pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log",
			"kinesis: InspectConfig.LeaseStore is nil; pass the group's store (lease.NewDynamoDBStore on its lease table, or its lease.MemoryStore)",
		}},
		{"bad stream name", func(c *admin.InspectConfig) { c.Stream = "a b" }, []string{
			`kinesis: InspectConfig.Stream: kinesis: invalid stream name: "a b" has ' ' at byte 1; Kinesis allows only letters, digits, '_', '.' and '-'`,
		}},
		{"typed nil client", func(c *admin.InspectConfig) { c.Client = nilLog }, []string{
			"kinesis: InspectConfig.Client is nil; pass an aws-sdk-go-v2 *kinesis.Client or a *memlog.Log",
		}},
		{"bad group", func(c *admin.InspectConfig) { c.ConsumerGroup = "\xff" }, []string{
			`kinesis: InspectConfig.ConsumerGroup "\xff" is not valid UTF-8, so no lease table can hold leases of it`,
		}},
		{"negative numbers", func(c *admin.InspectConfig) {
			c.Concurrency, c.RequestTimeout, c.Watch = -1, -time.Second, -2*time.Second
		}, []string{
			"kinesis: InspectConfig.Concurrency is -1; it must not be negative",
			"kinesis: InspectConfig.RequestTimeout is -1s; it must not be negative",
			"kinesis: InspectConfig.Watch is -2s; it must not be negative (NoWatch lists the leases once)",
		}},
		{"NoWatch", func(c *admin.InspectConfig) { c.Watch = admin.NoWatch }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Validate():\n got %q\nwant %q", got, tt.want)
			}
			if _, ierr := admin.InspectLeases(context.Background(), c); ierr == nil || !strings.Contains(ierr.Error(), tt.want[0]) {
				t.Errorf("InspectLeases() = %v, want the config's problems", ierr)
			}
		})
	}
}

func TestInspectReport_BehindCells(t *testing.T) {
	tests := []struct {
		name string
		s    admin.ShardLease
		want string
	}{
		{"finished", admin.ShardLease{Finished: true, Measured: true}, "finished"},
		{"not measured", admin.ShardLease{}, "-"},
		{"caught up", admin.ShardLease{Measured: true}, "caught up"},
		{"behind", admin.ShardLease{Measured: true, Pending: true, BehindMillis: 90_500}, "1m30.5s"},
		{"waiting, just arrived", admin.ShardLease{Measured: true, Pending: true}, "0s"},
		{"expired and caught up", admin.ShardLease{Measured: true, CheckpointExpired: true}, "caught up (checkpoint expired)"},
		{"error", admin.ShardLease{Error: "boom"}, "error (below)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.s.ShardID, tt.s.State, tt.s.HasLease, tt.s.Owner = "shardId-000000000000", admin.ShardOpen, true, "w"
			var out bytes.Buffer
			if err := (admin.GroupReport{Shards: []admin.ShardLease{tt.s}}).WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(out.String(), "\n")
			if got := tableCells(t, lines[:2])[1][7]; got != tt.want {
				t.Errorf("BEHIND = %q, want %q\n%s", got, tt.want, out.String())
			}
		})
	}
}

// failingWriter fails every write, as a closed pipe does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestInspectReport_WriteTableFails(t *testing.T) {
	r := admin.GroupReport{Stream: "orders", ConsumerGroup: "billing"}
	err := r.WriteTable(failingWriter{})
	if err == nil || !strings.Contains(err.Error(), `group "billing" on stream "orders": broken pipe`) {
		t.Errorf("WriteTable() = %v, want the write error, naming group and stream", err)
	}
}

// A closed shard whose lease the group deleted once its children were read is reported
// finished, not as a shard without a lease yet.
func TestInspectFinishedLeaseDeleted(t *testing.T) {
	f := newInspectFixture(t)
	if err := f.store.DeleteFinished(context.Background(), f.get(t, shardID(1))); err != nil {
		t.Fatal(err)
	}
	r, err := admin.InspectLeases(context.Background(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	var parent *admin.ShardLease
	for i := range r.Shards {
		if r.Shards[i].ShardID == shardID(1) {
			parent = &r.Shards[i]
		}
	}
	if parent == nil || parent.HasLease || !parent.Finished {
		t.Fatalf("parent %s: %+v, want no lease and finished", shardID(1), parent)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(finished, lease deleted)") {
		t.Errorf("table does not show the deleted lease of a finished shard:\n%s", b.String())
	}
}

// A checkpoint inside a record (seq:sub, as a KCL worker or an aggregate's user record writes
// it) measures from the record after it when the record is done: a plain record at any sub.
func TestInspectLeases_CheckpointInsideRecord(t *testing.T) {
	f := newInspectFixture(t)
	for shard, cp := range map[string]string{shardID(0): f.r0a + ":0", shardID(2): f.r2a + ":0"} {
		if _, err := f.store.Checkpoint(context.Background(), f.get(t, shard), cp); err != nil {
			t.Fatal(err)
		}
	}
	r, err := admin.InspectLeases(context.Background(), f.config())
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Shards[0]; !s.Pending || s.NextSequenceNumber != f.r0b || s.BehindMillis != 9000 {
		t.Errorf("shard 0 at %s:0 = %+v, want r0b next, 9000 ms behind", f.r0a, s)
	}
	if s := r.Shards[2]; s.Pending || s.NextSequenceNumber != "" || s.BehindMillis != 0 {
		t.Errorf("shard 2 at its only record %s:0 = %+v, want caught up", f.r2a, s)
	}
}

// Inside a KPL aggregate, the checkpoint of its last user record (seq:last) is caught up; one
// before it still has the aggregate waiting.
func TestInspectLeases_CheckpointInsideAggregate(t *testing.T) {
	f := newInspectFixture(t)
	agg := kpl.NewAggregator(0)
	for _, d := range []string{"a", "b", "c"} {
		agg.Add("k", "", []byte(d))
	}
	out, err := f.log.PutRecord(context.Background(), &awskinesis.PutRecordInput{
		StreamName: aws.String("orders"), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(inspectKeyShard1), Data: agg.Build(),
	})
	if err != nil || aws.ToString(out.ShardId) != shardID(2) {
		t.Fatalf("PutRecord of the aggregate = %v, %v", out, err)
	}
	seq := aws.ToString(out.SequenceNumber)
	for _, tc := range []struct {
		checkpoint string
		pending    bool
	}{{seq + ":1", true}, {seq + ":2", false}} {
		if _, err := f.store.Checkpoint(context.Background(), f.get(t, shardID(2)), tc.checkpoint); err != nil {
			t.Fatal(err)
		}
		r, err := admin.InspectLeases(context.Background(), f.config())
		if err != nil {
			t.Fatal(err)
		}
		if s := r.Shards[2]; s.Pending != tc.pending || tc.pending && s.NextSequenceNumber != seq {
			t.Errorf("shard 2 at %s = %+v, want pending %v", tc.checkpoint, s, tc.pending)
		}
	}
}

// A group being watched, on fake time: worker-a heartbeats its member record every second from
// 0.7 s and renews its lease of shard 0 at 2.2 s; worker-b checkpoints shard 2 (which has a
// handoff asked, so only a moved checkpoint counts) at 1.2 s; worker-c does nothing. With the
// default Watch of 4 s the leases are listed at 0, 0.5, ..., 4 s; InspectLeases takes 4 s.
func TestInspectLeases_WatchesOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newInspectFixture(t)
		ctx := context.Background()
		held0, held2 := f.get(t, shardID(0)), f.get(t, shardID(2))
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(700 * time.Millisecond)
			for range 4 {
				if _, err := f.store.Heartbeat(ctx, lease.Member{Group: "billing", Stream: "orders", Worker: "worker-a"}); err != nil {
					t.Error(err)
				}
				time.Sleep(time.Second)
			}
		})
		wg.Go(func() {
			time.Sleep(2200 * time.Millisecond)
			if _, err := f.store.Renew(ctx, held0); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			time.Sleep(1200 * time.Millisecond)
			if _, err := f.store.Checkpoint(ctx, held2, f.r2a+":0"); err != nil {
				t.Error(err)
			}
		})
		cfg := f.config()
		cfg.Watch = 0 // the default
		start := time.Now()
		r, err := admin.InspectLeases(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != admin.DefaultInspectWatch {
			t.Errorf("InspectLeases took %s, want the watch, %s", took, admin.DefaultInspectWatch)
		}
		wg.Wait()
		if r.Looks != 9 || r.WatchedMillis != 4000 || !r.MembersKept || r.WatchError != "" {
			t.Errorf("looks %d, watched %d ms, members kept %v, watch error %q; want 9, 4000, true, none",
				r.Looks, r.WatchedMillis, r.MembersKept, r.WatchError)
		}
		want := []admin.OwnerReport{
			// The last heartbeat, at 3.7 s, is first seen by the look at 4 s: 0 to 0.5 s ago.
			{Owner: "worker-a", Leases: 1, Member: true, Moved: true, MovedMinAgoMillis: 0, MovedMaxAgoMillis: 500, HeartbeatMoved: true, LeaseMoved: true},
			// The checkpoint at 1.2 s is first seen at 1.5 s: 2.5 to 3 s before 4 s.
			{Owner: "worker-b", Leases: 1, Moved: true, MovedMinAgoMillis: 2500, MovedMaxAgoMillis: 3000, LeaseMoved: true},
			{Owner: "worker-c", Leases: 1},
		}
		if !reflect.DeepEqual(r.Owners, want) {
			t.Errorf("owners:\n got %+v\nwant %+v", r.Owners, want)
		}
		assertShards(t, r.Shards, f.expectedShards()) // the first look's leases

		var out bytes.Buffer
		if err := r.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		t.Logf("table:\n%s", out.String())
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != 12 {
			t.Fatalf("table has %d lines, want 12:\n%s", len(lines), out.String())
		}
		wantOwners := [][]string{
			{"OWNER", "LEASES", "LAST-MOVE"},
			{"worker-a", "1", "moved 0.0-0.5 s ago (heartbeat, lease)"},
			{"worker-b", "1", "moved 2.5-3.0 s ago (lease)"},
			{"worker-c", "1", "no move in the 4.0 s watched: may be dead (its leases are taken once their counters stand still for the group's LeaseDuration, 10 s by default)"},
		}
		if got := tableCells(t, lines[7:11]); !reflect.DeepEqual(got, wantOwners) {
			t.Errorf("owner cells:\n got %q\nwant %q", got, wantOwners)
		}
		wantSummary := "5 shards (3 open, 1 closed, 1 gone); 4 leases (1 free); 1 shard without a lease; 1 handoff pending; " +
			"max 9s behind (shardId-000000000000); 3 owners, 1 with no move in the 4.0 s watched"
		if lines[11] != wantSummary {
			t.Errorf("summary\n got %q\nwant %q", lines[11], wantSummary)
		}
	})
}

// When measuring the shards outlasts the watch, InspectLeases waits for it, and the watch
// still ends after Watch: its looks do not go on while the shards are read.
func TestInspectLeases_MeasuringOutlastsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newInspectFixture(t)
		f.log.SetFault(func(_ context.Context, c memlog.Call) error {
			if c.Op == "GetRecords" {
				time.Sleep(3 * time.Second)
			}
			return nil
		})
		cfg := f.config()
		cfg.Watch, cfg.Concurrency = 2*time.Second, 1
		start := time.Now()
		r, err := admin.InspectLeases(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Shards 0, 2 and 3 are read; 1 is finished, 9 gone.
		if took := time.Since(start); took != 9*time.Second {
			t.Errorf("InspectLeases took %s, want 9s (three reads of 3 s, one at a time)", took)
		}
		// Looks every 2s/8 = 250 ms, at 0, 0.25, ..., 2 s.
		if r.Looks != 9 || r.WatchedMillis != 2000 {
			t.Errorf("looks %d, watched %d ms; want 9, 2000", r.Looks, r.WatchedMillis)
		}
		assertShards(t, r.Shards, f.expectedShards())
	})
}

func TestInspectLeases_CancelledWhileWatching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newInspectFixture(t)
		cfg := f.config()
		cfg.Watch = time.Minute
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := admin.InspectLeases(ctx, cfg)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `group "billing" on stream "orders"`) {
			t.Errorf("err = %v, want the deadline, naming group and stream", err)
		}
		if took := time.Since(start); took != 5*time.Second {
			t.Errorf("InspectLeases returned after %s, want 5s (the context's deadline)", took)
		}
	})
}

// scriptedLeases is a lease store whose List returns script[i] at its i-th call (the last one
// again after the end), and fails the calls in fail. Only List is implemented.
type scriptedLeases struct {
	lease.Store
	script [][]lease.Lease
	fail   map[int]bool
	calls  int
}

func (s *scriptedLeases) List(context.Context, string, string) ([]lease.Lease, error) {
	i := s.calls
	s.calls++
	if s.fail[i] {
		return nil, errors.New("table on fire")
	}
	return s.script[min(i, len(s.script)-1)], nil
}

// scriptedMembers adds member records to scriptedLeases: Members returns members[i] in the
// look of List's i-th call. Only Members is implemented.
type scriptedMembers struct {
	*scriptedLeases
	lease.Membership
	members [][]lease.Member
}

func (s *scriptedMembers) Members(context.Context, string, string) ([]lease.Member, error) {
	return s.members[min(s.calls-1, len(s.members)-1)], nil
}

// TestInspectLeases_OwnerMoves: which counter moves prove an owner alive, and when. The leases
// are listed at 0, 0.5, ..., 4 s (looks 0 to 8); a move first seen at look k happened between
// look k-1 and look k, so (8-k)*500 to (9-k)*500 ms before the last look.
func TestInspectLeases_OwnerMoves(t *testing.T) {
	ls := func(owner string, gen, counter int64, checkpoint, pending string) lease.Lease {
		return lease.Lease{Group: "billing", Stream: "orders", ShardID: shardID(0), Owner: owner, Generation: gen,
			Counter: counter, Checkpoint: checkpoint, PendingOwner: pending}
	}
	mb := func(worker string, counter int64) lease.Member {
		return lease.Member{Group: "billing", Stream: "orders", Worker: worker, Counter: counter}
	}
	// from returns a script of 9 looks: before until look k, then after.
	from := func(k int, before, after []lease.Lease) [][]lease.Lease {
		var script [][]lease.Lease
		for i := range 9 {
			script = append(script, map[bool][]lease.Lease{true: before, false: after}[i < k])
		}
		return script
	}
	membersFrom := func(k int, before, after []lease.Member) [][]lease.Member {
		var script [][]lease.Member
		for i := range 9 {
			script = append(script, map[bool][]lease.Member{true: before, false: after}[i < k])
		}
		return script
	}
	a := []lease.Lease{ls("a", 1, 5, "10", "")}
	tests := []struct {
		name    string
		leases  [][]lease.Lease
		members [][]lease.Member // nil: the store keeps no member records
		fail    map[int]bool
		want    []admin.OwnerReport
		wantErr string // in WatchError
	}{
		{name: "counter stands still", leases: [][]lease.Lease{a},
			want: []admin.OwnerReport{{Owner: "a", Leases: 1}}},
		{name: "renewal", leases: from(3, a, []lease.Lease{ls("a", 1, 6, "10", "")}),
			want: []admin.OwnerReport{{Owner: "a", Leases: 1, Moved: true, MovedMinAgoMillis: 2500, MovedMaxAgoMillis: 3000, LeaseMoved: true}}},
		{name: "renewal seen by the last look", leases: from(8, a, []lease.Lease{ls("a", 1, 6, "10", "")}),
			want: []admin.OwnerReport{{Owner: "a", Leases: 1, Moved: true, MovedMinAgoMillis: 0, MovedMaxAgoMillis: 500, LeaseMoved: true}}},
		{name: "the latest of several moves", leases: [][]lease.Lease{a, a, {ls("a", 1, 6, "10", "")}, {ls("a", 1, 6, "10", "")}, {ls("a", 1, 7, "11", "")}},
			want: []admin.OwnerReport{{Owner: "a", Leases: 1, Moved: true, MovedMinAgoMillis: 2000, MovedMaxAgoMillis: 2500, LeaseMoved: true}}},
		{name: "a take is not the taker's proof", leases: from(2, a, []lease.Lease{ls("b", 2, 6, "10", "")}),
			want: []admin.OwnerReport{{Owner: "a", Leases: 1}, {Owner: "b"}}},
		{name: "a release is no one's", leases: from(2, a, []lease.Lease{ls("", 2, 6, "10", "")}),
			want: []admin.OwnerReport{{Owner: "a", Leases: 1}}},
		{name: "a handoff request is the taker's", leases: from(2, a, []lease.Lease{ls("a", 1, 6, "10", "b")}),
			want: []admin.OwnerReport{{Owner: "a", Leases: 1}}},
		{name: "a renewal with a handoff pending may be a repeated request",
			leases: from(2, []lease.Lease{ls("a", 1, 5, "10", "b")}, []lease.Lease{ls("a", 1, 6, "10", "b")}),
			want:   []admin.OwnerReport{{Owner: "a", Leases: 1}}},
		{name: "a checkpoint with a handoff pending is the owner's",
			leases: from(6, []lease.Lease{ls("a", 1, 5, "10", "b")}, []lease.Lease{ls("a", 1, 6, "12", "b")}),
			want:   []admin.OwnerReport{{Owner: "a", Leases: 1, Moved: true, MovedMinAgoMillis: 1000, MovedMaxAgoMillis: 1500, LeaseMoved: true}}},
		{name: "heartbeat", leases: [][]lease.Lease{a}, members: membersFrom(7, []lease.Member{mb("a", 3)}, []lease.Member{mb("a", 4)}),
			want: []admin.OwnerReport{{Owner: "a", Leases: 1, Member: true, Moved: true, MovedMinAgoMillis: 500, MovedMaxAgoMillis: 1000, HeartbeatMoved: true}}},
		{name: "a member record appears: its worker's own heartbeat created it", leases: [][]lease.Lease{a},
			members: membersFrom(4, nil, []lease.Member{mb("c", 1)}),
			want: []admin.OwnerReport{{Owner: "a", Leases: 1},
				{Owner: "c", Member: true, Moved: true, MovedMinAgoMillis: 2000, MovedMaxAgoMillis: 2500, HeartbeatMoved: true}}},
		{name: "a member record that stands still, then goes", leases: [][]lease.Lease{a},
			members: membersFrom(5, []lease.Member{mb("a", 3), mb("c", 9)}, []lease.Member{mb("a", 3)}),
			want:    []admin.OwnerReport{{Owner: "a", Leases: 1, Member: true}, {Owner: "c", Member: true}}},
		{name: "lease and heartbeat: the later move gives the time, both the kinds",
			leases:  from(2, a, []lease.Lease{ls("a", 1, 6, "10", "")}),
			members: membersFrom(6, []lease.Member{mb("a", 3)}, []lease.Member{mb("a", 4)}),
			want: []admin.OwnerReport{{Owner: "a", Leases: 1, Member: true, Moved: true, MovedMinAgoMillis: 1000, MovedMaxAgoMillis: 1500,
				HeartbeatMoved: true, LeaseMoved: true}}},
		{name: "failed looks widen the bounds", leases: from(3, a, []lease.Lease{ls("a", 1, 6, "10", "")}), fail: map[int]bool{3: true, 4: true},
			want:    []admin.OwnerReport{{Owner: "a", Leases: 1, Moved: true, MovedMinAgoMillis: 1500, MovedMaxAgoMillis: 3000, LeaseMoved: true}},
			wantErr: "2 of 8 looks at the leases after the first failed, so the owners' moves are timed less closely; the last: kinesis: listing the leases of group \"billing\" on stream \"orders\": table on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := memlog.New(memlog.Config{})
				if _, err := log.CreateStream(context.Background(), &awskinesis.CreateStreamInput{StreamName: aws.String("orders"), ShardCount: aws.Int32(1)}); err != nil {
					t.Fatal(err)
				}
				leases := &scriptedLeases{script: tt.leases, fail: tt.fail}
				var store lease.Store = leases
				if tt.members != nil {
					store = &scriptedMembers{scriptedLeases: leases, members: tt.members}
				}
				r, err := admin.InspectLeases(context.Background(), admin.InspectConfig{
					Stream: "orders", ConsumerGroup: "billing", Client: log, LeaseStore: store, SkipBehind: true,
				})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(r.Owners, tt.want) {
					t.Errorf("owners:\n got %+v\nwant %+v", r.Owners, tt.want)
				}
				if r.WatchError != tt.wantErr || r.MembersKept != (tt.members != nil) {
					t.Errorf("watch error %q, members kept %v; want %q, %v", r.WatchError, r.MembersKept, tt.wantErr, tt.members != nil)
				}
				if wantLooks := 9 - len(tt.fail); r.Looks != wantLooks || r.WatchedMillis != 4000 {
					t.Errorf("looks %d, watched %d ms; want %d, 4000", r.Looks, r.WatchedMillis, wantLooks)
				}
				if tt.wantErr != "" {
					var out bytes.Buffer
					if err := r.WriteTable(&out); err != nil {
						t.Fatal(err)
					}
					if !strings.HasSuffix(out.String(), "\nowners: "+tt.wantErr+"\n") {
						t.Errorf("the table does not end with the watch error:\n%s", out.String())
					}
				}
			})
		})
	}
}

// The summary gives the lag by time: the most any measured shard is behind, and which.
func TestInspectReport_Summary(t *testing.T) {
	behind := func(id string, ms int64) admin.ShardLease {
		return admin.ShardLease{ShardID: id, State: admin.ShardOpen, Measured: true, Pending: true, BehindMillis: ms}
	}
	caughtUp := admin.ShardLease{ShardID: "s-caught-up", State: admin.ShardOpen, Measured: true}
	unmeasured := admin.ShardLease{ShardID: "s-unmeasured", State: admin.ShardOpen}
	finished := admin.ShardLease{ShardID: "s-finished", State: admin.ShardClosed, Finished: true, Measured: true}
	gone := admin.ShardLease{ShardID: "s-gone", State: admin.ShardGone}
	const counts = "%d shards (%d open, %d closed, %d gone); 0 leases (0 free); %d shards without a lease; 0 handoffs pending; "
	tests := []struct {
		name    string
		r       admin.GroupReport
		wantEnd string // after the counts
	}{
		{"two shards behind: the max, not the count", admin.GroupReport{Shards: []admin.ShardLease{behind("s1", 231), behind("s2", 432)}},
			"max 432ms behind (s2); 0 owners"},
		{"a tie: the first shard", admin.GroupReport{Shards: []admin.ShardLease{behind("s1", 90_500), behind("s2", 90_500)}},
			"max 1m30.5s behind (s1); 0 owners"},
		{"behind by less than a millisecond", admin.GroupReport{Shards: []admin.ShardLease{caughtUp, behind("s2", 0)}},
			"max 0s behind (s2); 0 owners"},
		{"caught up", admin.GroupReport{Shards: []admin.ShardLease{caughtUp, finished, gone}}, "caught up; 0 owners"},
		{"some not measured", admin.GroupReport{Shards: []admin.ShardLease{behind("s1", 5), unmeasured, unmeasured}},
			"max 5ms behind (s1) (2 shards not measured); 0 owners"},
		{"none measured (SkipBehind)", admin.GroupReport{Shards: []admin.ShardLease{unmeasured, finished, gone}}, "lag not measured; 0 owners"},
		{"no shards", admin.GroupReport{}, "caught up; 0 owners"},
		{"owners, one look", admin.GroupReport{Owners: []admin.OwnerReport{{Owner: "a"}, {Owner: "b"}}}, "caught up; 2 owners"},
		{"owners watched", admin.GroupReport{WatchedMillis: 4012,
			Owners: []admin.OwnerReport{{Owner: "a", Moved: true, LeaseMoved: true}, {Owner: "b"}, {Owner: "c"}}},
			"caught up; 3 owners, 2 with no move in the 4.0 s watched"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var open, closed, gone int
			for _, s := range tt.r.Shards {
				switch s.State {
				case admin.ShardOpen:
					open++
				case admin.ShardClosed:
					closed++
				case admin.ShardGone:
					gone++
				}
			}
			var out bytes.Buffer
			if err := tt.r.WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			// Every shard here is without a lease but the finished one.
			unleased := 0
			for _, s := range tt.r.Shards {
				if !s.Finished {
					unleased++
				}
			}
			want := fmt.Sprintf(counts, len(tt.r.Shards), open, closed, gone, unleased) + tt.wantEnd
			want = strings.Replace(want, "; 1 shards without", "; 1 shard without", 1)
			if got := lines[len(lines)-1]; got != want {
				t.Errorf("summary\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestInspectReport_LastMoveCells(t *testing.T) {
	tests := []struct {
		name    string
		o       admin.OwnerReport
		watched int64
		want    string
	}{
		{"heartbeat", admin.OwnerReport{Moved: true, MovedMinAgoMillis: 1234, MovedMaxAgoMillis: 1734, HeartbeatMoved: true}, 4000,
			"moved 1.2-1.7 s ago (heartbeat)"},
		{"both", admin.OwnerReport{Moved: true, MovedMaxAgoMillis: 499, HeartbeatMoved: true, LeaseMoved: true}, 4000,
			"moved 0.0-0.5 s ago (heartbeat, lease)"},
		{"lease", admin.OwnerReport{Moved: true, MovedMinAgoMillis: 61_000, MovedMaxAgoMillis: 61_500, LeaseMoved: true}, 70_000,
			"moved 61.0-61.5 s ago (lease)"},
		{"still, with leases", admin.OwnerReport{Leases: 2}, 4000,
			"no move in the 4.0 s watched: may be dead (its leases are taken once their counters stand still for the group's LeaseDuration, 10 s by default)"},
		{"still, no lease", admin.OwnerReport{Member: true}, 2500, "no move in the 2.5 s watched: may be gone"},
		{"one look", admin.OwnerReport{Leases: 1}, 0, "not watched (one look)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Owner = "w"
			var out bytes.Buffer
			r := admin.GroupReport{WatchedMillis: tt.watched, Owners: []admin.OwnerReport{tt.o}}
			if err := r.WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(out.String(), "\n")
			// The shard table's header, a blank line, the owner table's header and its row.
			if len(lines) < 4 || lines[1] != "" {
				t.Fatalf("table:\n%s", out.String())
			}
			if got := tableCells(t, lines[2:4])[1]; !reflect.DeepEqual(got, []string{"w", strconv.Itoa(tt.o.Leases), tt.want}) {
				t.Errorf("owner row = %q, want LAST-MOVE %q\n%s", got, tt.want, out.String())
			}
		})
	}
}

// After a reset, BEHIND is measured from where the reset put the group: the first record at or
// after a time, the record at a sequence number, the trim horizon.
func TestInspectAfterReset(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   func(f *inspectFixture) string
		next func(f *inspectFixture) string
	}{
		{"at a time", func(*inspectFixture) string {
			return lease.Start{Type: lease.StartAtTimestamp, Timestamp: inspectT0.Add(time.Second)}.Checkpoint()
		}, func(f *inspectFixture) string { return f.r0b }},
		{"at a sequence number", func(f *inspectFixture) string {
			return lease.Start{Type: lease.StartAtSequenceNumber, SequenceNumber: f.r0c}.Checkpoint()
		}, func(f *inspectFixture) string { return f.r0c }},
		{"trim horizon", func(*inspectFixture) string { return lease.TrimHorizon }, func(f *inspectFixture) string { return f.r0a }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newInspectFixture(t)
			l := f.get(t, shardID(0))
			if _, err := f.store.Checkpoint(context.Background(), l, tc.to(f)); err != nil {
				t.Fatal(err)
			}
			r, err := admin.InspectLeases(context.Background(), f.config())
			if err != nil {
				t.Fatal(err)
			}
			s := r.Shards[0]
			if !s.Measured || !s.Pending || s.NextSequenceNumber != tc.next(f) || s.Error != "" {
				t.Errorf("shard 0 at %s: measured %v, pending %v, next %q (error %q); want next %q", tc.to(f), s.Measured, s.Pending, s.NextSequenceNumber, s.Error, tc.next(f))
			}
		})
	}
}
