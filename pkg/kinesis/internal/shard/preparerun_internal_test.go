package shard

import (
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// TestPrepareRunStops: a run of prepares decodes up to prepareRunLength records, but ends
// after a record the Unmarshaler rejected (the PoisonHandler, the application's, may do I/O)
// and, under a lease, once a lease step is due, so that the application's decoding never
// holds a renewal back for a whole run.
//
// In a synctest bubble: the reader reads the time with time.Now, and the test moves it.
func TestPrepareRunStops(t *testing.T) {
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
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				cfg := &Config{
					Stream: "s", Logger: watermill.NopLogger{}, MaxInFlight: 1, MaxBufferedRecords: 10000, MaxBufferedBytes: 1 << 30,
					LeaseDuration: 10 * time.Second, LeaseRenewInterval: 2 * time.Second, CheckpointInterval: time.Minute,
					Unmarshaler: rejectAt{tc.poisonAt},
					Poison:      func(p PoisonRecord) (*message.Message, error) { return message.NewMessage("p", p.Data), nil },
				}
				var held *lease.Lease
				if tc.leased {
					held = &lease.Lease{ShardID: testShard, Generation: 1}
				}
				r := testReader(t.Context(), cfg, nil, held, start)
				if tc.leased {
					r.renewAt, r.checkpointAt = start.Add(time.Second), start.Add(time.Minute)
					if tc.wantReady == 1 {
						time.Sleep(time.Second) // the renewal is due once the first record is prepared
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
