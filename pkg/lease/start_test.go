package lease_test

import (
	"strings"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func TestParseStart(t *testing.T) {
	at := time.Date(2026, 12, 5, 14, 0, 0, 123_000_000, time.UTC)
	for _, tc := range []struct {
		cp      string
		want    lease.Start
		isStart bool
		err     string
	}{
		{cp: "", isStart: false},
		{cp: lease.ShardEnd, isStart: false},
		{cp: "49590338271490256608559692538361571095921575989136588898", isStart: false},
		{cp: "49590338271490256608559692538361571095921575989136588898:3", isStart: false},
		{cp: "TRIM_HORIZON", isStart: true, want: lease.Start{Type: lease.StartTrimHorizon}},
		{cp: "TRIM_HORIZON@x", isStart: true, err: "takes no value"},
		{cp: "AT_TIMESTAMP@2026-12-05T14:00:00.123Z", isStart: true, want: lease.Start{Type: lease.StartAtTimestamp, Timestamp: at}},
		{cp: "AT_TIMESTAMP@2026-12-05T15:00:00.123+01:00", isStart: true, want: lease.Start{Type: lease.StartAtTimestamp, Timestamp: at}},
		{cp: "AT_TIMESTAMP@yesterday", isStart: true, err: "not RFC 3339"},
		{cp: "AT_SEQUENCE_NUMBER@4959", isStart: true, want: lease.Start{Type: lease.StartAtSequenceNumber, SequenceNumber: "4959"}},
		{cp: "AT_SEQUENCE_NUMBER@", isStart: true, err: "not decimal digits"},
		{cp: "AT_SEQUENCE_NUMBER@12a", isStart: true, err: "not decimal digits"},
		{cp: "LATEST", isStart: false}, // never written: a reset to LATEST writes a time
	} {
		t.Run(tc.cp, func(t *testing.T) {
			got, isStart, err := lease.ParseStart(tc.cp)
			switch {
			case isStart != tc.isStart:
				t.Fatalf("ParseStart(%q) says start %v, want %v", tc.cp, isStart, tc.isStart)
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.cp) {
					t.Fatalf("ParseStart(%q) error %v, want one naming the checkpoint and saying %q", tc.cp, err, tc.err)
				}
				return
			case err != nil:
				t.Fatalf("ParseStart(%q): %v", tc.cp, err)
			case !got.Timestamp.Equal(tc.want.Timestamp) || got.Type != tc.want.Type || got.SequenceNumber != tc.want.SequenceNumber:
				t.Fatalf("ParseStart(%q) = %+v, want %+v", tc.cp, got, tc.want)
			}
			if isStart {
				// What Checkpoint writes reads back the same.
				back, ok, err := lease.ParseStart(got.Checkpoint())
				if !ok || err != nil || back.Checkpoint() != got.Checkpoint() {
					t.Fatalf("round trip of %q: %q, %v, %v", tc.cp, got.Checkpoint(), ok, err)
				}
			}
		})
	}
	// A time is kept to the millisecond, cut rather than rounded: nothing at the time is skipped.
	s := lease.Start{Type: lease.StartAtTimestamp, Timestamp: at.Add(999 * time.Microsecond)}
	if got, want := s.Checkpoint(), "AT_TIMESTAMP@2026-12-05T14:00:00.123Z"; got != want {
		t.Errorf("Checkpoint() = %q, want %q", got, want)
	}
}
