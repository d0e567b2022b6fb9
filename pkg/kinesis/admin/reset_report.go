package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as indented JSON, as encoding/json encodes it: the fields of
// ResetReport and ShardReset under their json tags (applied_after_ns in nanoseconds).
func (r ResetReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as an aligned table, one line per shard, then a summary line.
//
// OWNER and FROM are the lease's owner and checkpoint before the reset ("(free)", "(no lease)",
// "-" for an empty checkpoint); FROM is what undoes the reset (see docs/operating.md). TO is the
// position written, or in a dry run the one that would be ("-" for a shard left alone). THEN is
// who took the lease after the reset and how long after its writes (with ResetConfig.Wait), why
// a shard is not taken yet, or whom the lease was given back to; "(settled first)" follows when
// the owner handed the lease over after settling its messages in flight (ResetConfig.Settle).
//
// The summary line counts the shards moved and, with ResetConfig.Wait, those applied (and the
// slowest) and those not yet. A report of a reset that failed (ResetGroup's error) says what
// the reset planned and what it gave back, not which shards it wrote: list the leases again to
// see where each shard stands.
func (r ResetReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tSTATE\tACTION\tOWNER\tFROM\tTO\tTHEN")
	for _, s := range r.Shards {
		owner := s.Owner
		switch {
		case s.Action == ResetActionCreate:
			owner = "(no lease)"
		case owner == "":
			owner = "(free)"
		}
		to := "-"
		if s.Action == ResetActionMove || s.Action == ResetActionCreate {
			to = r.To
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ShardID, s.State, s.Action, owner, orDash(s.From), to, r.then(s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, r.summary())
	return err
}

// then is the THEN cell of a shard.
func (r ResetReport) then(s ShardReset) string {
	if s.Settled && !r.DryRun {
		return r.thenMoved(s) + " (settled first)"
	}
	return r.thenMoved(s)
}

func (r ResetReport) thenMoved(s ShardReset) string {
	switch {
	case s.Action == ResetActionGone:
		return "not listed by Kinesis (aged out): left as it is"
	case s.Action == ResetActionNone:
		return "-"
	case r.DryRun:
		return "(dry run: nothing written)"
	case s.AppliedBy != "":
		return fmt.Sprintf("applied by %s after %s", s.AppliedBy, s.AppliedAfter.Round(time.Millisecond))
	case s.Waiting != "":
		return s.Waiting
	case s.GivenTo != "":
		return "given back to " + s.GivenTo + " (it resumes at the new position)"
	}
	return "released (the group takes it at the new position)"
}

// summary is the report's last line.
func (r ResetReport) summary() string {
	moved, applied, waiting := 0, 0, 0
	var slowest time.Duration
	for _, s := range r.Shards {
		if s.Action != ResetActionMove && s.Action != ResetActionCreate {
			continue
		}
		moved++
		if s.AppliedBy != "" {
			applied++
			slowest = max(slowest, s.AppliedAfter)
		} else if s.Waiting != "" {
			waiting++
		}
	}
	var b strings.Builder
	if r.DryRun {
		fmt.Fprintf(&b, "dry run: %s would move to %s; nothing was written", plural(moved, "shard"), r.To)
		return b.String()
	}
	fmt.Fprintf(&b, "%s moved to %s", plural(moved, "shard"), r.To)
	switch {
	case applied > 0:
		fmt.Fprintf(&b, "; %d applied (the slowest after %s), %d not yet", applied, slowest.Round(time.Millisecond), waiting)
	case waiting > 0:
		fmt.Fprintf(&b, "; 0 applied, %d not yet", waiting)
	}
	return b.String()
}
