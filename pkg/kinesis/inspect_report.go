package kinesis

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as indented JSON, as encoding/json encodes it.
func (r GroupReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as an aligned table, one line per shard, then a summary line
// and, for each shard that could not be measured, a line saying why.
//
// OWNER is "(free)" for a lease nobody holds and "(no lease yet)" for a shard without one;
// "-" is an empty cell. BEHIND is "finished" at SHARD_END, "caught up" when nothing waits,
// else BehindMillis as a duration ("-" when not measured).
func (r GroupReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tSTATE\tOWNER\tGEN\tCHECKPOINT\tPARENTS\tPENDING-OWNER\tBEHIND")
	for _, s := range r.Shards {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ShardID, s.State, ownerCell(s), genCell(s),
			orDash(s.Checkpoint), orDash(strings.Join(s.Parents, ",")), orDash(s.PendingOwner), behindCell(s))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("kinesis: writing the lease table of group %q on stream %q: %w", r.ConsumerGroup, r.Stream, err)
	}
	var b strings.Builder
	b.WriteString(r.summary())
	for _, s := range r.Shards {
		if s.Error != "" {
			fmt.Fprintf(&b, "%s: %s\n", s.ShardID, s.Error)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("kinesis: writing the lease table of group %q on stream %q: %w", r.ConsumerGroup, r.Stream, err)
	}
	return nil
}

// summary is the table's last line: the counts an operator scans for, then the live leases
// per owner (a lopsided spread shows a fair-share problem at a glance).
func (r GroupReport) summary() string {
	var open, closed, gone, leases, free, unleased, handoffs, behind int
	owners := map[string]int{}
	for _, s := range r.Shards {
		switch s.State {
		case ShardOpen:
			open++
		case ShardClosed:
			closed++
		case ShardGone:
			gone++
		}
		switch {
		case !s.HasLease && s.Finished:
		case !s.HasLease:
			unleased++
		case s.Owner == "":
			leases++
			free++
		default:
			leases++
			owners[s.Owner]++
		}
		if s.PendingOwner != "" {
			handoffs++
		}
		if s.Pending {
			behind++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d open, %d closed, %d gone); %s (%d free); %s without a lease; %s pending; %s behind",
		plural(len(r.Shards), "shard"), open, closed, gone, plural(leases, "lease"), free,
		plural(unleased, "shard"), plural(handoffs, "handoff"), plural(behind, "shard"))
	if len(owners) > 0 {
		b.WriteString("; owners:")
		names := make([]string, 0, len(owners))
		for o := range owners {
			names = append(names, o)
		}
		slices.Sort(names)
		for _, o := range names {
			fmt.Fprintf(&b, " %s=%d", o, owners[o])
		}
	}
	b.WriteString("\n")
	return b.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func ownerCell(s ShardLease) string {
	switch {
	case !s.HasLease && s.Finished:
		return "(finished, lease deleted)"
	case !s.HasLease:
		return "(no lease yet)"
	case s.Owner == "":
		return "(free)"
	}
	return s.Owner
}

func genCell(s ShardLease) string {
	if !s.HasLease {
		return "-"
	}
	return strconv.FormatInt(s.Generation, 10)
}

func behindCell(s ShardLease) string {
	var cell string
	switch {
	case s.Error != "":
		return "error (below)"
	case s.Finished:
		return "finished"
	case !s.Measured:
		return "-"
	case !s.Pending:
		cell = "caught up"
	default:
		cell = (time.Duration(s.BehindMillis) * time.Millisecond).String()
	}
	if s.CheckpointExpired {
		cell += " (checkpoint expired)"
	}
	return cell
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
