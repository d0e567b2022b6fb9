package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/admin"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
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
	cfg := admin.ResetConfig{
		Stream: o.stream, ConsumerGroup: o.group, Client: kc, LeaseStore: store,
		To: o.position, ShardID: o.shard, DryRun: o.dryRun, Settle: o.settle, Wait: o.wait,
	}
	report, err := admin.ResetGroup(ctx, cfg)
	if err != nil {
		if report.Worker != "" { // it began writing: say where each shard stands now
			if o.json {
				_ = report.WriteJSON(stdout)
			} else {
				leases, lerr := listNow(ctx, cfg)
				_ = writeFailedReset(stdout, report, leases, lerr)
			}
		}
		fmt.Fprintf(stderr, "kinesis-leases reset: %s\n", explainReset(o, err))
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
	noteNoLeases(o, report, stderr)
	return exitOK
}

// explainReset is explain, with what to write instead of a position a KCL table cannot hold
// (told by the flags, not by the error's text).
func explainReset(o resetOptions, err error) string {
	msg := explain(o.options, err)
	if o.kcl && o.position.Type != admin.ResetToTrimHorizon && o.position.Type != admin.ResetAfterSequenceNumber {
		msg += "\n  with -kcl write -to trim-horizon, or -shard ID -to after-sequence:SEQ"
	}
	return msg
}

// listNow lists the group's leases after a reset failed, with a context of its own: the
// reset's may be what ran out.
func listNow(ctx context.Context, cfg admin.ResetConfig) ([]lease.Lease, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return cfg.LeaseStore.List(ctx, cfg.ConsumerGroup, cfg.Stream)
}

// writeFailedReset prints, for a reset that failed after it began writing, each shard's lease
// before the reset (OWNER, FROM: what undoes it) and as listed now (NOW, OWNER-NOW), since
// the report cannot say which shards were written before the failure: a shard at TO moved, a
// shard still at FROM did not, and the group may have read on from either.
func writeFailedReset(w io.Writer, r admin.ResetReport, now []lease.Lease, listErr error) error {
	byShard := map[string]lease.Lease{}
	for _, l := range now {
		byShard[l.ShardID] = l
	}
	fmt.Fprintf(w, "The reset to %s failed (the error is below). Each shard's lease before it and now:\n", r.To)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tACTION\tOWNER\tFROM\tNOW\tOWNER-NOW")
	moved, atTo := 0, 0
	for _, s := range r.Shards {
		if s.Action != admin.ResetActionMove && s.Action != admin.ResetActionCreate {
			continue
		}
		moved++
		owner := orNone(s.Owner, "(free)")
		if s.Action == admin.ResetActionCreate {
			owner = "(no lease)"
		}
		cp, ownerNow := "?", "?"
		if listErr == nil {
			l, ok := byShard[s.ShardID]
			switch {
			case !ok:
				cp, ownerNow = "(no lease)", "-"
			default:
				cp, ownerNow = orNone(l.Checkpoint, "-"), orNone(l.Owner, "(free)")
			}
			if ok && l.Checkpoint == r.To {
				atTo++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ShardID, s.Action, owner, orNone(s.From, "-"), cp, ownerNow)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if listErr != nil {
		_, err := fmt.Fprintf(w, "The leases could not be listed again (%v): run kinesis-leases to see where each shard stands.\n", listErr)
		return err
	}
	_, err := fmt.Fprintf(w, "%d of %d shards are at %s now; the others are at FROM or have read on. Run the reset again, "+
		"or undo a moved shard with -shard ID -to after-sequence:FROM (docs/operating.md).\n", atTo, moved, r.To)
	return err
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// noteNoLeases tells on stderr that the group had no lease at all on the stream in the table,
// so that the reset created (or would create) every lease: right for a group that has not run
// yet, which then starts at the position; a typo in -group, -table or -stream otherwise.
func noteNoLeases(o resetOptions, r admin.ResetReport, stderr io.Writer) {
	created := 0
	for _, s := range r.Shards {
		switch s.Action {
		case admin.ResetActionMove, admin.ResetActionGone:
			return
		case admin.ResetActionCreate:
			created++
		}
	}
	if created == 0 || o.shard != "" {
		return
	}
	does := "created"
	if r.DryRun {
		does = "would create"
	}
	fmt.Fprintf(stderr, "kinesis-leases reset: note: table %q held no leases of group %q on stream %q: the reset %s them at the position, where a group that has not run yet starts; if that is not meant, check -group, -table and -stream\n",
		o.table, o.group, o.stream, does)
}

// parseResetOptions reads the flags of kinesis-leases reset and reports every problem at once.
func parseResetOptions(args []string, stderr io.Writer) (resetOptions, error) {
	var o resetOptions
	fs := resetFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, checkResetOptions(fs, &o)
}

// resetFlags are the flags of kinesis-leases reset, and its -help.
func resetFlags(o *resetOptions, stderr io.Writer) *flag.FlagSet {
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
		fmt.Fprintf(fs.Output(), "Usage: kinesis-leases reset -stream S -group G -table T -to POSITION [-shard ID] [-dry-run] [-settle] [-wait 30s] [-json] [flags]\n\n"+
			"Moves a consumer group's position on a stream, on a running group as on a stopped one, through the\n"+
			"lease protocol: each owner is fenced and stops delivering at its next lease write (at once when\n"+
			"notified, at the latest one LeaseRenewInterval after this command returns), its messages in flight\n"+
			"dropped (-settle: acked or nacked first), and resumes at the new position; no two readers ever hold\n"+
			"a shard. A stopped group applies it when it starts. See docs/operating.md, \"Moving a group\n"+
			"(reset)\", for the runbook.\n\n"+
			"POSITION is one of:\n"+
			"  trim-horizon          the oldest record the stream still has\n"+
			"  latest                what arrives from now on (from one second before, for clock skew)\n"+
			"  2026-12-05T14:00:00Z  the first record that arrived at or after the time (RFC 3339, with a\n"+
			"                        zone: Z or an offset such as +01:00; not in the future)\n"+
			"  at-sequence:SEQ       with -shard: that record again, and what follows\n"+
			"  after-sequence:SEQ    with -shard: the record after it (steps over a poison record)\n\n"+
			"Without -shard every shard the stream lists moves (closed parents of a split or merge too, so\n"+
			"that each key's records come in order again); with -shard that shard alone, and its children,\n"+
			"if it was split or merged, go on where they are.\n\n"+
			"Always look first with -dry-run: it prints per shard its owner and checkpoint (FROM) and where\n"+
			"it would go (TO), and writes nothing. Keep it: -shard ID -to after-sequence:FROM puts a shard\n"+
			"back. The reset prints per shard what it did; with -wait, which worker applied it and when.\n\n"+
			"Examples:\n"+
			"  # look, then reprocess everything since yesterday 14:00 UTC, waiting for the owners\n"+
			"  kinesis-leases reset -stream orders -group billing -table leases -to 2026-12-04T14:00:00Z -dry-run\n"+
			"  kinesis-leases reset -stream orders -group billing -table leases -to 2026-12-04T14:00:00Z -wait 30s\n"+
			"  # skip a flood, letting the messages in flight finish first\n"+
			"  kinesis-leases reset -stream orders -group billing -table leases -to latest -settle -wait 30s\n"+
			"  # replay one shard\n"+
			"  kinesis-leases reset -stream orders -group billing -table leases -shard shardId-000000000003 -to trim-horizon\n"+
			"  # step over one poison record (its sequence number: kinesis.RecordFromContext in the handler)\n"+
			"  kinesis-leases reset -stream orders -group billing -table leases -shard shardId-000000000003 -to after-sequence:4959...\n\n"+
			"With -kcl (a KCL application's table) only trim-horizon and after-sequence:SEQ can be written,\n"+
			"and the reset is refused while a KCL worker renews a lease (it watches the leases KCL workers\n"+
			"hold for 12 s first).\n\n"+
			credentialsHelp+"\n\nExit status: 0 done (or dry run printed; with -wait also when some owner has not applied it\n"+
			"yet: the table says which), 1 the reset failed (the error names the shard and what to do; what it\n"+
			"held is given back, and the table shows each shard's checkpoint before and now), 2 bad command line.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// checkResetOptions fills in the defaults and lists every problem of the parsed flags.
func checkResetOptions(fs *flag.FlagSet, o *resetOptions) error {
	problems := commonProblems(fs, &o.options)
	pos, err := parseResetPosition(o.to)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if now := time.Now(); pos.Type == admin.ResetToTimestamp && pos.Timestamp.After(now) {
		problems = append(problems, fmt.Sprintf("-to %s is in the future (it is %s now): the group would skip every record that arrives before then; "+
			"for what arrives from now on write -to latest, and for a time in another zone give its offset (2026-12-05T14:00:00+01:00) or convert it to UTC (Z)",
			o.to, now.UTC().Format(time.RFC3339)))
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
		return &usageError{msg: strings.Join(problems, "\n  ")}
	}
	return nil
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
