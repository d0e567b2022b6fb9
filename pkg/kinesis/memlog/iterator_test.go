package memlog_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// payloads returns the records' data as strings.
func payloads(recs []types.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Data)
	}
	return out
}

func TestIteratorTypes(t *testing.T) {
	l, c := newStream(t, "s", 1)
	var seqs []string
	var times []time.Time
	for i := range 5 {
		c.Advance(time.Second)
		times = append(times, c.Now())
		seqs = append(seqs, *put(t, l, "s", "k", fmt.Sprint("r", i)).SequenceNumber)
	}
	sh := aws.String(shardName(0))
	tests := []struct {
		name string
		in   awskinesis.GetShardIteratorInput
		want string
	}{
		{"TRIM_HORIZON", awskinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeTrimHorizon}, "r0 r1 r2 r3 r4"},
		{"LATEST", awskinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeLatest}, ""},
		{"AT_SEQUENCE_NUMBER", awskinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber,
			StartingSequenceNumber: &seqs[2]}, "r2 r3 r4"},
		{"AFTER_SEQUENCE_NUMBER", awskinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber,
			StartingSequenceNumber: &seqs[2]}, "r3 r4"},
		{"AFTER_SEQUENCE_NUMBER of the newest", awskinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber,
			StartingSequenceNumber: &seqs[4]}, ""},
		{"AT_TIMESTAMP exact", awskinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp,
			Timestamp: &times[3]}, "r3 r4"},
		{"AT_TIMESTAMP between", awskinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp,
			Timestamp: aws.Time(times[1].Add(time.Millisecond))}, "r2 r3 r4"},
		{"AT_TIMESTAMP before all", awskinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp,
			Timestamp: aws.Time(time.Unix(0, 0))}, "r0 r1 r2 r3 r4"},
		{"AT_TIMESTAMP now", awskinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp,
			Timestamp: aws.Time(c.Now().Add(time.Millisecond / 2))}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.StreamName, in.ShardId = aws.String("s"), sh
			it := iter(t, l, &in)
			if got := strings.Join(payloads(get(t, l, it, 0).Records), " "); got != tt.want {
				t.Errorf("read %q, want %q", got, tt.want)
			}
		})
	}
	// LATEST sees what is put after it was taken, AT/AFTER_SEQUENCE_NUMBER what was put before.
	latest := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeLatest)
	put(t, l, "s", "k", "r5")
	if got := payloads(get(t, l, latest, 0).Records); strings.Join(got, " ") != "r5" {
		t.Errorf("LATEST read %q, want r5", got)
	}
}

func TestGetShardIteratorErrors(t *testing.T) {
	l, c := newStream(t, "s", 2)
	seqOf := map[string]string{} // a sequence number of each shard
	for i := 0; len(seqOf) < 2; i++ {
		out := put(t, l, "s", fmt.Sprint(i), "x")
		seqOf[*out.ShardId] = *out.SequenceNumber
	}
	seq0, seq1 := seqOf[shardName(0)], seqOf[shardName(1)]
	createStream(t, l, "other", 2)
	other := *put(t, l, "other", "a", "x").SequenceNumber
	forged := []byte(seq0)
	forged[40] ^= 1 // one digit off

	in := func(shard string, typ types.ShardIteratorType, seq *string) awskinesis.GetShardIteratorInput {
		return awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shard), ShardIteratorType: typ, StartingSequenceNumber: seq}
	}
	tests := []struct {
		name     string
		in       awskinesis.GetShardIteratorInput
		wantCode string
		wantMsg  string
	}{
		{"unknown stream", awskinesis.GetShardIteratorInput{StreamName: aws.String("nope"), ShardId: aws.String(shardName(0)),
			ShardIteratorType: types.ShardIteratorTypeLatest}, "ResourceNotFoundException", "nope"},
		{"unknown shard", in(shardName(2), types.ShardIteratorTypeLatest, nil), "ResourceNotFoundException",
			"Shard shardId-000000000002 in stream s under account 000000000000 does not exist"},
		{"malformed shard id", in("shard-0", types.ShardIteratorTypeLatest, nil), "ResourceNotFoundException", "shard-0"},
		{"no shard id", awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardIteratorType: types.ShardIteratorTypeLatest},
			"ValidationException", "Value null at 'shardId'"},
		{"bad type", in(shardName(0), "OLDEST", nil), "ValidationException", "enum value set"},
		{"AT without sequence number", in(shardName(0), types.ShardIteratorTypeAtSequenceNumber, nil),
			"InvalidArgumentException", "Request specified AT_SEQUENCE_NUMBER and no StartingSequenceNumber."},
		{"AFTER without sequence number", in(shardName(0), types.ShardIteratorTypeAfterSequenceNumber, nil),
			"InvalidArgumentException", "no StartingSequenceNumber"},
		{"LATEST with sequence number", in(shardName(0), types.ShardIteratorTypeLatest, &seq0),
			"InvalidArgumentException", "Request specified LATEST and also a StartingSequenceNumber."},
		{"TRIM_HORIZON with sequence number", in(shardName(0), types.ShardIteratorTypeTrimHorizon, &seq0),
			"InvalidArgumentException", "also a StartingSequenceNumber"},
		{"AT_TIMESTAMP without timestamp", in(shardName(0), types.ShardIteratorTypeAtTimestamp, nil),
			"InvalidArgumentException", "Must specify timestampInMillis parameter"},
		{"AT_TIMESTAMP in the future", awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardName(0)),
			ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(c.Now().Add(time.Minute))},
			"InvalidArgumentException", "cannot be greater than the currentTimestampInMillis"},
		{"garbage sequence number", in(shardName(0), types.ShardIteratorTypeAtSequenceNumber, aws.String("banana")),
			"InvalidArgumentException", "StartingSequenceNumber banana used in GetShardIterator on shard shardId-000000000000 in stream s under account 000000000000 is invalid."},
		{"altered sequence number", in(shardName(0), types.ShardIteratorTypeAtSequenceNumber, aws.String(string(forged))),
			"InvalidArgumentException", "is invalid"},
		{"sequence number of another shard", in(shardName(0), types.ShardIteratorTypeAfterSequenceNumber, &seq1),
			"InvalidArgumentException", "Invalid StartingSequenceNumber. It encodes shardId-000000000001, while it was used in a call to a shard with shardId-000000000000"},
		{"sequence number of another stream", in(shardName(0), types.ShardIteratorTypeAtSequenceNumber, &other),
			"InvalidArgumentException", "did not come from this stream"},
		{"dry run", awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardName(0)),
			ShardIteratorType: types.ShardIteratorTypeLatest, DryRun: aws.Bool(true)}, "DryRunOperationException", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.GetShardIterator(ctx, &tt.in)
			if got := errCode(err); got != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", got, err, tt.wantCode)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
		})
	}
}

func TestForgedIterator(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	put(t, l, "s", "k", "x")
	good := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	raw, err := base64.StdEncoding.DecodeString(good)
	if err != nil {
		t.Fatalf("iterator %q is not base64: %v", good, err)
	}
	flipped := append([]byte(nil), raw...)
	flipped[20] ^= 0x01              // e.g. the position
	other, _ := newStream(t, "s", 1) // same stream, another Log: another key
	foreign := iterOf(t, other, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	for name, it := range map[string]string{
		"garbage":         "not an iterator",
		"altered":         base64.StdEncoding.EncodeToString(flipped),
		"truncated":       good[:len(good)-8],
		"another Log's":   foreign,
		"empty base64":    "",
		"too long":        strings.Repeat("A", 600),
		"base64 of bytes": base64.StdEncoding.EncodeToString([]byte("0123456789012345678901234567890123456789")),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(it)})
			switch code := errCode(err); code {
			case "InvalidArgumentException", "ValidationException":
			default:
				t.Errorf("error %v (%s), want InvalidArgumentException", err, code)
			}
		})
	}
	_, err = l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String("garbage")})
	wantErr[*types.InvalidArgumentException](t, err, "Invalid ShardIterator.")
}

func TestExpiredIterator(t *testing.T) {
	l, c := newStream(t, "s", 1)
	put(t, l, "s", "k", "x")
	it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	c.Advance(5 * time.Minute)
	out := get(t, l, it, 0) // exactly five minutes old: still valid
	c.Advance(5*time.Minute + time.Second)
	_, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
	wantErr[*types.ExpiredIteratorException](t, err, "Iterator expired.", "tolerated delay of 300000 milliseconds")
	_, err = l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErr[*types.ExpiredIteratorException](t, err)
}

func TestIteratorOfDeletedStream(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	put(t, l, "s", "k", "x")
	it := iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon)
	if _, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String("s")}); err != nil {
		t.Fatal(err)
	}
	_, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErr[*types.ResourceNotFoundException](t, err, "Shard shardId-000000000000 in stream s under account 000000000000 does not exist")

	createStream(t, l, "s", 1)
	put(t, l, "s", "k", "new")
	_, err = l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErr[*types.ResourceNotFoundException](t, err)
}

// A sequence number of a deleted stream is not one of the stream that replaced it.
func TestSequenceNumberOfRecreatedStream(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	old := *put(t, l, "s", "k", "x").SequenceNumber
	if _, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String("s")}); err != nil {
		t.Fatal(err)
	}
	createStream(t, l, "s", 1)
	put(t, l, "s", "k", "x")
	_, err := l.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardName(0)),
		ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: &old})
	wantErr[*types.InvalidArgumentException](t, err, "did not come from this stream")
}
