package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// OwnerReport is one worker of a GroupReport, and whether it proved alive while watched.
//
// An owner proves it is alive by moving a counter: its member record's heartbeat (about once
// a second by default, when the store keeps member records), or a lease's counter when it
// renews (every LeaseRenewInterval, 3.3 s by default) or checkpoints. A lease counter's move
// counts only when the lease kept its owner and generation between two looks and either no
// handoff was asked at the later look or the checkpoint moved: a take, a release, a handoff
// and a handoff request are writes that may be another worker's. What it cannot tell is when
// a move happened between two looks: MovedMinAgoMillis and MovedMaxAgoMillis bound it.
//
// An owner that did not move while watched may be dead: the group takes its leases once their
// counters stand still for the group's LeaseDuration (10 s by default), timed by each taker
// on its own clock.
type OwnerReport struct {
	// Owner is the worker id: the Owner of its leases, the Worker of its member record.
	Owner string `json:"owner"`
	// Leases is how many of the report's leases (Shards, at the first look) it holds.
	Leases int `json:"leases"`
	// Member is set when a look found its member record.
	Member bool `json:"member"`
	// Moved is set when one of its counters was seen to move between two looks.
	Moved bool `json:"moved"`
	// MovedMinAgoMillis and MovedMaxAgoMillis bound when its latest move seen happened,
	// counted back from the end of the last look: by the end of the look that first saw it,
	// and after the start of the look before. 0 unless Moved.
	MovedMinAgoMillis int64 `json:"moved_min_ago_millis"`
	MovedMaxAgoMillis int64 `json:"moved_max_ago_millis"`
	// HeartbeatMoved and LeaseMoved say which of its counters moved while watched: its member
	// record's, one of its leases'.
	HeartbeatMoved bool `json:"heartbeat_moved"`
	LeaseMoved     bool `json:"lease_moved"`
}

// WriteJSON writes the report as indented JSON, as encoding/json encodes it.
func (r GroupReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as aligned tables: one line per shard; after a blank line, one
// per owner (when there is any); then a summary line, a line for each shard that could not be
// measured, saying why, and one for WatchError.
//
// In the shard table, OWNER is "(free)" for a lease nobody holds and "(no lease yet)" for a
// shard without one; "-" is an empty cell. BEHIND is "finished" at SHARD_END, "caught up" when
// nothing waits, else BehindMillis as a duration ("-" when not measured).
//
// In the owner table, LEASES counts the shard table's leases of the owner, and LAST-MOVE says
// when one of its counters was last seen to move, between two bounds ("moved 1.2-1.7 s ago
// (heartbeat, lease)", naming the counters that moved while watched), or that none moved in
// the time watched ("may be dead"), or "not watched" with one look (see OwnerReport).
//
// The summary counts shards, leases, handoffs and owners, and gives the lag by time: the
// largest BEHIND and its shard ("max 432ms behind (shardId-000000000001)"), "caught up", or
// "lag not measured".
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
	if len(r.Owners) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "\nOWNER\tLEASES\tLAST-MOVE")
		for _, o := range r.Owners {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", o.Owner, o.Leases, lastMoveCell(o, r.WatchedMillis))
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("kinesis: writing the lease table of group %q on stream %q: %w", r.ConsumerGroup, r.Stream, err)
		}
	}
	var b strings.Builder
	b.WriteString(r.summary())
	for _, s := range r.Shards {
		if s.Error != "" {
			fmt.Fprintf(&b, "%s: %s\n", s.ShardID, s.Error)
		}
	}
	if r.WatchError != "" {
		fmt.Fprintf(&b, "owners: %s\n", r.WatchError)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("kinesis: writing the lease table of group %q on stream %q: %w", r.ConsumerGroup, r.Stream, err)
	}
	return nil
}

// summary is the table's last line: the counts an operator scans for, the lag by time, and
// the owners, with how many showed no move.
func (r GroupReport) summary() string {
	var open, closed, gone, leases, free, unleased, handoffs int
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
		}
		if s.PendingOwner != "" {
			handoffs++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d open, %d closed, %d gone); %s (%d free); %s without a lease; %s pending; %s; %s",
		plural(len(r.Shards), "shard"), open, closed, gone, plural(leases, "lease"), free,
		plural(unleased, "shard"), plural(handoffs, "handoff"), lagSummary(r.Shards), plural(len(r.Owners), "owner"))
	if r.WatchedMillis > 0 {
		still := 0
		for _, o := range r.Owners {
			if !o.Moved {
				still++
			}
		}
		fmt.Fprintf(&b, ", %d with no move in the %s s watched", still, seconds(r.WatchedMillis))
	}
	b.WriteString("\n")
	return b.String()
}

// lagSummary is how far behind the group is, by time: the largest BehindMillis and its shard,
// "caught up" when no measured shard has records waiting, or "lag not measured" when no shard
// that could have any was measured; with the number of such shards not measured, if any.
func lagSummary(shards []ShardLease) string {
	var measured, unmeasured int
	for _, s := range shards {
		switch {
		case s.Finished || s.State == ShardGone: // nothing to read, or nothing readable
		case s.Measured:
			measured++
		default:
			unmeasured++
		}
	}
	if measured == 0 && unmeasured > 0 {
		return "lag not measured"
	}
	lag := "caught up"
	if millis, shard := maxBehind(shards); shard != "" {
		lag = fmt.Sprintf("max %s behind (%s)", time.Duration(millis)*time.Millisecond, shard)
	}
	if unmeasured > 0 {
		lag += fmt.Sprintf(" (%s not measured)", plural(unmeasured, "shard"))
	}
	return lag
}

// lastMoveCell is an owner's LAST-MOVE: when its counters were last seen to move, or that they
// were not, in the watchedMillis watched.
func lastMoveCell(o OwnerReport, watchedMillis int64) string {
	switch {
	case o.Moved:
		var kinds []string
		if o.HeartbeatMoved {
			kinds = append(kinds, "heartbeat")
		}
		if o.LeaseMoved {
			kinds = append(kinds, "lease")
		}
		return fmt.Sprintf("moved %s-%s s ago (%s)", seconds(o.MovedMinAgoMillis), seconds(o.MovedMaxAgoMillis), strings.Join(kinds, ", "))
	case watchedMillis == 0:
		return "not watched (one look)"
	case o.Leases > 0:
		return fmt.Sprintf("no move in the %s s watched: may be dead (its leases are taken once their counters stand still for the group's LeaseDuration, 10 s by default)",
			seconds(watchedMillis))
	}
	return fmt.Sprintf("no move in the %s s watched: may be gone", seconds(watchedMillis))
}

// seconds writes milliseconds as seconds with one decimal.
func seconds(millis int64) string { return strconv.FormatFloat(float64(millis)/1000, 'f', 1, 64) }

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
