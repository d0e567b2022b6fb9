package kpl_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
)

func FuzzDeaggregate(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzDeaggregate; see TestWriteFuzzCorpus.
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDeaggregate(t, data)
		// Random bytes almost never carry the right digest, so also try them as a message:
		// that lets the fuzzer reach the protobuf parsing behind the checksum.
		checkDeaggregate(t, seal(data))
	})
}

// checkDeaggregate asserts Deaggregate's properties on any input: no panic, a well-formed
// *FormatError, or records bounded by the input that survive re-aggregation unchanged.
func checkDeaggregate(t *testing.T, data []byte) {
	t.Helper()
	orig := bytes.Clone(data)
	recs, err := kpl.Deaggregate(data)
	if !bytes.Equal(data, orig) {
		t.Fatal("Deaggregate modified its input")
	}
	if err != nil {
		var fe *kpl.FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("error %T is not a *FormatError: %v", err, err)
		}
		if recs != nil {
			t.Fatalf("%d records returned with an error", len(recs))
		}
		if fe.Reason < kpl.ReasonNotAggregated || fe.Reason > kpl.ReasonNoRecords {
			t.Fatalf("unknown Reason %d: %v", fe.Reason, err)
		}
		if fe.Offset < 0 || fe.Offset > len(data) {
			t.Fatalf("Offset %d outside the %d-byte record: %v", fe.Offset, len(data), err)
		}
		if (fe.Err != nil) != (fe.Reason == kpl.ReasonMalformed) {
			t.Fatalf("Err = %v with Reason %v", fe.Err, fe.Reason)
		}
		if fe.Reason != kpl.ReasonNotAggregated && !kpl.IsAggregated(data) {
			t.Fatalf("Reason %v for a record without the magic", fe.Reason)
		}
		if len(err.Error()) > 300 {
			t.Fatalf("error message of %d bytes: %v", len(err.Error()), err)
		}
		return
	}

	if !kpl.IsAggregated(data) {
		t.Fatal("Deaggregate accepted a record that IsAggregated rejects")
	}
	msgLen := len(data) - 20
	// A Record takes at least 6 bytes (tag, length, two fields of two bytes) and there is at
	// least one, which bounds the count; the data of all records lies within the message.
	if len(recs) == 0 || 6*len(recs) > msgLen {
		t.Fatalf("%d records from a %d-byte message", len(recs), msgLen)
	}
	total := 0
	start, end := uintptr(unsafe.Pointer(unsafe.SliceData(data))), uintptr(unsafe.Pointer(unsafe.SliceData(data)))+uintptr(len(data))
	for i, r := range recs {
		if r.SubSequenceNumber != i {
			t.Fatalf("record %d has SubSequenceNumber %d", i, r.SubSequenceNumber)
		}
		if cap(r.Data) != len(r.Data) {
			t.Fatalf("record %d: cap(Data) = %d, len = %d", i, cap(r.Data), len(r.Data))
		}
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(r.Data))); len(r.Data) > 0 && (p < start || p+uintptr(len(r.Data)) > end) {
			t.Fatalf("record %d: Data does not alias the input", i)
		}
		if len(r.PartitionKey) > msgLen || len(r.ExplicitHashKey) > msgLen {
			t.Fatalf("record %d: keys of %d and %d bytes from a %d-byte message",
				i, len(r.PartitionKey), len(r.ExplicitHashKey), msgLen)
		}
		total += len(r.Data)
	}
	if total > msgLen {
		t.Fatalf("%d bytes of data from a %d-byte message", total, msgLen)
	}

	want := toUser(recs)
	a := kpl.NewAggregator(math.MaxInt)
	for i, r := range want {
		if !a.Add(r.pk, r.ehk, r.data) {
			t.Fatalf("Add refused record %d", i)
		}
	}
	again := a.Build()
	if a.Size() != len(again) {
		t.Fatalf("Size() = %d, len(Build()) = %d", a.Size(), len(again))
	}
	got, err := kpl.Deaggregate(again)
	if err != nil {
		t.Fatalf("re-aggregated records fail: %v", err)
	}
	checkRecords(t, got, want)
}

// parseSpec turns fuzz bytes into user records: a header byte whose low and high nibbles are the
// lengths of the partition key and the explicit hash key, the keys, a byte giving the data
// length, and the data, repeated. Short keys make shared keys easy for the fuzzer to find. It
// stops at maxSpecRecords, because the reference checks in FuzzAggregate are quadratic in the
// number of records.
func parseSpec(spec []byte) []userRecord {
	take := func(n int) []byte {
		n = min(n, len(spec))
		b := spec[:n]
		spec = spec[n:]
		return b
	}
	var out []userRecord
	for len(spec) > 0 && len(out) < maxSpecRecords {
		h := take(1)[0]
		r := userRecord{pk: string(take(int(h & 0x0f))), ehk: string(take(int(h >> 4)))}
		n := 0
		if b := take(1); len(b) == 1 {
			n = int(b[0])
		}
		r.data = bytes.Clone(take(n))
		out = append(out, r)
	}
	return out
}

// maxSpecRecords is enough records for key indices of two bytes (over 127 distinct keys).
const maxSpecRecords = 300

func FuzzAggregate(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzAggregate; see TestWriteFuzzCorpus.
	f.Fuzz(func(t *testing.T, spec []byte, limit uint32) {
		recs := parseSpec(spec)
		a := kpl.NewAggregator(int(limit % 8192)) // 0 means the default
		var added []userRecord
		for i, r := range recs {
			cand := append(added[:len(added):len(added)], r)
			fits := refSize(cand)+len(cand[0].pk) <= a.MaxSize()
			if ok := a.Add(r.pk, r.ehk, r.data); ok != fits {
				t.Fatalf("record %d: Add = %v, want %v (MaxSize %d)", i, ok, fits, a.MaxSize())
			}
			if fits {
				added = cand
			}
			if a.Len() != len(added) || a.Size() != refSize(added) {
				t.Fatalf("record %d: Len() = %d, Size() = %d; want %d, %d", i, a.Len(), a.Size(), len(added), refSize(added))
			}
		}
		built := a.Build()
		if !bytes.Equal(built, refAggregate(added)) {
			t.Fatalf("Build differs from the reference\n got %x\nwant %x", built, refAggregate(added))
		}
		if len(added) == 0 {
			if built != nil || a.Size() != 0 {
				t.Fatalf("empty Aggregator: Build = %x, Size = %d", built, a.Size())
			}
			return
		}
		if a.Size()+len(a.PartitionKey()) > a.MaxSize() {
			t.Fatalf("Size()+len(PartitionKey()) = %d > MaxSize() = %d", a.Size()+len(a.PartitionKey()), a.MaxSize())
		}
		if a.PartitionKey() != added[0].pk || a.ExplicitHashKey() != added[0].ehk {
			t.Fatalf("carrier keys %q, %q; want %q, %q", a.PartitionKey(), a.ExplicitHashKey(), added[0].pk, added[0].ehk)
		}
		got, err := kpl.Deaggregate(built)
		if err != nil {
			t.Fatal(err)
		}
		checkRecords(t, got, added)

		// The same records in reverse order after a Reset: nothing of the first aggregate may
		// leak into the second.
		kept := bytes.Clone(built)
		a.Reset()
		rev := slices.Clone(added)
		slices.Reverse(rev)
		n := 0
		for ; n < len(rev); n++ {
			r := rev[n]
			fits := refSize(rev[:n+1])+len(rev[0].pk) <= a.MaxSize()
			if ok := a.Add(r.pk, r.ehk, r.data); ok != fits {
				t.Fatalf("after Reset, record %d: Add = %v, want %v", n, ok, fits)
			}
			if !fits {
				break
			}
		}
		rev = rev[:n]
		if !bytes.Equal(a.Build(), refAggregate(rev)) {
			t.Fatal("after Reset, Build differs from the reference")
		}
		if !bytes.Equal(built, kept) {
			t.Fatal("reusing the Aggregator changed an earlier Build result")
		}
	})
}

var writeCorpus = flag.Bool("kpl.write-corpus", false, "rewrite the seed corpora in testdata/fuzz")

// TestWriteFuzzCorpus writes the seed corpora: a few valid aggregates and near misses for
// FuzzDeaggregate, and a few record specs for FuzzAggregate. Run it with
//
//	go test -run TestWriteFuzzCorpus -kpl.write-corpus ./pkg/kinesis/internal/wire/kpl/
//
// It writes only the named seed files; inputs the fuzzer found are kept beside them.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*writeCorpus {
		t.Skip("run with -kpl.write-corpus to rewrite the seed corpora")
	}
	golden, err := hex.DecodeString(goldenHex)
	if err != nil {
		t.Fatal(err)
	}
	goldenMsg := golden[4 : len(golden)-16]
	flipped := bytes.Clone(golden)
	flipped[len(flipped)-1] ^= 1
	unknownFields := wire{}.uv(15, 1).str(1, "pk").raw(0x2b, 0x08, 0x01, 0x2c).
		sub(3, record(0, "d").raw(0x3d, 1, 2, 3, 4).sub(4, wire{}.str(1, "k").str(2, "v").raw(0x19, 1, 2, 3, 4, 5, 6, 7, 8)))
	deaggregate := map[string][]byte{
		"golden":               golden,
		"golden-message":       goldenMsg,
		"one-record":           aggregate(t, []userRecord{{"pk", "", []byte("data")}}),
		"unknown-fields":       seal(unknownFields),
		"unknown-fields-msg":   unknownFields,
		"tables-after-records": seal(wire{}.sub(3, record(1, "a").uv(2, 0)).str(1, "x").str(1, "y").str(2, "7")),
		"digest-flipped":       flipped,
		"truncated":            golden[:len(golden)-1],
		"index-out-of-range":   seal(wire{}.str(1, "pk").sub(3, record(1, "d"))),
		"missing-data":         seal(wire{}.str(1, "pk").sub(3, wire{}.uv(1, 0))),
		"tag-without-key":      seal(wire{}.str(1, "pk").sub(3, record(0, "d").sub(4, wire{}.str(2, "v")))),
		"no-records":           seal(wire{}.str(1, "pk")),
		"plain":                []byte(`{"id":1}`),
	}
	for name, data := range deaggregate {
		writeSeed(t, "FuzzDeaggregate", name, fmt.Sprintf("[]byte(%q)", data))
	}

	spec := func(recs ...userRecord) []byte {
		var b []byte
		for _, r := range recs {
			b = append(b, byte(len(r.ehk)<<4|len(r.pk)))
			b = append(b, r.pk...)
			b = append(b, r.ehk...)
			b = append(b, byte(len(r.data)))
			b = append(b, r.data...)
		}
		return b
	}
	mixed := spec(userRecord{"alpha", "", []byte("one")}, userRecord{"beta", "12345", nil}, userRecord{"alpha", "12345", []byte("three")})
	aggregateSeeds := map[string]string{
		"empty":        fmt.Sprintf("[]byte(%q)\nuint32(0)", []byte{}),
		"mixed":        fmt.Sprintf("[]byte(%q)\nuint32(0)", mixed),
		"mixed-tight":  fmt.Sprintf("[]byte(%q)\nuint32(60)", mixed),
		"shared-key":   fmt.Sprintf("[]byte(%q)\nuint32(200)", spec(userRecord{"k", "", []byte("aaaa")}, userRecord{"k", "", []byte("bbbb")}, userRecord{"k", "", bytes.Repeat([]byte("c"), 130)})),
		"too-small":    fmt.Sprintf("[]byte(%q)\nuint32(10)", spec(userRecord{"pk", "", []byte("x")})),
		"ehk-only-set": fmt.Sprintf("[]byte(%q)\nuint32(0)", spec(userRecord{"", "9", []byte("x")}, userRecord{"", "9", []byte("y")})),
	}
	for name, body := range aggregateSeeds {
		writeSeed(t, "FuzzAggregate", name, body)
	}
}

func writeSeed(t *testing.T, target, name, body string) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	content := "go test fuzz v1\n" + strings.TrimSuffix(body, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
