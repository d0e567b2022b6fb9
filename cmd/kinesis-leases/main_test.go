package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// emulators are kinesalite and dynalite, started by scripts/with-emulators.sh, which exports
// their addresses as the SDK's AWS_ENDPOINT_URL_KINESIS and AWS_ENDPOINT_URL_DYNAMODB.
type emulators struct {
	kinesisEndpoint, dynamoDBEndpoint string
	kinesis                           *awskinesis.Client
	dynamoDB                          *dynamodb.Client
}

func newEmulators(t *testing.T) *emulators {
	t.Helper()
	k, d := os.Getenv("AWS_ENDPOINT_URL_KINESIS"), os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if k == "" || d == "" {
		t.Skip("AWS_ENDPOINT_URL_KINESIS and AWS_ENDPOINT_URL_DYNAMODB are not set: run make test, or scripts/with-emulators.sh go test ./cmd/...")
	}
	// The command reads its credentials, region and endpoints from the environment, as in
	// production; the test's own clients too, so that they go where the command goes.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return &emulators{
		kinesisEndpoint:  k,
		dynamoDBEndpoint: d,
		kinesis:          awskinesis.NewFromConfig(cfg),
		dynamoDB:         dynamodb.NewFromConfig(cfg),
	}
}

// leaseTable creates a lease table of the test's own, dropped when it ends.
func (e *emulators) leaseTable(t *testing.T) (string, *lease.DynamoDBStore) {
	t.Helper()
	table := "inspect-leases-" + watermill.NewShortUUID()
	store, err := lease.NewDynamoDBStore(context.Background(), lease.DynamoDBConfig{Client: e.dynamoDB, TableName: table, CreateTable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = e.dynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return table, store
}

// args are the command line: no endpoint flags, so the command finds the emulators through
// the SDK's AWS_ENDPOINT_URL_KINESIS and AWS_ENDPOINT_URL_DYNAMODB, as a user in the shell of
// scripts/with-emulators.sh runs it; -watch 0, so that it returns without watching the owners
// (a -watch in more wins: the last flag counts).
func (e *emulators) args(stream, group, table string, more ...string) []string {
	return append([]string{"-stream", stream, "-group", group, "-table", table, "-region", "us-east-1", "-watch", "0"}, more...)
}

// runGroup runs a real group member for a moment: it publishes n messages, receives and acks
// them all, and closes, which checkpoints and releases every lease. It returns the sequence
// number of the last acked record of each shard that got any.
func runGroup(t *testing.T, e *emulators, stream, group string, store lease.Store, n int) map[string]string {
	t.Helper()
	logger := watermill.NopLogger{}
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: e.kinesis, CreateStream: true, CreateStreamShards: 2}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client:       e.kinesis,
		Group:        kinesis.GroupConfig{Name: group, LeaseStore: store, WorkerID: "inspect-worker"},
		CreateStream: true, CreateStreamShards: 2, PollInterval: 50 * time.Millisecond,
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := pub.Publish(stream, message.NewMessage(watermill.NewUUID(), []byte("m"+strconv.Itoa(i)))); err != nil {
			t.Fatal(err)
		}
	}
	last := map[string]string{}
	timeout := time.After(30 * time.Second) // a bound for a broken build, not a wait
	for range n {
		select {
		case msg := <-msgs:
			info, ok := kinesis.RecordFromContext(msg.Context())
			if !ok {
				t.Fatal("message without record info")
			}
			last[info.ShardID] = info.SequenceNumber // each shard delivers in sequence order
			msg.Ack()
		case <-timeout:
			t.Fatalf("received %d of %d messages in 30 s", len(last), n)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	return last
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// tableRows splits the table's shard lines into cells, keyed by shard id (tabwriter pads with
// two spaces or more; cells hold at most single spaces), and returns the summary, the last
// line. The owner table, if any, is tableOwners'.
func tableRows(t *testing.T, out string) (header []string, rows map[string][]string, summary string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("table too short:\n%s", out)
	}
	rows = map[string][]string{}
	for _, line := range lines[1 : len(lines)-1] {
		if line == "" { // the owner table follows
			break
		}
		cells := cellSep.Split(line, -1)
		rows[cells[0]] = cells
	}
	return cellSep.Split(lines[0], -1), rows, lines[len(lines)-1]
}

// tableOwners splits the owner table (after the blank line, before the summary) into cells,
// keyed by owner; nil when there is none.
func tableOwners(t *testing.T, out string) (header []string, rows map[string][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	blank := slices.Index(lines, "")
	if blank < 0 {
		return nil, nil
	}
	rows = map[string][]string{}
	for _, line := range lines[blank+2 : len(lines)-1] {
		cells := cellSep.Split(line, -1)
		rows[cells[0]] = cells
	}
	return cellSep.Split(lines[blank+1], -1), rows
}

func runCommand(t *testing.T, args []string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRun_Emulators(t *testing.T) {
	e := newEmulators(t)
	table, store := e.leaseTable(t)
	stream, group := "inspect-"+watermill.NewShortUUID(), "billing"
	last := runGroup(t, e, stream, group, store, 8)

	// The table, after Close: every lease free, each checkpoint the last acked record.
	code, out, errOut := runCommand(t, e.args(stream, group, table))
	t.Logf("table:\n%s", out)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	header, rows, summary := tableRows(t, out)
	if want := []string{"SHARD", "STATE", "OWNER", "GEN", "CHECKPOINT", "PARENTS", "PENDING-OWNER", "BEHIND"}; !slices.Equal(header, want) {
		t.Errorf("header = %q, want %q", header, want)
	}
	leases, err := store.List(context.Background(), group, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(leases) != 2 {
		t.Fatalf("%d rows and %d leases, want 2 of each (2 shards):\n%s", len(rows), len(leases), out)
	}
	for _, l := range leases {
		if l.Checkpoint != last[l.ShardID] { // "" for a shard that got no message
			t.Errorf("lease %s checkpoint = %q, want the last acked record %q", l.ShardID, l.Checkpoint, last[l.ShardID])
		}
		if l.Owner != "" || l.Generation < 2 {
			t.Errorf("lease %s after Close = %+v, want free, taken and released (generation 2 or more)", l.ShardID, l)
		}
		checkpointCell := l.Checkpoint
		if checkpointCell == "" {
			checkpointCell = "-"
		}
		want := []string{l.ShardID, "open", "(free)", strconv.FormatInt(l.Generation, 10), checkpointCell, "-", "-", "caught up"}
		if got := rows[l.ShardID]; !slices.Equal(got, want) {
			t.Errorf("row of %s = %q, want %q", l.ShardID, got, want)
		}
	}
	// The group closed: it released its leases and removed its member record, so no owner.
	if want := "2 shards (2 open, 0 closed, 0 gone); 2 leases (2 free); 0 shards without a lease; 0 handoffs pending; caught up; 0 owners"; summary != want {
		t.Errorf("summary = %q, want %q", summary, want)
	}

	// One record more, after the group stopped: its shard is behind, by that record.
	put, err := e.kinesis.PutRecord(context.Background(), &awskinesis.PutRecordInput{
		StreamName: aws.String(stream), PartitionKey: aws.String("late"), Data: []byte("late"),
	})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCommand(t, e.args(stream, group, table, "-json"))
	t.Logf("JSON:\n%s", out)
	if code != exitOK || errOut != "" {
		t.Fatalf("-json: exit %d, stderr %q", code, errOut)
	}
	var r admin.GroupReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-json output does not decode: %v\n%s", err, out)
	}
	if r.Stream != stream || r.ConsumerGroup != group || time.Since(r.InspectedAt) > time.Minute || len(r.Shards) != 2 {
		t.Fatalf("report = %+v", r)
	}
	for i, s := range r.Shards {
		l := leases[i] // both sorted by shard id
		lateHere := s.ShardID == *put.ShardId
		want := admin.ShardLease{
			ShardID: l.ShardID, State: admin.ShardOpen, HasLease: true, Generation: l.Generation, Counter: l.Counter,
			Checkpoint: l.Checkpoint, Parents: []string{}, Measured: true, Pending: lateHere,
		}
		if lateHere {
			want.NextSequenceNumber, want.NextArrival, want.BehindMillis = *put.SequenceNumber, s.NextArrival, s.BehindMillis
			if s.NextArrival == nil || s.BehindMillis < 0 || s.BehindMillis > time.Minute.Milliseconds() {
				t.Errorf("shard %s with the late record: arrival %v, behind %d ms", s.ShardID, s.NextArrival, s.BehindMillis)
			}
		}
		if a, b := mustJSON(t, s), mustJSON(t, want); a != b {
			t.Errorf("shard %d:\n got %s\nwant %s", i, a, b)
		}
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

func TestRun_MissingStreamOrTable(t *testing.T) {
	e := newEmulators(t)
	table, _ := e.leaseTable(t)
	code, out, errOut := runCommand(t, e.args("no-such-stream-"+watermill.NewShortUUID(), "g", table))
	if code != exitError || out != "" || !strings.Contains(errOut, "stream not found") || !strings.Contains(errOut, "check -stream") {
		t.Errorf("missing stream: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCommand(t, e.args("any", "g", "no-such-table-"+watermill.NewShortUUID()))
	if code != exitError || out != "" || !strings.Contains(errOut, "lease table not found") || !strings.Contains(errOut, "check -table") {
		t.Errorf("missing table: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// deadEndpoint is the address of a loopback port nobody listens on: a call there is refused.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// TestRun_NetworkErrorHint: in a shell whose AWS_ENDPOINT_URL_DYNAMODB names a server that is
// not there, the command fails with the network error and a hint naming the address it tried
// and the settings that chose it. Needs no emulator.
func TestRun_NetworkErrorHint(t *testing.T) {
	dead := deadEndpoint(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_MAX_ATTEMPTS", "1") // the SDK's retries of a refused connection only add time here
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", dead)
	t.Setenv("AWS_ENDPOINT_URL_KINESIS", dead)
	code, out, errOut := runCommand(t, []string{"-stream", "s", "-group", "g", "-table", "leases", "-timeout", "20s"})
	t.Logf("stderr:\n%s", errOut)
	if code != exitError || out != "" {
		t.Fatalf("exit %d (want %d), stdout %q", code, exitError, out)
	}
	for _, want := range []string{"connection refused", "could not reach DynamoDB at " + dead, "-endpoint-dynamodb",
		"AWS_ENDPOINT_URL_DYNAMODB", "AWS_REGION", `"us-east-1"`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not say %q", want)
		}
	}
}

// TestExplain_NetworkErrors: errors of the network are told by their types, wrapped as the SDK
// wraps them, and get the hint of their service; other errors get none.
func TestExplain_NetworkErrors(t *testing.T) {
	o := options{region: "eu-west-1", timeout: time.Minute}
	sdkErr := func(service, op, endpoint string, cause error) error {
		return fmt.Errorf("kinesis: listing the shards of stream %q: %w", "orders", &smithy.OperationError{
			ServiceID: service, OperationName: op,
			Err: &smithyhttp.RequestSendError{Err: &url.Error{Op: "Post", URL: endpoint + "/", Err: cause}},
		})
	}
	dns := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "kinesis.eu-west-1.example", IsNotFound: true}}
	for _, tc := range []struct {
		name string
		err  error
		want []string // "" alone: no hint
	}{
		{"Kinesis, name not found", sdkErr("Kinesis", "ListShards", "https://kinesis.eu-west-1.example", dns),
			[]string{"could not reach Kinesis at https://kinesis.eu-west-1.example", "-endpoint-kinesis", "AWS_ENDPOINT_URL_KINESIS", `"eu-west-1"`}},
		{"DynamoDB, refused", sdkErr("DynamoDB", "DescribeTable", "http://127.0.0.1:9", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}),
			[]string{"could not reach DynamoDB at http://127.0.0.1:9", "-endpoint-dynamodb", "AWS_ENDPOINT_URL_DYNAMODB"}},
		{"a bare DNS error", fmt.Errorf("wrapped: %w", &net.DNSError{Err: "no such host", Name: "x"}),
			[]string{"could not reach Kinesis or DynamoDB at its endpoint", "AWS_ENDPOINT_URL_KINESIS or AWS_ENDPOINT_URL_DYNAMODB"}},
		{"not the network", &smithy.OperationError{ServiceID: "Kinesis", OperationName: "ListShards",
			Err: errors.New("no route to host, in words only")}, []string{""}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			got := explain(o, tc.err)
			if tc.want[0] == "" {
				if got != tc.err.Error() {
					t.Errorf("explain added to an error that is not the network's:\n%s", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("explain does not say %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestRun_EndpointFlags: the flags win over the SDK's settings. With the environment pointing
// at a dead port and the flags at the emulators, the command reaches both (the stream is
// missing, the table is there); with -endpoint-kinesis at a dead port, it names Kinesis and
// that address.
func TestRun_EndpointFlags(t *testing.T) {
	e := newEmulators(t)
	table, _ := e.leaseTable(t)
	dead := deadEndpoint(t)
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	t.Setenv("AWS_ENDPOINT_URL_KINESIS", dead)
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", dead)
	args := e.args("no-such-stream-"+watermill.NewShortUUID(), "g", table,
		"-endpoint-kinesis", e.kinesisEndpoint, "-endpoint-dynamodb", e.dynamoDBEndpoint)
	if code, out, errOut := runCommand(t, args); code != exitError || out != "" || !strings.Contains(errOut, "stream not found") {
		t.Errorf("flags at the emulators: exit %d, stdout %q, stderr %q; want stream not found", code, out, errOut)
	}
	args = e.args("any", "g", table, "-endpoint-kinesis", dead, "-endpoint-dynamodb", e.dynamoDBEndpoint)
	code, out, errOut := runCommand(t, args)
	if code != exitError || out != "" || !strings.Contains(errOut, "could not reach Kinesis at "+dead) || !strings.Contains(errOut, "-endpoint-kinesis") {
		t.Errorf("-endpoint-kinesis at a dead port: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestRun_BadCommandLine(t *testing.T) {
	full := []string{"-stream", "orders", "-group", "billing", "-table", "leases", "-region", "eu-west-1"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want []string // in stderr
	}{
		{"nothing", nil, nil, exitUsage, []string{
			"-stream is missing: name the Kinesis stream", "-group is missing", "-table is missing", "kinesis-leases -help"}},
		{"unknown flag", append([]string{"-nope"}, full...), nil, exitUsage, []string{"flag provided but not defined: -nope", "Usage: kinesis-leases"}},
		{"positional argument", append(full, "orders"), nil, exitUsage, []string{`unexpected argument "orders"`}},
		{"bad stream name", []string{"-stream", "a b", "-group", "g", "-table", "leases", "-region", "r"}, nil, exitUsage,
			[]string{`-stream "a b" is not a Kinesis stream name`}},
		{"bad table name", []string{"-stream", "s", "-group", "g", "-table", "x", "-region", "r"}, nil, exitUsage,
			[]string{`-table "x" is not a DynamoDB table name`}},
		{"bad endpoint", append(full, "-endpoint-kinesis", "localhost:4567"), nil, exitUsage,
			[]string{`-endpoint-kinesis "localhost:4567" is not an http:// or https:// URL`}},
		{"bad timeout", append(full, "-timeout", "0s"), nil, exitUsage, []string{"-timeout is 0s; it must be positive"}},
		{"negative watch", append(full, "-watch", "-1s"), nil, exitUsage, []string{"-watch is -1s; it must not be negative (-watch 0 looks once)"}},
		{"timeout within the watch", append(full, "-timeout", "3s"), nil, exitUsage,
			[]string{"-timeout 3s is not longer than -watch 4s, so the command would give up before it reports: raise -timeout or shorten -watch"}},
		{"multi-stream without kcl", append(full, "-multi-stream"), nil, exitUsage, []string{"-multi-stream is set without -kcl"}},
		{"kcl without table", []string{"-kcl", "-stream", "s", "-region", "r"}, nil, exitUsage, []string{"-table is missing"}},
		{"group without kcl", []string{"-stream", "s", "-table", "leases", "-region", "r"}, nil, exitUsage,
			[]string{"-group is missing: name the consumer group (or, for a KCL application's lease table, set -kcl)"}},
		{"no region", full[:6], map[string]string{"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "",
			"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none")}, exitUsage,
			[]string{"-region is missing: pass -region, set AWS_REGION, or give the profile a region"}},
		{"help", []string{"-help"}, nil, exitOK, []string{"Usage: kinesis-leases", "-endpoint-dynamodb", "-kcl", "-multi-stream",
			"-group defaults to the table's name (the KCL application's", "-watch duration", "(default 4s)", "so it takes 4 s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", "id")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, out, errOut := runCommand(t, tt.args)
			if code != tt.code || out != "" {
				t.Errorf("exit %d (want %d), stdout %q", code, tt.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr does not say %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestRun_OwnersLiveness: a group with a live member and a dead one, as after a SIGKILL. The
// dead worker holds shard 0's lease and left a member record, neither moving; the live one
// holds shard 1 and heartbeats. Watched for 2 s, the command shows the live one moving and
// the dead one not, in the table and in JSON.
func TestRun_OwnersLiveness(t *testing.T) {
	e := newEmulators(t)
	ctx := context.Background()
	table, store := e.leaseTable(t)
	stream, group := "inspect-owners-"+watermill.NewShortUUID(), "billing"
	createStream(t, e, stream, 2)
	dead, err := store.Create(ctx, lease.Lease{Group: group, Stream: stream, ShardID: "shardId-000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Take(ctx, dead, "dead-worker"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Heartbeat(ctx, lease.Member{Group: group, Stream: stream, Worker: "dead-worker"}); err != nil {
		t.Fatal(err)
	}
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: e.kinesis,
		// A LeaseDuration long enough that the dead worker's lease is not taken during the test.
		Group: kinesis.GroupConfig{Name: group, LeaseStore: store, WorkerID: "live-worker", LeaseDuration: 2 * time.Minute},
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := sub.Subscribe(ctx, stream); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	code, out, errOut := runCommand(t, e.args(stream, group, table, "-watch", "2s"))
	took := time.Since(start)
	t.Logf("table (in %s):\n%s", took, out)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if took < 2*time.Second || took > 20*time.Second {
		t.Errorf("the command took %s, want the 2 s watch and a little more", took)
	}
	_, rows, summary := tableRows(t, out)
	if rows["shardId-000000000000"][2] != "dead-worker" || rows["shardId-000000000001"][2] != "live-worker" {
		t.Fatalf("shard owners: %q, want dead-worker on shard 0, live-worker on shard 1", rows)
	}
	header, owners := tableOwners(t, out)
	if want := []string{"OWNER", "LEASES", "LAST-MOVE"}; !slices.Equal(header, want) {
		t.Errorf("owner header = %q, want %q", header, want)
	}
	// The watch ends with the look that starts 2 s after the first: it lasts 2 s and the time
	// that look takes.
	wantDead := regexp.MustCompile(`^no move in the 2\.[0-9] s watched: may be dead \(its leases are taken once their counters stand still for the group's LeaseDuration, 10 s by default\)$`)
	if dead := owners["dead-worker"]; len(dead) != 3 || dead[1] != "1" || !wantDead.MatchString(dead[2]) {
		t.Errorf("dead-worker's row = %q, want 1 lease, and LAST-MOVE to match %s", dead, wantDead)
	}
	// It heartbeats every second (half the default LeaseSyncInterval of 2 s).
	live := owners["live-worker"]
	if len(live) != 3 || live[1] != "1" || !regexp.MustCompile(`^moved [0-9.]+-[0-9.]+ s ago \(heartbeat(, lease)?\)$`).MatchString(live[2]) {
		t.Errorf("live-worker's row = %q, want 1 lease, moved by its heartbeat", live)
	}
	if !regexp.MustCompile(`; 2 owners, 1 with no move in the 2\.[0-9] s watched$`).MatchString(summary) {
		t.Errorf("summary = %q, want 2 owners, 1 with no move", summary)
	}

	code, out, errOut = runCommand(t, e.args(stream, group, table, "-watch", "2s", "-json"))
	if code != exitOK || errOut != "" {
		t.Fatalf("-json: exit %d, stderr %q", code, errOut)
	}
	var r admin.GroupReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-json output does not decode: %v\n%s", err, out)
	}
	// Looks every 250 ms (2s/8) for 2 s: 9, fewer if a listing takes longer than 250 ms.
	if !r.MembersKept || r.Looks < 5 || r.Looks > 9 || r.WatchedMillis < 2000 || len(r.Owners) != 2 {
		t.Fatalf("report: members kept %v, %d looks, watched %d ms, owners %+v; want true, 5 to 9, 2000 or more, 2", r.MembersKept, r.Looks, r.WatchedMillis, r.Owners)
	}
	// (Its member record may be gone by now: the live worker removes it once stale, 6 s after
	// it first saw it.)
	if o := r.Owners[0]; o.Owner != "dead-worker" || o.Leases != 1 || o.Moved {
		t.Errorf("dead-worker = %+v, want 1 lease, no move", o)
	}
	if o := r.Owners[1]; o.Owner != "live-worker" || o.Leases != 1 || !o.Member || !o.Moved || !o.HeartbeatMoved ||
		o.MovedMinAgoMillis > o.MovedMaxAgoMillis || o.MovedMaxAgoMillis > r.WatchedMillis {
		t.Errorf("live-worker = %+v, want 1 lease, moved by its heartbeat within the %d ms watched", o, r.WatchedMillis)
	}
}
