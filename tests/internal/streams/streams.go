// Package streams holds what the test packages under tests/ share: what they ask of a stream
// and of memlog (its shards, open and closed; when a reshard has finished; which calls a memlog
// was asked), and the Backend that Watermill's universal suite runs on. It is for tests only.
package streams

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

func HashKey(s *string) *big.Int {
	v, _ := new(big.Int).SetString(aws.ToString(s), 10)
	if v == nil {
		v = new(big.Int)
	}
	return v
}

// ListAll lists every shard of the stream, open and closed, following NextToken.
func ListAll(ctx context.Context, api kinesis.KinesisAPI, stream string) ([]types.Shard, error) {
	var all []types.Shard
	in := &awskinesis.ListShardsInput{StreamName: &stream}
	for {
		out, err := api.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		all = append(all, out.Shards...)
		if aws.ToString(out.NextToken) == "" {
			return all, nil
		}
		in = &awskinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// WaitActive waits until a reshard has finished: kinesis-local takes the stream through
// UPDATING even with no configured delay (memlog is ACTIVE at once). There is no signal to
// wait on, so this polls, with a deadline.
func WaitActive(ctx context.Context, t *testing.T, api kinesis.KinesisAPI, stream string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := api.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: &stream})
		if err == nil && out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stream %s did not become ACTIVE: %v (last error: %v)", stream, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// OpCounts counts a memlog's calls by operation, through its fault hook.
type OpCounts struct {
	mu  sync.Mutex
	ops map[string]int
}

// CountOps installs a counting fault hook on log.
func CountOps(log *memlog.Log) *OpCounts {
	c := &OpCounts{ops: map[string]int{}}
	log.SetFault(func(_ context.Context, call memlog.Call) error {
		c.mu.Lock()
		c.ops[call.Op]++
		c.mu.Unlock()
		return nil
	})
	return c
}

// NoPolling fails the test unless every read was pushed: no GetRecords, some subscriptions.
func (c *OpCounts) NoPolling(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops["GetRecords"] != 0 || c.ops["SubscribeToShard"] == 0 {
		t.Errorf("GetRecords=%d SubscribeToShard=%d: grouped subscribers with FanOut must read every shard through subscriptions, none by polling",
			c.ops["GetRecords"], c.ops["SubscribeToShard"])
	}
}
