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
// memberSyncs lease syncs, over which the run counts the member records read (Members and
// LeadingMembers), the calls, the read units they would cost on DynamoDB (cost_test.go), and
// the heartbeats.
//
//	go test ./tests/scale      4 and 12 instances; asserts that a member reads a bounded number
//	                           of records per lease sync, whatever the group's size
//	make scale                 50, 200 and 1,000 instances; prints the table
//
// Before the leader read the records for everyone (internal/group/roster.go), every member read
// every record at every lease sync: members² records per sync.
const memberSyncs = 20

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
			// Bounded per member, whatever the size: the two readers of all read n each, the
			// others leadingRead each, so a member reads at most allReaders + leadingRead on
			// average (4 + 2 with the driver's constants), with room for a listing's churn.
			if row.perMemberItems > 8 {
				t.Errorf("%d members read %.2f member records each per lease sync, want at most 8 (a number that does not grow with the group)", n, row.perMemberItems)
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
	for _, op := range []string{lease.OpMembers, lease.OpLeading} {
		c := win.ops[op]
		row.calls += c.reads
		row.items += c.memberItems
		row.rcu += c.rcu
	}
	for _, op := range []string{lease.OpHeartbeat, lease.OpJoin} {
		row.beats += win.ops[op].writes
		row.beatWCU += win.ops[op].wcu
	}
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
		"The first two live members read every member record at every lease sync, the others the first four; "+
		"all read every record again only when the leader's digest of the records changes. "+
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
	return b.String()
}
