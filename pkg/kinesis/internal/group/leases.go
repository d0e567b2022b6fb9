package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/shard"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// createLeases creates the leases of the given known shards that have none yet. Another worker
// creating one first is fine: the lease is the same.
//
// It decides from a listing of the leases no older than leaseViewMaxAge, listing again when
// the loop has run longer: a lease missing from an old listing may have been created, read to
// its end and deleted since, and creating it again would read the shard twice. Deletions wait
// longer than that (deleteFinishedAfter).
//
// Instances that start together on a new group all find every lease missing. Each goes through
// the shards in an order of its own (takeOrder), and one that meets createdByOthers leases
// created by another worker in a row lists again and skips what is there by then: in the scale
// run, 50 instances on 4,000 shards sent 33,666 creates, 29,666 of them failed, and failed
// conditional writes cost write units as the others do.
func (c *Subscription) createLeases(ids []string) error {
	ids = slices.Clone(ids)
	slices.SortStableFunc(ids, func(a, b string) int {
		return cmp.Compare(takeOrder(c.cfg.WorkerID, a), takeOrder(c.cfg.WorkerID, b))
	})
	existed := 0
	for _, id := range ids {
		if _, ok := c.leases.byShard[id]; ok || c.finishedWithoutLease(id) {
			// Leases are deleted only at SHARD_END, and then not created again; a shard known
			// to be finished stays so, whatever listing said it. Only a shard that may need a
			// lease is worth a fresh listing.
			continue
		}
		if existed >= createdByOthers || time.Since(c.leases.listedAt) > leaseViewMaxAge(c.cfg) {
			existed = 0
			if err := c.refreshLeases(); err != nil {
				return err
			}
		}
		if _, ok := c.leases.byShard[id]; ok || c.finishedWithoutLease(id) {
			continue // a finished shard whose lease was deleted is not read again
		}
		ctx, cancel := c.callContext()
		l, err := c.cfg.LeaseStore.Create(ctx, lease.Lease{
			Group: c.cfg.Group, Stream: c.cfg.Stream, ShardID: id, Parents: parentsOf(c.shards[id]),
		})
		cancel()
		switch {
		case errors.Is(err, lease.ErrLeaseExists):
			existed++
		case err != nil:
			return fmt.Errorf("kinesis: creating the lease of shard %q of stream %q: %w", id, c.cfg.Stream, err)
		default:
			existed = 0
			c.leases.byShard[id] = l
		}
	}
	return nil
}

// createdByOthers is how many leases createLeases finds created by another worker in a row
// before it lists the leases again.
const createdByOthers = 8

// leaseView is what this worker knows of the group's leases. The coordinator goroutine owns it.
type leaseView struct {
	// byShard is the last listing, with this worker's own writes since (takes, requests).
	byShard map[string]lease.Lease
	// seen is what the listings showed of each lease, and since when (tracker).
	seen tracker
	// listedAt is when the last listing was sent (zero: never), and aliveAtList the members
	// alive then (aliveMembers): one gone since lists again (listDue).
	listedAt    time.Time
	aliveAtList []string
	// soon: something since the last listing that only a listing shows (listing.soon).
	soon bool
	// timeouts counts the listings that timed out in a row.
	timeouts int
}

// refreshLeases lists the group's leases.
func (c *Subscription) refreshLeases() error {
	sent := time.Now() // the listing is as of some moment after this
	// A listing is up to 16 Queries (one per partition of the group's leases) in one call.
	// After listings that timed out, the next may take longer, as a reader's reads may
	// (shard.Reader.callContext): a slow store's answers get through, a hung call is still cut.
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout<<min(c.leases.timeouts, shard.MaxTimeoutDoublings))
	list, err := c.cfg.LeaseStore.List(ctx, c.cfg.Group, c.cfg.Stream)
	timedOut := err != nil && c.ctx.Err() == nil && context.Cause(ctx) == context.DeadlineExceeded
	cancel()
	if timedOut {
		c.leases.timeouts++
	}
	if err != nil {
		return fmt.Errorf("kinesis: listing the leases of group %q on stream %q: %w", c.cfg.Group, c.cfg.Stream, err)
	}
	c.leases.timeouts = 0
	now := time.Now()
	c.lastLeaseSync.Store(now.UnixNano())
	c.leases.listedAt, c.leases.aliveAtList = sent, c.aliveMembers(now)
	c.leases.seen.observeLeases(list, now)
	c.invalidateFinished()
	c.watchForeign(list, now)
	clear(c.leases.byShard)
	for _, l := range list {
		c.leases.byShard[l.ShardID] = l
	}
	c.learnFromLeases()
	return nil
}

// learnFromLeases adds to the known shards those that only the leases show: children of a
// reshard whose leases another worker created when its read reached the parent's end. Without
// them this worker could not take such a lease (eligible needs a known shard) until its next
// shard listing, up to ShardSyncInterval later. A lease of an unfinished shard is created only
// for a shard that a listing or a read's ChildShards showed; the next shard listing confirms
// it, as it does the children learnChildren adds.
func (c *Subscription) learnFromLeases() {
	for id, l := range c.leases.byShard {
		if _, known := c.shards[id]; known || l.Checkpoint == lease.ShardEnd || len(l.Parents) == 0 || !c.allKnown(l.Parents) {
			continue // only a reshard's children, of parents still listed: not a shard gone from the stream
		}
		s := types.Shard{ShardId: aws.String(id), ParentShardId: aws.String(l.Parents[0])}
		if len(l.Parents) > 1 {
			s.AdjacentParentShardId = aws.String(l.Parents[1])
		}
		c.shards[id], c.learned[id] = s, s
		c.invalidateFinished()
	}
}

// allKnown: every shard is in the known shards.
func (c *Subscription) allKnown(ids []string) bool {
	for _, id := range ids {
		if _, ok := c.shards[id]; !ok {
			return false
		}
	}
	return true
}
