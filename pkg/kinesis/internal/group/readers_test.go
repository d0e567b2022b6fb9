package group

import (
	"errors"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
)

// The table holds at most one reader per shard, and only the reader it holds can leave it: a
// late exit report of an earlier reader changes nothing.
func TestReaderTableOneReaderPerShard(t *testing.T) {
	tbl := newReaderTable()
	first := testReader("s0", 1)
	second := testReader("s0", 3)
	other := testReader("s1", 1)

	if err := tbl.add(first, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.add(second, time.Time{}); !errors.Is(err, errReaderLive) {
		t.Fatalf("a second reader of a shard with a live one: err = %v, want errReaderLive", err)
	}
	if err := tbl.add(other, time.Time{}); err != nil {
		t.Fatalf("a reader of another shard: %v", err)
	}
	if tbl.remove(second) {
		t.Fatal("a reader the table does not hold was removed")
	}
	if tbl.get("s0") != first {
		t.Fatal("the live reader is gone after a stranger's exit")
	}
	if !tbl.remove(first) || tbl.has("s0") {
		t.Fatal("the shard's own reader was not removed")
	}
	if err := tbl.add(second, time.Time{}); err != nil {
		t.Fatalf("a successor once the first reader's exit is in: %v", err)
	}
	if tbl.remove(first) {
		t.Fatal("a second exit report of the first reader removed its successor")
	}
	if tbl.get("s0") != second || tbl.len() != 2 {
		t.Fatalf("table after a late exit: s0 = gen %d, %d readers; want gen 3, 2 readers", tbl.get("s0").Generation(), tbl.len())
	}
}

// Readers that hold no iterator by their readyBy are reported late once each, and a reader
// that readied is never late.
func TestReaderTableLate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tbl := newReaderTable()
	early := testReader("s0", 0)
	lateOne := testReader("s1", 0)
	readied := testReader("s2", 0)
	for _, r := range []*shard.Reader{early, lateOne, readied} {
		by := t0.Add(time.Second)
		if r == early {
			by = t0.Add(2 * time.Second)
		}
		if err := tbl.add(r, by); err != nil {
			t.Fatal(err)
		}
	}
	tbl.readied(readied)
	if got := tbl.firstReadyBy(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("firstReadyBy = %v, want t0+1s", got.Sub(t0))
	}
	if late := tbl.late(t0.Add(time.Second)); len(late) != 1 || late[0] != lateOne {
		t.Fatalf("late at t0+1s = %d readers, want s1 only", len(late))
	}
	if late := tbl.late(t0.Add(time.Second)); len(late) != 0 {
		t.Fatal("a late reader was reported twice")
	}
	if got := tbl.firstReadyBy(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("firstReadyBy = %v, want t0+2s", got.Sub(t0))
	}
}
