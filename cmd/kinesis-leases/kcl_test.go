package main

import (
	"context"
	"encoding/json"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
)

// kclLease is one item of a KCL lease table, with the attribute names the KCL writes.
type kclLease struct {
	leaseKey, owner, checkpoint string
	sub, counter                int64
	parents                     []string
	streamName, shardID         string // multi-stream tables only
}

func (l kclLease) item() map[string]types.AttributeValue {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: big.NewInt(v).String()} }
	item := map[string]types.AttributeValue{
		"leaseKey": s(l.leaseKey), "leaseCounter": n(l.counter), "checkpoint": s(l.checkpoint),
		"checkpointSubSequenceNumber": n(l.sub), "ownerSwitchesSinceCheckpoint": n(0),
	}
	if l.owner != "" { // the KCL leaves the attribute out of a lease nobody holds
		item["leaseOwner"] = s(l.owner)
	}
	if len(l.parents) > 0 { // DynamoDB has no empty sets
		item["parentShardId"] = &types.AttributeValueMemberSS{Value: l.parents}
	}
	if l.streamName != "" {
		item["streamName"], item["shardId"] = s(l.streamName), s(l.shardID)
	}
	return item
}

// kclTable creates a lease table as the KCL creates it (partition key leaseKey alone,
// on-demand), dropped when the test ends, and writes the leases into it.
func (e *emulators) kclTable(t *testing.T, leases ...kclLease) string {
	t.Helper()
	ctx := context.Background()
	table := "kcl-app-" + watermill.NewShortUUID()
	if _, err := e.dynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = e.dynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	waiter := dynamodb.NewTableExistsWaiter(e.dynamoDB, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = waitMinDelay, waitMaxDelay
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, waitBound); err != nil {
		t.Fatalf("waiting for table %s to be ACTIVE: %v", table, err)
	}
	for _, l := range leases {
		if _, err := e.dynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: l.item()}); err != nil {
			t.Fatal(err)
		}
	}
	return table
}

// kclArgs are the command line for a KCL table, without -group (it defaults to the table), and
// without endpoint flags, with -watch 0, as args.
func (e *emulators) kclArgs(stream, table string, more ...string) []string {
	return append([]string{"-kcl", "-stream", stream, "-table", table, "-region", "us-east-1", "-watch", "0"}, more...)
}

// The SDK's waiters, for a table or stream to become ACTIVE, poll the emulators as often as
// their answers come (in milliseconds) rather than at the waiters' AWS defaults (a first poll
// after 10 s or 20 s). waitBound is a bound for a broken build, not a wait.
const (
	waitMinDelay = 10 * time.Millisecond
	waitMaxDelay = 200 * time.Millisecond
	waitBound    = 30 * time.Second
)

// createStream creates a stream of n shards and waits until it is active.
func createStream(t *testing.T, e *emulators, stream string, n int32) {
	t.Helper()
	if _, err := e.kinesis.CreateStream(context.Background(), &awskinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(n)}); err != nil {
		t.Fatal(err)
	}
	streamActive(t, e, stream)
}

// streamActive waits until the stream is active (created, or done with a split).
func streamActive(t *testing.T, e *emulators, stream string) {
	t.Helper()
	waiter := awskinesis.NewStreamExistsWaiter(e.kinesis, func(o *awskinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = waitMinDelay, waitMaxDelay
	})
	if err := waiter.Wait(context.Background(), &awskinesis.DescribeStreamInput{StreamName: aws.String(stream)}, waitBound); err != nil {
		t.Fatalf("waiting for stream %s to be ACTIVE: %v", stream, err)
	}
}

// splitStream creates a stream of two shards and splits shardId-000000000001 in two
// (shardId-000000000002 and -3). It returns the sequence number of a record put into shard 0
// before the split, and the hash key of shard 2, where no record is.
func splitStream(t *testing.T, e *emulators, stream string) (seq0, hashKey2 string) {
	t.Helper()
	ctx := context.Background()
	createStream(t, e, stream, 2)
	put, err := e.kinesis.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("p"), ExplicitHashKey: aws.String("0"), Data: []byte("aggregate")})
	if err != nil || aws.ToString(put.ShardId) != "shardId-000000000000" {
		t.Fatalf("PutRecord to hash key 0 = %v, %v; want shard 0", put, err)
	}
	shards, err := e.kinesis.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil || len(shards.Shards) != 2 {
		t.Fatalf("ListShards = %v, %v", shards, err)
	}
	r := shards.Shards[1].HashKeyRange
	start, _ := new(big.Int).SetString(aws.ToString(r.StartingHashKey), 10)
	end, _ := new(big.Int).SetString(aws.ToString(r.EndingHashKey), 10)
	middle := new(big.Int).Add(start, new(big.Int).Rsh(new(big.Int).Sub(end, start), 1))
	if _, err := e.kinesis.SplitShard(ctx, &awskinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: shards.Shards[1].ShardId, NewStartingHashKey: aws.String(middle.String()),
	}); err != nil {
		t.Fatal(err)
	}
	streamActive(t, e, stream)
	return aws.ToString(put.SequenceNumber), start.String()
}

// TestRun_KCLTable: -kcl reads a single-stream KCL application's lease table, written as the
// KCL writes it, and reports each shard's owner and checkpoint: a KCL checkpoint with a
// sub-sequence number as "seq:sub" (caught up when the record there is a plain one), one at
// TRIM_HORIZON as none, SHARD_END as finished, with the parents
// the KCL recorded. -group defaults to the table's name.
func TestRun_KCLTable(t *testing.T) {
	e := newEmulators(t)
	stream := "kcl-" + watermill.NewShortUUID()
	seq0, hashKey2 := splitStream(t, e, stream)
	parent := []string{"shardId-000000000001"}
	table := e.kclTable(t,
		kclLease{leaseKey: "shardId-000000000000", owner: "kcl-worker-a", checkpoint: seq0, sub: 2, counter: 7},
		kclLease{leaseKey: "shardId-000000000001", checkpoint: "SHARD_END", counter: 20},
		kclLease{leaseKey: "shardId-000000000002", owner: "kcl-worker-b", checkpoint: "TRIM_HORIZON", counter: 1, parents: parent},
		kclLease{leaseKey: "shardId-000000000003", owner: "kcl-worker-b", checkpoint: "TRIM_HORIZON", counter: 4, parents: parent},
	)
	put, err := e.kinesis.PutRecord(context.Background(), &awskinesis.PutRecordInput{
		StreamName: aws.String(stream), PartitionKey: aws.String("p"), ExplicitHashKey: aws.String(hashKey2), Data: []byte("unread"),
	})
	if err != nil || aws.ToString(put.ShardId) != "shardId-000000000002" {
		t.Fatalf("PutRecord to shard 2 = %v, %v", put, err)
	}

	code, out, errOut := runCommand(t, e.kclArgs(stream, table))
	t.Logf("table:\n%s", out)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	_, rows, summary := tableRows(t, out)
	want := map[string][]string{
		// The record at seq0 is a plain one: a checkpoint inside it (seq:sub) covers all of it.
		"shardId-000000000000": {"shardId-000000000000", "open", "kcl-worker-a", "0", seq0 + ":2", "-", "-", "caught up"},
		"shardId-000000000001": {"shardId-000000000001", "closed", "(free)", "0", "SHARD_END", "-", "-", "finished"},
		"shardId-000000000002": {"shardId-000000000002", "open", "kcl-worker-b", "0", "-", "shardId-000000000001", "-", "(behind)"},
		"shardId-000000000003": {"shardId-000000000003", "open", "kcl-worker-b", "0", "-", "shardId-000000000001", "-", "caught up"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), out)
	}
	for id, w := range want {
		got := rows[id]
		if len(got) == len(w) && w[7] == "(behind)" {
			if d, err := time.ParseDuration(got[7]); err == nil && d >= 0 && d < time.Minute {
				w = append(w[:7:7], got[7])
			}
		}
		if !slices.Equal(got, w) {
			t.Errorf("row of %s = %q, want %q", id, got, w)
		}
	}
	wantSummary := regexp.MustCompile(`^4 shards \(3 open, 1 closed, 0 gone\); 4 leases \(1 free\); 0 shards without a lease; 0 handoffs pending; ` +
		`max [0-9.]+m?s behind \(shardId-000000000002\); 2 owners$`)
	if !wantSummary.MatchString(summary) {
		t.Errorf("summary = %q, want it to match %s", summary, wantSummary)
	}
	_, owners := tableOwners(t, out)
	if want := map[string][]string{"kcl-worker-a": {"kcl-worker-a", "1", "not watched (one look)"}, "kcl-worker-b": {"kcl-worker-b", "2", "not watched (one look)"}}; !reflect.DeepEqual(owners, want) {
		t.Errorf("owners = %q, want %q", owners, want)
	}

	// -json -skip-behind: the same leases, under the application's name; an explicit -group
	// names the application.
	for _, tc := range []struct{ group string }{{table}, {"orders-app"}} {
		args := e.kclArgs(stream, table, "-json", "-skip-behind")
		if tc.group != table {
			args = append(args, "-group", tc.group)
		}
		code, out, errOut = runCommand(t, args)
		if code != exitOK || errOut != "" {
			t.Fatalf("-json -group %s: exit %d, stderr %q", tc.group, code, errOut)
		}
		var r admin.GroupReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("-json output does not decode: %v\n%s", err, out)
		}
		var got []string
		for _, s := range r.Shards {
			got = append(got, s.ShardID+"="+s.Owner+"@"+s.Checkpoint)
		}
		wantShards := []string{"shardId-000000000000=kcl-worker-a@" + seq0 + ":2", "shardId-000000000001=@SHARD_END",
			"shardId-000000000002=kcl-worker-b@", "shardId-000000000003=kcl-worker-b@"}
		if r.ConsumerGroup != tc.group || r.Stream != stream || !slices.Equal(got, wantShards) {
			t.Errorf("-json -group %s: group %q, stream %q, shards %q; want %q", tc.group, r.ConsumerGroup, r.Stream, got, wantShards)
		}
	}
}

// TestRun_KCLMultiStream: -kcl -multi-stream reads the leases of the stream from a
// multi-stream application's table and leaves the other stream's out; without -multi-stream
// the command says the table looks like a multi-stream one; -multi-stream on a single-stream
// table fails and says to leave it out.
func TestRun_KCLMultiStream(t *testing.T) {
	e := newEmulators(t)
	stream := "kcl-multi-" + watermill.NewShortUUID()
	seq0, _ := splitStream(t, e, stream)
	id := "123456789012:" + stream + ":1700000000"
	other := "123456789012:other-stream:1700000000"
	ms := func(streamID, shard, owner, checkpoint string, sub int64) kclLease {
		return kclLease{leaseKey: streamID + ":" + shard, streamName: streamID, shardID: shard, owner: owner, checkpoint: checkpoint, sub: sub, counter: 3}
	}
	table := e.kclTable(t,
		ms(id, "shardId-000000000000", "kcl-worker-a", seq0, 0),
		ms(id, "shardId-000000000001", "", "SHARD_END", 0),
		ms(other, "shardId-000000000000", "kcl-worker-z", "TRIM_HORIZON", 0),
	)

	code, out, errOut := runCommand(t, e.kclArgs(stream, table, "-multi-stream", "-skip-behind"))
	t.Logf("table:\n%s", out)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	_, rows, summary := tableRows(t, out)
	for id, w := range map[string][]string{
		"shardId-000000000000": {"shardId-000000000000", "open", "kcl-worker-a", "0", seq0 + ":0", "-", "-", "-"},
		"shardId-000000000001": {"shardId-000000000001", "closed", "(free)", "0", "SHARD_END", "-", "-", "finished"},
		"shardId-000000000002": {"shardId-000000000002", "open", "(no lease yet)", "-", "-", "shardId-000000000001", "-", "-"},
	} {
		if got := rows[id]; !slices.Equal(got, w) {
			t.Errorf("row of %s = %q, want %q", id, got, w)
		}
	}
	if want := "4 shards (3 open, 1 closed, 0 gone); 2 leases (1 free); 2 shards without a lease; 0 handoffs pending; lag not measured; 1 owner"; summary != want {
		t.Errorf("summary = %q, want %q", summary, want)
	}

	unread := "kcl-unread-" + watermill.NewShortUUID()
	createStream(t, e, unread, 1)
	code, _, errOut = runCommand(t, e.kclArgs(unread, table, "-multi-stream", "-skip-behind"))
	if code != exitOK || !strings.Contains(errOut, "holds no leases of stream") {
		t.Errorf("a stream the application has not read: exit %d, stderr %q", code, errOut)
	}

	code, out, errOut = runCommand(t, e.kclArgs(stream, table, "-skip-behind"))
	if code != exitOK || !strings.Contains(errOut, "looks like a multi-stream application's: add -multi-stream") {
		t.Errorf("multi-stream table without -multi-stream: exit %d, stderr %q\n%s", code, errOut, out)
	}

	single := e.kclTable(t, kclLease{leaseKey: "shardId-000000000000", owner: "kcl-worker-a", checkpoint: seq0, counter: 1})
	code, out, errOut = runCommand(t, e.kclArgs(stream, single, "-multi-stream", "-skip-behind"))
	if code != exitError || out != "" || !strings.Contains(errOut, "streamName") || !strings.Contains(errOut, "leave out -multi-stream") {
		t.Errorf("single-stream table with -multi-stream: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	empty := e.kclTable(t)
	code, _, errOut = runCommand(t, e.kclArgs(stream, empty, "-skip-behind"))
	if code != exitOK || !strings.Contains(errOut, "holds no leases; check -table") {
		t.Errorf("empty KCL table: exit %d, stderr %q", code, errOut)
	}
}
