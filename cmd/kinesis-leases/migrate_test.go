package main

import (
	"context"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestRun_Migrate: -migrate -dry-run names the old lease and changes nothing; -migrate moves
// it, owner and checkpoint kept, so that a store of this version lists it; a second -migrate
// moves nothing.
func TestRun_Migrate(t *testing.T) {
	e := newEmulators(t)
	table, store := e.leaseTable(t)
	stream, group := "migrate-"+watermill.NewShortUUID(), "billing"
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	// A lease as earlier versions wrote every lease: in partition stream|group.
	if _, err := e.dynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": s(stream + "|" + group), "shard_id": s("shardId-000000000000"), "group": s(group), "stream": s(stream),
		"owner": s("worker-a"), "generation": n("3"), "counter": n("7"), "checkpoint": s("4959"),
	}}); err != nil {
		t.Fatal(err)
	}
	items := func() int {
		out, err := e.dynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items)
	}

	code, out, errOut := runCommand(t, e.args(stream, group, table, "-migrate", "-dry-run"))
	t.Logf("dry run:\n%s", out)
	if code != exitOK || errOut != "" {
		t.Fatalf("dry run: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"dry run", "move 1 lease(s)", "shard shardId-000000000000: owner worker-a, generation 3, counter 7, checkpoint 4959", "nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run does not say %q", want)
		}
	}
	if got := items(); got != 1 {
		t.Fatalf("the dry run changed the table: %d items, want the old lease only", got)
	}
	if _, err := store.List(ctx, group, stream); err == nil {
		t.Fatal("a store of this version lists the group before the migration; want ErrOldLeaseLayout")
	}

	code, out, errOut = runCommand(t, e.args(stream, group, table, "-migrate"))
	if code != exitOK || errOut != "" || !strings.Contains(out, "moved 1 lease(s)") {
		t.Fatalf("-migrate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	ls, err := store.List(ctx, group, stream)
	if err != nil || len(ls) != 1 || ls[0].Owner != "worker-a" || ls[0].Generation != 3 || ls[0].Checkpoint != "4959" {
		t.Fatalf("List after -migrate = %+v, %v; want the lease with its owner, generation and checkpoint", ls, err)
	}
	code, out, _ = runCommand(t, e.args(stream, group, table, "-migrate"))
	if code != exitOK || !strings.Contains(out, "moved 0 lease(s)") {
		t.Fatalf("a second -migrate: exit %d, stdout %q; want 0 moved", code, out)
	}
}
