package memlog_test

import (
	"math/big"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// wantCode fails unless err has the AWS error code code and its message contains msg.
func wantCode(t *testing.T, err error, code, msg string) {
	t.Helper()
	if got := errCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
	if err != nil && !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q does not contain %q", err, msg)
	}
}

func onDemand(t *testing.T, l *memlog.Log, name string) {
	t.Helper()
	if _, err := l.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(name),
		StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand}}); err != nil {
		t.Fatal(err)
	}
}

func TestSplitShardErrors(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	onDemand(t, l, "od")
	split(t, l, "s", shardName(1), new(big.Int).Mul(big.NewInt(3), new(big.Int).Lsh(big.NewInt(1), 126)))
	end0 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1)).String() // shard 0 owns [0, end0]
	in := func(stream, shard, key string) *awskinesis.SplitShardInput {
		return &awskinesis.SplitShardInput{StreamName: aws.String(stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(key)}
	}
	outOfRange := "used in SplitShard() on shard shardId-000000000000 in stream s under account 000000000000 is not both " +
		"greater than one plus the shard's StartingHashKey 0 and less than the shard's EndingHashKey " + end0 + "."
	tests := []struct {
		name     string
		in       *awskinesis.SplitShardInput
		wantCode string
		wantMsg  string
	}{
		{"nil input", nil, "ValidationException", "2 validation errors"},
		{"no shard", &awskinesis.SplitShardInput{StreamName: aws.String("s"), NewStartingHashKey: aws.String("5")},
			"ValidationException", "Value null at 'shardToSplit' failed to satisfy constraint: Member must not be null"},
		{"no hash key", &awskinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: aws.String(shardName(0))},
			"ValidationException", "Value null at 'newStartingHashKey'"},
		{"hash key not a number", in("s", shardName(0), "sth"), "ValidationException",
			`Value 'sth' at 'newStartingHashKey' failed to satisfy constraint: Member must satisfy regular expression pattern: 0|([1-9]\d{0,38})`},
		{"hash key with a leading zero", in("s", shardName(0), "012"), "ValidationException", "newStartingHashKey"},
		{"negative hash key", in("s", shardName(0), "-5"), "ValidationException", "newStartingHashKey"},
		{"bad shard id", in("s", "?", "5"), "ValidationException", "Value '?' at 'shardToSplit'"},
		{"no stream", &awskinesis.SplitShardInput{ShardToSplit: aws.String(shardName(0)), NewStartingHashKey: aws.String("5")},
			"InvalidArgumentException", "Either StreamName or StreamARN should be provided."},
		{"unknown stream", in("nope", shardName(0), "5"), "ResourceNotFoundException", "Stream nope under account 000000000000 not found."},
		{"unknown shard", in("s", shardName(9), "5"), "ResourceNotFoundException",
			"Could not find shard shardId-000000000009 in stream s under account 000000000000."},
		{"shard id in another form", in("s", "shard-0", "5"), "ResourceNotFoundException", "Could not find shard shard-0"},
		{"hash key at the start", in("s", shardName(0), "0"), "InvalidArgumentException", "NewStartingHashKey 0 " + outOfRange},
		{"hash key one above the start", in("s", shardName(0), "1"), "InvalidArgumentException", "NewStartingHashKey 1 " + outOfRange},
		{"hash key at the end", in("s", shardName(0), end0), "InvalidArgumentException", outOfRange},
		{"hash key in another shard", in("s", shardName(0), "340282366920938463463374607431768211455"), "InvalidArgumentException", outOfRange},
		{"hash key over 2^128-1", in("s", shardName(0), strings.Repeat("9", 39)), "InvalidArgumentException", outOfRange},
		{"closed shard", in("s", shardName(1), "5"), "InvalidArgumentException",
			"Shard shardId-000000000001 in stream s under account 000000000000 has already been merged or split, and thus is not eligible for merging or splitting."},
		{"on-demand stream", in("od", shardName(0), "5"), "ValidationException",
			"Request is invalid. Stream od under account 000000000000 is in On-Demand mode."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.SplitShard(ctx, tt.in)
			wantCode(t, err, tt.wantCode, tt.wantMsg)
		})
	}
	if got := shape(listShards(t, l, "s", nil)); got != "0 1- 2(1) 3(1)" {
		t.Errorf("failed splits changed the stream: %s", got)
	}
}

func TestMergeShardsErrors(t *testing.T) {
	l, _ := newStream(t, "s", 4)
	onDemand(t, l, "od")
	merge(t, l, "s", shardName(2), shardName(3))
	in := func(stream, a, b string) *awskinesis.MergeShardsInput {
		return &awskinesis.MergeShardsInput{StreamName: aws.String(stream), ShardToMerge: aws.String(a), AdjacentShardToMerge: aws.String(b)}
	}
	notAdjacent := func(a, b int) string {
		return "Shards " + shardName(a) + " and " + shardName(b) +
			" in stream s under account 000000000000 are not an adjacent pair of shards eligible for merging"
	}
	tests := []struct {
		name     string
		in       *awskinesis.MergeShardsInput
		wantCode string
		wantMsg  string
	}{
		{"nil input", nil, "ValidationException", "2 validation errors"},
		{"no adjacent shard", &awskinesis.MergeShardsInput{StreamName: aws.String("s"), ShardToMerge: aws.String(shardName(0))},
			"ValidationException", "Value null at 'adjacentShardToMerge'"},
		{"bad shard id", in("s", "a b", shardName(1)), "ValidationException", "Value 'a b' at 'shardToMerge'"},
		{"unknown stream", in("nope", shardName(0), shardName(1)), "ResourceNotFoundException", "Stream nope under account"},
		{"unknown shard", in("s", shardName(0), shardName(7)), "ResourceNotFoundException",
			"Could not find shard shardId-000000000007 in stream s under account 000000000000."},
		{"not adjacent", in("s", shardName(0), shardName(4)), "InvalidArgumentException", notAdjacent(0, 4)},
		{"last and first", in("s", shardName(4), shardName(0)), "InvalidArgumentException", notAdjacent(4, 0)},
		{"same shard", in("s", shardName(1), shardName(1)), "InvalidArgumentException", notAdjacent(1, 1)},
		{"closed shard", in("s", shardName(1), shardName(2)), "InvalidArgumentException",
			"Shard shardId-000000000002 in stream s under account 000000000000 has already been merged or split"},
		{"on-demand stream", in("od", shardName(0), shardName(1)), "ValidationException", "is in On-Demand mode."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.MergeShards(ctx, tt.in)
			wantCode(t, err, tt.wantCode, tt.wantMsg)
		})
	}
	if got := shape(listShards(t, l, "s", nil)); got != "0 1 2- 3- 4(2+3)" {
		t.Errorf("failed merges changed the stream: %s", got)
	}
}

func TestUpdateShardCountErrors(t *testing.T) {
	l, _ := newStream(t, "s", 4)
	onDemand(t, l, "od")
	in := func(stream string, n int32) *awskinesis.UpdateShardCountInput {
		return &awskinesis.UpdateShardCountInput{StreamName: aws.String(stream), TargetShardCount: aws.Int32(n),
			ScalingType: types.ScalingTypeUniformScaling}
	}
	tests := []struct {
		name     string
		in       *awskinesis.UpdateShardCountInput
		wantCode string
		wantMsg  string
	}{
		{"nil input", nil, "ValidationException", "2 validation errors"},
		{"no scaling type", &awskinesis.UpdateShardCountInput{StreamName: aws.String("s"), TargetShardCount: aws.Int32(2)},
			"ValidationException", "Value null at 'scalingType'"},
		{"unknown scaling type", &awskinesis.UpdateShardCountInput{StreamName: aws.String("s"), TargetShardCount: aws.Int32(2), ScalingType: "FAST"},
			"ValidationException", "Value 'FAST' at 'scalingType' failed to satisfy constraint: Member must satisfy enum value set: [UNIFORM_SCALING]"},
		{"no target", &awskinesis.UpdateShardCountInput{StreamName: aws.String("s"), ScalingType: types.ScalingTypeUniformScaling},
			"ValidationException", "Value null at 'targetShardCount'"},
		{"zero", in("s", 0), "ValidationException", "Value '0' at 'targetShardCount' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"over the API's bound", in("s", 100001), "ValidationException", "Member must have value less than or equal to 100000"},
		{"unknown stream", in("nope", 2), "ResourceNotFoundException", "Stream nope under account 000000000000 not found."},
		{"over double", in("s", 9), "LimitExceededException",
			"UpdateShardCount cannot scale up over double your current open shard count. Current open shard count: 4, Target shard count: 9"},
		{"under half", in("s", 1), "LimitExceededException",
			"UpdateShardCount cannot scale down below half your current open shard count. Current open shard count: 4, Target shard count: 1"},
		{"on-demand stream", in("od", 2), "ValidationException", "is in On-Demand mode."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.UpdateShardCount(ctx, tt.in)
			wantCode(t, err, tt.wantCode, tt.wantMsg)
		})
	}
	t.Run("three to one is under half", func(t *testing.T) {
		createStream(t, l, "three", 3)
		_, err := l.UpdateShardCount(ctx, in("three", 1))
		wantCode(t, err, "LimitExceededException", "cannot scale down below half")
	})
	t.Run("over 10000 shards", func(t *testing.T) {
		big := memlog.New(memlog.Config{ShardLimit: 20000})
		createStream(t, big, "s", 6000)
		_, err := big.UpdateShardCount(ctx, in("s", 10001))
		wantCode(t, err, "LimitExceededException",
			"Target shard count or number of open shards cannot be greater than 10000. Current open shard count: 6000, Target shard count: 10001")
	})
}

// Splits and UpdateShardCount count against Config.ShardLimit, which counts open shards.
func TestReshardShardLimit(t *testing.T) {
	l := memlog.New(memlog.Config{ShardLimit: 3})
	createStream(t, l, "s", 2)
	split(t, l, "s", shardName(0), big.NewInt(1000))
	_, err := l.SplitShard(ctx, &awskinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: aws.String(shardName(1)),
		NewStartingHashKey: aws.String(new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1000)).String())})
	wantErr[*types.LimitExceededException](t, err, "This request would exceed the shard limit for the account 000000000000 in us-east-1. "+
		"Current shard count for the account: 3. Limit: 3. Number of additional shards that would have resulted from this request: 1.")
	merge(t, l, "s", shardName(2), shardName(3)) // closed shards do not count
	_, err = l.UpdateShardCount(ctx, &awskinesis.UpdateShardCountInput{StreamName: aws.String("s"), TargetShardCount: aws.Int32(4),
		ScalingType: types.ScalingTypeUniformScaling})
	wantErr[*types.LimitExceededException](t, err, "Number of additional shards that would have resulted from this request: 2.")
	rescale(t, l, "s", 3)
}

// A reshard of a stream deleted meanwhile, or recreated under its name, does not touch the new one.
func TestReshardDeletedStream(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	if _, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String("s")}); err != nil {
		t.Fatal(err)
	}
	_, err := l.MergeShards(ctx, &awskinesis.MergeShardsInput{StreamName: aws.String("s"),
		ShardToMerge: aws.String(shardName(0)), AdjacentShardToMerge: aws.String(shardName(1))})
	wantErr[*types.ResourceNotFoundException](t, err, "Stream s under account 000000000000 not found.")
}
