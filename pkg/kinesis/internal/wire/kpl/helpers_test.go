package kpl_test

import (
	"bytes"
	"crypto/md5"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
)

// The helpers here build messages with protowire directly, independently of the Aggregator, so
// that the tests check the package against the format rather than against itself.

// wire is a protobuf message under construction.
type wire []byte

func (w wire) str(num protowire.Number, s string) wire {
	w = protowire.AppendTag(w, num, protowire.BytesType)
	return protowire.AppendString(w, s)
}

func (w wire) uv(num protowire.Number, v uint64) wire {
	w = protowire.AppendTag(w, num, protowire.VarintType)
	return protowire.AppendVarint(w, v)
}

func (w wire) sub(num protowire.Number, m wire) wire {
	w = protowire.AppendTag(w, num, protowire.BytesType)
	return protowire.AppendBytes(w, m)
}

func (w wire) raw(b ...byte) wire { return append(w, b...) }

// seal frames a message as an aggregated record: magic, message, MD5 of the message.
func seal(msg []byte) []byte {
	m := kpl.Magic()
	out := append(m[:], msg...)
	sum := md5.Sum(msg)
	return append(out, sum[:]...)
}

// userRecord is a user record to aggregate.
type userRecord struct {
	pk, ehk string
	data    []byte
}

// refAggregate encodes records the way the Aggregator is specified to, with protowire and
// nothing else: keys deduplicated in order of first use, tables before records, fields in number
// order. It returns nil for no records, as Build does.
func refAggregate(recs []userRecord) []byte {
	if len(recs) == 0 {
		return nil
	}
	var pks, ehks []string
	index := func(table *[]string, k string) uint64 {
		for i, t := range *table {
			if t == k {
				return uint64(i)
			}
		}
		*table = append(*table, k)
		return uint64(len(*table) - 1)
	}
	var records wire
	for _, r := range recs {
		m := wire{}.uv(1, index(&pks, r.pk))
		if r.ehk != "" {
			m = m.uv(2, index(&ehks, r.ehk))
		}
		m = protowire.AppendTag(m, 3, protowire.BytesType)
		m = protowire.AppendBytes(m, r.data)
		records = records.sub(3, m)
	}
	var msg wire
	for _, k := range pks {
		msg = msg.str(1, k)
	}
	for _, k := range ehks {
		msg = msg.str(2, k)
	}
	return seal(append(msg, records...))
}

// refSize is len(refAggregate(recs)), computed from the lengths alone so that tests can afford
// it after every Add.
func refSize(recs []userRecord) int {
	if len(recs) == 0 {
		return 0
	}
	pks, ehks := map[string]int{}, map[string]int{}
	size := 4 + 16
	index := func(table map[string]int, num protowire.Number, k string) uint64 {
		i, ok := table[k]
		if !ok {
			i = len(table)
			table[k] = i
			size += protowire.SizeTag(num) + protowire.SizeBytes(len(k))
		}
		return uint64(i)
	}
	for _, r := range recs {
		n := protowire.SizeTag(1) + protowire.SizeVarint(index(pks, 1, r.pk))
		if r.ehk != "" {
			n += protowire.SizeTag(2) + protowire.SizeVarint(index(ehks, 2, r.ehk))
		}
		n += protowire.SizeTag(3) + protowire.SizeBytes(len(r.data))
		size += protowire.SizeTag(3) + protowire.SizeBytes(n)
	}
	return size
}

// aggregate adds recs to a new Aggregator without a practical size limit and builds it.
func aggregate(t testing.TB, recs []userRecord) []byte {
	t.Helper()
	a := kpl.NewAggregator(1 << 40)
	for i, r := range recs {
		if !a.Add(r.pk, r.ehk, r.data) {
			t.Fatalf("Add refused record %d", i)
		}
	}
	return a.Build()
}

// checkRecords compares deaggregated records with the user records that went in.
func checkRecords(t testing.TB, got []kpl.Record, want []userRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.PartitionKey != w.pk || g.ExplicitHashKey != w.ehk || !bytes.Equal(g.Data, w.data) || g.SubSequenceNumber != i {
			t.Fatalf("record %d = {%q %q %q %d}, want {%q %q %q %d}",
				i, g.PartitionKey, g.ExplicitHashKey, g.Data, g.SubSequenceNumber, w.pk, w.ehk, w.data, i)
		}
	}
}

// toUser converts deaggregated records back to user records.
func toUser(recs []kpl.Record) []userRecord {
	out := make([]userRecord, len(recs))
	for i, r := range recs {
		out[i] = userRecord{r.PartitionKey, r.ExplicitHashKey, r.Data}
	}
	return out
}
