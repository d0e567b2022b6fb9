package kinesis

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func keyed(keys ...string) []*pendingRecord {
	out := make([]*pendingRecord, len(keys))
	for i, k := range keys {
		out[i] = &pendingRecord{index: i, entry: types.PutRecordsRequestEntry{PartitionKey: &k}, size: 10}
	}
	return out
}

func indexes(round []*pendingRecord) string {
	var b strings.Builder
	for _, r := range round {
		fmt.Fprint(&b, r.index)
	}
	return b.String()
}

func TestRounds(t *testing.T) {
	tests := []struct {
		keys []string
		want []string // record indexes per round
	}{
		{nil, nil},
		{[]string{"a", "b", "c"}, []string{"012"}},
		{[]string{"a", "a", "a"}, []string{"0", "1", "2"}},
		{[]string{"a", "b", "a", "c", "b", "a"}, []string{"013", "24", "5"}},
	}
	for _, tt := range tests {
		var got []string
		for _, round := range rounds(keyed(tt.keys...)) {
			got = append(got, indexes(round))
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("rounds(%v) = %v, want %v", tt.keys, got, tt.want)
		}
	}
}

// queued puts records in a dispatcher's queue as submit does, and returns the dispatcher.
func queued(records []*pendingRecord) *dispatcher {
	w := &callWait{ctx: context.Background(), open: len(records), done: make(chan struct{})}
	for _, r := range records {
		r.state, r.call = recordQueued, w
	}
	return &dispatcher{queue: append([]*pendingRecord(nil), records...)}
}

// take fills each request up to 500 entries and 5 MiB, in queue order, and leaves the rest
// queued; records settled while queued (their call gave up) are dropped.
func TestTakeRespectsCountAndSize(t *testing.T) {
	sizes := func(d *dispatcher) (got []int) {
		for req := d.take(); req != nil; req = d.take() {
			if again := d.take(); again != nil {
				t.Errorf("a second request of the same call taken while the first is out")
			}
			size := 0
			for _, rs := range req.records {
				for _, r := range rs {
					size += r.size + entryOverhead
					d.settle(r, true, nil, false) // answered: the call's next request may go
				}
			}
			if size > maxPutRecordsSize {
				t.Errorf("a request of %d bytes", size)
			}
			got = append(got, len(req.entries))
		}
		return got
	}
	if got := sizes(queued(keyed(make([]string, 1201)...))); fmt.Sprint(got) != "[500 500 201]" {
		t.Errorf("1201 records: requests of %v entries, want [500 500 201]", got)
	}
	big := keyed("a", "b", "c", "d", "e", "f")
	for _, r := range big {
		r.size = 2 << 20 // 2 MiB each: two fit under 5 MiB
	}
	if got := sizes(queued(big)); fmt.Sprint(got) != "[2 2 2]" {
		t.Errorf("6 x 2 MiB: requests of %v entries, want [2 2 2]", got)
	}
	some := keyed("a", "b", "c", "d")
	d := queued(some)
	some[1].state, some[2].state = recordSettled, recordSettled
	req := d.take()
	if req == nil || len(req.entries) != 2 || req.records[0][0] != some[0] || req.records[1][0] != some[3] || len(d.queue) != 0 {
		t.Errorf("with two records settled while queued: %+v, queue %d; want records 0 and 3", req, len(d.queue))
	}
}
