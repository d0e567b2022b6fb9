package kinesis

import (
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

func TestBatchesRespectCountAndSize(t *testing.T) {
	many := keyed(make([]string, 1201)...)
	if got := batches(many); len(got) != 3 || len(got[0]) != 500 || len(got[2]) != 201 {
		t.Fatalf("1201 records: %d batches", len(got))
	}
	big := keyed("a", "b", "c", "d", "e", "f")
	for _, r := range big {
		r.size = 2 << 20 // 2 MiB each: two fit under 5 MiB
	}
	got := batches(big)
	if len(got) != 3 {
		t.Fatalf("6 x 2 MiB: %d batches, want 3", len(got))
	}
	for _, b := range got {
		size := 0
		for _, r := range b {
			size += r.size
		}
		if size > maxPutRecordsSize {
			t.Fatalf("batch of %d bytes exceeds 5 MiB", size)
		}
	}
}
