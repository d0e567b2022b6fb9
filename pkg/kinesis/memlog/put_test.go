package memlog_test

import (
	"crypto/md5"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

const mib = 1 << 20

func TestPutRecordValidation(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	key := func(s string) *string { return &s }
	tests := []struct {
		name     string
		in       awskinesis.PutRecordInput
		wantCode string
		wantMsg  string
	}{
		{name: "ok", in: awskinesis.PutRecordInput{PartitionKey: key("k"), Data: []byte("x")}},
		{name: "empty data", in: awskinesis.PutRecordInput{PartitionKey: key("k"), Data: []byte{}}},
		{name: "256-character key", in: awskinesis.PutRecordInput{PartitionKey: key(strings.Repeat("é", 256)), Data: []byte("x")}},
		{name: "key and data exactly 1 MiB", in: awskinesis.PutRecordInput{PartitionKey: key("k"), Data: make([]byte, mib-1)}},
		{name: "unknown stream", in: awskinesis.PutRecordInput{StreamName: aws.String("nope"), PartitionKey: key("k"), Data: []byte("x")},
			wantCode: "ResourceNotFoundException", wantMsg: "Stream nope under account 000000000000 not found."},
		{name: "bad stream name", in: awskinesis.PutRecordInput{StreamName: aws.String("no/slash"), PartitionKey: key("k"), Data: []byte("x")},
			wantCode: "ValidationException", wantMsg: "Value 'no/slash' at 'streamName' failed to satisfy constraint"},
		{name: "empty key", in: awskinesis.PutRecordInput{PartitionKey: key(""), Data: []byte("x")},
			wantCode: "ValidationException", wantMsg: "at 'partitionKey' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{name: "257-character key", in: awskinesis.PutRecordInput{PartitionKey: key(strings.Repeat("k", 257)), Data: []byte("x")},
			wantCode: "ValidationException", wantMsg: "Member must have length less than or equal to 256"},
		{name: "no key", in: awskinesis.PutRecordInput{Data: []byte("x")},
			wantCode: "ValidationException", wantMsg: "Value null at 'partitionKey'"},
		{name: "no data", in: awskinesis.PutRecordInput{PartitionKey: key("k")},
			wantCode: "ValidationException", wantMsg: "at 'data' failed to satisfy constraint: Member must not be null"},
		{name: "data over 1 MiB", in: awskinesis.PutRecordInput{PartitionKey: key("k"), Data: make([]byte, mib+1)},
			wantCode: "ValidationException", wantMsg: "Member must have length less than or equal to 1048576"},
		{name: "data and key over 1 MiB", in: awskinesis.PutRecordInput{PartitionKey: key("kk"), Data: make([]byte, mib-1)},
			wantCode: "InvalidArgumentException", wantMsg: "1048577 bytes"},
		{name: "violations listed together", in: awskinesis.PutRecordInput{StreamName: aws.String(""), PartitionKey: key("")},
			wantCode: "ValidationException", wantMsg: "3 validation errors detected"},
		{name: "explicit hash key too big", in: awskinesis.PutRecordInput{PartitionKey: key("k"), Data: []byte("x"),
			ExplicitHashKey: aws.String("340282366920938463463374607431768211456")},
			wantCode: "InvalidArgumentException", wantMsg: "Invalid ExplicitHashKey"},
		{name: "explicit hash key not a number", in: awskinesis.PutRecordInput{PartitionKey: key("k"), Data: []byte("x"),
			ExplicitHashKey: aws.String("-1")}, wantCode: "InvalidArgumentException"},
		{name: "bad sequence number for ordering", in: awskinesis.PutRecordInput{PartitionKey: key("k"), Data: []byte("x"),
			SequenceNumberForOrdering: aws.String("12")}, wantCode: "InvalidArgumentException", wantMsg: "ExclusiveMinimumSequenceNumber 12"},
		{name: "dry run", in: awskinesis.PutRecordInput{PartitionKey: key("k"), Data: []byte("x"), DryRun: aws.Bool(true)},
			wantCode: "DryRunOperationException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if in.StreamName == nil {
				in.StreamName = aws.String("s")
			}
			out, err := l.PutRecord(ctx, &in)
			if got := errCode(err); got != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", got, err, tt.wantCode)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not contain %q", err, tt.wantMsg)
				}
				return
			}
			if out.SequenceNumber == nil || out.ShardId == nil {
				t.Errorf("output %+v lacks sequence number or shard", out)
			}
		})
	}
}

func entries(n, size int) []types.PutRecordsRequestEntry {
	out := make([]types.PutRecordsRequestEntry, n)
	for i := range out {
		out[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("key-", i)), Data: make([]byte, size)}
	}
	return out
}

func TestPutRecordsValidation(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	tests := []struct {
		name     string
		records  []types.PutRecordsRequestEntry
		stream   string
		wantCode string
		wantMsg  string
	}{
		{name: "500 entries", records: entries(500, 10)},
		{name: "exactly 5 MiB", records: []types.PutRecordsRequestEntry{
			{PartitionKey: aws.String("k"), Data: make([]byte, mib-1)}, {PartitionKey: aws.String("k"), Data: make([]byte, mib-1)},
			{PartitionKey: aws.String("k"), Data: make([]byte, mib-1)}, {PartitionKey: aws.String("k"), Data: make([]byte, mib-1)},
			{PartitionKey: aws.String("k"), Data: make([]byte, mib-1)}}},
		{name: "501 entries", records: entries(501, 1), wantCode: "ValidationException",
			wantMsg: "at 'records' failed to satisfy constraint: Member must have length less than or equal to 500"},
		{name: "0 entries", records: []types.PutRecordsRequestEntry{}, wantCode: "ValidationException",
			wantMsg: "Member must have length greater than or equal to 1"},
		{name: "nil entries", wantCode: "ValidationException", wantMsg: "Value null at 'records'"},
		{name: "over 5 MiB", records: entries(6, mib-100), wantCode: "InvalidArgumentException", wantMsg: "Records size exceeds 5 MB limit"},
		{name: "entry over 1 MiB", records: append(entries(2, 1), types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: make([]byte, mib+1)}),
			wantCode: "ValidationException", wantMsg: "Value at 'records.3.member.data'"},
		{name: "entry with empty key", records: append(entries(1, 1), types.PutRecordsRequestEntry{PartitionKey: aws.String(""), Data: []byte("x")}),
			wantCode: "ValidationException", wantMsg: "at 'records.2.member.partitionKey'"},
		{name: "entry with 257-character key", records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String(strings.Repeat("k", 257)), Data: []byte("x")}},
			wantCode: "ValidationException", wantMsg: "length less than or equal to 256"},
		{name: "unknown stream", stream: "nope", records: entries(1, 1), wantCode: "ResourceNotFoundException",
			wantMsg: "Stream nope under account 000000000000 not found."},
		{name: "bad stream name", stream: "a b", records: entries(1, 1), wantCode: "ValidationException"},
		{name: "bad explicit hash key", records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: []byte("x"),
			ExplicitHashKey: aws.String("1x")}}, wantCode: "InvalidArgumentException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := tt.stream
			if stream == "" {
				stream = "s"
			}
			out, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String(stream), Records: tt.records})
			if got := errCode(err); got != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", got, err, tt.wantCode)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not contain %q", err, tt.wantMsg)
				}
				return
			}
			if len(out.Records) != len(tt.records) || aws.ToInt32(out.FailedRecordCount) != 0 {
				t.Errorf("%d results, %d failed", len(out.Records), aws.ToInt32(out.FailedRecordCount))
			}
		})
	}
}

func TestPutRecordsResults(t *testing.T) {
	l, _ := newStream(t, "s", 4)
	recs := entries(200, 3)
	for i := range recs {
		recs[i].Data = []byte(fmt.Sprint(i))
	}
	out, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{
		StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/s"), Records: recs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.EncryptionType != types.EncryptionTypeNone {
		t.Errorf("EncryptionType %q", out.EncryptionType)
	}
	// Each shard holds its records in request order, with the reported sequence numbers.
	want := map[string][]string{}
	seqs := map[string][]string{}
	for i, r := range out.Records {
		id := aws.ToString(r.ShardId)
		want[id] = append(want[id], fmt.Sprint(i))
		seqs[id] = append(seqs[id], aws.ToString(r.SequenceNumber))
	}
	for id, w := range want {
		it := iterOf(t, l, "s", id, types.ShardIteratorTypeTrimHorizon)
		got := get(t, l, it, 0)
		if len(got.Records) != len(w) {
			t.Fatalf("%s holds %d records, want %d", id, len(got.Records), len(w))
		}
		for j, r := range got.Records {
			if string(r.Data) != w[j] || aws.ToString(r.SequenceNumber) != seqs[id][j] {
				t.Errorf("%s record %d = %q %s, want %q %s", id, j, r.Data, aws.ToString(r.SequenceNumber), w[j], seqs[id][j])
			}
		}
	}
}

// Callers reuse their buffers; what was put must not change with them.
func TestPutCopiesData(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	buf := []byte("first")
	if _, err := l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: buf}); err != nil {
		t.Fatal(err)
	}
	batch := []byte("second")
	if _, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"),
		Records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: batch}}}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX")
	copy(batch, "YYYYYY")
	got := readAll(t, l, "s", shardName(0))
	if strings.Join(got, ",") != "first,second" {
		t.Errorf("stored %q after caller reused its buffers", got)
	}
}

// hashOf is where Kinesis places a key: MD5 as a big-endian 128-bit integer.
func hashOf(key string) *big.Int {
	sum := md5.Sum([]byte(key))
	return new(big.Int).SetBytes(sum[:])
}

func TestRoutingByPartitionKey(t *testing.T) {
	l, _ := newStream(t, "s", 4)
	out, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s")})
	if err != nil {
		t.Fatal(err)
	}
	owner := func(h *big.Int) string {
		for _, s := range out.Shards {
			lo, _ := new(big.Int).SetString(*s.HashKeyRange.StartingHashKey, 10)
			hi, _ := new(big.Int).SetString(*s.HashKeyRange.EndingHashKey, 10)
			if h.Cmp(lo) >= 0 && h.Cmp(hi) <= 0 {
				return *s.ShardId
			}
		}
		return ""
	}
	counts := map[string]int{}
	for i := range 2000 {
		key := fmt.Sprint("user-", i)
		a := put(t, l, "s", key, "x")
		b := put(t, l, "s", key, "y")
		if *a.ShardId != *b.ShardId {
			t.Fatalf("key %s went to %s and %s", key, *a.ShardId, *b.ShardId)
		}
		if want := owner(hashOf(key)); *a.ShardId != want {
			t.Fatalf("key %s went to %s, its hash is in %s", key, *a.ShardId, want)
		}
		counts[*a.ShardId]++
	}
	for i := range 4 {
		if n := counts[shardName(i)]; n < 400 || n > 600 {
			t.Errorf("%s got %d of 2000 keys, want about 500", shardName(i), n)
		}
	}
}

func TestRoutingByExplicitHashKey(t *testing.T) {
	l, _ := newStream(t, "s", 4)
	quarter := new(big.Int).Lsh(big.NewInt(1), 126)
	max128 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))
	tests := []struct {
		hash *big.Int
		want int
	}{
		{big.NewInt(0), 0},
		{new(big.Int).Sub(quarter, big.NewInt(1)), 0},
		{quarter, 1},
		{new(big.Int).Mul(quarter, big.NewInt(2)), 2},
		{new(big.Int).Sub(new(big.Int).Mul(quarter, big.NewInt(3)), big.NewInt(1)), 2},
		{new(big.Int).Mul(quarter, big.NewInt(3)), 3},
		{max128, 3},
	}
	for _, tt := range tests {
		out, err := l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("ignored"),
			Data: []byte("x"), ExplicitHashKey: aws.String(tt.hash.String())})
		if err != nil {
			t.Fatalf("hash %s: %v", tt.hash, err)
		}
		if *out.ShardId != shardName(tt.want) {
			t.Errorf("hash %s went to %s, want %s", tt.hash, *out.ShardId, shardName(tt.want))
		}
	}
}

func TestSequenceNumbersIncrease(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	last := map[string]*big.Int{}
	for i := range 3000 {
		out := put(t, l, "s", fmt.Sprint(i%7), "x")
		s := aws.ToString(out.SequenceNumber)
		n, ok := new(big.Int).SetString(s, 10)
		if !ok || len(s) != 56 {
			t.Fatalf("sequence number %q is not a 56-digit integer", s)
		}
		if prev := last[*out.ShardId]; prev != nil && n.Cmp(prev) <= 0 {
			t.Fatalf("sequence number %s after %s in %s", n, prev, *out.ShardId)
		}
		last[*out.ShardId] = n
	}
	// The shard's StartingSequenceNumber is below its first record's.
	shards, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s")})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards.Shards {
		start, _ := new(big.Int).SetString(*sh.SequenceNumberRange.StartingSequenceNumber, 10)
		first := get(t, l, iterOf(t, l, "s", *sh.ShardId, types.ShardIteratorTypeTrimHorizon), 1).Records[0]
		f, _ := new(big.Int).SetString(*first.SequenceNumber, 10)
		if start.Cmp(f) >= 0 {
			t.Errorf("%s starts at %s, first record %s", *sh.ShardId, start, f)
		}
	}
}
