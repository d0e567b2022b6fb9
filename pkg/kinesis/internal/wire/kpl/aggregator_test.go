package kpl_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
)

func TestRoundTrip(t *testing.T) {
	many := make([]userRecord, 1000)
	for i := range many {
		many[i] = userRecord{pk: fmt.Sprintf("pk-%d", i%37), data: []byte(fmt.Sprintf("payload %d", i))}
		if i%3 == 0 {
			many[i].ehk = fmt.Sprintf("%d", i%5)
		}
	}
	distinct := make([]userRecord, 300) // over 127 keys, so indices take two-byte varints
	for i := range distinct {
		distinct[i] = userRecord{pk: fmt.Sprintf("key-%d", i), ehk: fmt.Sprintf("%d", i), data: []byte{byte(i)}}
	}
	tests := []struct {
		name string
		recs []userRecord
	}{
		{"one record", []userRecord{{"pk", "", []byte("data")}}},
		{"empty data", []userRecord{{"pk", "", []byte{}}, {"pk", "", nil}}},
		{"empty partition key", []userRecord{{"", "", []byte("x")}}},
		{"shared partition key", []userRecord{{"pk", "", []byte("a")}, {"pk", "", []byte("b")}, {"pk", "", []byte("c")}}},
		{"distinct partition keys", []userRecord{{"a", "", []byte("1")}, {"b", "", []byte("2")}, {"c", "", []byte("3")}}},
		{"explicit hash keys", []userRecord{
			{"a", "340282366920938463463374607431768211455", []byte("max")},
			{"b", "0", []byte("min")},
			{"c", "", []byte("none")},
			{"a", "0", []byte("shared")},
		}},
		{"binary keys and data", []userRecord{{"\x00\xff", "\xf3\x89", []byte("\xf3\x89\x9a\xc2")}, {"ünï", "", bytes.Repeat([]byte{0}, 300)}}},
		{"long key", []userRecord{{strings.Repeat("k", 256), strings.Repeat("9", 39), []byte("d")}}},
		{"large data", []userRecord{{"pk", "", bytes.Repeat([]byte("x"), 100_000)}, {"pk", "", []byte("y")}}},
		{"many records", many},
		{"many distinct keys", distinct},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := kpl.NewAggregator(0)
			for i, r := range tc.recs {
				if !a.Add(r.pk, r.ehk, r.data) {
					t.Fatalf("Add refused record %d", i)
				}
			}
			if a.Len() != len(tc.recs) {
				t.Fatalf("Len() = %d, want %d", a.Len(), len(tc.recs))
			}
			data := a.Build()
			if a.Size() != len(data) {
				t.Fatalf("Size() = %d, len(Build()) = %d", a.Size(), len(data))
			}
			if want := refSize(tc.recs); want != len(data) {
				t.Fatalf("refSize = %d, len(Build()) = %d", want, len(data))
			}
			if want := refAggregate(tc.recs); !bytes.Equal(data, want) {
				t.Fatalf("Build differs from the reference encoding\n got %x\nwant %x", data, want)
			}
			if a.PartitionKey() != tc.recs[0].pk || a.ExplicitHashKey() != tc.recs[0].ehk {
				t.Fatalf("carrier keys %q, %q; want the first record's, %q, %q",
					a.PartitionKey(), a.ExplicitHashKey(), tc.recs[0].pk, tc.recs[0].ehk)
			}
			recs, err := kpl.Deaggregate(data)
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, recs, tc.recs)
		})
	}
}

// tableSizes counts the entries of the key tables of an aggregate.
func tableSizes(t *testing.T, data []byte) (pks, ehks int) {
	t.Helper()
	msg := data[4 : len(data)-16]
	for len(msg) > 0 {
		num, _, n := protowire.ConsumeField(msg)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		switch num {
		case 1:
			pks++
		case 2:
			ehks++
		}
		msg = msg[n:]
	}
	return pks, ehks
}

func TestBuildDeduplicatesKeys(t *testing.T) {
	data := aggregate(t, []userRecord{
		{"a", "1", nil}, {"b", "", nil}, {"a", "2", nil}, {"b", "1", nil}, {"a", "", nil}, {"c", "2", nil},
	})
	if pks, ehks := tableSizes(t, data); pks != 3 || ehks != 2 {
		t.Fatalf("tables have %d partition keys and %d explicit hash keys, want 3 and 2", pks, ehks)
	}
}

func TestAddLimit(t *testing.T) {
	recs := []userRecord{
		{"first-key", "", []byte("some data")},
		{"second", "12", []byte("more data")},
		{"third", "", []byte("x")},
	}
	// The limit that admits exactly the first two records, from the reference encoding.
	limit := len(refAggregate(recs[:2])) + len(recs[0].pk)

	a := kpl.NewAggregator(limit)
	if a.MaxSize() != limit {
		t.Fatalf("MaxSize() = %d, want %d", a.MaxSize(), limit)
	}
	for i, r := range recs[:2] {
		if !a.Add(r.pk, r.ehk, r.data) {
			t.Fatalf("Add refused record %d under a limit it fits exactly", i)
		}
	}
	if got := a.Size() + len(a.PartitionKey()); got != limit {
		t.Fatalf("Size()+len(PartitionKey()) = %d, want %d", got, limit)
	}
	assertRefused(t, a, recs[2])

	a = kpl.NewAggregator(limit - 1)
	if !a.Add(recs[0].pk, recs[0].ehk, recs[0].data) {
		t.Fatal("Add refused the first record")
	}
	assertRefused(t, a, recs[1])

	// A record that does not fit even alone: the carrying record's partition key counts too.
	alone := len(refAggregate(recs[:1]))
	a = kpl.NewAggregator(alone + len(recs[0].pk) - 1)
	assertRefused(t, a, recs[0])
	a = kpl.NewAggregator(alone)
	assertRefused(t, a, recs[0])
}

// assertRefused checks that Add refuses r and leaves a as it was.
func assertRefused(t *testing.T, a *kpl.Aggregator, r userRecord) {
	t.Helper()
	n, size, pk, ehk, built := a.Len(), a.Size(), a.PartitionKey(), a.ExplicitHashKey(), a.Build()
	if a.Add(r.pk, r.ehk, r.data) {
		t.Fatalf("Add accepted a record over the limit: Size()+len(PartitionKey()) = %d > MaxSize() = %d",
			a.Size()+len(a.PartitionKey()), a.MaxSize())
	}
	if a.Len() != n || a.Size() != size || a.PartitionKey() != pk || a.ExplicitHashKey() != ehk || !bytes.Equal(a.Build(), built) {
		t.Fatal("a refused Add changed the Aggregator")
	}
}

// TestDefaultLimit fills a zero-value Aggregator to exactly 1 MiB. The arithmetic is the format
// worked by hand: 20 bytes of magic and digest, the table entry (tag, length, key), the records
// field (tag, 3-byte length) and the Record (2 bytes of index, tag, 3-byte length, data).
func TestDefaultLimit(t *testing.T) {
	const pk = "partition"
	n := kpl.DefaultMaxSize - 20 - (2 + len(pk)) - (1 + 3) - (2 + 1 + 3) - len(pk)
	data := make([]byte, n+1)

	var a kpl.Aggregator
	if a.MaxSize() != kpl.DefaultMaxSize {
		t.Fatalf("zero value MaxSize() = %d", a.MaxSize())
	}
	if a.Add(pk, "", data) {
		t.Fatal("Add accepted 1 MiB + 1 byte")
	}
	if !a.Add(pk, "", data[:n]) {
		t.Fatal("Add refused exactly 1 MiB")
	}
	if got := a.Size() + len(a.PartitionKey()); got != kpl.DefaultMaxSize {
		t.Fatalf("Size()+len(PartitionKey()) = %d, want %d", got, kpl.DefaultMaxSize)
	}
	if got := len(a.Build()); got != a.Size() {
		t.Fatalf("len(Build()) = %d, Size() = %d", got, a.Size())
	}
	if a.Add(pk, "", nil) {
		t.Fatal("Add accepted an empty record into a full aggregate")
	}
}

func TestEmptyAggregator(t *testing.T) {
	var a kpl.Aggregator
	if a.Len() != 0 || a.Size() != 0 || a.Build() != nil || a.PartitionKey() != "" || a.ExplicitHashKey() != "" {
		t.Fatalf("zero value: Len %d, Size %d, Build %x, keys %q %q",
			a.Len(), a.Size(), a.Build(), a.PartitionKey(), a.ExplicitHashKey())
	}
	a.Reset() // must not panic on nil maps
}

func TestAddCopiesData(t *testing.T) {
	buf := []byte("original")
	a := kpl.NewAggregator(0)
	a.Add("pk", "", buf)
	copy(buf, "CHANGED!")
	recs, err := kpl.Deaggregate(a.Build())
	if err != nil {
		t.Fatal(err)
	}
	if string(recs[0].Data) != "original" {
		t.Fatalf("Data = %q after the caller reused its buffer", recs[0].Data)
	}
}

func TestReset(t *testing.T) {
	a := kpl.NewAggregator(0)
	first := []userRecord{{"a", "1", []byte("x")}, {"b", "", []byte("y")}}
	for _, r := range first {
		a.Add(r.pk, r.ehk, r.data)
	}
	built := a.Build()
	kept := bytes.Clone(built)
	if again := a.Build(); !bytes.Equal(again, built) {
		t.Fatal("a second Build differs")
	}

	a.Reset()
	if a.Len() != 0 || a.Size() != 0 || a.Build() != nil || a.PartitionKey() != "" || a.ExplicitHashKey() != "" {
		t.Fatal("Reset left state behind")
	}
	second := []userRecord{{"b", "", []byte("z")}, {"c", "2", []byte("w")}}
	for _, r := range second {
		a.Add(r.pk, r.ehk, r.data)
	}
	if !bytes.Equal(built, kept) {
		t.Fatal("reusing the Aggregator changed an earlier Build result")
	}
	if got := a.Build(); !bytes.Equal(got, refAggregate(second)) {
		t.Fatalf("after Reset, Build = %x, want %x", got, refAggregate(second))
	}
	if a.PartitionKey() != "b" {
		t.Fatalf("PartitionKey() = %q after Reset, want %q", a.PartitionKey(), "b")
	}
}

// TestSizeRandom checks Size against Build after every Add for random records, with key and data
// lengths and key counts around the varint boundaries (127/128 and 16383/16384).
func TestSizeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 2, 126, 127, 128, 129, 255, 256}
	dataLengths := []int{0, 1, 127, 128, 16383, 16384, 20000}
	for iter := range 200 {
		a := kpl.NewAggregator(1 + rng.IntN(300_000))
		keys := make([]string, 1+rng.IntN(200))
		for i := range keys {
			keys[i] = fmt.Sprintf("%d-%s", i, strings.Repeat("k", lengths[rng.IntN(len(lengths))]))
		}
		var added []userRecord
		for range rng.IntN(400) {
			r := userRecord{pk: keys[rng.IntN(len(keys))]}
			if rng.IntN(2) == 0 {
				r.ehk = keys[rng.IntN(len(keys))]
			}
			if rng.IntN(4) == 0 {
				r.data = make([]byte, dataLengths[rng.IntN(len(dataLengths))])
			} else {
				r.data = make([]byte, rng.IntN(200))
			}
			want := refSize(append(added, r))
			fits := want+len(append(added, r)[0].pk) <= a.MaxSize()
			if ok := a.Add(r.pk, r.ehk, r.data); ok != fits {
				t.Fatalf("iteration %d, record %d: Add = %v, want %v", iter, len(added), ok, fits)
			}
			if !fits {
				continue
			}
			added = append(added, r)
			if a.Size() != want {
				t.Fatalf("iteration %d, record %d: Size() = %d, want %d", iter, len(added), a.Size(), want)
			}
		}
		if got := a.Build(); a.Size() != len(got) || !bytes.Equal(got, refAggregate(added)) {
			t.Fatalf("iteration %d: Size() = %d, len(Build()) = %d, or Build differs from the reference",
				iter, a.Size(), len(got))
		}
	}
}
