package admin

import (
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/group"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// joinShardsAndLeases makes one entry per shard id found in either list, sorted by shard id
// (Kinesis pads shard ids to a fixed width, so that is also their numeric order).
func joinShardsAndLeases(shards []types.Shard, leases []lease.Lease) []ShardLease {
	byID := map[string]*ShardLease{}
	entry := func(id string) *ShardLease {
		if s, ok := byID[id]; ok {
			return s
		}
		s := &ShardLease{ShardID: id, State: ShardGone, Parents: []string{}}
		byID[id] = s
		return s
	}
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		if id == "" {
			continue
		}
		s := entry(id)
		s.State = ShardOpen
		if sh.SequenceNumberRange != nil && aws.ToString(sh.SequenceNumberRange.EndingSequenceNumber) != "" {
			s.State = ShardClosed
			s.EndingSequenceNumber = *sh.SequenceNumberRange.EndingSequenceNumber
		}
		for _, p := range []*string{sh.ParentShardId, sh.AdjacentParentShardId} {
			if aws.ToString(p) != "" {
				s.Parents = append(s.Parents, *p)
			}
		}
	}
	for _, l := range leases {
		s := entry(l.ShardID)
		s.HasLease = true
		s.Owner, s.Generation, s.Counter = l.Owner, l.Generation, l.Counter
		s.Checkpoint, s.PendingOwner = l.Checkpoint, l.PendingOwner
		s.Finished = l.Checkpoint == lease.ShardEnd
		if len(l.Parents) > 0 { // what the coordinator acts on
			s.Parents = append([]string{}, l.Parents...)
		}
	}
	// Closed shards whose lease was deleted after their children were read: finished.
	var taken []string
	for id, s := range byID {
		if s.HasLease && (s.Generation > 0 || s.Checkpoint != "") {
			taken = append(taken, id)
		}
	}
	finished := group.FinishedAncestors(taken, func(id string) []string { return byID[id].Parents }, func(id string) bool {
		s, ok := byID[id]
		return ok && !s.HasLease && s.State == ShardClosed
	})
	for id := range finished {
		byID[id].Finished = true
	}
	out := make([]ShardLease, 0, len(byID))
	for _, s := range byID {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b ShardLease) int { return strings.Compare(a.ShardID, b.ShardID) })
	return out
}
