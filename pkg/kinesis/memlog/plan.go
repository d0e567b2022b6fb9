package memlog

import (
	"cmp"
	"slices"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// plan is a reshard being prepared: splits and merges applied to a copy of a stream's shard set,
// then made real at once by commit, so puts, reads and listings see the stream either before or
// after the whole reshard, never half way through one. UpdateShardCount is a plan of many steps;
// a shard created and closed within one plan is published already closed and empty, as AWS's
// short-lived intermediate shards are.
//
// The caller holds l.mu from building the plan to committing it, so plans of a Log never overlap.
type plan struct {
	st     *stream
	old    *shardSet
	now    int64      // Unix milliseconds: the shards' creation and closing time
	all    []*shard   // old.all, then the shards the plan creates
	open   []*shard   // the open shards after the steps so far, by starting hash key
	closes []closeOne // the shards the steps close, in order
}

// closeOne is one shard a plan closes and what replaces it.
type closeOne struct {
	sh       *shard
	children []types.ChildShard
}

func newPlan(st *stream, now int64) *plan {
	old := st.shards.Load()
	return &plan{st: st, old: old, now: now, all: slices.Clip(old.all), open: slices.Clone(old.open)}
}

// isOpen reports whether sh is open after the steps so far.
func (p *plan) isOpen(sh *shard) bool {
	i := p.openIndex(sh.hashes.start)
	return i < len(p.open) && p.open[i] == sh
}

// openIndex is the position in p.open of the open shard whose range holds h.
func (p *plan) openIndex(h hashKey) int {
	i := sort.Search(len(p.open), func(i int) bool { return p.open[i].hashes.start.cmp(h) > 0 })
	return max(i-1, 0)
}

// add creates the next shard (ids are never reused: its index is the number of shards so far).
func (p *plan) add(r hashRange, parent, adjacent string) *shard {
	sh := newShard(len(p.all), p.st.incarnation, r, p.now)
	sh.parent, sh.adjacentParent = parent, adjacent
	p.all = append(p.all, sh)
	return sh
}

// split closes the open shard sh and opens two children: [start, at-1] and [at, end]. at must
// satisfy start < at <= end.
func (p *plan) split(sh *shard, at hashKey) (left, right *shard) {
	i := p.openIndex(sh.hashes.start)
	left = p.add(newHashRange(sh.hashes.start, at.prev()), sh.id, "")
	right = p.add(newHashRange(at, sh.hashes.end), sh.id, "")
	p.open = slices.Replace(p.open, i, i+1, left, right)
	p.closes = append(p.closes, closeOne{sh: sh, children: []types.ChildShard{
		childShard(left, sh.id), childShard(right, sh.id),
	}})
	return left, right
}

// merge closes the open, adjacent shards sh (the ShardToMerge, whose id becomes the child's
// ParentShardId) and adjacent (its AdjacentParentShardId), in either order of hash keys, and
// opens the child that owns both ranges.
func (p *plan) merge(sh, adjacent *shard) *shard {
	lo, hi := sh, adjacent
	if hi.hashes.start.cmp(lo.hashes.start) < 0 {
		lo, hi = hi, lo
	}
	i := p.openIndex(lo.hashes.start)
	child := p.add(newHashRange(lo.hashes.start, hi.hashes.end), sh.id, adjacent.id)
	p.open = slices.Replace(p.open, i, i+2, child)
	cs := []types.ChildShard{childShard(child, sh.id, adjacent.id)}
	p.closes = append(p.closes, closeOne{sh: sh, children: cs}, closeOne{sh: adjacent, children: cs})
	return child
}

func childShard(sh *shard, parents ...string) types.ChildShard {
	return types.ChildShard{
		ShardId:      ptr(sh.id),
		ParentShards: parents,
		HashKeyRange: &types.HashKeyRange{StartingHashKey: ptr(sh.hashes.startStr), EndingHashKey: ptr(sh.hashes.endStr)},
	}
}

// rescale plans UpdateShardCount's UNIFORM_SCALING to n shards as a sequence of splits and
// merges, so each resulting shard has at most a parent and an adjacent parent: first every open
// shard is split at each boundary of the n uniform ranges (those CreateStream would make) that
// falls inside it, then the pieces within each uniform range are merged, adjacent pairs at a
// time, until one shard owns the range.
func (p *plan) rescale(n int) {
	targets := splitHashSpace(n)
	for _, t := range targets[1:] {
		if sh := p.open[p.openIndex(t.start)]; sh.hashes.start != t.start {
			p.split(sh, t.start)
		}
	}
	for _, t := range targets {
		for {
			first := p.openIndex(t.start)
			last := p.openIndex(t.end)
			if first == last {
				break
			}
			pieces := slices.Clone(p.open[first : last+1])
			for i := 0; i+1 < len(pieces); i += 2 {
				p.merge(pieces[i], pieces[i+1])
			}
		}
	}
}

// commit makes the plan real. It locks the existing shards that close (in index order; a put or a
// read holds one shard lock at a time, so this cannot deadlock), closes them, publishes the new
// set, and only then unlocks. A put waiting on a closing shard therefore finds it closed and the
// new set already there to route by, and no record lands in a shard after its
// EndingSequenceNumber.
func (p *plan) commit() {
	var locked []*shard
	for _, c := range p.closes {
		if c.sh.index < len(p.old.all) {
			locked = append(locked, c.sh)
		}
	}
	slices.SortFunc(locked, func(a, b *shard) int { return cmp.Compare(a.index, b.index) })
	for _, sh := range locked {
		sh.mu.Lock()
	}
	state := make([]shardState, len(p.all))
	copy(state, p.old.state)
	for _, c := range p.closes {
		// Shards the plan created are not published yet, so nothing else can see them.
		c.sh.closed, c.sh.children = true, c.children
		state[c.sh.index] = shardState{endSeq: p.endSeq(c.sh), closed: p.now}
	}
	p.st.shards.Store(&shardSet{all: p.all, open: p.open, state: state})
	for _, sh := range locked {
		sh.mu.Unlock()
	}
}

// endSeq is the EndingSequenceNumber of a shard closing now: that of its newest record, so a
// consumer that checkpointed it can tell it has read the shard to its end. A shard closed empty
// has none, so it ends with the number its first record would have had (ordinal 1): just above
// its StartingSequenceNumber, in the same format, and never the number of any record. The
// caller holds sh.mu, or sh is not published yet.
func (p *plan) endSeq(sh *shard) string {
	return formatSeq(p.st.incarnation, uint64(sh.index), max(sh.last, 1))
}
