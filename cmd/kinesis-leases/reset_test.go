package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
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

	// The group, started again, reads every shard from its first record: all 8 again.
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
	got := map[string]bool{}
	timeout := time.After(30 * time.Second) // a bound for a broken build, not a wait
	for len(got) < 8 {
		select {
		case m := <-msgs:
			got[string(m.Payload)] = true
			m.Ack()
		case <-timeout:
			t.Fatalf("after the reset the group read %d of the 8 records again (InitialPosition LATEST must not matter)", len(got))
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
	if code != exitError || !strings.Contains(errOut, "a KCL application's lease table cannot hold as a checkpoint the KCL reads the same way") {
		t.Fatalf("exit %d, stderr %q; want 1 and the reason", code, errOut)
	}
}
