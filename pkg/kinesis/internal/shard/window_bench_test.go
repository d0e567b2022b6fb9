package shard

import (
	"strconv"
	"testing"
)

// BenchmarkWindowSettle is the settle stage's cost per record, without I/O: a batch of 500
// prepared deliveries (eight keys, as a GetRecords answer brings them) goes into the window,
// out as ordering lets it, is acked in the order sent, and the watermark moves past it. b.N is
// the record count, so ns/op and allocs/op are per record: a regression in the window's
// bookkeeping shows here, apart from decoding (BenchmarkDecode, BenchmarkDeaggregate) and
// delivery to the application (BenchmarkDeliverAck).
func BenchmarkWindowSettle(b *testing.B) {
	for _, tc := range []struct {
		name     string
		ordering Ordering
	}{{"unordered", Unordered}, {"by-key", OrderByKey}, {"by-shard", OrderByShard}} {
		b.Run(tc.name, func(b *testing.B) {
			const batch = 500
			keys := [...]string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
			seqs := make([]string, batch)
			for i := range seqs {
				seqs[i] = "4959033827149025660855969253836157109592157598913658" + strconv.Itoa(1000+i)
			}
			var w windowState
			ds := make([]delivery, batch)
			out := make([]*delivery, 0, batch)
			b.ReportAllocs()
			for done := 0; done < b.N; done += batch {
				for i := range ds {
					d := &ds[i]
					*d = delivery{}
					d.ctx = &d.first
					d.first.seq = seqs[i]
					w.enqueue(d, tc.ordering, keys[i%len(keys)])
				}
				for settled := 0; settled < batch; {
					for d := w.sendable.peek(); d != nil; d = w.sendable.peek() {
						w.sent(d)
						out = append(out, d)
					}
					for _, d := range out {
						w.ackedOut(d)
					}
					settled += len(out)
					out = out[:0]
					w.watermark()
				}
			}
		})
	}
}
