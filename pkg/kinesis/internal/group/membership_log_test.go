package group

import (
	"fmt"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func TestDiffMembers(t *testing.T) {
	rec := func(ws ...string) []lease.Member {
		var ms []lease.Member
		for _, w := range ws {
			ms = append(ms, lease.Member{Worker: w})
		}
		return ms
	}
	for _, tc := range []struct {
		name              string
		before, now       []string
		records           []lease.Member
		joined, left, gon string // as fmt prints them
	}{
		{"nothing moved", []string{"a", "b"}, []string{"a", "b"}, rec("a", "b"), "[]", "[]", "[]"},
		{"one joined", []string{"a"}, []string{"a", "b"}, rec("a", "b"), "[b]", "[]", "[]"},
		{"one left on Close: its record is gone", []string{"a", "b"}, []string{"a"}, rec("a"), "[]", "[b]", "[]"},
		{"one crashed: its record stays, stale", []string{"a", "b", "c"}, []string{"a", "c"}, rec("a", "b", "c"), "[]", "[]", "[b]"},
		{"a rolling replacement in one sync", []string{"a", "b"}, []string{"a", "c"}, rec("a", "c"), "[c]", "[b]", "[]"},
		{"from nobody", nil, []string{"a"}, rec("a"), "[a]", "[]", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := diffMembers(tc.before, tc.now, tc.records)
			got := fmt.Sprint(ev.joined) + " " + fmt.Sprint(ev.left) + " " + fmt.Sprint(ev.gone)
			if want := tc.joined + " " + tc.left + " " + tc.gon; got != want {
				t.Errorf("diffMembers(%v, %v) = joined, left, gone %s; want %s", tc.before, tc.now, got, want)
			}
		})
	}
}
