package memlog

import (
	"testing"
	"time"
)

// step is one thing done to a bucket at a moment (an offset from the scenario's start) and what
// it must answer.
type step struct {
	at   time.Duration
	op   string // "take", "charge", "debt" (inDebt), "wait"
	n    int64
	ok   bool          // take's and debt's answer
	wait time.Duration // wait's answer
}

func TestBucket(t *testing.T) {
	const mib = 1 << 20
	never := time.Duration(1<<63 - 1)
	cases := []struct {
		name  string
		r     rate
		steps []step
	}{
		{"starts full, then refuses", perSecond(5), []step{
			{0, "take", 5, true, 0},
			{0, "take", 1, false, 0},
			{0, "wait", 1, false, 200 * time.Millisecond},
		}},
		{"one token back every 200 ms at 5 a second, exactly", perSecond(5), []step{
			{0, "take", 5, true, 0},
			{199 * time.Millisecond, "take", 1, false, 0},
			{200 * time.Millisecond, "take", 1, true, 0},
			{200 * time.Millisecond, "take", 1, false, 0},
			{time.Second, "take", 4, true, 0},
			{time.Second, "take", 1, false, 0},
		}},
		{"a refused take takes nothing", perSecond(10), []step{
			{0, "take", 8, true, 0},
			{0, "take", 3, false, 0},
			{0, "take", 2, true, 0},
		}},
		{"never holds more than its burst", perSecond(5), []step{
			{0, "take", 1, true, 0},
			{time.Hour, "take", 6, false, 0},
			{time.Hour, "take", 5, true, 0},
		}},
		{"a long idle stretch does not overflow", perSecond(2 * mib), []step{
			{0, "charge", 10 * mib, false, 0},
			{1_000_000 * time.Hour, "take", 2 * mib, true, 0},
		}},
		{"a 10 MiB read on a full 2 MiB/s budget keeps reads out for 4 s", perSecond(2 * mib), []step{
			{0, "charge", 10 * mib, false, 0},
			{0, "debt", 0, true, 0},
			{0, "wait", 0, false, 4 * time.Second},
			{3999 * time.Millisecond, "debt", 0, true, 0},
			{4 * time.Second, "debt", 0, false, 0},
		}},
		{"a 10 MiB read on a spent budget keeps reads out for 5 s", perSecond(2 * mib), []step{
			{0, "charge", 2 * mib, false, 0},
			{0, "debt", 0, false, 0},
			{0, "charge", 10 * mib, false, 0},
			{4 * time.Second, "debt", 0, true, 0},
			{5 * time.Second, "debt", 0, false, 0},
		}},
		{"in debt refuses every take", perSecond(5), []step{
			{0, "charge", 7, false, 0},
			{0, "take", 0, false, 0},
			{400 * time.Millisecond, "take", 1, false, 0},
			{600 * time.Millisecond, "take", 1, true, 0},
		}},
		{"a clock that goes back adds nothing and takes nothing", perSecond(5), []step{
			{time.Second, "take", 5, true, 0},
			{0, "take", 1, false, 0},
			{time.Second + 200*time.Millisecond, "take", 1, true, 0},
		}},
		{"more than the burst is never there", perSecond(5), []step{
			{0, "wait", 6, false, never},
		}},
		{"a bucket that never refills", rate{perSec: 0, burst: 2}, []step{
			{0, "take", 2, true, 0},
			{time.Hour, "take", 1, false, 0},
			{time.Hour, "wait", 1, false, never},
		}},
	}
	start := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bucket
			for i, s := range c.steps {
				now := start.Add(s.at)
				switch s.op {
				case "take":
					if got := b.take(c.r, now, s.n); got != s.ok {
						t.Fatalf("step %d: take(%d) at %v = %v, want %v", i, s.n, s.at, got, s.ok)
					}
				case "charge":
					b.charge(c.r, now, s.n)
				case "debt":
					if got := b.inDebt(c.r, now); got != s.ok {
						t.Fatalf("step %d: inDebt at %v = %v, want %v", i, s.at, got, s.ok)
					}
				case "wait":
					if got := b.wait(c.r, now, s.n); got != s.wait {
						t.Fatalf("step %d: wait(%d) at %v = %v, want %v", i, s.n, s.at, got, s.wait)
					}
				}
			}
		})
	}
}

func TestPayloadUnits(t *testing.T) {
	for _, c := range []struct {
		size int
		want int64
	}{{0, 1}, {1, 1}, {5 << 10, 1}, {25 << 10, 1}, {25<<10 + 1, 2}, {45 << 10, 2}, {1 << 20, 41}} {
		if got := payloadUnits(c.size); got != c.want {
			t.Errorf("payloadUnits(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

func TestNewLimits(t *testing.T) {
	if newLimits(nil) != nil {
		t.Fatal("a nil Quotas must enforce nothing")
	}
	lim := newLimits(&Quotas{ShardReadCalls: 2, ShardWriteBytes: -1, ControlCalls: map[string]int{"ListShards": 3, "CreateStream": -1}})
	if lim.readCalls != perSecond(2) || lim.writeRecords != perSecond(awsShardWriteRecords) || lim.readBytes != perSecond(awsShardReadBytes) {
		t.Errorf("rates: %+v", lim)
	}
	if lim.on("ShardWriteBytes") || !lim.on("ShardWriteRecords") {
		t.Error("a negative field lifts its quota, and only its")
	}
	if lim.control["ListShards"].perSec != 3 || !lim.control["ListShards"].perStream {
		t.Errorf("ListShards: %+v", lim.control["ListShards"])
	}
	if _, ok := lim.control["CreateStream"]; ok {
		t.Error("CreateStream's quota was lifted")
	}
	if lim.control["DescribeStreamSummary"].perSec != 20 {
		t.Errorf("DescribeStreamSummary keeps AWS's rate: %+v", lim.control["DescribeStreamSummary"])
	}
}
