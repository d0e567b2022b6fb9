package shard

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWindowOrdering drives the window's ordering queues by hand: each step prepares records
// (by key), sends what ordering lets out, or acks one, and the test checks what may go out
// next and where the watermark is.
func TestWindowOrdering(t *testing.T) {
	type op struct {
		do   string // "add KEY...", "send", "ack N"
		want string // after the op: the ords sendable, oldest first, and "| watermark"
	}
	tests := []struct {
		name     string
		ordering Ordering
		ops      []op
	}{
		{"by key: a key waits for its own ack only", OrderByKey, []op{
			{"add a b a c b", "0 1 3 | -"},
			{"send", "1 3 | -"}, // 0 out
			{"send", "3 | -"},   // 1 out
			{"send", " | -"},    // 3 out; 2 waits for 0, 4 for 1
			{"ack 1", "4 | -"},  // b's next may go; the watermark waits for 0
			{"ack 0", "2 4 | 1"},
			{"send", "4 | 1"},
			{"ack 3", "4 | 1"},
			{"ack 2", "4 | 3"},
		}},
		{"by shard: one at a time, in order", OrderByShard, []op{
			{"add a b c", "0 | -"},
			{"send", " | -"},
			{"ack 0", "1 | 0"},
			{"send", " | 0"},
			{"ack 1", "2 | 1"},
		}},
		{"unordered: everything may go", Unordered, []op{
			{"add a a b", "0 1 2 | -"},
			{"send", "1 2 | -"},
			{"send", "2 | -"},
			{"ack 1", "2 | -"},
			{"ack 0", "2 | 1"},
		}},
		{"by key: a key queue emptied and used again", OrderByKey, []op{
			{"add a", "0 | -"},
			{"send", " | -"},
			{"ack 0", " | 0"},
			{"add a a", "1 | 0"},
			{"send", " | 0"},
			{"ack 1", "2 | 1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w windowState
			all := map[uint64]*delivery{}
			for i, o := range tt.ops {
				f := strings.Fields(o.do)
				switch f[0] {
				case "add":
					for _, key := range f[1:] {
						d := &delivery{}
						d.ctx = &d.first
						d.first.seq = fmt.Sprint(w.nextOrd)
						w.enqueue(d, tt.ordering, key)
						all[d.ord] = d
					}
				case "send":
					w.sent(w.sendable.peek())
				case "ack":
					var n uint64
					fmt.Sscan(f[1], &n)
					w.ackedOut(all[n])
				}
				mark := w.watermark()
				if mark != "" {
					w.acked = mark
				}
				var got []string
				h := append(readyHeap(nil), w.sendable...)
				for len(h) > 0 {
					got = append(got, fmt.Sprint(h.pop().ord))
				}
				wm := w.acked
				if wm == "" {
					wm = "-"
				}
				if g := strings.Join(got, " ") + " | " + wm; g != o.want {
					t.Fatalf("op %d %q: sendable and watermark %q, want %q", i, o.do, g, o.want)
				}
			}
		})
	}
}

// TestReadRamp: reads start small and reach Kinesis's limit of 10,000 within seven reads.
func TestReadRamp(t *testing.T) {
	for reads, want := range []int{100, 200, 400, 800, 1600, 3200, 6400, 12800, 12800} {
		if got := readRamp(reads); got != want {
			t.Errorf("readRamp(%d) = %d, want %d", reads, got, want)
		}
	}
}

// TestHoldLimit: a shard's share of the memory budget, with its floors.
func TestHoldLimit(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name string
		b    readBudget
		want int
	}{
		{"one shard takes the whole record budget", readBudget{maxRecords: 10000, maxBytes: 64 << 20, shards: 1, minReadInterval: 200 * ms}, 10000},
		{"16 shards share it", readBudget{maxRecords: 10000, maxBytes: 64 << 20, shards: 16, minReadInterval: 200 * ms}, 625},
		{"no reader counted yet: as one", readBudget{maxRecords: 10000, maxBytes: 64 << 20, shards: 0, minReadInterval: 200 * ms}, 10000},
		{"many shards: the floor outruns 1,000 records/s at 5 reads/s", readBudget{maxRecords: 10000, maxBytes: 64 << 20, shards: 1000, minReadInterval: 200 * ms}, 250},
		{"floor follows MinReadInterval", readBudget{maxRecords: 10, maxBytes: 64 << 20, shards: 1, minReadInterval: time.Second}, 1250},
		{"big records: the byte share rules", readBudget{maxRecords: 10000, maxBytes: 64 << 20, shards: 4, avgRecordBytes: 64 << 10, minReadInterval: 200 * ms}, 256},
		{"big records, many shards: the byte floor outruns 1 MiB/s", readBudget{maxRecords: 10000, maxBytes: 64 << 20, shards: 1000, avgRecordBytes: 64 << 10, minReadInterval: 200 * ms}, 4},
		{"records over the byte floor: still one at a time", readBudget{maxRecords: 10000, maxBytes: 1 << 20, shards: 100, avgRecordBytes: 1 << 20, minReadInterval: 200 * ms}, 1},
		{"memlog pace: no floor to speak of", readBudget{maxRecords: 100, maxBytes: 64 << 20, shards: 8, minReadInterval: time.Microsecond}, 12},
	}
	for _, tt := range tests {
		if got := tt.b.holdLimit(); got != tt.want {
			t.Errorf("%s: holdLimit = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// A queue that never empties (OrderByShard holds the next record while one is out; a hot key
// always has a successor) keeps a bounded array: it grew by a slot per message.
func TestKeyQueueStaysSmall(t *testing.T) {
	for _, ordering := range []Ordering{OrderByShard, OrderByKey} {
		var w windowState
		add := func() {
			d := &delivery{}
			d.ctx = &d.first
			w.enqueue(d, ordering, "hot")
		}
		add()
		for range 100000 {
			add() // one prepared ahead
			d := w.sendable.peek()
			w.sent(d)
			w.ackedOut(d)
			w.watermark()
		}
		q := &w.shardQ
		if ordering == OrderByKey {
			q = w.queues["hot"]
		}
		if len(q.items)-q.head != 1 || cap(q.items) > 64 {
			t.Errorf("ordering %d: after 100,000 messages the queue holds %d with an array of %d; want 1 in a small array",
				ordering, len(q.items)-q.head, cap(q.items))
		}
	}
}

// TestReadLimitSkipsTheRampOnABacklog: after a read that came back full with more behind it,
// the next read asks for all the shard's share of the budget leaves room for; otherwise the
// ramp goes on from its step.
func TestReadLimitSkipsTheRampOnABacklog(t *testing.T) {
	cfg := &Config{GetRecordsLimit: 10000, MaxBufferedRecords: 10000, MaxBufferedBytes: 1 << 40, MinReadInterval: time.Millisecond}
	for _, tc := range []struct {
		name             string
		readsWithRecords int
		backlogged       bool
		inWindow         int
		want             int32
	}{
		{"a cold start asks for the ramp's first step", 0, false, 0, 100},
		{"a full read with more behind: the share at once", 1, true, 0, 2500},
		{"the share less what the window holds", 1, true, 400, 2100},
		{"a read that was not full, or nothing behind: the ramp's next step", 1, false, 0, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reader{cfg: cfg, links: &Links{Readers: func() int { return 4 }}}
			r.readsWithRecords, r.backlogged = tc.readsWithRecords, tc.backlogged
			r.window = make([]*delivery, tc.inWindow)
			if got := r.readLimit(); got != tc.want {
				t.Errorf("readLimit() = %d, want %d", got, tc.want)
			}
		})
	}
}
