package group

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// syncShards lists the stream's shards and, in a group, creates the leases of new ones.
func (c *Subscription) syncShards() error {
	shards, err := listShards(c.ctx, c.cfg, c.cfg.Stream)
	if errors.Is(err, awscall.ErrStreamNotFound) && len(c.shards) > 0 {
		// The stream is gone: forget its shards, so that no reader is started on it until a
		// listing finds it again (a stream created again under the same name is read from
		// the checkpoints, or from TRIM_HORIZON where they are not its own).
		c.cfg.Logger.Error("Stream not found (deleted?); no shard of it is read until a shard listing finds it again", err,
			c.logFields().Add(watermill.LogFields{"shard_sync_interval": c.cfg.ShardSyncInterval}))
		clear(c.shards)
		c.invalidateFinished()
		clear(c.learned)
		return nil
	}
	if err != nil {
		return err
	}
	for id, s := range c.learned {
		if _, listed := shards[id]; listed {
			delete(c.learned, id)
		} else {
			shards[id] = s
		}
	}
	c.shards = shards
	c.invalidateFinished()
	c.forgetUnlisted()
	if !c.grouped() {
		return nil
	}
	c.startHeartbeat() // once: at the first listing that found the stream (Subscribe's)
	// The lease syncs list the leases when the group changes; a shard sync lists them only
	// when nothing else has for listMaxAge (createLeases lists again by itself before it
	// creates a lease missing from an older listing).
	if time.Since(c.leases.listedAt) >= c.listMaxAge() {
		if err := c.refreshLeases(); err != nil {
			return err
		}
	}
	c.cleanFinished()
	return c.createLeases(sortedKeys(shards))
}

// forgetUnlisted drops what the subscription kept of shards the listing no longer shows: they
// left the stream (retention passed them), nothing will read them again, and a parent that is
// not listed counts as finished for its children anyway. Without it, the maps grew with every
// reshard for as long as the subscription ran.
func (c *Subscription) forgetUnlisted() {
	for _, m := range []map[string]bool{c.ended, c.skipped} {
		for id := range m {
			if _, listed := c.shards[id]; !listed {
				delete(m, id)
			}
		}
	}
	for id := range c.progress {
		if _, listed := c.shards[id]; !listed {
			delete(c.progress, id)
		}
	}
}

// recheckIfNotFound lists the shards at once when a reader met ResourceNotFound. Without it, a
// deleted stream's shards stayed known: in the fault suite, two instances started a reader of
// each shard at every lease sync for as long as the stream was gone (313 GetShardIterator calls,
// 671 lease takes and releases and 321 error lines in two minutes). The listing tells a stream
// that is gone (syncShards then forgets its shards) from a shard that aged out of the stream
// (no longer listed, so not read again).
func (c *Subscription) recheckIfNotFound(err error) {
	if err == nil || c.ctx.Err() != nil || len(c.shards) == 0 || awscall.Classify(c.ctx, err) != awscall.NotFound {
		return
	}
	c.logIfFailed("listing shards", c.syncShards())
}

// learnChildren adds the children a finished shard named to the known shards and, in a group,
// creates their leases, with their parents, so they can be taken at once.
func (c *Subscription) learnChildren(children []types.ChildShard) error {
	var ids []string
	unknownParent := false
	for _, ch := range children {
		if ch.ShardId == nil || *ch.ShardId == "" {
			continue
		}
		id := *ch.ShardId
		if _, known := c.shards[id]; known {
			continue
		}
		s := types.Shard{ShardId: ch.ShardId, HashKeyRange: ch.HashKeyRange}
		if len(ch.ParentShards) > 0 {
			s.ParentShardId = &ch.ParentShards[0]
		}
		if len(ch.ParentShards) > 1 {
			s.AdjacentParentShardId = &ch.ParentShards[1]
		}
		c.shards[id], c.learned[id] = s, s
		c.invalidateFinished()
		ids = append(ids, id)
		for _, p := range ch.ParentShards {
			if _, known := c.shards[p]; !known {
				unknownParent = true
			}
		}
	}
	if unknownParent {
		// A parent missing from the last listing is taken as aged out of the stream, which
		// lets its children start. A merge's other parent may simply be newer than that
		// listing (another worker read its parents), so list again before judging it.
		return c.syncShards()
	}
	if !c.grouped() || len(ids) == 0 {
		return nil
	}
	if err := c.refreshLeases(); err != nil {
		return err
	}
	return c.createLeases(ids)
}

// listShards returns every shard of the stream, following NextToken.
// Each call is bounded by RequestTimeout.
func listShards(ctx context.Context, cfg Config, stream string) (map[string]types.Shard, error) {
	shards := map[string]types.Shard{}
	in := &awskinesis.ListShardsInput{StreamName: &stream}
	for {
		callCtx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		out, err := cfg.Kinesis.ListShards(callCtx, in)
		cancel()
		if err != nil {
			if awscall.Classify(ctx, err) == awscall.NotFound {
				return nil, fmt.Errorf("%w: %q (create it, or set CreateStream in the config): %w", awscall.ErrStreamNotFound, stream, err)
			}
			return nil, fmt.Errorf("kinesis: listing the shards of stream %q: %w", stream, err)
		}
		for _, s := range out.Shards {
			if s.ShardId != nil {
				shards[*s.ShardId] = s
			}
		}
		if out.NextToken == nil || *out.NextToken == "" {
			return shards, nil
		}
		in = &awskinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

func parentsOf(s types.Shard) []string {
	var parents []string
	for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
		if p != nil && *p != "" {
			parents = append(parents, *p)
		}
	}
	return parents
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
