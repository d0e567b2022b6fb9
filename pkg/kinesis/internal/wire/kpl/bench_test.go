package kpl_test

import (
	"fmt"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
)

// benchRecords is 100 records of 100 bytes over 10 partition keys, a typical small-message batch.
func benchRecords() []userRecord {
	recs := make([]userRecord, 100)
	for i := range recs {
		recs[i] = userRecord{pk: fmt.Sprintf("order-%d", i%10), data: make([]byte, 100)}
	}
	return recs
}

func BenchmarkDeaggregate(b *testing.B) {
	data := aggregate(b, benchRecords())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kpl.Deaggregate(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuild measures Build alone on a filled Aggregator.
func BenchmarkBuild(b *testing.B) {
	a := kpl.NewAggregator(0)
	for _, r := range benchRecords() {
		a.Add(r.pk, r.ehk, r.data)
	}
	b.SetBytes(int64(a.Size()))
	b.ReportAllocs()
	for b.Loop() {
		_ = a.Build()
	}
}

// BenchmarkAggregate measures what a publisher does per aggregate: 100 Adds, Build and Reset on
// a reused Aggregator.
func BenchmarkAggregate(b *testing.B) {
	recs := benchRecords()
	a := kpl.NewAggregator(0)
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range recs {
			a.Add(r.pk, r.ehk, r.data)
		}
		_ = a.Build()
		a.Reset()
	}
}
