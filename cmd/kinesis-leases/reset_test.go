package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func TestReset_BadCommandLine(t *testing.T) {
	full := []string{"reset", "-stream", "orders", "-group", "billing", "-table", "leases", "-region", "eu-west-1"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no position", full, []string{"-to is missing: say where the group goes"}},
		{"a word", append(full, "-to", "yesterday"), []string{`-to "yesterday" is neither trim-horizon, latest, at-sequence:SEQ, after-sequence:SEQ nor an RFC 3339 time`}},
		{"a time without a zone", append(full, "-to", "2026-12-05T14:00:00"), []string{"RFC 3339 time such as 2026-12-05T14:00:00Z (with a zone"}},
		{"a sequence number without a shard", append(full, "-to", "after-sequence:12"), []string{"names a sequence number, which belongs to one shard: add -shard"}},
		{"not a sequence number", append(full, "-to", "at-sequence:12a", "-shard", "shardId-000000000000"), []string{`"12a" is not a sequence number`}},
		{"timeout within the wait", append(full, "-to", "latest", "-wait", "3m"), []string{"-timeout 2m0s is not longer than -wait 3m0s"}},
		{"no stream", []string{"reset", "-to", "latest"}, []string{"-stream is missing", "kinesis-leases reset -help"}},
		{"a time in the future", append(full, "-to", "2099-01-01T00:00:00Z"), []string{"-to 2099-01-01T00:00:00Z is in the future", "write -to latest"}},
		{"a negative wait", append(full, "-to", "latest", "-wait", "-1s"), []string{"-wait is -1s; it must not be negative"}},
		{"an argument", append(full, "-to", "latest", "now"), []string{`unexpected argument "now"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCommand(t, tc.args)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q\nwant it to say %q", errOut, w)
				}
			}
		})
	}
}

// A stopped group: the dry run changes nothing; the reset to trim-horizon writes TRIM_HORIZON
// checkpoints, and a subscriber of the group then starts each shard at its first record.
func TestReset_StoppedGroupToTrimHorizon(t *testing.T) {
	e := newEmulators(t)
	table, store := e.leaseTable(t)
	stream, group := "reset-"+watermill.NewShortUUID(), "billing"
	runGroup(t, e, stream, group, store, 8)
	before, err := store.List(context.Background(), group, stream)
	if err != nil {
		t.Fatal(err)
	}

	args := []string{"reset", "-stream", stream, "-group", group, "-table", table, "-region", "us-east-1", "-to", "trim-horizon"}
	code, out, errOut := runCommand(t, append(args, "-dry-run"))
	t.Logf("dry run:\n%s", out)
	if code != exitOK || errOut != "" {
		t.Fatalf("dry run: exit %d, stderr %q", code, errOut)
	}
	_, rows, summary := tableRows(t, out)
	if len(rows) != 2 || !strings.HasPrefix(summary, "dry run: 2 shards would move to TRIM_HORIZON; nothing was written") {
		t.Fatalf("dry run rows %v, summary %q", rows, summary)
	}
	for _, l := range before {
		if got := rows[l.ShardID]; len(got) < 6 || got[4] != l.Checkpoint || got[5] != "TRIM_HORIZON" {
			t.Errorf("dry run row of %s = %q, want FROM %s and TO TRIM_HORIZON", l.ShardID, got, l.Checkpoint)
		}
	}
	after, _ := store.List(context.Background(), group, stream)
	for i := range after {
		if after[i].Counter != before[i].Counter || after[i].Checkpoint != before[i].Checkpoint {
			t.Errorf("the dry run wrote lease %s: %+v, was %+v", after[i].ShardID, after[i], before[i])
		}
	}

	code, out, errOut = runCommand(t, args)
	t.Logf("reset:\n%s", out)
	if code != exitOK || errOut != "" {
		t.Fatalf("reset: exit %d, stderr %q", code, errOut)
	}
	after, _ = store.List(context.Background(), group, stream)
	for _, l := range after {
		if l.Checkpoint != lease.TrimHorizon || l.Owner != "" {
			t.Errorf("lease %s after the reset = %+v, want free at TRIM_HORIZON", l.ShardID, l)
		}
	}

	// The group, started again, reads every shard from its first record: all 8 again, the
	// first of each shard first.
	first := firstRecords(t, e, stream)
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: e.kinesis, Group: kinesis.GroupConfig{Name: group, LeaseStore: store, WorkerID: "after-reset"},
		PollInterval: 50 * time.Millisecond, InitialPosition: kinesis.Position{Type: kinesis.Latest},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	got, firstRead := map[string]bool{}, map[string]string{}
	timeout := time.After(30 * time.Second) // a bound for a broken build, not a wait
	for len(got) < 8 {
		select {
		case m := <-msgs:
			got[string(m.Payload)] = true
			info, _ := kinesis.RecordFromContext(m.Context())
			if _, ok := firstRead[info.ShardID]; !ok {
				firstRead[info.ShardID] = info.SequenceNumber
			}
			m.Ack()
		case <-timeout:
			t.Fatalf("after the reset the group read %d of the 8 records again (InitialPosition LATEST must not matter)", len(got))
		}
	}
	if !reflect.DeepEqual(firstRead, first) {
		t.Errorf("first record read of each shard after the reset = %v, want each shard's first %v", firstRead, first)
	}
}

// firstRecords is the sequence number of the first record of each shard that has one.
func firstRecords(t *testing.T, e *emulators, stream string) map[string]string {
	t.Helper()
	ctx := context.Background()
	shards, err := e.kinesis.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]string{}
	for _, sh := range shards.Shards {
		it, err := e.kinesis.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{
			StreamName: aws.String(stream), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.kinesis.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) > 0 {
			first[*sh.ShardId] = *out.Records[0].SequenceNumber
		}
	}
	return first
}

// ownedBy waits until every lease of the group is held by worker.
func ownedBy(t *testing.T, store lease.Store, group, stream, worker string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a bound for a broken build, not a wait
	for {
		leases, err := store.List(context.Background(), group, stream)
		if err != nil {
			t.Fatal(err)
		}
		owned := 0
		for _, l := range leases {
			if l.Owner == worker {
				owned++
			}
		}
		if owned == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d of the %d leases after 30 s: %+v", worker, owned, n, leases)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A running group: the reset with -settle and -wait says per shard that its owner settled,
// handed the lease over and applied the reset, and the owner then delivers each shard from its
// first record; a reset to latest in -json says the same, and nothing that arrived before its
// position is delivered after it.
func TestReset_RunningGroupWait(t *testing.T) {
	e := newEmulators(t)
	table, store := e.leaseTable(t)
	stream, group := "reset-live-"+watermill.NewShortUUID(), "billing"
	runGroup(t, e, stream, group, store, 8)
	first := firstRecords(t, e, stream)
	sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		Client: e.kinesis, Group: kinesis.GroupConfig{Name: group, LeaseStore: store, WorkerID: "live-worker"},
		PollInterval: 50 * time.Millisecond,
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	ownedBy(t, store, group, stream, "live-worker", 2)

	args := []string{"reset", "-stream", stream, "-group", group, "-table", table, "-region", "us-east-1"}
	code, out, errOut := runCommand(t, append(args, "-to", "trim-horizon", "-settle", "-wait", "20s"))
	t.Logf("reset -settle -wait:\n%s", out)
	if code != exitOK || errOut != "" {
		t.Fatalf("reset: exit %d, stderr %q", code, errOut)
	}
	_, rows, summary := tableRows(t, out)
	applied := regexp.MustCompile(`^applied by live-worker after [0-9.]+m?s \(settled first\)$`)
	for shard := range first {
		if row := rows[shard]; len(row) != 7 || row[2] != "move" || row[3] != "live-worker" || row[5] != "TRIM_HORIZON" || !applied.MatchString(row[6]) {
			t.Errorf("row of %s = %q, want live-worker's lease moved to TRIM_HORIZON, THEN to match %s", shard, row, applied)
		}
	}
	if !regexp.MustCompile(`^2 shards moved to TRIM_HORIZON; 2 applied \(the slowest after [0-9.]+m?s\), 0 not yet$`).MatchString(summary) {
		t.Errorf("summary = %q", summary)
	}
	firstRead := map[string]string{}
	timeout := time.After(30 * time.Second) // a bound for a broken build, not a wait
	for n := 0; n < 8; n++ {
		select {
		case m := <-msgs:
			info, _ := kinesis.RecordFromContext(m.Context())
			if _, ok := firstRead[info.ShardID]; !ok {
				firstRead[info.ShardID] = info.SequenceNumber
			}
			m.Ack()
		case <-timeout:
			t.Fatalf("after the reset the group delivered %d of the 8 records again", n)
		}
	}
	if !reflect.DeepEqual(firstRead, first) {
		t.Errorf("first record delivered of each shard after the reset = %v, want each shard's first %v", firstRead, first)
	}

	code, out, errOut = runCommand(t, append(args, "-to", "latest", "-wait", "20s", "-json"))
	t.Logf("reset -to latest -json:\n%s", out)
	if code != exitOK || errOut != "" {
		t.Fatalf("reset -to latest: exit %d, stderr %q, stdout %s", code, errOut, out)
	}
	var r admin.ResetReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-json output does not decode: %v\n%s", err, out)
	}
	start, isStart, err := lease.ParseStart(r.To)
	if err != nil || !isStart || start.Type != lease.StartAtTimestamp || r.DryRun || len(r.Shards) != 2 {
		t.Fatalf("report: to %q, dry run %v, %d shards; want AT_TIMESTAMP@..., a real run of 2 shards", r.To, r.DryRun, len(r.Shards))
	}
	for _, s := range r.Shards {
		if s.Action != admin.ResetActionMove || s.GivenTo != "live-worker" || s.AppliedBy != "live-worker" || s.AppliedAfter <= 0 || s.Waiting != "" {
			t.Errorf("shard %+v: want moved, given back to live-worker and applied by it", s)
		}
	}
	// A record published now is delivered; whatever comes before it arrived at or after the
	// position (LATEST starts one second before the reset).
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: e.kinesis}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish(stream, message.NewMessage(watermill.NewUUID(), []byte("after-latest"))); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case m := <-msgs:
			m.Ack()
			info, _ := kinesis.RecordFromContext(m.Context())
			if string(m.Payload) == "after-latest" {
				return
			}
			if info.ArrivalTime.Before(start.Timestamp) {
				t.Errorf("%s (arrived %s) was delivered after the reset to %s", m.Payload, info.ArrivalTime, r.To)
			}
		case <-timeout:
			t.Fatal("the record published after the reset to latest was not delivered")
		}
	}
}

// A group that never ran: the dry run says, on stderr, that the table holds no lease of it
// (a typo in -group is the likelier reason), and writes nothing.
func TestReset_NoLeasesNote(t *testing.T) {
	e := newEmulators(t)
	table, store := e.leaseTable(t)
	stream := "reset-none-" + watermill.NewShortUUID()
	createStream(t, e, stream, 2)
	code, out, errOut := runCommand(t, []string{"reset", "-stream", stream, "-group", "bliling", "-table", table, "-region", "us-east-1", "-to", "trim-horizon", "-dry-run"})
	t.Logf("dry run:\n%s%s", out, errOut)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if want := `note: table "` + table + `" held no leases of group "bliling" on stream "` + stream + `": the reset would create them`; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q\nwant it to say %q", errOut, want)
	}
	if _, rows, _ := tableRows(t, out); len(rows) != 2 || rows["shardId-000000000000"][2] != "create" {
		t.Errorf("rows %q, want 2 shards to create", rows)
	}
	if leases, err := store.List(context.Background(), "bliling", stream); err != nil || len(leases) != 0 {
		t.Errorf("the dry run wrote leases: %+v, %v", leases, err)
	}
}

// After a reset that failed once it began writing, the command lists each moved shard's lease
// before and now, since the report cannot say which shards were written.
func TestReset_WriteFailed(t *testing.T) {
	r := admin.ResetReport{To: "TRIM_HORIZON", Worker: "kinesis-reset/x", Shards: []admin.ShardReset{
		{ShardID: "shardId-000000000000", Action: admin.ResetActionMove, Owner: "one", From: "4951"},
		{ShardID: "shardId-000000000001", Action: admin.ResetActionMove, From: "4952"},
		{ShardID: "shardId-000000000002", Action: admin.ResetActionCreate},
		{ShardID: "shardId-000000000003", Action: admin.ResetActionNone, Owner: "two", From: "4953"},
	}}
	now := []lease.Lease{
		{ShardID: "shardId-000000000000", Owner: "one", Checkpoint: "TRIM_HORIZON"},
		{ShardID: "shardId-000000000001", Checkpoint: "4952"},
		{ShardID: "shardId-000000000003", Owner: "two", Checkpoint: "4953"},
	}
	var out bytes.Buffer
	if err := writeFailedReset(&out, r, now, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := [][]string{
		{"SHARD", "ACTION", "OWNER", "FROM", "NOW", "OWNER-NOW"},
		{"shardId-000000000000", "move", "one", "4951", "TRIM_HORIZON", "one"},
		{"shardId-000000000001", "move", "(free)", "4952", "4952", "(free)"},
		{"shardId-000000000002", "create", "(no lease)", "-", "(no lease)", "-"},
	}
	if len(lines) != len(want)+2 {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, w := range want {
		if got := cellSep.Split(lines[i+1], -1); !slices.Equal(got, w) {
			t.Errorf("line %d = %q, want %q", i+1, got, w)
		}
	}
	if !strings.HasPrefix(lines[0], "The reset to TRIM_HORIZON failed") || !strings.HasPrefix(lines[len(lines)-1], "1 of 3 shards are at TRIM_HORIZON now") {
		t.Errorf("first and last lines:\n%s\n%s", lines[0], lines[len(lines)-1])
	}

	out.Reset()
	if err := writeFailedReset(&out, r, nil, errors.New("throttled")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "The leases could not be listed again (throttled): run kinesis-leases") {
		t.Errorf("output without a listing:\n%s", out.String())
	}
}

// Every flag the runbook's reset commands use is a flag of kinesis-leases reset, and every
// -to in them that is not a placeholder is a position it reads.
func TestReset_DocumentedCommandLines(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "## Moving a group (reset)")
	if start < 0 {
		t.Fatal(`docs/operating.md has no section "## Moving a group (reset)"`)
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var o resetOptions
	fs := resetFlags(&o, io.Discard)
	commands := regexp.MustCompile("(?:`|\n {4})(kinesis-leases reset [^`\n]*)").FindAllStringSubmatch(section, -1)
	if len(commands) < 5 {
		t.Fatalf("found %d reset commands in the runbook, want its examples", len(commands))
	}
	flagRE := regexp.MustCompile(`(?:^|\s)-([a-z][a-z-]*)(?:\s+(\S+))?`)
	for _, c := range commands {
		for _, m := range flagRE.FindAllStringSubmatch(c[1], -1) {
			if fs.Lookup(m[1]) == nil {
				t.Errorf("the runbook's %q uses -%s, which kinesis-leases reset does not have", c[1], m[1])
			}
			if m[1] == "to" && !regexp.MustCompile(`[A-Z]{2,}|\.\.\.`).MatchString(m[2]) { // TIME, SEQ, CHECKPOINT, 4959...: placeholders
				if _, err := parseResetPosition(m[2]); err != nil {
					t.Errorf("the runbook's %q: %v", c[1], err)
				}
			}
		}
	}
}

// On a KCL application's table, a reset to a time is refused, saying why, and writes nothing.
func TestReset_KCLTableRefusesATime(t *testing.T) {
	e := newEmulators(t)
	stream := "reset-kcl-" + watermill.NewShortUUID()
	createStream(t, e, stream, 1)
	table := e.kclTable(t, kclLease{leaseKey: "shardId-000000000000", counter: 3, checkpoint: "TRIM_HORIZON"})
	args := []string{"reset", "-kcl", "-stream", stream, "-table", table, "-region", "us-east-1", "-to", "2026-12-05T14:00:00Z"}
	code, _, errOut := runCommand(t, args)
	if code != exitError || !strings.Contains(errOut, "a KCL application's lease table cannot hold as a checkpoint the KCL reads the same way") ||
		!strings.Contains(errOut, "with -kcl write -to trim-horizon, or -shard ID -to after-sequence:SEQ") {
		t.Fatalf("exit %d, stderr %q; want 1, the reason and what to write", code, errOut)
	}
}
