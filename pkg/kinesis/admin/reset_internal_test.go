package admin

import (
	"fmt"
	"strings"
	"testing"
)

// planReset decides what a reset does to each shard from the shards and leases as listed.
func TestPlanReset(t *testing.T) {
	shards := []ShardLease{
		{ShardID: "s0", State: ShardClosed, HasLease: true, Owner: "w1", Checkpoint: "SHARD_END"},
		{ShardID: "s1", State: ShardClosed}, // a parent whose lease was deleted once read
		{ShardID: "s2", State: ShardOpen, HasLease: true, Owner: "w2", Checkpoint: "12", Parents: []string{"s0", "s1"}},
		{ShardID: "s3", State: ShardGone, HasLease: true, Checkpoint: "7"},
		{ShardID: "s4", State: ShardOpen}, // a new shard no coordinator listed yet
	}
	for _, tc := range []struct {
		shard string
		want  string
	}{
		{"", "s0 move, s1 create, s2 move, s3 gone, s4 create"},
		{"s2", "s0 none, s1 none, s2 move, s3 gone, s4 none"},
		{"s1", "s0 none, s1 create, s2 none, s3 gone, s4 none"},
	} {
		t.Run(fmt.Sprintf("shard %q", tc.shard), func(t *testing.T) {
			var got []string
			for _, s := range planReset(shards, tc.shard) {
				got = append(got, s.ShardID+" "+s.Action)
			}
			if strings.Join(got, ", ") != tc.want {
				t.Errorf("planReset = %s, want %s", strings.Join(got, ", "), tc.want)
			}
		})
	}
}
