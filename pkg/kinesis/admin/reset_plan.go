package admin

import (
	"fmt"
	"strings"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// planReset decides, from the shards and leases as listed (joinShardsAndLeases), what a reset
// does to each shard: move every listed shard's lease (or create it), or only shardID's, and
// leave the leases of shards no longer listed.
func planReset(shards []ShardLease, shardID string) []ShardReset {
	out := make([]ShardReset, 0, len(shards))
	for _, s := range shards {
		sr := ShardReset{ShardID: s.ShardID, State: s.State, Parents: s.Parents, Owner: s.Owner, From: s.Checkpoint}
		switch {
		case s.State == ShardGone:
			sr.Action = ResetActionGone
		case shardID != "" && s.ShardID != shardID:
			sr.Action = ResetActionNone
		case s.HasLease:
			sr.Action = ResetActionMove
		default:
			sr.Action = ResetActionCreate
		}
		out = append(out, sr)
	}
	return out
}

func listed(shards []ShardReset, id string) bool {
	for _, s := range shards {
		if s.ShardID == id && s.State != ShardGone {
			return true
		}
	}
	return false
}

// refuseOtherResets fails when another reset holds a lease of the group, or has asked for one
// (Settle): two resets moving the same leases at once would each give back leases the other
// took, and the group's position would be a mix of both.
func refuseOtherResets(cfg ResetConfig, leases []lease.Lease) error {
	for _, l := range leases {
		if err := otherReset(cfg, l, ""); err != nil {
			return err
		}
	}
	return nil
}

// otherReset is the error of a lease another reset than self holds or asked for, nil if none.
func otherReset(cfg ResetConfig, l lease.Lease, self string) error {
	other := ""
	switch {
	case strings.HasPrefix(l.Owner, resetOwnerPrefix) && l.Owner != self:
		other = l.Owner
	case strings.HasPrefix(l.PendingOwner, resetOwnerPrefix) && l.PendingOwner != self:
		other = l.PendingOwner
	default:
		return nil
	}
	return fmt.Errorf("kinesis: resetting group %q on stream %q: another reset (%s) holds or asked for the lease of shard %q; wait for it to finish (a reset that crashed leaves its leases to the group once they expire, after the group's LeaseDuration) and run this one again",
		cfg.ConsumerGroup, cfg.Stream, other, l.ShardID)
}

// refuseUnreached fails a one-shard reset of a shard that has no lease yet while one of its
// parents has none either and is not finished: the group has not reached the shard. A lease
// created there with a checkpoint would make the group count the shard's unleased ancestors as
// finished (group.FinishedAncestors: a shard is taken only once its parents are), and it would
// never read them. A reset of the whole stream creates the parents' leases too.
func refuseUnreached(cfg ResetConfig, joined []ShardLease) error {
	if cfg.ShardID == "" {
		return nil
	}
	byID := map[string]ShardLease{}
	for _, s := range joined {
		byID[s.ShardID] = s
	}
	s, ok := byID[cfg.ShardID]
	if !ok || s.HasLease {
		return nil
	}
	for _, p := range s.Parents {
		if ps, ok := byID[p]; ok && ps.State != ShardGone && !ps.HasLease && !ps.Finished {
			return fmt.Errorf("kinesis: resetting shard %q of group %q on stream %q: the shard has no lease yet, and neither has its parent %q, which is not finished: the group has not reached the shard; reset the whole stream, or wait until the group has read the shard's parents",
				cfg.ShardID, cfg.ConsumerGroup, cfg.Stream, p)
		}
	}
	return nil
}
