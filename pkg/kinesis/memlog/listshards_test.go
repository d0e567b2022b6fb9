package memlog_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func shardIDs(shards []types.Shard) string {
	ids := make([]string, len(shards))
	for i, s := range shards {
		ids[i] = strings.TrimPrefix(aws.ToString(s.ShardId), "shardId-0000000000")
	}
	return strings.Join(ids, " ")
}

// The shards split the hash key space evenly, without gaps, up to 2^128-1.
func TestListShardsHashRanges(t *testing.T) {
	for _, n := range []int32{1, 3, 4, 7} {
		l, _ := newStream(t, "s", n)
		out, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s")})
		if err != nil {
			t.Fatal(err)
		}
		space := new(big.Int).Lsh(big.NewInt(1), 128)
		step := new(big.Int).Div(space, big.NewInt(int64(n)))
		next := new(big.Int)
		for i, s := range out.Shards {
			start, _ := new(big.Int).SetString(*s.HashKeyRange.StartingHashKey, 10)
			end, _ := new(big.Int).SetString(*s.HashKeyRange.EndingHashKey, 10)
			if start.Cmp(next) != 0 {
				t.Errorf("%d shards: shard %d starts at %s, want %s", n, i, start, next)
			}
			if i < int(n)-1 && new(big.Int).Sub(end, start).Cmp(new(big.Int).Sub(step, big.NewInt(1))) != 0 {
				t.Errorf("%d shards: shard %d spans %s..%s", n, i, start, end)
			}
			if s.SequenceNumberRange == nil || s.SequenceNumberRange.StartingSequenceNumber == nil ||
				s.SequenceNumberRange.EndingSequenceNumber != nil || s.ParentShardId != nil || s.AdjacentParentShardId != nil {
				t.Errorf("shard %d = %+v", i, s)
			}
			next = end.Add(end, big.NewInt(1))
		}
		if next.Cmp(space) != 0 {
			t.Errorf("%d shards end at %s, want 2^128-1", n, next.Sub(next, big.NewInt(1)))
		}
	}
}

func TestListShardsPaging(t *testing.T) {
	l, _ := newStream(t, "s", 7)
	out, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(3)})
	if err != nil {
		t.Fatal(err)
	}
	var pages []string
	for {
		pages = append(pages, shardIDs(out.Shards))
		if out.NextToken == nil {
			break
		}
		if out, err = l.ListShards(ctx, &awskinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(3)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(pages, " | "); got != "00 01 02 | 03 04 05 | 06" {
		t.Errorf("pages %q", got)
	}
	// A page that ends on the last shard has no NextToken.
	out, err = l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(7)})
	if err != nil || out.NextToken != nil || len(out.Shards) != 7 {
		t.Errorf("7 of 7: %d shards, NextToken %v, %v", len(out.Shards), out.NextToken, err)
	}
}

func TestListShardsStartAndFilter(t *testing.T) {
	l, c := newStream(t, "s", 5)
	tests := []struct {
		name string
		in   awskinesis.ListShardsInput
		want string
	}{
		{"all", awskinesis.ListShardsInput{}, "00 01 02 03 04"},
		{"exclusive start", awskinesis.ListShardsInput{ExclusiveStartShardId: aws.String(shardName(1))}, "02 03 04"},
		{"exclusive start before all", awskinesis.ListShardsInput{ExclusiveStartShardId: aws.String("a")}, "00 01 02 03 04"},
		{"exclusive start past all", awskinesis.ListShardsInput{ExclusiveStartShardId: aws.String(shardName(4))}, ""},
		{"AFTER_SHARD_ID", awskinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAfterShardId,
			ShardId: aws.String(shardName(2))}}, "03 04"},
		{"AT_LATEST", awskinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}}, "00 01 02 03 04"},
		{"AT_TIMESTAMP", awskinesis.ListShardsInput{ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp,
			Timestamp: aws.Time(c.Now())}}, "00 01 02 03 04"},
		{"creation timestamp", awskinesis.ListShardsInput{StreamCreationTimestamp: aws.Time(c.Now())}, "00 01 02 03 04"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.StreamName = aws.String("s")
			out, err := l.ListShards(ctx, &in)
			if err != nil {
				t.Fatal(err)
			}
			if got := shardIDs(out.Shards); got != tt.want {
				t.Errorf("shards %q, want %q", got, tt.want)
			}
		})
	}
}

func TestListShardsErrors(t *testing.T) {
	l, c := newStream(t, "s", 3)
	first, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	tok := first.NextToken
	tests := []struct {
		name     string
		in       awskinesis.ListShardsInput
		wantCode string
		wantMsg  string
	}{
		{"nothing", awskinesis.ListShardsInput{}, "InvalidArgumentException", "Either NextToken or StreamName should be provided."},
		{"token and name", awskinesis.ListShardsInput{NextToken: tok, StreamName: aws.String("s")},
			"InvalidArgumentException", "NextToken and StreamName cannot be provided together."},
		{"token and start", awskinesis.ListShardsInput{NextToken: tok, ExclusiveStartShardId: aws.String(shardName(0))},
			"InvalidArgumentException", "ExclusiveStartShardId"},
		{"token and filter", awskinesis.ListShardsInput{NextToken: tok, ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}},
			"InvalidArgumentException", "ShardFilter"},
		{"forged token", awskinesis.ListShardsInput{NextToken: aws.String("AAAA")}, "InvalidArgumentException", "Invalid NextToken."},
		{"empty token", awskinesis.ListShardsInput{NextToken: aws.String("")}, "ValidationException", "nextToken"},
		{"unknown stream", awskinesis.ListShardsInput{StreamName: aws.String("nope")}, "ResourceNotFoundException",
			"Stream nope under account 000000000000 not found."},
		{"bad stream name", awskinesis.ListShardsInput{StreamName: aws.String("a*b")}, "ValidationException", "streamName"},
		{"max results 0", awskinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(0)},
			"ValidationException", "maxResults"},
		{"max results 10001", awskinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(10001)},
			"ValidationException", "less than or equal to 10000"},
		{"bad filter type", awskinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: "SOME"}},
			"ValidationException", "shardFilter.type"},
		{"AFTER_SHARD_ID without id", awskinesis.ListShardsInput{StreamName: aws.String("s"),
			ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAfterShardId}}, "InvalidArgumentException", "ShardId"},
		{"other creation timestamp", awskinesis.ListShardsInput{StreamName: aws.String("s"),
			StreamCreationTimestamp: aws.Time(c.Now().Add(-time.Hour))}, "ResourceNotFoundException", "creation timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.ListShards(ctx, &tt.in)
			if got := errCode(err); got != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", got, err, tt.wantCode)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
		})
	}

	t.Run("expired token", func(t *testing.T) {
		c.Advance(300*time.Second + time.Millisecond)
		_, err := l.ListShards(ctx, &awskinesis.ListShardsInput{NextToken: tok})
		wantErr[*types.ExpiredNextTokenException](t, err)
	})
	t.Run("token of a deleted stream", func(t *testing.T) {
		out, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(1)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String("s")}); err != nil {
			t.Fatal(err)
		}
		_, err = l.ListShards(ctx, &awskinesis.ListShardsInput{NextToken: out.NextToken})
		wantErr[*types.ResourceNotFoundException](t, err)
	})
}
