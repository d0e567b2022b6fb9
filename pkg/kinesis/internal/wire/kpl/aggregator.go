package kpl

import (
	"crypto/md5"

	"google.golang.org/protobuf/encoding/protowire"
)

// DefaultMaxSize is the limit an Aggregator uses when none is given: 1 MiB, the Kinesis limit on
// a record's data plus its partition key.
const DefaultMaxSize = 1 << 20

// Aggregator packs user records into one KPL aggregated record, for a publisher.
//
// The Kinesis record that carries the aggregate should use PartitionKey and ExplicitHashKey,
// which are those of the first user record, so that the aggregate goes to the shard the first
// record would have gone to on its own. (The KPL itself sends a one-byte partition key and, as
// the explicit hash key, the first record's hash key: its explicit hash key, or else the MD5 of
// its partition key in decimal. That routes the same way; reusing the first record's keys
// spares computing the hash, at the cost of counting a longer partition key against MaxSize.)
//
// Consumers such as the KCL drop user records whose hash key falls outside the hash key range of
// the shard they were read from, so the caller must only aggregate records bound for the same
// shard: records with the same partition key and explicit hash key are always safe, others only
// if the caller knows the stream's shard map.
//
// The zero value is ready to use, with limit DefaultMaxSize. An Aggregator is not safe for
// concurrent use.
type Aggregator struct {
	maxSize int

	// pkIndex and ehkIndex map each key to its index in the table, so that records sharing a
	// key store it once.
	pkIndex  map[string]uint64
	ehkIndex map[string]uint64
	pkTable  []string
	ehkTable []string
	// tablesSize is the encoded size of both tables.
	tablesSize int
	// records holds the encoded records field (tag, length and Record message) of every record
	// added, in order. Encoding at Add copies the data, so the caller may reuse its buffer, and
	// leaves Build only the tables to encode; Record messages do not depend on the tables
	// beyond the indices, which are fixed when the record is added.
	records []byte
	n       int

	firstPK, firstEHK string
}

// NewAggregator returns an Aggregator that keeps the aggregate, together with the partition key
// of the Kinesis record that carries it, within maxSize bytes. A maxSize of zero or less means
// DefaultMaxSize; a stream configured for larger records may use a larger limit.
func NewAggregator(maxSize int) *Aggregator {
	return &Aggregator{maxSize: maxSize}
}

// MaxSize returns the limit on Size plus the length of PartitionKey.
func (a *Aggregator) MaxSize() int {
	if a.maxSize <= 0 {
		return DefaultMaxSize
	}
	return a.maxSize
}

// Add appends a user record and reports whether it did. It refuses, and changes nothing, when the
// record would take Size plus the length of PartitionKey over MaxSize: the caller should then
// Build and send the aggregate, Reset, and add the record again. A record refused by an empty
// Aggregator is too large to aggregate at all.
//
// An explicitHashKey of "" means the record has none. Add does not validate keys; Kinesis
// requires a partition key of 1 to 256 characters and an explicit hash key that is a decimal
// number below 2^128, and the caller is expected to have checked them. data is copied.
func (a *Aggregator) Add(partitionKey, explicitHashKey string, data []byte) bool {
	pkIdx, pkNew := lookup(a.pkIndex, partitionKey, len(a.pkTable))
	grow := 0
	if pkNew {
		grow += tableEntrySize(fieldPartitionKeyTable, partitionKey)
	}
	var ehkIdx uint64
	hasEHK, ehkNew := explicitHashKey != "", false
	if hasEHK {
		ehkIdx, ehkNew = lookup(a.ehkIndex, explicitHashKey, len(a.ehkTable))
		if ehkNew {
			grow += tableEntrySize(fieldExplicitHashKeyTable, explicitHashKey)
		}
	}
	recLen := recordSize(pkIdx, hasEHK, ehkIdx, len(data))
	grow += protowire.SizeTag(fieldRecords) + protowire.SizeBytes(recLen)

	carrier := a.firstPK
	if a.n == 0 {
		carrier = partitionKey
		grow += overhead
	}
	if a.Size()+grow+len(carrier) > a.MaxSize() {
		return false
	}

	if pkNew {
		if a.pkIndex == nil {
			a.pkIndex = make(map[string]uint64)
		}
		a.pkIndex[partitionKey] = pkIdx
		a.pkTable = append(a.pkTable, partitionKey)
		a.tablesSize += tableEntrySize(fieldPartitionKeyTable, partitionKey)
	}
	if ehkNew {
		if a.ehkIndex == nil {
			a.ehkIndex = make(map[string]uint64)
		}
		a.ehkIndex[explicitHashKey] = ehkIdx
		a.ehkTable = append(a.ehkTable, explicitHashKey)
		a.tablesSize += tableEntrySize(fieldExplicitHashKeyTable, explicitHashKey)
	}
	b := protowire.AppendTag(a.records, fieldRecords, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(recLen))
	b = protowire.AppendTag(b, fieldPartitionKeyIndex, protowire.VarintType)
	b = protowire.AppendVarint(b, pkIdx)
	if hasEHK {
		b = protowire.AppendTag(b, fieldExplicitHashKeyIndex, protowire.VarintType)
		b = protowire.AppendVarint(b, ehkIdx)
	}
	b = protowire.AppendTag(b, fieldData, protowire.BytesType)
	a.records = protowire.AppendBytes(b, data)
	if a.n == 0 {
		a.firstPK, a.firstEHK = partitionKey, explicitHashKey
	}
	a.n++
	return true
}

// Len returns the number of user records added since the last Reset.
func (a *Aggregator) Len() int { return a.n }

// Size returns the exact length of the record Build would return now, 0 when empty. It is kept
// up to date by Add rather than computed by encoding.
func (a *Aggregator) Size() int {
	if a.n == 0 {
		return 0
	}
	return overhead + a.tablesSize + len(a.records)
}

// PartitionKey returns the partition key the Kinesis record carrying the aggregate should use:
// that of the first user record, or "" when empty.
func (a *Aggregator) PartitionKey() string { return a.firstPK }

// ExplicitHashKey returns the explicit hash key the Kinesis record carrying the aggregate should
// use: that of the first user record, or "" when it had none and the carrying record should
// have none either.
func (a *Aggregator) ExplicitHashKey() string { return a.firstEHK }

// Build returns the aggregated record: magic, AggregatedRecord message and MD5 digest, with each
// distinct key stored once in its table. It returns nil when no record was added, because an
// aggregate of no records is invalid. The result is a new slice, unaffected by later calls; Build
// does not reset the Aggregator.
//
// A caller holding a single record may prefer to send it as it is, as the KPL does: it saves
// the aggregation overhead, and consumers deliver raw and aggregated records alike.
func (a *Aggregator) Build() []byte {
	if a.n == 0 {
		return nil
	}
	out := make([]byte, 0, a.Size())
	out = append(out, magic[:]...)
	// The tables go first and the records after them, in field number order, as the KPL writes
	// them; parsers must accept any order, but a hand-written one might not.
	for _, k := range a.pkTable {
		out = protowire.AppendTag(out, fieldPartitionKeyTable, protowire.BytesType)
		out = protowire.AppendString(out, k)
	}
	for _, k := range a.ehkTable {
		out = protowire.AppendTag(out, fieldExplicitHashKeyTable, protowire.BytesType)
		out = protowire.AppendString(out, k)
	}
	out = append(out, a.records...)
	sum := md5.Sum(out[magicLen:])
	return append(out, sum[:]...)
}

// Reset empties the Aggregator for the next aggregate, keeping its limit and its buffers.
func (a *Aggregator) Reset() {
	clear(a.pkIndex)
	clear(a.ehkIndex)
	clear(a.pkTable) // drop the references to the strings, not just the length
	clear(a.ehkTable)
	a.pkTable, a.ehkTable = a.pkTable[:0], a.ehkTable[:0]
	a.tablesSize = 0
	a.records = a.records[:0]
	a.n = 0
	a.firstPK, a.firstEHK = "", ""
}

// lookup returns the index of key in a table of size n indexed by index, and whether it is new
// and would be appended at that index.
func lookup(index map[string]uint64, key string, n int) (idx uint64, isNew bool) {
	if i, ok := index[key]; ok {
		return i, false
	}
	return uint64(n), true
}

// tableEntrySize is the encoded size of one entry of a key table.
func tableEntrySize(num protowire.Number, key string) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(len(key))
}

// recordSize is the encoded size of a Record message, without its own tag and length.
func recordSize(pkIdx uint64, hasEHK bool, ehkIdx uint64, dataLen int) int {
	n := protowire.SizeTag(fieldPartitionKeyIndex) + protowire.SizeVarint(pkIdx) +
		protowire.SizeTag(fieldData) + protowire.SizeBytes(dataLen)
	if hasEHK {
		n += protowire.SizeTag(fieldExplicitHashKeyIndex) + protowire.SizeVarint(ehkIdx)
	}
	return n
}
