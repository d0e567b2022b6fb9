package kcl_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/kcl"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/leasetest"
)

// dynamoClient is a client of the DynamoDB server at AWS_ENDPOINT_URL_DYNAMODB (dynalite under
// scripts/with-emulators.sh); the test is skipped when it is not set. The SDK reads the
// variable itself: the config is loaded as a user's program loads it, with a region and dummy
// credentials the server does not check.
func dynamoClient(t *testing.T) *dynamodb.Client {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		t.Skip("set AWS_ENDPOINT_URL_DYNAMODB or run `make test`, which starts dynalite")
	}
	cfg, err := config.LoadDefaultConfig(t.Context(), config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	if err != nil {
		t.Fatalf("loading the AWS configuration: %v", err)
	}
	return dynamodb.NewFromConfig(cfg)
}

// tableName is a table name no other test or run uses.
func tableName(t *testing.T, what string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random name: %v", err)
	}
	return "lease-test-" + what + "-" + hex.EncodeToString(b[:])
}

// dropTable deletes the table when the test ends.
func dropTable(t *testing.T, c *dynamodb.Client, table string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
}

// kclIdentifier is a multi-stream KCL stream identifier of the tests' account.
func kclIdentifier(stream string) string { return "123456789012:" + stream + ":1700000000" }

// The conformance suite on KCL lease tables, single- and multi-stream: every subtest's group is
// a KCL application with a table of its own, and the member records share one member table.
func TestStoreConformance(t *testing.T) {
	c := dynamoClient(t)
	members := tableName(t, "kcl-members")
	for _, multi := range []bool{false, true} {
		name := "single-stream"
		if multi {
			name = "multi-stream"
		}
		t.Run(name, func(t *testing.T) {
			leasetest.RunScoped(t, leasetest.Scope{MultiStream: multi}, func(t *testing.T, group, stream string) lease.Store {
				cfg := kcl.Config{Client: c, TableName: tableName(t, "kcl"), Application: group, MemberTableName: members, CreateLeaseTable: true, CreateMemberTable: true}
				if multi {
					cfg.MultiStream = true
					cfg.StreamIdentifiers = map[string]string{stream: kclIdentifier(stream), "stream-b": kclIdentifier("stream-b")}
				} else {
					cfg.Stream = stream
				}
				s, err := kcl.NewStore(t.Context(), cfg)
				if err != nil {
					t.Fatalf("NewStore: %v", err)
				}
				return s
			})
		})
	}
}

// A multi-stream table keeps the leases of a stream that was deleted and created again under
// the old identifier beside the new one: List refuses to guess which is current, and with the
// identifier configured it lists and writes that stream's leases alone.
func TestStoreRecreatedStream(t *testing.T) {
	c := dynamoClient(t)
	table := tableName(t, "kcl-recreated")
	open := func(ids map[string]string) *kcl.Store {
		s, err := kcl.NewStore(t.Context(), kcl.Config{Client: c, TableName: table, Application: "app", MultiStream: true,
			StreamIdentifiers: ids, CreateLeaseTable: true, LeasesOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	open(nil)
	for epoch, counter := range map[string]string{"100": "5", "200": "9"} {
		id := "123456789012:orders:" + epoch
		item := map[string]types.AttributeValue{
			"leaseKey":                     &types.AttributeValueMemberS{Value: id + ":shardId-000000000000"},
			"streamName":                   &types.AttributeValueMemberS{Value: id},
			"shardId":                      &types.AttributeValueMemberS{Value: "shardId-000000000000"},
			"leaseOwner":                   &types.AttributeValueMemberS{Value: "kcl-worker"},
			"leaseCounter":                 &types.AttributeValueMemberN{Value: counter},
			"checkpoint":                   &types.AttributeValueMemberS{Value: "TRIM_HORIZON"},
			"checkpointSubSequenceNumber":  &types.AttributeValueMemberN{Value: "0"},
			"ownerSwitchesSinceCheckpoint": &types.AttributeValueMemberN{Value: "0"},
		}
		if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := open(nil).List(t.Context(), "app", "orders")
	if err == nil || !strings.Contains(err.Error(), "123456789012:orders:100 and 123456789012:orders:200") || !strings.Contains(err.Error(), "StreamIdentifiers") {
		t.Fatalf("List with two identifiers of one stream: %v, want an error naming both and StreamIdentifiers", err)
	}
	s := open(map[string]string{"orders": "123456789012:orders:200"})
	list, err := s.List(t.Context(), "app", "orders")
	if err != nil || len(list) != 1 || list[0].Counter != 9 || !list[0].Foreign {
		t.Fatalf("List with the current identifier configured = %+v, %v; want the counter-9 lease alone, foreign", list, err)
	}
	taken, err := s.Take(t.Context(), list[0], "wm-1")
	if err != nil || taken.Owner != "wm-1" || taken.Foreign || taken.Counter != 10 {
		t.Fatalf("Take = %+v, %v", taken, err)
	}
}

// A shard the KCL never checkpointed starts at its initialPositionInStream: NewStore fails
// when Config.InitialPosition says another, naming both, and opens with the same one.
func TestStoreInitialPositionMustMatch(t *testing.T) {
	c := dynamoClient(t)
	table := tableName(t, "kcl-start")
	cfg := kcl.Config{Client: c, TableName: table, Stream: "orders", CreateLeaseTable: true, LeasesOnly: true}
	if _, err := kcl.NewStore(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	for i, cp := range []string{"LATEST", "49590338271490256608559692538361571095921575989136588898"} {
		item := map[string]types.AttributeValue{
			"leaseKey":                     &types.AttributeValueMemberS{Value: fmt.Sprintf("shardId-00000000000%d", i)},
			"leaseCounter":                 &types.AttributeValueMemberN{Value: "3"},
			"checkpoint":                   &types.AttributeValueMemberS{Value: cp},
			"checkpointSubSequenceNumber":  &types.AttributeValueMemberN{Value: "0"},
			"ownerSwitchesSinceCheckpoint": &types.AttributeValueMemberN{Value: "0"},
		}
		if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	cfg.LeasesOnly, cfg.CreateMemberTable, cfg.MemberTableName = false, true, tableName(t, "kcl-start-members")
	_, err := kcl.NewStore(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "start at LATEST") || !strings.Contains(err.Error(), "shardId-000000000000") ||
		!strings.Contains(err.Error(), "kcl.Config.InitialPosition is TRIM_HORIZON") {
		t.Fatalf("NewStore at TRIM_HORIZON on a table whose unread shard starts at LATEST: %v", err)
	}
	cfg.InitialPosition = kcl.Latest
	if _, err := kcl.NewStore(t.Context(), cfg); err != nil {
		t.Fatalf("NewStore at LATEST: %v", err)
	}
}

// KCL 3.x hands a lease over by writing the next owner into leaseOwner and the old one into
// checkpointOwner. Mid-handoff between KCL workers, the lease reads as the old owner's, asked
// for by the next, and foreign; mid-handoff away from a worker of the group (which never answers
// it), it reads as the KCL worker's.
func TestStoreReads3xHandoff(t *testing.T) {
	c := dynamoClient(t)
	table := tableName(t, "kcl-handoff")
	s, err := kcl.NewStore(t.Context(), kcl.Config{Client: c, TableName: table, Application: "app", Stream: "orders",
		CreateLeaseTable: true, LeasesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	num := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for shard, attrs := range map[string]map[string]types.AttributeValue{
		"shardId-000000000000": {"leaseOwner": str("kcl-next"), "checkpointOwner": str("kcl-old")},
		"shardId-000000000001": {"leaseOwner": str("kcl-next"), "checkpointOwner": str("wm-1"), "watermillOwner": str("wm-1")},
	} {
		item := map[string]types.AttributeValue{"leaseKey": str(shard), "leaseCounter": num("4"), "checkpoint": str("TRIM_HORIZON"),
			"checkpointSubSequenceNumber": num("0"), "ownerSwitchesSinceCheckpoint": num("0")}
		for k, v := range attrs {
			item[k] = v
		}
		if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List(t.Context(), "app", "orders")
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if l := list[0]; l.Owner != "kcl-old" || l.PendingOwner != "kcl-next" || !l.Foreign {
		t.Errorf("a handoff between KCL workers reads as %+v, want owner kcl-old, pending kcl-next, foreign", l)
	}
	if l := list[1]; l.Owner != "kcl-next" || l.PendingOwner != "" || !l.Foreign {
		t.Errorf("a handoff away from wm-1 reads as %+v, want owner kcl-next, foreign", l)
	}
}

// A Store opened with LeasesOnly has no member table: every member call fails with
// ErrNoMemberTable, naming the lease table.
func TestStoreLeasesOnlyHasNoMembers(t *testing.T) {
	c := dynamoClient(t)
	table := tableName(t, "kcl-leases-only")
	dropTable(t, c, table)
	s, err := kcl.NewStore(t.Context(), kcl.Config{Client: c, TableName: table, Stream: "orders",
		CreateLeaseTable: true, LeasesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	m := lease.Member{Group: table, Stream: "orders", Worker: "wm-1"}
	_, heartbeat := s.Heartbeat(t.Context(), m)
	_, members := s.Members(t.Context(), m.Group, m.Stream)
	for op, err := range map[string]error{lease.OpHeartbeat: heartbeat, lease.OpMembers: members,
		lease.OpRemoveMember: s.RemoveMember(t.Context(), m), lease.OpNotifyMember: s.NotifyMember(t.Context(), m)} {
		if !errors.Is(err, kcl.ErrNoMemberTable) || !strings.Contains(err.Error(), table) {
			t.Errorf("%s: %v, want ErrNoMemberTable naming the table", op, err)
		}
	}
}

// A reset to TRIM_HORIZON (admin.ResetGroup) on a KCL table writes the KCL's own sentinel,
// which a KCL worker reads as the same position, and reads back as lease.TrimHorizon (whatever
// the Subscriber's InitialPosition); a TRIM_HORIZON the KCL wrote itself stays "no checkpoint".
// A position the KCL cannot hold is refused, naming it.
func TestStoreResetToTrimHorizon(t *testing.T) {
	c := dynamoClient(t)
	table := tableName(t, "kcl-reset")
	s, err := kcl.NewStore(t.Context(), kcl.Config{Client: c, TableName: table, Stream: "orders", CreateLeaseTable: true, LeasesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	dropTable(t, c, table)
	l, err := s.Create(t.Context(), lease.Lease{Group: table, Stream: "orders", ShardID: "shardId-000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Take(t.Context(), l, "reset")
	if err == nil {
		held, err = s.Checkpoint(t.Context(), held, "49590338271490256608559692538361571095921575989136588898")
	}
	if err == nil {
		held, err = s.Checkpoint(t.Context(), held, lease.TrimHorizon)
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"leaseKey": &types.AttributeValueMemberS{Value: "shardId-000000000000"}}})
	if err != nil {
		t.Fatal(err)
	}
	if cp, _ := out.Item["checkpoint"].(*types.AttributeValueMemberS); cp == nil || cp.Value != "TRIM_HORIZON" {
		t.Errorf("the KCL's checkpoint attribute after a reset to TRIM_HORIZON is %v, want the KCL's sentinel TRIM_HORIZON", out.Item["checkpoint"])
	}
	list, err := s.List(t.Context(), table, "orders")
	if err != nil || len(list) != 1 || list[0].Checkpoint != lease.TrimHorizon {
		t.Fatalf("List after the reset = %+v, %v; want checkpoint %q", list, err, lease.TrimHorizon)
	}
	if _, err := s.Checkpoint(t.Context(), held, "AT_TIMESTAMP@2026-12-05T14:00:00.000Z"); err == nil || !strings.Contains(err.Error(), "AT_TIMESTAMP@2026-12-05T14:00:00.000Z") {
		t.Errorf("a checkpoint at a time on a KCL table: %v, want it refused, naming it", err)
	}
	// The KCL's own TRIM_HORIZON, with nothing of this store's: no checkpoint.
	item := map[string]types.AttributeValue{
		"leaseKey":                     &types.AttributeValueMemberS{Value: "shardId-000000000001"},
		"leaseCounter":                 &types.AttributeValueMemberN{Value: "3"},
		"checkpoint":                   &types.AttributeValueMemberS{Value: "TRIM_HORIZON"},
		"checkpointSubSequenceNumber":  &types.AttributeValueMemberN{Value: "0"},
		"ownerSwitchesSinceCheckpoint": &types.AttributeValueMemberN{Value: "0"},
	}
	if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatal(err)
	}
	list, err = s.List(t.Context(), table, "orders")
	if err != nil || len(list) != 2 || list[1].Checkpoint != "" {
		t.Fatalf("List = %+v, %v; want the KCL's own TRIM_HORIZON read as no checkpoint", list, err)
	}
}
