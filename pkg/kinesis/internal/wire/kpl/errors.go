package kpl

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Reason classifies why Deaggregate rejected a record.
type Reason int

var reasonText = [...]string{
	ReasonNotAggregated:   "not an aggregated record",
	ReasonTooShort:        "aggregated record too short",
	ReasonChecksum:        "aggregated record checksum mismatch",
	ReasonMalformed:       "malformed aggregated record",
	ReasonMissingField:    "aggregated record lacks a required field",
	ReasonIndexOutOfRange: "aggregated record key index out of range",
	ReasonNoRecords:       "aggregated record holds no records",
}

// String describes the reason in a few words.
func (r Reason) String() string {
	if r > 0 && int(r) < len(reasonText) {
		return reasonText[r]
	}
	return fmt.Sprintf("kpl.Reason(%d)", int(r))
}

// FormatError is the error Deaggregate returns for a record that is not a valid aggregate. It is
// the only error Deaggregate returns, so a consumer can deliver the record as a raw payload on
// any error; the fields are for logging and tests.
type FormatError struct {
	// Reason classifies the problem.
	Reason Reason
	// Offset is the byte offset in the record at which the problem was found.
	Offset int
	// Detail says what exactly was wrong, for example "record 3: partition_key_index 7,
	// partition key table size 2"; it may be empty. It never quotes record content, so a
	// hostile record cannot make the error message long.
	Detail string
	// Err is the protowire error behind ReasonMalformed, and nil otherwise.
	Err error
}

// Error reports the reason, the detail and the offset in one line.
func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("kpl: ")
	b.WriteString(e.Reason.String())
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	fmt.Fprintf(&b, " at offset %d", e.Offset)
	return b.String()
}

// Unwrap returns the protowire error behind a malformed message, if any.
func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(reason Reason, off int, format string, args ...any) *FormatError {
	return &FormatError{Reason: reason, Offset: off, Detail: fmt.Sprintf(format, args...)}
}

// wireErr reports the protowire error code n (negative) found at offset off.
func wireErr(off, n int, format string, args ...any) *FormatError {
	e := formatErr(ReasonMalformed, off, format, args...)
	e.Err = protowire.ParseError(n)
	return e
}
