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

// A one-shard reset of a shard the group has not reached (no lease, a parent with none that
// is not finished) is refused; one whose parent is finished or leased is not.
func TestRefuseUnreached(t *testing.T) {
	shards := []ShardLease{
		{ShardID: "p0", State: ShardClosed},                                        // never read
		{ShardID: "p1", State: ShardClosed, Finished: true},                        // read, lease deleted
		{ShardID: "p2", State: ShardClosed, HasLease: true},                        // being read
		{ShardID: "c0", State: ShardOpen, Parents: []string{"p0"}},                 // unreached
		{ShardID: "c1", State: ShardOpen, Parents: []string{"p1"}},                 // reachable
		{ShardID: "c2", State: ShardOpen, Parents: []string{"p2"}},                 // reachable
		{ShardID: "c3", State: ShardOpen, HasLease: true, Parents: []string{"p0"}}, // has a lease
	}
	for id, refused := range map[string]bool{"c0": true, "c1": false, "c2": false, "c3": false, "p0": false, "": false} {
		err := refuseUnreached(ResetConfig{Stream: "s", ConsumerGroup: "g", ShardID: id}, shards)
		if (err != nil) != refused {
			t.Errorf("shard %q: %v, want refused %v", id, err, refused)
		}
		if err != nil && !strings.Contains(err.Error(), `parent "p0"`) {
			t.Errorf("shard %q: %v, want it to name the parent", id, err)
		}
	}
}
