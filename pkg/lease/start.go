package lease

import (
	"fmt"
	"strings"
	"time"
)

// A checkpoint is normally the last record the group finished (a sequence number, "seq:sub"
// inside a KPL aggregate), ShardEnd, or "" (nothing finished yet: the subscriber's
// InitialPosition). A reset of the group's position (admin.ResetGroup) writes a fourth kind:
// a Start, where the shard's next reader starts, whatever the subscriber's InitialPosition
// says. The first record finished replaces it with a sequence number again.
//
// The three forms are plain strings, so that any Store keeps them as it keeps a sequence
// number, and an operator reading the table sees what they mean:
//
//	TRIM_HORIZON                             the oldest record the stream still has
//	AT_TIMESTAMP@2026-12-05T14:00:00.123Z    the first record that arrived at or after the time
//	AT_SEQUENCE_NUMBER@4959...               the record with that sequence number, and on
//
// TRIM_HORIZON is also the KCL's own sentinel for the same position.

// StartType is the kind of a Start.
type StartType string

// The kinds of Start, spelt as Kinesis spells the shard iterator types they read with.
const (
	StartTrimHorizon      StartType = "TRIM_HORIZON"
	StartAtTimestamp      StartType = "AT_TIMESTAMP"
	StartAtSequenceNumber StartType = "AT_SEQUENCE_NUMBER"
)

// TrimHorizon is the checkpoint of a Start at the trim horizon.
const TrimHorizon = string(StartTrimHorizon)

// startSep separates a Start's kind from its value. Neither a sequence number (digits) nor a
// checkpoint inside an aggregate ("seq:sub") holds it.
const startSep = "@"

// Start is a checkpoint that says where to start reading a shard rather than what was
// finished: see the comment above.
type Start struct {
	Type StartType
	// Timestamp is the time of StartAtTimestamp (kept to the millisecond, as Kinesis keeps
	// arrival times).
	Timestamp time.Time
	// SequenceNumber is the record of StartAtSequenceNumber.
	SequenceNumber string
}

// Checkpoint is s as a checkpoint to store.
func (s Start) Checkpoint() string {
	switch s.Type {
	case StartAtTimestamp:
		return string(s.Type) + startSep + s.Timestamp.UTC().Format(startTimeLayout)
	case StartAtSequenceNumber:
		return string(s.Type) + startSep + s.SequenceNumber
	}
	return string(s.Type)
}

func (s Start) String() string { return s.Checkpoint() }

// startTimeLayout is RFC 3339 to the millisecond.
const startTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// ParseStart reads a checkpoint as a Start; ok is false for every other checkpoint (a sequence
// number, ShardEnd, ""). A checkpoint that names a kind of Start but whose value cannot be
// read is an error, so that a reader never takes a damaged one for a sequence number.
func ParseStart(checkpoint string) (s Start, ok bool, err error) {
	kind, value, _ := strings.Cut(checkpoint, startSep)
	switch StartType(kind) {
	case StartTrimHorizon:
		if checkpoint != TrimHorizon {
			return Start{}, true, fmt.Errorf("checkpoint %q: TRIM_HORIZON takes no value", checkpoint)
		}
		return Start{Type: StartTrimHorizon}, true, nil
	case StartAtTimestamp:
		t, perr := time.Parse(time.RFC3339Nano, value)
		if perr != nil {
			return Start{}, true, fmt.Errorf("checkpoint %q: the time after %q is not RFC 3339: %w", checkpoint, startSep, perr)
		}
		return Start{Type: StartAtTimestamp, Timestamp: t.UTC()}, true, nil
	case StartAtSequenceNumber:
		if value == "" || strings.Trim(value, "0123456789") != "" {
			return Start{}, true, fmt.Errorf("checkpoint %q: the sequence number after %q is not decimal digits", checkpoint, startSep)
		}
		return Start{Type: StartAtSequenceNumber, SequenceNumber: value}, true, nil
	}
	return Start{}, false, nil
}
