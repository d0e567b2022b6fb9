package lease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
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

// dropTable deletes the table when the test ends (its leases are of no use to anyone).
func dropTable(t *testing.T, c *dynamodb.Client, table string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
}

// newTableStore creates a fresh lease table through the store (CreateTable on) and returns the
// store and its name.
func newTableStore(t *testing.T, client lease.DynamoDBAPI, raw *dynamodb.Client, what string) (*lease.DynamoDBStore, string) {
	t.Helper()
	table := tableName(t, what)
	dropTable(t, raw, table)
	s, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: client, TableName: table, CreateTable: true})
	if err != nil {
		t.Fatalf("NewDynamoDBStore(%q, CreateTable): %v", table, err)
	}
	return s, table
}

func TestDynamoDBStoreConformance(t *testing.T) {
	c := dynamoClient(t)
	_, table := newTableStore(t, c, c, "conformance")
	// One table for the whole suite (each subtest uses its own group); every subtest opens it
	// anew, which also runs NewDynamoDBStore's checks of an existing table many times.
	leasetest.Run(t, func(t *testing.T) lease.Store {
		s, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: c, TableName: table})
		if err != nil {
			t.Fatalf("NewDynamoDBStore on the existing table %q: %v", table, err)
		}
		return s
	})
}

func TestDynamoDBStoreMissingTable(t *testing.T) {
	c := dynamoClient(t)
	table := tableName(t, "missing")
	s, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: c, TableName: table})
	if err == nil {
		t.Fatalf("NewDynamoDBStore on a missing table succeeded: %+v", s)
	}
	if !errors.Is(err, lease.ErrTableNotFound) {
		t.Fatalf("error %q does not match ErrTableNotFound", err)
	}
	for _, want := range []string{table, "DynamoDBConfig.CreateTable"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %q", err, want)
		}
	}
	// Nothing was created behind the caller's back.
	_, err = c.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var notFound *types.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		t.Fatalf("DescribeTable of the missing table after NewDynamoDBStore: %v, want ResourceNotFoundException", err)
	}
}

func TestDynamoDBStoreCreatesTable(t *testing.T) {
	c := dynamoClient(t)
	start := time.Now()
	s, table := newTableStore(t, c, c, "created")
	t.Logf("table created and ACTIVE in %v", time.Since(start))

	out, err := c.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Table.TableStatus != types.TableStatusActive {
		t.Fatalf("table status %s, want ACTIVE", out.Table.TableStatus)
	}
	if bm := out.Table.BillingModeSummary; bm == nil || bm.BillingMode != types.BillingModePayPerRequest {
		t.Fatalf("billing mode summary %+v, want PAY_PER_REQUEST", bm)
	}

	// Usable at once, and the item is laid out as documented.
	l, err := s.Create(t.Context(), lease.Lease{Group: "billing", Stream: "orders", ShardID: "shardId-000000000001",
		Parents: []string{"shardId-000000000000"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(t.Context(), l, "worker-a"); err != nil {
		t.Fatal(err)
	}
	// FNV-1a 32 of "shardId-000000000001" is 1653134990, bucket 1653134990 % 16 = 14.
	const pk = "orders|billing|14"
	if got := lease.DynamoDBPartitionKey(l.Key()); got != pk {
		t.Fatalf("DynamoDBPartitionKey = %q, want %q", got, pk)
	}
	got, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(table),
		Key: map[string]types.AttributeValue{
			"pk":       &types.AttributeValueMemberS{Value: pk},
			"shard_id": &types.AttributeValueMemberS{Value: "shardId-000000000001"},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"pk": "S:" + pk, "shard_id": "S:shardId-000000000001", "group": "S:billing",
		"stream": "S:orders", "owner": "S:worker-a", "generation": "N:1", "counter": "N:2",
		"parents": "L:[shardId-000000000000]",
	}
	if gotAttrs := describeItem(got.Item); fmt.Sprint(gotAttrs) != fmt.Sprint(want) {
		t.Fatalf("stored item\n got  %v\n want %v", gotAttrs, want)
	}

	// Opening it again with CreateTable on finds the table and leaves it alone.
	again, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: c, TableName: table, CreateTable: true})
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := again.List(t.Context(), "billing", "orders"); err != nil || len(ls) != 1 {
		t.Fatalf("List through a second store = %+v, %v", ls, err)
	}
}

// describeItem renders an item's attributes as type:value, for comparing with a literal.
func describeItem(item map[string]types.AttributeValue) map[string]string {
	out := map[string]string{}
	for name, v := range item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			out[name] = "S:" + v.Value
		case *types.AttributeValueMemberN:
			out[name] = "N:" + v.Value
		case *types.AttributeValueMemberL:
			var elems []string
			for _, e := range v.Value {
				if s, ok := e.(*types.AttributeValueMemberS); ok {
					elems = append(elems, s.Value)
				} else {
					elems = append(elems, fmt.Sprintf("%T", e))
				}
			}
			out[name] = fmt.Sprintf("L:%v", elems)
		default:
			out[name] = fmt.Sprintf("%T", v)
		}
	}
	return out
}

func TestDynamoDBStoreConcurrentCreateTable(t *testing.T) {
	c := dynamoClient(t)
	table := tableName(t, "race")
	dropTable(t, c, table)
	const starters = 4
	var (
		wg     sync.WaitGroup
		errs   [starters]error
		stores [starters]*lease.DynamoDBStore
	)
	for i := range starters {
		wg.Go(func() {
			stores[i], errs[i] = lease.NewDynamoDBStore(t.Context(),
				lease.DynamoDBConfig{Client: c, TableName: table, CreateTable: true})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("starter %d: %v", i, err)
		}
	}
	if _, err := stores[0].Create(t.Context(), lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0"}); err != nil {
		t.Fatal(err)
	}
	if ls, err := stores[starters-1].List(t.Context(), "g", "s"); err != nil || len(ls) != 1 {
		t.Fatalf("List = %+v, %v", ls, err)
	}
}

func TestDynamoDBStoreWrongKeySchema(t *testing.T) {
	c := dynamoClient(t)
	def := func(name string, typ types.ScalarAttributeType) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: typ}
	}
	key := func(name string, typ types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: aws.String(name), KeyType: typ}
	}
	for _, tc := range []struct {
		name string
		defs []types.AttributeDefinition
		keys []types.KeySchemaElement
		got  string // how the error describes the table's key
	}{
		{"other hash key", []types.AttributeDefinition{def("leaseKey", "S")},
			[]types.KeySchemaElement{key("leaseKey", types.KeyTypeHash)}, "leaseKey (HASH, S)"},
		{"no sort key", []types.AttributeDefinition{def("pk", "S")},
			[]types.KeySchemaElement{key("pk", types.KeyTypeHash)}, "pk (HASH, S), want"},
		{"numeric sort key", []types.AttributeDefinition{def("pk", "S"), def("shard_id", "N")},
			[]types.KeySchemaElement{key("pk", types.KeyTypeHash), key("shard_id", types.KeyTypeRange)}, "shard_id (RANGE, N)"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			table := tableName(t, "schema")
			dropTable(t, c, table)
			_, err := c.CreateTable(t.Context(), &dynamodb.CreateTableInput{
				TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
				AttributeDefinitions: tc.defs, KeySchema: tc.keys,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, create := range []bool{false, true} {
				_, err = lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: c, TableName: table, CreateTable: create})
				if err == nil {
					t.Fatalf("NewDynamoDBStore (CreateTable %v) accepted a table keyed %s", create, tc.got)
				}
				for _, want := range []string{table, tc.got, "want pk (HASH, S), shard_id (RANGE, S)"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("error %q does not say %q", err, want)
					}
				}
				if errors.Is(err, lease.ErrTableNotFound) {
					t.Fatalf("error %q matches ErrTableNotFound; the table exists", err)
				}
			}
		})
	}
}

// countingClient counts the calls of each method and fails those its fault function chooses; it
// is the fault injection of these tests. inner may be nil if no call is to reach it.
type countingClient struct {
	inner lease.DynamoDBAPI

	mu    sync.Mutex
	calls map[string]int
	fault func(method string) error
}

func (c *countingClient) setFault(f func(method string) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fault = f
}

func (c *countingClient) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

func (c *countingClient) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.calls {
		n += k
	}
	return n
}

func (c *countingClient) before(method string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[method]++
	if c.fault != nil {
		return c.fault(method)
	}
	return nil
}

func (c *countingClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := c.before("PutItem"); err != nil {
		return nil, err
	}
	return c.inner.PutItem(ctx, in, o...)
}

func (c *countingClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := c.before("UpdateItem"); err != nil {
		return nil, err
	}
	return c.inner.UpdateItem(ctx, in, o...)
}

func (c *countingClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := c.before("GetItem"); err != nil {
		return nil, err
	}
	return c.inner.GetItem(ctx, in, o...)
}

func (c *countingClient) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := c.before("Query"); err != nil {
		return nil, err
	}
	return c.inner.Query(ctx, in, o...)
}

func (c *countingClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := c.before("DeleteItem"); err != nil {
		return nil, err
	}
	return c.inner.DeleteItem(ctx, in, o...)
}

func (c *countingClient) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if err := c.before("DescribeTable"); err != nil {
		return nil, err
	}
	return c.inner.DescribeTable(ctx, in, o...)
}

func (c *countingClient) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if err := c.before("CreateTable"); err != nil {
		return nil, err
	}
	return c.inner.CreateTable(ctx, in, o...)
}

// sameBucketShards returns n shard ids, in order, whose leases share one partition, so that a
// test can fill one partition past a page.
func sameBucketShards(n int) []string {
	var ids []string
	bucket := ""
	for i := 0; len(ids) < n; i++ {
		id := fmt.Sprintf("shardId-%012d", i)
		pk := lease.DynamoDBPartitionKey(lease.Key{Group: "g", Stream: "s", ShardID: id})
		if bucket == "" {
			bucket = pk
		}
		if pk == bucket {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestDynamoDBStoreListPages fills one partition with 7 leases and reads it 2 per page.
// (TestDynamoDBStoreListBuckets pages over many partitions.)
func TestDynamoDBStoreListPages(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, _ := newTableStore(t, cc, c, "pages")
	const n = 7
	ids := sameBucketShards(n)
	for i := n - 1; i >= 0; i-- {
		if _, err := s.Create(t.Context(), lease.Lease{Group: "g", Stream: "s", ShardID: ids[i]}); err != nil {
			t.Fatal(err)
		}
	}
	lease.SetDynamoDBQueryLimit(s, 2)
	before := cc.count("Query")
	ls, err := s.List(t.Context(), "g", "s")
	if err != nil {
		t.Fatal(err)
	}
	// 4 pages of the full partition, one each of the 15 empty ones.
	if pages := cc.count("Query") - before; pages < 4+lease.DynamoDBLeaseBuckets-1 {
		t.Fatalf("List of %d leases in one partition with 2 per page made %d queries, want at least %d",
			n, pages, 4+lease.DynamoDBLeaseBuckets-1)
	}
	if len(ls) != n {
		t.Fatalf("List returned %d leases over pages, want %d", len(ls), n)
	}
	for i, l := range ls {
		if l.ShardID != ids[i] || l.Counter != 1 {
			t.Fatalf("lease %d = %+v, want shard %s", i, l, ids[i])
		}
	}
}

// TestDynamoDBStoreListPagesBySize reads a partition over DynamoDB's 1 MB page limit without
// any Limit: List must follow LastEvaluatedKey.
func TestDynamoDBStoreListPagesBySize(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, _ := newTableStore(t, cc, c, "bigpages")
	const n = 6
	big := strings.Repeat("9", 300_000) // 6 × 300 kB > 1 MB, in one partition
	ids := sameBucketShards(n)
	for i := range n {
		if _, err := s.Create(t.Context(), lease.Lease{Group: "g", Stream: "s", ShardID: ids[i],
			Checkpoint: big}); err != nil {
			t.Fatal(err)
		}
	}
	before := cc.count("Query")
	ls, err := s.List(t.Context(), "g", "s")
	if err != nil {
		t.Fatal(err)
	}
	if pages := cc.count("Query") - before; pages < 2+lease.DynamoDBLeaseBuckets-1 {
		t.Fatalf("List of %d × 300 kB in one partition made %d queries, want at least %d", n, pages, 2+lease.DynamoDBLeaseBuckets-1)
	}
	if len(ls) != n {
		t.Fatalf("List returned %d leases, want %d", len(ls), n)
	}
	for i, l := range ls {
		if l.ShardID != ids[i] || l.Checkpoint != big {
			t.Fatalf("lease %d: shard %q, checkpoint of %d bytes", i, l.ShardID, len(l.Checkpoint))
		}
	}
}

func TestDynamoDBStoreFaultsNameTableAndWriteNothing(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, table := newTableStore(t, cc, c, "faults")
	held, err := s.Create(t.Context(), lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0", Owner: "worker-a"})
	if err != nil {
		t.Fatal(err)
	}

	injected := errors.New("injected: ProvisionedThroughputExceededException")
	cc.setFault(func(string) error { return injected })
	for op, err := range calls(t.Context(), s, held) {
		if !errors.Is(err, injected) {
			t.Errorf("%s: error %v, want the injected one", op, err)
			continue
		}
		var ce *lease.ConditionError
		if errors.As(err, &ce) {
			t.Errorf("%s: a failed call is reported as a condition error: %v", op, err)
		}
		for _, want := range []string{table, "lease " + op + " of", `group "g" stream "s"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not name %q", op, err, want)
			}
		}
		if op != lease.OpList && !strings.Contains(err.Error(), "shard-") {
			t.Errorf("%s: error %q does not name the shard", op, err)
		}
	}
	for op, err := range memberCalls(t.Context(), s, lease.Member{Group: "g", Stream: "s", Worker: "worker-a", Counter: 1}) {
		if !errors.Is(err, injected) {
			t.Errorf("%s: error %v, want the injected one", op, err)
			continue
		}
		for _, want := range []string{table, "lease " + op + " of", `group "g" stream "s"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not name %q", op, err, want)
			}
		}
		if op != lease.OpMembers && !strings.Contains(err.Error(), "worker-a") {
			t.Errorf("%s: error %q does not name the worker", op, err)
		}
	}
	cc.setFault(nil)
	got := storedLease(t, s)
	if got.Counter != held.Counter || got.Owner != "worker-a" || got.Checkpoint != "" {
		t.Fatalf("a failed call wrote: %+v, want %+v", got, held)
	}
	if ms, err := s.Members(t.Context(), "g", "s"); err != nil || len(ms) != 0 {
		t.Fatalf("failed member calls wrote: Members = %+v, %v", ms, err)
	}
}

// TestDynamoDBStoreMemberCalls checks what each member call costs: Heartbeat, NotifyMember and
// RemoveMember one write each, Members one Query per page.
func TestDynamoDBStoreMemberCalls(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, _ := newTableStore(t, cc, c, "membercalls")
	ctx := t.Context()
	calls := func(what string, f func() error, method string, want int) {
		t.Helper()
		before, total := cc.count(method), cc.total()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n, all := cc.count(method)-before, cc.total()-total; n != want || all != want {
			t.Fatalf("%s made %d %s calls and %d in all, want %d", what, n, method, all, want)
		}
	}
	var m lease.Member
	for _, w := range []string{"worker-e", "worker-d", "worker-c", "worker-b", "worker-a"} {
		calls("Heartbeat", func() (err error) {
			m, err = s.Heartbeat(ctx, lease.Member{Group: "g", Stream: "s", Worker: w})
			return err
		}, "UpdateItem", 1)
	}
	calls("NotifyMember", func() error { return s.NotifyMember(ctx, m) }, "UpdateItem", 1)
	calls("NotifyMember of no record", func() error {
		return s.NotifyMember(ctx, lease.Member{Group: "g", Stream: "s", Worker: "worker-none"})
	}, "UpdateItem", 1)
	calls("RemoveMember", func() error { return s.RemoveMember(ctx, m) }, "DeleteItem", 1)
	lease.SetDynamoDBQueryLimit(s, 2)
	var ms []lease.Member
	calls("Members of 4 records, 2 a page", func() (err error) {
		ms, err = s.Members(ctx, "g", "s")
		return err
	}, "Query", 3) // the third page is empty: DynamoDB cannot tell the second was the last
	var names []string
	for _, m := range ms {
		names = append(names, m.Worker)
	}
	if fmt.Sprint(names) != "[worker-b worker-c worker-d worker-e]" {
		t.Fatalf("Members over pages = %v, want worker-b to worker-e in order", names)
	}
}

func TestDynamoDBStoreTakeReadBackFails(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, table := newTableStore(t, cc, c, "readback")
	free, err := s.Create(t.Context(), lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0"})
	if err != nil {
		t.Fatal(err)
	}
	stale := free
	stale.Counter-- // the condition fails; the store then reads the lease back, and that fails
	cc.setFault(func(method string) error {
		if method == "GetItem" {
			return errors.New("injected: read timeout")
		}
		return nil
	})
	_, err = s.Take(t.Context(), stale, "worker-b")
	var ce *lease.ConditionError
	if !errors.As(err, &ce) || !errors.Is(err, lease.ErrLeaseChanged) || ce.Op != lease.OpTake {
		t.Fatalf("Take with a failing read-back: %v, want a take ConditionError matching ErrLeaseChanged", err)
	}
	for _, want := range []string{table, "injected: read timeout", "shard-0"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if cc.count("GetItem") != 1 {
		t.Fatalf("GetItem calls = %d, want 1", cc.count("GetItem"))
	}

	// Owner-side writes never read back: every failed condition is ErrLeaseLost.
	cc.setFault(nil)
	before := cc.count("GetItem")
	held := free
	held.Owner = "worker-x"
	if _, err := s.Renew(t.Context(), held); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Renew of a lease never taken: %v", err)
	}
	if got := cc.count("GetItem") - before; got != 0 {
		t.Fatalf("Renew read the lease back %d times, want 0", got)
	}
}

func TestDynamoDBStoreMalformedItems(t *testing.T) {
	c := dynamoClient(t)
	s, table := newTableStore(t, c, c, "malformed")
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	pk := func(group, shard string) types.AttributeValue {
		return str(lease.DynamoDBPartitionKey(lease.Key{Group: group, Stream: "s", ShardID: shard}))
	}
	put(map[string]types.AttributeValue{
		"pk": pk("g", "shard-bad"), "shard_id": str("shard-bad"), "group": str("g"), "stream": str("s"),
		"generation": str("one"), "counter": &types.AttributeValueMemberN{Value: "1"},
	})
	_, err := s.List(t.Context(), "g", "s")
	if err == nil {
		t.Fatal("List of a partition with a malformed item succeeded")
	}
	for _, want := range []string{table, "shard-bad", `"generation" is a string (S)`, "malformed"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}

	// An item without a counter fails the renew's arithmetic on the server side: not a
	// condition failure, an error that names the table and the lease.
	put(map[string]types.AttributeValue{
		"pk": pk("g2", "shard-0"), "shard_id": str("shard-0"), "group": str("g2"), "stream": str("s"),
		"owner": str("worker-a"), "generation": &types.AttributeValueMemberN{Value: "1"},
	})
	held := lease.Lease{Group: "g2", Stream: "s", ShardID: "shard-0", Owner: "worker-a", Generation: 1}
	_, err = s.Renew(t.Context(), held)
	var ce *lease.ConditionError
	if err == nil || errors.As(err, &ce) {
		t.Fatalf("Renew of an item without a counter: %v, want a non-condition error", err)
	}
	for _, want := range []string{table, "shard-0", "lease renew"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	t.Logf("server-side failure: %v", err)

	put(map[string]types.AttributeValue{
		"pk": str(lease.DynamoDBMemberPartitionKey("g", "s")), "shard_id": str("worker-bad"), "counter": str("1"),
	})
	_, err = s.Members(t.Context(), "g", "s")
	for _, want := range []string{table, "lease members of", "worker-bad", `"counter" is a string (S)`, "malformed"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Members of a partition with a malformed record: %v, want an error that says %q", err, want)
		}
	}
}

func TestDynamoDBStoreRejectsSeparatorInStreamName(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, _ := newTableStore(t, cc, c, "separator")
	before := cc.total()
	l := lease.Lease{Group: "g", Stream: "a|b", ShardID: "shard-0"}
	_, err := s.Create(t.Context(), l)
	if err == nil || !strings.Contains(err.Error(), `contains "|"`) {
		t.Fatalf("Create with stream %q: %v, want an error about the '|'", l.Stream, err)
	}
	if _, err := s.List(t.Context(), "g", "a|b"); err == nil {
		t.Fatal("List with a '|' in the stream name succeeded")
	}
	if cc.total() != before {
		t.Fatal("the store was asked about an invalid key")
	}
	// '|' in the group is fine: the stream ends at the first one.
	l = lease.Lease{Group: "a|b", Stream: "s", ShardID: "shard-0"}
	if _, err := s.Create(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	if ls, err := s.List(t.Context(), "a|b", "s"); err != nil || len(ls) != 1 || ls[0].Group != "a|b" {
		t.Fatalf("List = %+v, %v", ls, err)
	}
}

// --- without a server ---

func TestDynamoDBConfigValidate(t *testing.T) {
	client := &countingClient{}
	for _, tc := range []struct {
		name string
		cfg  lease.DynamoDBConfig
		want []string // each in the error; none means valid
	}{
		{"valid", lease.DynamoDBConfig{Client: client, TableName: "leases"}, nil},
		{"valid with options", lease.DynamoDBConfig{Client: client, TableName: "my_app.leases-v2", CreateTable: true,
			CreateTableTimeout: time.Second}, nil},
		{"shortest name", lease.DynamoDBConfig{Client: client, TableName: "abc"}, nil},
		{"longest name", lease.DynamoDBConfig{Client: client, TableName: strings.Repeat("a", 255)}, nil},
		{"nil client", lease.DynamoDBConfig{TableName: "leases"}, []string{"Client is nil"}},
		{"empty table name", lease.DynamoDBConfig{Client: client}, []string{"TableName is empty"}},
		{"name too short", lease.DynamoDBConfig{Client: client, TableName: "ab"}, []string{`TableName "ab" is not a valid`}},
		{"name too long", lease.DynamoDBConfig{Client: client, TableName: strings.Repeat("a", 256)}, []string{"is not a valid"}},
		{"name with space", lease.DynamoDBConfig{Client: client, TableName: "my leases"}, []string{`"my leases" is not a valid`}},
		{"name with slash", lease.DynamoDBConfig{Client: client, TableName: "a/b/c"}, []string{"is not a valid"}},
		{"negative timeout", lease.DynamoDBConfig{Client: client, TableName: "leases", CreateTableTimeout: -time.Second},
			[]string{"CreateTableTimeout is negative"}},
		{"everything wrong", lease.DynamoDBConfig{CreateTableTimeout: -1},
			[]string{"Client is nil", "TableName is empty", "CreateTableTimeout is negative"}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v", tc.cfg)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
			// NewDynamoDBStore refuses it before asking DynamoDB anything.
			cc := &countingClient{}
			cfg := tc.cfg
			if cfg.Client != nil {
				cfg.Client = cc
			}
			if _, err := lease.NewDynamoDBStore(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), tc.want[0]) {
				t.Fatalf("NewDynamoDBStore: %v, want the validation error", err)
			}
			if cc.total() != 0 {
				t.Fatalf("NewDynamoDBStore with an invalid config made %d calls", cc.total())
			}
		})
	}
}

// scriptedTables answers DescribeTable and CreateTable from a script; the item calls are not
// expected.
type scriptedTables struct {
	lease.DynamoDBAPI // nil: any other call panics, which fails the test

	mu       sync.Mutex
	statuses []types.TableStatus // one per DescribeTable; "" = not found; the last one repeats
	creates  int
	createFn func() error
}

func (s *scriptedTables) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.statuses[0]
	if len(s.statuses) > 1 {
		s.statuses = s.statuses[1:]
	}
	if st == "" {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName:   in.TableName,
		TableStatus: st,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("shard_id"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("shard_id"), KeyType: types.KeyTypeRange},
		},
	}}, nil
}

func (s *scriptedTables) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creates++
	if s.createFn != nil {
		return nil, s.createFn()
	}
	return &dynamodb.CreateTableOutput{}, nil
}

func TestDynamoDBStoreWaitsUntilActive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   []types.TableStatus
		create   bool
		createFn func() error
		creates  int
	}{
		{"created here", []types.TableStatus{"", "", types.TableStatusCreating, types.TableStatusCreating, types.TableStatusActive}, true, nil, 1},
		{"created by another at the same time", []types.TableStatus{"", types.TableStatusCreating, types.TableStatusActive}, true,
			func() error { return &types.ResourceInUseException{Message: aws.String("Table already exists")} }, 1},
		{"being created by another, CreateTable off", []types.TableStatus{types.TableStatusCreating, types.TableStatusActive}, false, nil, 0},
		{"updating is usable", []types.TableStatus{types.TableStatusUpdating}, false, nil, 0},
		// The SDK's TableExists waiter would wait on for ACTIVE; the store's acceptor takes it.
		{"updating while waiting is usable", []types.TableStatus{"", types.TableStatusCreating, types.TableStatusUpdating}, true, nil, 1},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			api := &scriptedTables{statuses: tc.script, createFn: tc.createFn}
			start := time.Now()
			s, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: api, TableName: "leases", CreateTable: tc.create})
			if err != nil {
				t.Fatal(err)
			}
			if s == nil || api.creates != tc.creates {
				t.Fatalf("store %v, CreateTable calls %d, want %d", s, api.creates, tc.creates)
			}
			t.Logf("ready after %v", time.Since(start))
		})
	}
}

func TestDynamoDBStoreCreateTableTimeout(t *testing.T) {
	api := &scriptedTables{statuses: []types.TableStatus{"", types.TableStatusCreating}}
	start := time.Now()
	_, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: api, TableName: "slow-leases",
		CreateTable: true, CreateTableTimeout: 150 * time.Millisecond})
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("NewDynamoDBStore succeeded while the table stayed CREATING")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %q does not match context.DeadlineExceeded", err)
	}
	for _, want := range []string{`"slow-leases"`, "CREATING", "CreateTableTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	if elapsed > 2*time.Second {
		t.Fatalf("gave up after %v, want about 150ms", elapsed)
	}

	// The caller's context bounds the wait too.
	api = &scriptedTables{statuses: []types.TableStatus{types.TableStatusCreating}}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = lease.NewDynamoDBStore(ctx, lease.DynamoDBConfig{Client: api, TableName: "slow-leases"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("NewDynamoDBStore with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestDynamoDBStoreTableNotFoundError: a missing table with CreateTable off is a
// *TableNotFoundError that errors.Is matches to ErrTableNotFound, through wrapping too, and
// that a caller with settings of its own can reword to name its setting alone.
func TestDynamoDBStoreTableNotFoundError(t *testing.T) {
	api := &scriptedTables{statuses: []types.TableStatus{""}}
	_, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: api, TableName: "leases"})
	want := `lease table not found: DynamoDB table "leases" does not exist; create it (partition key "pk", sort key "shard_id", both strings) or set DynamoDBConfig.CreateTable`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	if api.creates != 0 {
		t.Fatalf("%d CreateTable calls with CreateTable off", api.creates)
	}
	wrapped := fmt.Errorf("opening the lease table: %w", err)
	var nf *lease.TableNotFoundError
	if !errors.Is(wrapped, lease.ErrTableNotFound) || !errors.As(wrapped, &nf) {
		t.Fatalf("errors.Is(ErrTableNotFound) %v, errors.As(*TableNotFoundError) %v: want both",
			errors.Is(wrapped, lease.ErrTableNotFound), errors.As(wrapped, &nf))
	}
	if nf.Table != "leases" || nf.CreateSetting != "DynamoDBConfig.CreateTable" {
		t.Fatalf("fields %+v", *nf)
	}
	reworded := *nf
	reworded.CreateSetting = "SubscriberConfig.Group.CreateLeaseTable"
	if got := reworded.Error(); strings.Contains(got, "DynamoDBConfig") || !strings.HasSuffix(got, "or set SubscriberConfig.Group.CreateLeaseTable") ||
		!errors.Is(&reworded, lease.ErrTableNotFound) {
		t.Fatalf("reworded copy: %q", got)
	}
}

func TestDynamoDBStoreUnusableTable(t *testing.T) {
	for _, st := range []types.TableStatus{types.TableStatusDeleting, types.TableStatusArchived} {
		api := &scriptedTables{statuses: []types.TableStatus{st}}
		_, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: api, TableName: "leases", CreateTable: true})
		if err == nil || !strings.Contains(err.Error(), string(st)) || !strings.Contains(err.Error(), `"leases"`) {
			t.Fatalf("table %s: %v, want an error naming the table and its status", st, err)
		}
		// Seen while waiting for a table being created: the wait ends at once (the SDK's
		// waiter alone would poll until CreateTableTimeout, an hour here).
		api = &scriptedTables{statuses: []types.TableStatus{"", types.TableStatusCreating, st}}
		_, err = lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: api, TableName: "leases", CreateTable: true,
			CreateTableTimeout: time.Hour})
		if err == nil || !strings.Contains(err.Error(), string(st)) || !strings.Contains(err.Error(), `"leases"`) ||
			errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("table %s while waiting: %v, want an error naming the table and its status", st, err)
		}
	}
}

func TestDynamoDBStoreSetupFaultsNameTable(t *testing.T) {
	injected := errors.New("injected: AccessDeniedException")
	for _, method := range []string{"DescribeTable", "CreateTable"} {
		api := &scriptedTables{statuses: []types.TableStatus{""}, createFn: func() error { return injected }}
		var client lease.DynamoDBAPI = api
		if method == "DescribeTable" {
			client = &countingClient{inner: api, fault: func(string) error { return injected }}
		}
		_, err := lease.NewDynamoDBStore(t.Context(), lease.DynamoDBConfig{Client: client, TableName: "leases", CreateTable: true})
		if !errors.Is(err, injected) || !strings.Contains(err.Error(), `"leases"`) {
			t.Fatalf("%s failing: %v, want the injected error naming the table", method, err)
		}
		if errors.Is(err, lease.ErrTableNotFound) {
			t.Fatalf("%s failing: %v matches ErrTableNotFound", method, err)
		}
	}
}

// TestDynamoDBStoreLongestKeys: the longest names the driver lets through (a 128-byte stream,
// a group of 2048-128-len("|")-len("|NN") bytes, a 1000-byte worker id with a "#12" suffix) fit
// the table's keys: the partition key of a lease (stream|group|NN, the longest the store
// writes: exactly 2048 bytes), of a member record (#stream|group), and the sort key of a member
// record; one byte more of group does not fit a lease's partition key.
func TestDynamoDBStoreLongestKeys(t *testing.T) {
	c := dynamoClient(t)
	s, _ := newTableStore(t, c, c, "longest")
	ctx := t.Context()
	stream := strings.Repeat("s", 128)
	group := strings.Repeat("g", 2048-128-len("|")-len("|NN"))
	worker := strings.Repeat("w", 1000) + "#12"
	if n := len(lease.DynamoDBPartitionKey(lease.Key{Group: group, Stream: stream, ShardID: "shardId-000000000000"})); n != 2048 {
		t.Fatalf("the longest lease partition key is %d bytes, want 2048", n)
	}
	l, err := s.Create(ctx, lease.Lease{Group: group, Stream: stream, ShardID: "shardId-000000000000"})
	if err != nil {
		t.Fatalf("Create with a %d-byte group: %v", len(group), err)
	}
	if _, err := s.Take(ctx, l, worker); err != nil {
		t.Fatalf("Take by a %d-byte worker (the owner, not a key): %v", len(worker), err)
	}
	if ls, err := s.List(ctx, group, stream); err != nil || len(ls) != 1 || ls[0].Owner != worker {
		t.Fatalf("List = %d leases, %v; want the one taken", len(ls), err)
	}
	if _, err := s.Heartbeat(ctx, lease.Member{Group: group, Stream: stream, Worker: worker}); err != nil {
		t.Fatalf("Heartbeat with a %d-byte group and a %d-byte worker: %v", len(group), len(worker), err)
	}
	if ms, err := s.Members(ctx, group, stream); err != nil || len(ms) != 1 || ms[0].Worker != worker {
		t.Fatalf("Members = %d records, %v; want the one worker", len(ms), err)
	}
	if _, err := s.Create(ctx, lease.Lease{Group: group + "g", Stream: stream, ShardID: "shardId-000000000000"}); err == nil {
		t.Fatalf("Create with a %d-byte group succeeded; the limit the driver enforces would be too loose", len(group)+1)
	}
	if _, err := s.Heartbeat(ctx, lease.Member{Group: "g", Stream: stream, Worker: strings.Repeat("w", 1025)}); err == nil {
		t.Fatal("Heartbeat with a 1025-byte worker succeeded; DynamoDB's sort key limit is 1024 bytes")
	}
	// A stream name cannot start with '#': its leases would share the member partition of
	// the stream named by the rest.
	if _, err := s.Create(ctx, lease.Lease{Group: "g", Stream: "#x", ShardID: "shardId-000000000000"}); err == nil || !strings.Contains(err.Error(), "starts with") {
		t.Fatalf("Create of a lease of stream %q: %v, want an input error", "#x", err)
	}
}
