package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// resetTableRows splits WriteTable's output into its header, its shard rows (cells split at two
// spaces or more, keyed by shard id) and its summary line.
func resetTableRows(t *testing.T, out string) (header []string, rows map[string][]string, summary string) {
	t.Helper()
	sep := regexp.MustCompile(`\s{2,}`)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("table too short:\n%s", out)
	}
	rows = map[string][]string{}
	for _, line := range lines[1 : len(lines)-1] {
		cells := sep.Split(line, -1)
		rows[cells[0]] = cells
	}
	return sep.Split(lines[0], -1), rows, lines[len(lines)-1]
}

// The dry run and the reset of the inspection fixture's group (stopped: nobody reads), on
// memlog and a MemoryStore, as WriteTable prints them: every kind of shard (a lease owned, a
// free finished parent, a child with a handoff pending, a shard without a lease, a lease of a
// shard aged out), and with Wait what each shard waits for.
func TestResetReport_WriteTable(t *testing.T) {
	f := newInspectFixture(t)
	cfg := admin.ResetConfig{
		Stream: "orders", ConsumerGroup: "billing", Client: f.log, LeaseStore: f.store,
		To: admin.ResetPosition{Type: admin.ResetToTrimHorizon}, DryRun: true,
	}
	dry, err := admin.ResetGroup(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := dry.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("dry run:\n%s", out.String())
	header, rows, summary := resetTableRows(t, out.String())
	if want := []string{"SHARD", "STATE", "ACTION", "OWNER", "FROM", "TO", "THEN"}; !reflect.DeepEqual(header, want) {
		t.Errorf("header = %q, want %q", header, want)
	}
	dryRows := map[string][]string{
		shardID(0): {shardID(0), "open", "move", "worker-a", f.r0a, "TRIM_HORIZON", "(dry run: nothing written)"},
		shardID(1): {shardID(1), "closed", "move", "(free)", "SHARD_END", "TRIM_HORIZON", "(dry run: nothing written)"},
		shardID(2): {shardID(2), "open", "move", "worker-b", f.r2a, "TRIM_HORIZON", "(dry run: nothing written)"},
		shardID(3): {shardID(3), "open", "create", "(no lease)", "-", "TRIM_HORIZON", "(dry run: nothing written)"},
		shardID(9): {shardID(9), "gone", "gone", "worker-c", "-", "-", "not listed by Kinesis (aged out): left as it is"},
	}
	if !reflect.DeepEqual(rows, dryRows) {
		t.Errorf("dry run rows:\n got %q\nwant %q", rows, dryRows)
	}
	if want := "dry run: 4 shards would move to TRIM_HORIZON; nothing was written"; summary != want {
		t.Errorf("dry run summary = %q, want %q", summary, want)
	}

	cfg.DryRun, cfg.Wait = false, 300*time.Millisecond
	done, err := admin.ResetGroup(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := done.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("reset:\n%s", out.String())
	_, rows, summary = resetTableRows(t, out.String())
	then := map[string]string{
		shardID(0): "worker-a has not taken the lease again yet (its fenced reader stops at its next renewal)",
		shardID(1): "no worker has taken the lease yet (a stopped group applies the reset when it starts)",
		shardID(2): "waits for its parents to be read to their end",
		shardID(3): "waits for its parents to be read to their end",
		shardID(9): "not listed by Kinesis (aged out): left as it is",
	}
	for shard, want := range then {
		if got := rows[shard]; len(got) != 7 || got[6] != want || got[3] != dryRows[shard][3] || got[4] != dryRows[shard][4] {
			t.Errorf("row of %s = %q, want OWNER %q, FROM %q, THEN %q", shard, got, dryRows[shard][3], dryRows[shard][4], want)
		}
	}
	if want := "4 shards moved to TRIM_HORIZON; 0 applied, 4 not yet"; summary != want {
		t.Errorf("summary = %q, want %q", summary, want)
	}
	for _, l := range []string{shardID(0), shardID(1), shardID(2), shardID(3)} {
		if got := f.get(t, l).Checkpoint; got != lease.TrimHorizon {
			t.Errorf("lease %s checkpoint = %q after the reset, want TRIM_HORIZON", l, got)
		}
	}
}

// WriteTable's THEN cell and summary for what a live group does after a reset, and WriteJSON.
func TestResetReport_Cells(t *testing.T) {
	r := admin.ResetReport{
		Stream: "orders", ConsumerGroup: "billing", To: "AT_TIMESTAMP@2026-12-05T14:00:00.000Z",
		At: time.Date(2026, 12, 5, 15, 0, 0, 0, time.UTC), Worker: "kinesis-reset/x",
		Shards: []admin.ShardReset{
			{ShardID: shardID(0), State: admin.ShardOpen, Action: admin.ResetActionMove, Owner: "one", From: "49", GivenTo: "one", Generation: 4,
				AppliedBy: "one", AppliedAfter: 1234567 * time.Microsecond, Settled: true},
			{ShardID: shardID(1), State: admin.ShardOpen, Action: admin.ResetActionMove, Owner: "two", From: "50", GivenTo: "two", Generation: 2},
			{ShardID: shardID(2), State: admin.ShardOpen, Action: admin.ResetActionMove, From: "51", Generation: 7},
			{ShardID: shardID(3), State: admin.ShardOpen, Action: admin.ResetActionNone, Owner: "two", From: "52"},
		},
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	_, rows, summary := resetTableRows(t, out.String())
	for shard, want := range map[string][]string{
		shardID(0): {shardID(0), "open", "move", "one", "49", r.To, "applied by one after 1.235s (settled first)"},
		shardID(1): {shardID(1), "open", "move", "two", "50", r.To, "given back to two (it resumes at the new position)"},
		shardID(2): {shardID(2), "open", "move", "(free)", "51", r.To, "released (the group takes it at the new position)"},
		shardID(3): {shardID(3), "open", "none", "two", "52", "-", "-"},
	} {
		if got := rows[shard]; !reflect.DeepEqual(got, want) {
			t.Errorf("row of %s:\n got %q\nwant %q", shard, got, want)
		}
	}
	if want := "3 shards moved to AT_TIMESTAMP@2026-12-05T14:00:00.000Z; 1 applied (the slowest after 1.235s), 0 not yet"; summary != want {
		t.Errorf("summary = %q, want %q", summary, want)
	}

	out.Reset()
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back admin.ResetReport
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatalf("WriteJSON's output does not decode: %v\n%s", err, out.String())
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("WriteJSON round trip:\n got %+v\nwant %+v", back, r)
	}
	for _, key := range []string{`"consumer_group": "billing"`, `"applied_by": "one"`, `"applied_after_ns": 1234567000`, `"settled": true`, `"given_to": "two"`} {
		if !strings.Contains(out.String(), key) {
			t.Errorf("WriteJSON's output lacks %s:\n%s", key, out.String())
		}
	}
}
