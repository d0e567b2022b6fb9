package shard

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/clock"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// TestPrepareRunStops: a run of prepares decodes up to prepareRunLength records, but ends
// after a record the Unmarshaler rejected (the PoisonHandler, the application's, may do I/O)
// and, under a lease, once a lease step is due, so that the application's decoding never
// holds a renewal back for a whole run.
func TestPrepareRunStops(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name      string
		poisonAt  int  // index of the record the Unmarshaler rejects; -1: none
		leased    bool // with a lease whose renewal is due after the first record
		wantReady int
	}{
		{"a whole run", -1, false, prepareRunLength},
		{"ends after a rejected record", 2, false, 3},
		{"a rejected first record alone", 0, false, 1},
		{"ends once a renewal is due", -1, true, 1},
		{"a whole run under a lease with nothing due", -1, true, prepareRunLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			cfg := &Config{
				Stream: "s", Clock: clk, Logger: watermill.NopLogger{}, MaxInFlight: 1, MaxBufferedRecords: 10000, MaxBufferedBytes: 1 << 30,
				LeaseDuration: 10 * time.Second, LeaseRenewInterval: 2 * time.Second, CheckpointInterval: time.Minute,
				Unmarshaler: rejectAt{tc.poisonAt},
				Poison:      func(p PoisonRecord) (*message.Message, error) { return message.NewMessage("p", p.Data), nil },
			}
			var held *lease.Lease
			if tc.leased {
				held = &lease.Lease{ShardID: "shardId-000000000000", Generation: 1}
			}
			r := New(cfg, &Links{Closing: t.Context(), Readers: func() int { return 1 }}, nopMetrics{}, "shardId-000000000000", Start{}, held, start)
			if tc.leased {
				r.renewAt, r.checkpointAt = start.Add(time.Second), start.Add(time.Minute)
				if tc.wantReady == 1 {
					clk.Advance(time.Second) // the renewal is due once the first record is prepared
				}
			}
			for i := range 20 {
				r.batch = append(r.batch, types.Record{SequenceNumber: aws.String(strconv.Itoa(100 + i)), PartitionKey: aws.String("k"), Data: []byte("x")})
			}
			r.prepareRun()
			if got := len(r.window); got != tc.wantReady {
				t.Errorf("prepared %d records, want %d", got, tc.wantReady)
			}
		})
	}
}

// rejectAt rejects the record at index at of the batch (sequence number 100+at).
type rejectAt struct{ at int }

func (u rejectAt) Unmarshal(_, _ string, rec *types.Record) (*message.Message, error) {
	if *rec.SequenceNumber == strconv.Itoa(100+u.at) {
		return nil, errors.New("bad record")
	}
	return message.NewMessage(*rec.SequenceNumber, rec.Data), nil
}

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
			cfg := &Config{Stream: "s", Client: answerClient{out}, Clock: clock.Real(), Logger: watermill.NopLogger{},
				RequestTimeout: time.Minute, GetRecordsLimit: 10000, MaxBufferedRecords: 10000, MaxBufferedBytes: 1 << 30}
			r := New(cfg, &Links{Closing: t.Context(), Readers: func() int { return 1 }}, nopMetrics{}, "shardId-000000000000", Start{}, nil, time.Time{})
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
