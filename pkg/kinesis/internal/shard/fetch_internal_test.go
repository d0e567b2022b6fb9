package shard

import (
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// TestFetchMarksABacklog: a read counts as a backlog, whose next read skips the ramp, only
// when it came back full and the shard said more waits. kinesalite says MillisBehindLatest 0
// for every open shard, so its tests never take this path; this one does.
func TestFetchMarksABacklog(t *testing.T) {
	for _, tc := range []struct {
		name     string
		returned int
		behind   int64
		want     bool
	}{
		{"full, more behind", 100, 5000, true},
		{"full, at the tip", 100, 0, false},
		{"not full, behind", 99, 5000, false},
		{"empty, behind", 0, 5000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := make([]types.Record, tc.returned)
			for i := range recs {
				recs[i] = types.Record{SequenceNumber: aws.String(strconv.Itoa(100 + i)), PartitionKey: aws.String("k"), Data: []byte("x")}
			}
			out := &awskinesis.GetRecordsOutput{Records: recs, NextShardIterator: aws.String("next"), MillisBehindLatest: aws.Int64(tc.behind)}
			cfg := &Config{Stream: "s", Client: answerClient{out}, Logger: watermill.NopLogger{},
				RequestTimeout: time.Minute, GetRecordsLimit: 10000, MaxBufferedRecords: 10000, MaxBufferedBytes: 1 << 30}
			r := testReader(t.Context(), cfg, nil, nil, time.Time{})
			r.iterator = "it"
			if limit := r.readLimit(); limit != firstReadRecords {
				t.Fatalf("first read asks for %d, want %d", limit, firstReadRecords)
			}
			if err := r.fetch(); err != nil {
				t.Fatal(err)
			}
			if r.backlogged != tc.want {
				t.Errorf("backlogged = %v after a read of %d of %d records with %d ms behind, want %v", r.backlogged, tc.returned, firstReadRecords, tc.behind, tc.want)
			}
		})
	}
}
