package kclref_test

import (
	"reflect"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/kclref"
)

func TestResume(t *testing.T) {
	// One shard: a plain record "10", an aggregate "20" of three user
	// records, a plain record "30".
	shard := []kclref.Record{
		{SequenceNumber: "10"},
		{SequenceNumber: "20", SubSequenceNumber: 0, Aggregated: true},
		{SequenceNumber: "20", SubSequenceNumber: 1, Aggregated: true},
		{SequenceNumber: "20", SubSequenceNumber: 2, Aggregated: true},
		{SequenceNumber: "30"},
	}
	tests := []struct {
		name string
		cp   kclref.ExtendedSequenceNumber
		want []kclref.Record // a tail of shard, or nil
	}{
		{"TRIM_HORIZON: everything", kclref.TrimHorizon, shard},
		{"AT_TIMESTAMP: what is given", kclref.AtTimestamp, shard},
		{"LATEST: nothing already in the shard", kclref.Latest, nil},
		{"SHARD_END: nothing", kclref.ShardEnd, nil},
		{"before everything", kclref.ESN("5", 0), shard},
		{"plain record done at seq/0", kclref.ESN("10", 0), shard[1:]},
		{"aggregate checkpointed at its first user record", kclref.ESN("20", 0), shard[2:]},
		{"aggregate checkpointed mid-way", kclref.ESN("20", 1), shard[3:]},
		{"aggregate fully done (checkpoint() after it)", kclref.ESN("20", 2), shard[4:]},
		{"sequence number between records", kclref.ESN("25", 0), shard[4:]},
		{"last record done", kclref.ESN("30", 0), nil},
		{"leading zeros compare as numbers", kclref.ESN("0020", 1), shard[3:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kclref.Resume(tt.cp, shard); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Resume(%v) =\n%v\nwant\n%v", tt.cp, got, tt.want)
			}
		})
	}
}

func TestResumePlainRecordIgnoresSubSequence(t *testing.T) {
	// A plain record's position is seq/0 whatever the field says, so a
	// checkpoint at seq/0 covers it.
	got := kclref.Resume(kclref.ESN("10", 0), []kclref.Record{{SequenceNumber: "10", SubSequenceNumber: 4}})
	if len(got) != 0 {
		t.Fatalf("Resume = %v, want nothing", got)
	}
}

func TestCheckpointOf(t *testing.T) {
	if got := kclref.CheckpointOf(kclref.Record{SequenceNumber: "20", SubSequenceNumber: 2, Aggregated: true}); got != kclref.ESN("20", 2) {
		t.Errorf("aggregated: %v", got)
	}
	if got := kclref.CheckpointOf(kclref.Record{SequenceNumber: "10", SubSequenceNumber: 9}); got != kclref.ESN("10", 0) {
		t.Errorf("plain: %v", got)
	}
}

func TestResumePanicsOnInvalid(t *testing.T) {
	for name, f := range map[string]func(){
		"checkpoint": func() { kclref.Resume(kclref.ESN("x", 0), nil) },
		"record":     func() { kclref.Resume(kclref.TrimHorizon, []kclref.Record{{SequenceNumber: "x"}}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}
