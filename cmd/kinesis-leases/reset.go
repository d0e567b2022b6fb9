package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease/kcl"
)

// resetOptions are the command line of kinesis-leases reset.
type resetOptions struct {
	options
	to, shard      string
	dryRun, settle bool
	wait           time.Duration
	position       admin.ResetPosition // parsed from -to
}

// runReset is kinesis-leases reset: admin.ResetGroup from the command line.
func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseResetOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var usage *usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(stderr, "kinesis-leases reset: %s\nRun kinesis-leases reset -help for the flags.\n", err)
		return exitUsage
	}
	if err != nil {
		return exitUsage
	}
	awsCfg, err := awsConfig(ctx, o.options)
	if err != nil {
		fmt.Fprintf(stderr, "kinesis-leases reset: %s\n", err)
		return exitUsage
	}
	o.region = awsCfg.Region
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	kc, dc := clients(o.options, awsCfg)
	store, err := openStore(ctx, o.options, dc)
	if err == nil && o.kcl {
		// The KCL store itself, not the leases-only view the inspection uses: a reset must
		// know the table is a KCL application's (lease.ForeignTable) to refuse what the KCL
		// would read otherwise. Its member calls fail on a leases-only store; a reset only
		// notifies owners, and a failed notice costs time only.
		store = store.(leasesOnly).Store.(*kcl.Store)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kinesis-leases reset: opening the lease table: %s\n", explain(o.options, err))
		return exitError
	}
	report, err := admin.ResetGroup(ctx, admin.ResetConfig{
		Stream: o.stream, ConsumerGroup: o.group, Client: kc, LeaseStore: store,
		To: o.position, ShardID: o.shard, DryRun: o.dryRun, Settle: o.settle, Wait: o.wait,
	})
	if err != nil {
		if len(report.Shards) > 0 && report.Worker != "" {
			_ = report.WriteTable(stdout) // what was done before it failed
		}
		fmt.Fprintf(stderr, "kinesis-leases reset: %s\n", explain(o.options, err))
		return exitError
	}
	if o.json {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kinesis-leases reset: %s\n", err)
		return exitError
	}
	return exitOK
}

// parseResetOptions reads the flags of kinesis-leases reset and reports every problem at once.
func parseResetOptions(args []string, stderr io.Writer) (resetOptions, error) {
	var o resetOptions
	fs := flag.NewFlagSet("kinesis-leases reset", flag.ContinueOnError)
	fs.SetOutput(stderr)
	commonFlags(fs, &o.options)
	fs.StringVar(&o.to, "to", "", "where the group goes (required): trim-horizon, latest, an RFC 3339 time (2026-12-05T14:00:00Z), at-sequence:SEQ or after-sequence:SEQ (the last two with -shard)")
	fs.StringVar(&o.shard, "shard", "", "move this shard alone (e.g. shardId-000000000003); default: every shard the stream lists")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print, per shard, where the group stands and where it would go; write nothing")
	fs.BoolVar(&o.settle, "settle", false, "let each owner finish its messages in flight and hand the lease over first (as a handoff does), instead of fencing it at once")
	fs.DurationVar(&o.wait, "wait", 0, "wait up to this long for every owner to apply the reset, and say per shard who did and when (0: return once the positions are written)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long (must be longer than -wait)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kinesis-leases reset -stream S -group G -table T -to POSITION [-shard ID] [-dry-run] [-settle] [-wait 30s] [flags]\n\n"+
			"Moves a consumer group's position on a stream, on a running group as on a stopped one, through the\n"+
			"lease protocol: each owner stops delivering at its next lease write (at once when notified, at the\n"+
			"latest one LeaseRenewInterval after this command returns) and resumes at the new position; no two\n"+
			"readers ever hold a shard. A stopped group applies it when it starts. See docs/operating.md,\n"+
			"\"Moving a group (reset)\", for the runbook and how to undo a reset (keep the -dry-run output).\n\n"+
			"POSITION is one of:\n"+
			"  trim-horizon          the oldest record the stream still has\n"+
			"  latest                what arrives from now on (from one second before, for clock skew)\n"+
			"  2026-12-05T14:00:00Z  the first record that arrived at or after the time (RFC 3339)\n"+
			"  at-sequence:SEQ       with -shard: that record again, and what follows\n"+
			"  after-sequence:SEQ    with -shard: the record after it (steps over a poison record)\n\n"+
			"Examples:\n"+
			"  kinesis-leases reset -stream orders -group billing -table leases -to 2026-12-04T14:00:00Z -dry-run\n"+
			"  kinesis-leases reset -stream orders -group billing -table leases -to latest -wait 30s\n"+
			"  kinesis-leases reset -stream orders -group billing -table leases -shard shardId-000000000003 -to after-sequence:4959...\n\n"+
			"With -kcl (a KCL application's table) only trim-horizon and after-sequence: are written, and the\n"+
			"reset is refused while a KCL worker renews a lease.\n\n"+
			credentialsHelp+"\n\nExit status: 0 done (or dry run printed), 1 the reset failed (the error names the shard and\n"+
			"what to do; what it held is given back), 2 bad command line.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	problems := commonProblems(fs, &o.options)
	pos, err := parseResetPosition(o.to)
	if err != nil {
		problems = append(problems, err.Error())
	}
	o.position = pos
	if (pos.Type == admin.ResetToSequenceNumber || pos.Type == admin.ResetAfterSequenceNumber) && o.shard == "" {
		problems = append(problems, fmt.Sprintf("-to %s names a sequence number, which belongs to one shard: add -shard", o.to))
	}
	switch {
	case o.wait < 0:
		problems = append(problems, fmt.Sprintf("-wait is %s; it must not be negative (0 returns once the positions are written)", o.wait))
	case o.timeout > 0 && o.timeout <= o.wait:
		problems = append(problems, fmt.Sprintf("-timeout %s is not longer than -wait %s: raise -timeout or shorten -wait", o.timeout, o.wait))
	}
	if len(problems) > 0 {
		return o, &usageError{msg: strings.Join(problems, "\n  ")}
	}
	return o, nil
}

// parseResetPosition reads -to.
func parseResetPosition(to string) (admin.ResetPosition, error) {
	switch {
	case to == "":
		return admin.ResetPosition{}, errors.New("-to is missing: say where the group goes (trim-horizon, latest, an RFC 3339 time, at-sequence:SEQ or after-sequence:SEQ)")
	case to == "trim-horizon":
		return admin.ResetPosition{Type: admin.ResetToTrimHorizon}, nil
	case to == "latest":
		return admin.ResetPosition{Type: admin.ResetToLatest}, nil
	}
	if kind, seq, ok := strings.Cut(to, ":"); ok && (kind == "at-sequence" || kind == "after-sequence") {
		if seq == "" || strings.Trim(seq, "0123456789") != "" {
			return admin.ResetPosition{}, fmt.Errorf("-to %s: %q is not a sequence number (decimal digits, as a record's SequenceNumber)", to, seq)
		}
		if kind == "at-sequence" {
			return admin.ResetPosition{Type: admin.ResetToSequenceNumber, SequenceNumber: seq}, nil
		}
		return admin.ResetPosition{Type: admin.ResetAfterSequenceNumber, SequenceNumber: seq}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, to)
	if err != nil {
		return admin.ResetPosition{}, fmt.Errorf("-to %q is neither trim-horizon, latest, at-sequence:SEQ, after-sequence:SEQ nor an RFC 3339 time such as 2026-12-05T14:00:00Z (with a zone: Z or +01:00)", to)
	}
	return admin.ResetPosition{Type: admin.ResetToTimestamp, Timestamp: t}, nil
}
