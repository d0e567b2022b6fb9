package kinesis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/shardmap"
)

// packer packs, with AggregateKPL, the single-message records of different Publish calls that
// go to one shard into KPL aggregates, as the KPL does: with the default partition keys (the
// message UUID) no two messages share a key, and packing by key alone would pack nothing.
//
// The KCL drops a user record whose hash key is outside the range of the shard it read it
// from, so records are packed by the shard their partition keys hash to, from the stream's
// open shards (ListShards). The map is loaded in the background at the stream's first request
// and again, at most once per mapReloadInterval, after Kinesis put a record in another shard
// than the map predicted (a reshard: the map is dropped at once). Until a map is in, or while
// ListShards fails (no kinesis:ListShards permission: retried with a growing wait), only
// records with the same partition key share an aggregate, which is always safe. A call's own
// messages with one key were packed by the call already (aggregateByKey); those aggregates go
// out as they are.
//
// After a split, a record packed by the old map in a request already out lands in one child
// with messages whose keys belong to the other. Their order against later messages of those
// keys, which go to the other child, is then lost (siblings are read in parallel), and the KCL
// drops them. docs/records.md says so. Every written entry is checked against the map (a shard
// it lacks, or another than it predicted, drops it), and a load is thrown away if an answer
// while it was out named a shard its listing does not have open (the listing may be from
// before a reshard), so the window is the requests out when Kinesis first answered with the
// new shards.
//
// Ownership: mu guards the map and its reload state; a sender reloads it (refresh) outside the
// dispatcher's lock, take reads a snapshot of it (begin) and put reports each answer to it
// (written), both under the dispatcher's mu: the dispatcher's mu, then the packer's, never the
// other way.
type packer struct {
	p      *Publisher
	stream string

	mu       sync.Mutex
	shards   shardmap.Map // the stream's open shards; empty if not known
	reloadAt time.Time    // when the map is due to be loaded; zero: not due (or a load is out)
	loadedAt time.Time    // when the last load began
	// answeredDuringLoad holds the shards Kinesis wrote to while a load is out; nil when
	// none is out.
	answeredDuringLoad map[string]bool
	failures           int  // loads failed in a row
	warned             bool // a failed load was logged
}

// mapReloadInterval is the least time between two loads of a stream's shard map; after
// failed loads the wait doubles, up to mapRetryMax.
const (
	mapReloadInterval = time.Second
	mapRetryMax       = time.Minute
)

func newPacker(p *Publisher, stream string) *packer {
	return &packer{p: p, stream: stream, reloadAt: time.Now()}
}

// refresh starts a load of the shard map in the background when one is due. No request
// waits for it: until it is in, records are packed by partition key, which is always safe.
// The loader is counted in p.senders (refresh runs in a sender, which is counted too, so
// Close is not past its wait) and ends with the publisher (p.stop).
func (k *packer) refresh() {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if k.reloadAt.IsZero() || now.Before(k.reloadAt) || k.p.stop.Err() != nil {
		return // not due, or the publisher is closing (a sender still draining)
	}
	k.reloadAt, k.loadedAt, k.answeredDuringLoad = time.Time{}, now, map[string]bool{}
	k.p.senders.Add(1)
	go func() {
		defer k.p.senders.Done()
		m, err := k.load()
		k.loaded(m, err)
	}()
}

// loaded records a load's outcome; a failed one is tried again after a backoff.
func (k *packer) loaded(m shardmap.Map, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	answered := k.answeredDuringLoad
	k.answeredDuringLoad = nil
	if err == nil && m.Len() == 0 {
		err = fmt.Errorf("ListShards of stream %q returned no open shard with a hash key range", k.stream)
	}
	if err == nil {
		for id := range answered {
			if !m.Has(id) { // the listing may be from before a reshard: load again
				k.reloadAt = k.loadedAt.Add(mapReloadInterval) // due at once if already past
				k.p.logger.Debug("AggregateKPL: a shard written to while the shard map loaded is not in its listing; loading it again",
					watermill.LogFields{"stream": k.stream, "shard": id})
				return
			}
		}
		k.shards, k.failures = m, 0
		return
	}
	k.failures++ // the map is empty: a load starts only without one
	k.reloadAt = time.Now().Add(min(mapReloadInterval<<min(k.failures-1, 6), mapRetryMax))
	if !k.warned {
		k.warned = true
		k.p.logger.Info("AggregateKPL: the stream's shard map could not be loaded; until it is, only messages with the same partition key share aggregated records (packing by shard, as the KPL does, needs kinesis:ListShards)",
			watermill.LogFields{"stream": k.stream, "err": err})
	}
}

// load lists the stream's open shards.
func (k *packer) load() (shardmap.Map, error) {
	var all []types.Shard
	in := &awskinesis.ListShardsInput{StreamName: &k.stream, ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}}
	for {
		ctx, cancel := context.WithTimeout(k.p.stop, k.p.config.RequestTimeout)
		page, err := k.p.config.Client.ListShards(ctx, in)
		cancel()
		if err != nil {
			return shardmap.Map{}, err
		}
		all = append(all, page.Shards...)
		if page.NextToken == nil {
			return shardmap.New(all), nil
		}
		in = &awskinesis.ListShardsInput{NextToken: page.NextToken}
	}
}

// written takes in where Kinesis wrote a request's entries: predicted is the shard the map
// said for each ("" without a map), res the answer. An entry in a shard the map lacks, or in
// another than predicted, shows a reshard: the map is dropped at once, so that records are
// packed by partition key only, and loaded again as soon as mapReloadInterval has passed since
// the last load. The shards written to while a load is out are kept for loaded to check its
// listing against.
func (k *packer) written(predicted []string, res []types.PutRecordsResultEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, r := range res {
		if r.ErrorCode != nil || r.ShardId == nil || i >= len(predicted) {
			continue
		}
		actual := *r.ShardId
		if k.answeredDuringLoad != nil {
			k.answeredDuringLoad[actual] = true
		}
		if k.shards.Len() > 0 && (!k.shards.Has(actual) || predicted[i] != "" && actual != predicted[i]) {
			k.misplaced(predicted[i], actual)
		}
	}
}

// misplaced drops the map after a record went to a shard the map lacks or another than it
// predicted; mu is held.
func (k *packer) misplaced(predicted, actual string) {
	if k.shards.Len() == 0 {
		return // dropped already: a reload is due or out
	}
	k.shards = shardmap.Map{}
	k.reloadAt = k.loadedAt.Add(mapReloadInterval) // due at once if already past
	k.p.logger.Debug("AggregateKPL: a record went to a shard the shard map lacks, or another than it said; reloading the map",
		watermill.LogFields{"stream": k.stream, "predicted": predicted, "shard": actual})
}

// begin starts packing one request.
func (k *packer) begin() *packing {
	k.mu.Lock()
	defer k.mu.Unlock()
	return &packing{shards: k.shards, open: map[string]*pack{}}
}

// packing is the aggregates of one request being built. A nil *packing packs nothing.
type packing struct {
	shards shardmap.Map
	packs  []*pack
	open   map[string]*pack // the aggregate each shard (or, without a map, key) fills now
}

type pack struct {
	shard   string // predicted shard; "" when packed by partition key
	agg     *kpl.Aggregator
	records []*pendingRecord
}

// count is the entries the aggregates will take.
func (g *packing) count() int {
	if g == nil {
		return 0
	}
	return len(g.packs)
}

// reserve is the request's bytes kept for what aggregates add beyond their records: each
// one's KPL framing and the partition key of the Kinesis record that carries it.
func (g *packing) reserve() int {
	if g == nil {
		return 0
	}
	return maxPutRecordsEntries * (256 + 32) // 256: the longest partition key
}

// add packs r, a record of one message, with the others bound for its shard; a new aggregate
// is begun only if mayOpen. It reports whether r was packed.
func (g *packing) add(r *pendingRecord, mayOpen bool) bool {
	if g == nil || r.members != nil {
		return false
	}
	key := *r.entry.PartitionKey
	target, shard := "key:"+key, ""
	if id, ok := g.shards.ShardOf(key); ok {
		target, shard = id, id
	}
	if pk := g.open[target]; pk != nil && pk.agg.Add(key, "", r.entry.Data) {
		pk.records = append(pk.records, r)
		return true
	}
	if !mayOpen {
		return false
	}
	pk := &pack{shard: shard, agg: kpl.NewAggregator(maxRecordSize)}
	if !pk.agg.Add(key, "", r.entry.Data) {
		return false // too large to aggregate: sent as it is
	}
	pk.records = append(pk.records, r)
	g.open[target], g.packs = pk, append(g.packs, pk)
	return true
}

// predict is the shard the map says r goes to; "" without a map (or with a nil *packing).
func (g *packing) predict(r *pendingRecord) string {
	if g == nil {
		return ""
	}
	id, _ := g.shards.ShardOf(*r.entry.PartitionKey)
	return id
}

// finish adds the aggregates to the request: an aggregate of one record goes as that record.
func (g *packing) finish(req *putRequest) {
	if g == nil {
		return
	}
	for _, pk := range g.packs {
		entry := pk.records[0].entry
		if len(pk.records) > 1 {
			key := pk.agg.PartitionKey()
			entry = types.PutRecordsRequestEntry{Data: pk.agg.Build(), PartitionKey: &key}
		}
		req.entries = append(req.entries, entry)
		req.records = append(req.records, pk.records)
		req.shards = append(req.shards, pk.shard)
	}
}
