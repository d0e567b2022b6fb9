package scale_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// The member-cost run: what reading the group's member state costs as the group grows. For
// each size, that many instances start on one stream, settle, and then run a quiet stretch of
// memberSyncs lease syncs, over which the run counts the member records read, the calls, the
// read units they would cost on DynamoDB (cost_test.go), and the heartbeats.
//
//	go test ./tests/scale      4 and 12 instances; asserts that a member reads the records
//	                           once per lease sync, and heartbeats twice
//	make scale                 50, 200 and 1,000 instances; prints the table and the goals
//
// Every member reads every record at every lease sync: members² records per sync, in one Query
// per member of a partition of small items (a key and a counter), so the read units grow with
// the group's size squared over 4 KB. The goals: at most 60 RCU/s for the group at 50 members
// and 600 at 200; 1,000 is reported without one.
const memberSyncs = 20

// memberRCUGoals are the member read goals, in RCU/s for the group, by group size.
var memberRCUGoals = map[int]float64{50: 60, 200: 600}

// memberCostRow is one size of the member-cost run.
type memberCostRow struct {
	members, shards              int
	syncs                        float64
	calls, items, rcu            int64 // member reads over the window, group-wide
	beats, beatWCU, keyRCU       int64 // heartbeats (and joins), their write units; RCU on the member key
	perSyncItems, perMemberItems float64
	beatsPerMemberSec            float64
}

func TestScaleMembers(t *testing.T) {
	full := os.Getenv("SCALE") != ""
	sizes, shards := []int{4, 12}, 16
	if full {
		sizes, shards = []int{50, 200, 1000}, 256
	} else if testing.Short() {
		t.Skip("the member-cost run takes a few seconds; skipped with -short")
	}
	var rows []memberCostRow
	for _, n := range sizes {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			var row memberCostRow
			synctest.Test(t, func(t *testing.T) {
				var err error
				if row, err = memberCost(n, shards); err != nil {
					t.Fatal(err)
				}
			})
			rows = append(rows, row)
			t.Logf("%d members: %.1f member records read per lease sync (%.2f per member; every member reading every record: %d), %.2f heartbeats per member per second",
				n, row.perSyncItems, row.perMemberItems, n*n, row.beatsPerMemberSec)
			// One read of every record per lease sync, and two heartbeats (a few more reads
			// come from the lease syncs a notice brings).
			if row.perMemberItems > 1.1*float64(n) || row.beatsPerMemberSec > 1.05/leaseSyncInterval.Seconds()*2 {
				t.Errorf("%d members: each read %.2f member records per lease sync and heartbeated %.2f times a second, want one read of the %d records per sync and two heartbeats",
					n, row.perMemberItems, row.beatsPerMemberSec, n)
			}
		})
	}
	if full && len(rows) > 0 {
		fmt.Print(renderMemberCost(rows))
	}
}

// memberCost starts n instances on a stream of the given shards, waits until they hold the
// shards evenly, and measures memberSyncs lease syncs of quiet.
func memberCost(n, shards int) (memberCostRow, error) {
	rc := fullConfig(shards)
	rc.start, rc.pubEvery = n, time.Hour // no records: the member state is what is measured
	w, err := newWorld(rc)
	if err != nil {
		return memberCostRow{}, err
	}
	defer w.shutdown()
	if err := w.startInstances(n); err != nil {
		return memberCostRow{}, err
	}
	for start := time.Now(); !w.spread().even && time.Since(start) < rc.evenLimit; {
		time.Sleep(rc.sample)
	}
	time.Sleep(3 * leaseSyncInterval) // past the lease syncs that follow the last take
	before := w.meter.snapshot()
	time.Sleep(memberSyncs * leaseSyncInterval)
	win := between(before, w.meter.snapshot())
	row := memberCostRow{members: n, shards: shards, syncs: win.secs / leaseSyncInterval.Seconds()}
	reads := win.ops[lease.OpMembers]
	row.calls, row.items, row.rcu = reads.reads, reads.memberItems, reads.rcu
	row.beats, row.beatWCU = win.ops[lease.OpHeartbeat].writes, win.ops[lease.OpHeartbeat].wcu
	row.keyRCU = win.keys[lease.DynamoDBMemberPartitionKey(scaleGroup, scaleStream)].rcu
	row.perSyncItems = float64(row.items) / row.syncs
	row.perMemberItems = row.perSyncItems / float64(n)
	row.beatsPerMemberSec = float64(row.beats) / win.secs / float64(n)
	return row, nil
}

// renderMemberCost is the table of the member-cost run.
func renderMemberCost(rows []memberCostRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Member state as the group grows (tests/scale, TestScaleMembers)\n\n")
	fmt.Fprintf(&b, "A quiet group of N instances on a %d-shard stream, over %d lease syncs after it settled. "+
		"Every member reads every member record at every lease sync (one Query of the member partition). "+
		"RCU is the cost model's estimate (strongly consistent Query, 4 KB a unit).\n\n", rows[0].shards, memberSyncs)
	b.WriteString("| members | member records read per lease sync (group) | per member | every member reading every record (N²) | member reads/s (group) | member RCU/s (group) | heartbeats per member per s | member partition WCU/s |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		secs := r.syncs * leaseSyncInterval.Seconds()
		fmt.Fprintf(&b, "| %d | %.0f | %.2f | %d | %.1f | %.1f | %.2f | %.0f |\n",
			r.members, r.perSyncItems, r.perMemberItems, r.members*r.members,
			float64(r.calls)/secs, float64(r.rcu)/secs, r.beatsPerMemberSec, float64(r.beatWCU)/secs)
	}
	b.WriteString("\n")
	for _, r := range rows {
		if goal, ok := memberRCUGoals[r.members]; ok {
			got := float64(r.rcu) / (r.syncs * leaseSyncInterval.Seconds())
			fmt.Fprintf(&b, "- member reads at %d members: %.1f RCU/s for the group, goal at most %.0f — **%s**\n", r.members, got, goal, verdict(got <= goal))
		}
	}
	b.WriteString("\n")
	return b.String()
}
