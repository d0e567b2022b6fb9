package kpl_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
)

// goldenHex is an aggregate of three user records, worked out by hand from the format:
//
//	f3899ac2                      magic
//	0a 05 616c706861              partition_key_table[0] = "alpha"
//	0a 04 62657461                partition_key_table[1] = "beta"
//	12 05 3132333435              explicit_hash_key_table[0] = "12345"
//	1a 07 (08 00) (1a 03 6f6e65)  records[0]: pk 0, data "one"
//	1a 06 (08 01) (10 00) (1a 00) records[1]: pk 1, ehk 0, data ""
//	1a 0b (08 00) (10 00) (1a 05 7468726565)
//	                              records[2]: pk 0, ehk 0, data "three"
//	0e0562daef6df03b4b52c4207348233f
//	                              MD5 of the 50 message bytes, computed with md5sum
const goldenHex = "f3899ac2" +
	"0a05616c706861" + "0a0462657461" + "12053132333435" +
	"1a070800" + "1a036f6e65" + "1a06080110001a00" + "1a0b080010001a057468726565" +
	"0e0562daef6df03b4b52c4207348233f"

var goldenRecords = []userRecord{
	{"alpha", "", []byte("one")},
	{"beta", "12345", []byte{}},
	{"alpha", "12345", []byte("three")},
}

func TestGolden(t *testing.T) {
	golden, err := hex.DecodeString(goldenHex)
	if err != nil {
		t.Fatal(err)
	}

	// The same bytes, built field by field with protowire.
	built := seal(wire{}.
		str(1, "alpha").str(1, "beta").
		str(2, "12345").
		sub(3, wire{}.uv(1, 0).str(3, "one")).
		sub(3, wire{}.uv(1, 1).uv(2, 0).str(3, "")).
		sub(3, wire{}.uv(1, 0).uv(2, 0).str(3, "three")))
	if !bytes.Equal(built, golden) {
		t.Fatalf("protowire-built aggregate differs from the hand-worked vector\n got %x\nwant %x", built, golden)
	}

	if got := aggregate(t, goldenRecords); !bytes.Equal(got, golden) {
		t.Fatalf("Aggregator.Build differs from the golden vector\n got %x\nwant %x", got, golden)
	}

	if !kpl.IsAggregated(golden) {
		t.Fatal("IsAggregated(golden) = false")
	}
	recs, err := kpl.Deaggregate(golden)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, recs, goldenRecords)
}

// record is a Record message with a partition key index and data.
func record(pk uint64, data string) wire { return wire{}.uv(1, pk).str(3, data) }

func TestDeaggregateRejects(t *testing.T) {
	valid := seal(wire{}.str(1, "pk").sub(3, record(0, "data")))
	flip := func(i int) []byte {
		b := bytes.Clone(valid)
		b[i] ^= 1
		return b
	}
	m := kpl.Magic()
	tests := []struct {
		name   string
		data   []byte
		reason kpl.Reason
	}{
		{"nil", nil, kpl.ReasonNotAggregated},
		{"plain text", []byte(`{"id":1}`), kpl.ReasonNotAggregated},
		{"three magic bytes", m[:3], kpl.ReasonNotAggregated},
		{"first magic byte wrong", flip(0), kpl.ReasonNotAggregated},

		{"magic only", m[:], kpl.ReasonTooShort},
		{"magic and digest of an empty message", seal(nil), kpl.ReasonTooShort},

		{"digest byte flipped", flip(len(valid) - 1), kpl.ReasonChecksum},
		{"message byte flipped", flip(6), kpl.ReasonChecksum},
		{"truncated", valid[:len(valid)-1], kpl.ReasonChecksum},
		{"trailing byte", append(bytes.Clone(valid), 0), kpl.ReasonChecksum},

		{"records length past the end", seal(wire{}.str(1, "pk").raw(0x1a, 0x64, 0x08, 0x00)), kpl.ReasonMalformed},
		{"table entry length past the end", seal(wire{}.raw(0x0a, 0x05, 'p', 'k')), kpl.ReasonMalformed},
		{"field number zero", seal(wire{}.raw(0x00, 0x00)), kpl.ReasonMalformed},
		{"truncated tag", seal(wire{}.str(1, "pk").sub(3, record(0, "")).raw(0x80)), kpl.ReasonMalformed},
		{"varint overflow in an unknown field", seal(wire{}.raw(0x28).raw(bytes.Repeat([]byte{0xff}, 10)...)), kpl.ReasonMalformed},
		{"varint overflow in a length", seal(wire{}.raw(0x1a).raw(bytes.Repeat([]byte{0xff}, 10)...)), kpl.ReasonMalformed},
		{"end group at top level", seal(protowire.AppendTag(nil, 5, protowire.EndGroupType)), kpl.ReasonMalformed},
		{"unterminated group", seal(protowire.AppendTag(nil, 5, protowire.StartGroupType)), kpl.ReasonMalformed},
		{"mismatched group end", seal(protowire.AppendTag(protowire.AppendTag(nil, 5, protowire.StartGroupType), 6, protowire.EndGroupType)), kpl.ReasonMalformed},
		{"reserved wire type", seal(wire{}.raw(0x0e)), kpl.ReasonMalformed},
		{"data length past the end of the record", seal(wire{}.str(1, "pk").sub(3, wire{}.uv(1, 0).raw(0x1a, 0x05, 'a', 'b'))), kpl.ReasonMalformed},
		{"truncated varint in a record", seal(wire{}.str(1, "pk").sub(3, wire{}.str(3, "d").raw(0x08, 0x80))), kpl.ReasonMalformed},
		{"unterminated group in a record", seal(wire{}.str(1, "pk").sub(3, record(0, "d").raw(0x2b))), kpl.ReasonMalformed},
		{"truncated tag in a record", seal(wire{}.str(1, "pk").sub(3, record(0, "d").raw(0x80))), kpl.ReasonMalformed},
		{"truncated tag in a tag message", seal(wire{}.str(1, "pk").sub(3, record(0, "d").sub(4, wire{}.str(1, "k").raw(0x80)))), kpl.ReasonMalformed},
		{"truncated tag message", seal(wire{}.str(1, "pk").sub(3, record(0, "d").sub(4, wire{}.raw(0x0a, 0x09)))), kpl.ReasonMalformed},

		{"no partition_key_index", seal(wire{}.str(1, "pk").sub(3, wire{}.str(3, "d"))), kpl.ReasonMissingField},
		{"no data", seal(wire{}.str(1, "pk").sub(3, wire{}.uv(1, 0))), kpl.ReasonMissingField},
		{"empty record", seal(wire{}.str(1, "pk").sub(3, nil)), kpl.ReasonMissingField},
		{"partition_key_index with the wrong wire type", seal(wire{}.str(1, "pk").sub(3, wire{}.str(1, "\x00").str(3, "d"))), kpl.ReasonMissingField},
		{"data with the wrong wire type", seal(wire{}.str(1, "pk").sub(3, wire{}.uv(1, 0).uv(3, 7))), kpl.ReasonMissingField},
		{"tag without key", seal(wire{}.str(1, "pk").sub(3, record(0, "d").sub(4, wire{}.str(2, "v")))), kpl.ReasonMissingField},
		{"second record incomplete", seal(wire{}.str(1, "pk").sub(3, record(0, "d")).sub(3, wire{}.str(3, "d"))), kpl.ReasonMissingField},

		{"partition_key_index past the table", seal(wire{}.str(1, "pk").sub(3, record(1, "d"))), kpl.ReasonIndexOutOfRange},
		{"no partition key table", seal(wire{}.sub(3, record(0, "d"))), kpl.ReasonIndexOutOfRange},
		{"partition_key_index 2^64-1", seal(wire{}.str(1, "pk").sub(3, record(math.MaxUint64, "d"))), kpl.ReasonIndexOutOfRange},
		{"partition key in the hash key table only", seal(wire{}.str(2, "pk").sub(3, record(0, "d"))), kpl.ReasonIndexOutOfRange},
		{"explicit_hash_key_index without a table", seal(wire{}.str(1, "pk").sub(3, record(0, "d").uv(2, 0))), kpl.ReasonIndexOutOfRange},
		{"explicit_hash_key_index past the table", seal(wire{}.str(1, "pk").str(2, "1").sub(3, record(0, "d").uv(2, 1))), kpl.ReasonIndexOutOfRange},
		{"second record out of range", seal(wire{}.str(1, "pk").sub(3, record(0, "d")).sub(3, record(1, "d"))), kpl.ReasonIndexOutOfRange},

		{"tables only", seal(wire{}.str(1, "pk").str(2, "1")), kpl.ReasonNoRecords},
		{"unknown fields only", seal(wire{}.uv(9, 1).str(10, "x")), kpl.ReasonNoRecords},
		{"records with the wrong wire type", seal(wire{}.str(1, "pk").uv(3, 0)), kpl.ReasonNoRecords},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := bytes.Clone(tc.data)
			recs, err := kpl.Deaggregate(tc.data)
			if !bytes.Equal(tc.data, orig) {
				t.Fatal("Deaggregate modified its input")
			}
			if recs != nil {
				t.Errorf("got %d records along with the error", len(recs))
			}
			var fe *kpl.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FormatError", err, err)
			}
			if fe.Reason != tc.reason {
				t.Fatalf("Reason = %v, want %v (%v)", fe.Reason, tc.reason, err)
			}
			if fe.Offset < 0 || fe.Offset > len(tc.data) {
				t.Errorf("Offset %d outside the %d-byte record", fe.Offset, len(tc.data))
			}
			if (fe.Err != nil) != (tc.reason == kpl.ReasonMalformed) {
				t.Errorf("Err = %v for reason %v", fe.Err, fe.Reason)
			}
			if !strings.HasPrefix(err.Error(), "kpl: "+tc.reason.String()) {
				t.Errorf("Error() = %q", err)
			}
			t.Log(err)
		})
	}
}

func TestFormatErrorUnwrap(t *testing.T) {
	_, err := kpl.Deaggregate(seal(wire{}.str(1, "pk").raw(0x1a, 0x64)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("errors.Is(%v, io.ErrUnexpectedEOF) = false", err)
	}
}

func TestReasonString(t *testing.T) {
	for r := kpl.ReasonNotAggregated; r <= kpl.ReasonNoRecords; r++ {
		if s := r.String(); s == "" || strings.HasPrefix(s, "kpl.Reason(") {
			t.Errorf("Reason(%d).String() = %q", int(r), s)
		}
	}
	if s := kpl.Reason(0).String(); s != "kpl.Reason(0)" {
		t.Errorf("Reason(0).String() = %q", s)
	}
	if s := kpl.Reason(99).String(); s != "kpl.Reason(99)" {
		t.Errorf("Reason(99).String() = %q", s)
	}
}

// TestDeaggregateAccepts covers encodings a valid producer may write although the Aggregator
// does not, which a protobuf parser, and so the KCL, accepts.
func TestDeaggregateAccepts(t *testing.T) {
	group := func(num protowire.Number, body wire) wire {
		w := protowire.AppendTag(nil, num, protowire.StartGroupType)
		w = append(w, body...)
		return protowire.AppendTag(w, num, protowire.EndGroupType)
	}
	unknown := func(w wire) wire {
		w = w.uv(15, 1).str(16, "x")
		w = protowire.AppendTag(w, 17, protowire.Fixed32Type)
		w = protowire.AppendFixed32(w, 7)
		w = protowire.AppendTag(w, 18, protowire.Fixed64Type)
		w = protowire.AppendFixed64(w, 7)
		return append(w, group(19, wire{}.uv(1, 2).raw(group(20, nil)...))...)
	}
	tests := []struct {
		name string
		msg  wire
		want []userRecord
	}{
		{
			"unknown fields at every level",
			unknown(wire{}).str(1, "pk").str(2, "1").
				sub(3, unknown(record(0, "d")).uv(2, 0).sub(4, unknown(wire{}.str(1, "k")))),
			[]userRecord{{"pk", "1", []byte("d")}},
		},
		{
			"tables after the records",
			wire{}.sub(3, record(1, "a")).sub(3, record(0, "b").uv(2, 0)).str(1, "x").str(1, "y").str(2, "9"),
			[]userRecord{{"y", "", []byte("a")}, {"x", "9", []byte("b")}},
		},
		{
			"fields of a record in reverse order",
			wire{}.str(1, "pk").sub(3, wire{}.str(3, "d").uv(1, 0)),
			[]userRecord{{"pk", "", []byte("d")}},
		},
		{
			"the last of repeated singular fields wins",
			wire{}.str(1, "a").str(1, "b").sub(3, record(0, "old").uv(1, 1).str(3, "new")),
			[]userRecord{{"b", "", []byte("new")}},
		},
		{
			"tags with and without a value",
			wire{}.str(1, "pk").sub(3, record(0, "d").sub(4, wire{}.str(1, "k")).sub(4, wire{}.str(1, "k").str(2, "v"))),
			[]userRecord{{"pk", "", []byte("d")}},
		},
		{
			"duplicate and unused table entries, empty keys",
			wire{}.str(1, "").str(1, "pk").str(1, "pk").str(2, "").sub(3, record(2, "a").uv(2, 0)).sub(3, record(0, "")),
			[]userRecord{{"pk", "", []byte("a")}, {"", "", []byte{}}},
		},
		{
			"overlong varints",
			wire{}.str(1, "pk").raw(0x1a, 0x88, 0x80, 0x00, 0x08, 0x80, 0x00, 0x1a, 0x82, 0x00, 'h', 'i'),
			[]userRecord{{"pk", "", []byte("hi")}},
		},
		{
			"one record, one byte",
			wire{}.str(1, "k").sub(3, record(0, "\xf3")),
			[]userRecord{{"k", "", []byte{0xf3}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := kpl.Deaggregate(seal(tc.msg))
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, recs, tc.want)
		})
	}
}

func TestDataAliasesInput(t *testing.T) {
	data := aggregate(t, []userRecord{{"a", "", []byte("first")}, {"a", "", []byte("second")}})
	recs, err := kpl.Deaggregate(data)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if cap(r.Data) != len(r.Data) {
			t.Fatalf("record %d: cap(Data) = %d, len = %d", i, cap(r.Data), len(r.Data))
		}
	}
	orig := bytes.Clone(data)
	_ = append(recs[0].Data, "XXXXXXXXXXXX"...)
	if !bytes.Equal(data, orig) {
		t.Fatal("appending to Data overwrote the input")
	}
	recs[1].Data[0] = 'S'
	if !bytes.Contains(data, []byte("Second")) {
		t.Fatal("Data does not alias the input")
	}
}

func TestIsAggregated(t *testing.T) {
	m := kpl.Magic()
	for _, tc := range []struct {
		data []byte
		want bool
	}{
		{nil, false},
		{m[:3], false},
		{m[:], true},
		{append(m[:], 'x'), true},
		{[]byte("\xf3\x89\x9a\xc3"), false},
		{[]byte("plain"), false},
	} {
		if got := kpl.IsAggregated(tc.data); got != tc.want {
			t.Errorf("IsAggregated(%x) = %v, want %v", tc.data, got, tc.want)
		}
	}
}

// TestDeaggregateAllocations pins the allocation count that Deaggregate documents.
func TestDeaggregateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations")
	}
	recs := make([]userRecord, 100)
	for i := range recs {
		recs[i] = userRecord{pk: string(rune('a' + i%26)), ehk: "1", data: make([]byte, 100)}
	}
	data := aggregate(t, recs)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := kpl.Deaggregate(data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 {
		t.Fatalf("Deaggregate made %v allocations, want at most 4", allocs)
	}
}
