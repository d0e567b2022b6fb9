package memlog

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// PutRecord stores one record in the shard its partition key (or ExplicitHashKey) routes to. The
// Data bytes are copied, so the caller may reuse its buffer. SequenceNumberForOrdering is checked
// but has nothing to do: sequence numbers already increase strictly within a shard.
func (l *Log) PutRecord(ctx context.Context, in *awskinesis.PutRecordInput, _ ...func(*awskinesis.Options)) (*awskinesis.PutRecordOutput, error) {
	if in == nil {
		in = &awskinesis.PutRecordInput{}
	}
	call := Call{Op: "PutRecord", Stream: refName(in.StreamName, in.StreamARN)}
	call.ShardID = l.peekShard(call.Stream, in.PartitionKey, in.ExplicitHashKey)
	if err := l.before(ctx, call); err != nil {
		return nil, err
	}
	var c checks
	r := l.parseRef(&c, in.StreamName, in.StreamARN)
	c.partitionKey(top("partitionKey"), in.PartitionKey)
	c.data(top("data"), in.Data)
	if err := c.err(); err != nil {
		return nil, err
	}
	st, err := l.find(r)
	if err != nil {
		return nil, err
	}
	if err := l.checkSize(st, top("data"), in.Data, *in.PartitionKey); err != nil {
		return nil, err
	}
	if s := in.SequenceNumberForOrdering; s != nil {
		if _, ok := parseSeq(*s); !ok && *s != "0" {
			return nil, errInvalid("ExclusiveMinimumSequenceNumber %s used in PutRecord on stream %s under account %s is invalid.",
				*s, st.name, l.account)
		}
	}
	h, err := routeHash(*in.PartitionKey, in.ExplicitHashKey)
	if err != nil {
		return nil, err
	}
	if isTrue(in.DryRun) {
		return nil, errDryRun()
	}
	now, size := l.now(), len(in.Data)+len(*in.PartitionKey)
	st.usage.putCalls.Add(1)
	if l.quotas != nil {
		if routed := st.shards.Load().route(h); !l.quotas.admitWrite(routed, now, size) {
			st.usage.throttledRecords.Add(1)
			return nil, l.errShardRate(st, routed)
		}
	}
	sh, seq := st.appendOne(h, in.Data, *in.PartitionKey, now.UnixMilli())
	st.usage.stored(1, int64(size), payloadUnits(size))
	return &awskinesis.PutRecordOutput{SequenceNumber: &seq, ShardId: ptr(sh.id), EncryptionType: types.EncryptionTypeNone}, nil
}

// PutRecords stores a batch of records, each in the shard its key routes to, in request order
// within each shard. The request is validated whole first (any violation fails it all, as on
// AWS); then entries fail one by one only through SetPutRecordsEntryFault. All Data bytes are
// copied into one allocation per call.
func (l *Log) PutRecords(ctx context.Context, in *awskinesis.PutRecordsInput, _ ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	if in == nil {
		in = &awskinesis.PutRecordsInput{}
	}
	if err := l.before(ctx, Call{Op: "PutRecords", Stream: refName(in.StreamName, in.StreamARN)}); err != nil {
		return nil, err
	}
	st, err := l.checkPutRecords(in)
	if err != nil {
		return nil, err
	}
	set := st.shards.Load()
	routes := make([]*shard, len(in.Records))
	hashes := make([]hashKey, len(in.Records))
	for i := range in.Records {
		e := &in.Records[i]
		h, err := routeHash(*e.PartitionKey, e.ExplicitHashKey)
		if err != nil {
			return nil, err
		}
		routes[i], hashes[i] = set.route(h), h
	}
	if isTrue(in.DryRun) {
		return nil, errDryRun()
	}
	return l.storeBatch(st, in.Records, routes, hashes), nil
}

// checkPutRecords validates a PutRecords request and finds its stream.
func (l *Log) checkPutRecords(in *awskinesis.PutRecordsInput) (*stream, error) {
	var c checks
	r := l.parseRef(&c, in.StreamName, in.StreamARN)
	recs := in.Records
	switch {
	case recs == nil:
		c.fail(nil, top("records"), "not be null")
	case len(recs) == 0:
		c.fail(ptr("[]"), top("records"), "have length greater than or equal to 1")
	case len(recs) > maxPutRecords:
		c.failBlob(top("records"), "have length less than or equal to "+strconv.Itoa(maxPutRecords))
	}
	total := 0
	for i := 0; i < len(recs) && len(recs) <= maxPutRecords; i++ {
		e := &recs[i]
		c.partitionKey(field{name: "partitionKey", entry: i + 1}, e.PartitionKey)
		c.data(field{name: "data", entry: i + 1}, e.Data)
		total += len(e.Data) + len(deref(e.PartitionKey))
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	if total > maxPutBytes {
		return nil, errInvalid("Records size exceeds 5 MB limit")
	}
	st, err := l.find(r)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		if err := l.checkSize(st, field{name: "data", entry: i + 1}, recs[i].Data, *recs[i].PartitionKey); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// checkSize holds a record to its stream's maximum record size: Data alone over it is a schema
// violation (ValidationException), Data plus partition key over it an InvalidArgumentException.
func (l *Log) checkSize(st *stream, f field, data []byte, key string) error {
	switch {
	case len(data) > st.maxRecord:
		var c checks
		c.failBlob(f, "have length less than or equal to "+strconv.Itoa(st.maxRecord))
		return c.err()
	case len(data)+len(key) > st.maxRecord:
		return errInvalid("Record size (data + partition key) of %d bytes exceeds the maximum record size of %d bytes for stream %s under account %s.",
			len(data)+len(key), st.maxRecord, st.name, l.account)
	}
	return nil
}

// routeHash is the hash key that places a record: its ExplicitHashKey if given, else the MD5 of
// its partition key.
func routeHash(key string, explicit *string) (hashKey, error) {
	if explicit == nil {
		return partitionHash(key), nil
	}
	h, ok := parseHashKey(*explicit)
	if !ok {
		return hashKey{}, errInvalid("Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. Specified value was %s", *explicit)
	}
	return h, nil
}

// peekShard is the shard a PutRecord would go to, for the fault hook; "" if it cannot tell.
func (l *Log) peekShard(stream string, key, explicit *string) string {
	st := l.lookup(stream)
	if st == nil || key == nil {
		return ""
	}
	h, err := routeHash(*key, explicit)
	if err != nil {
		return ""
	}
	return st.shards.Load().route(h).id
}

// storeBatch applies entry faults, then appends the surviving entries, one shard at a time
// under that shard's lock, and reports each entry's outcome in request order. hashes are the
// entries' hash keys, to route again the entries of a shard that a reshard closed meanwhile.
func (l *Log) storeBatch(st *stream, entries []types.PutRecordsRequestEntry, routes []*shard, hashes []hashKey) *awskinesis.PutRecordsOutput {
	n := len(entries)
	res := make([]types.PutRecordsResultEntry, n)
	now := l.now()
	failed := l.entryFaults(st, entries, routes, res)
	failed += l.writeQuota(st, entries, routes, res, now)
	order := make([]int32, 0, n-failed)
	size, stored, units := 0, 0, int64(0)
	for i, sh := range routes {
		if sh != nil {
			order = append(order, int32(i))
			size += len(entries[i].Data)
			rec := len(entries[i].Data) + len(*entries[i].PartitionKey)
			stored += rec
			units += payloadUnits(rec)
		}
	}
	st.usage.putCalls.Add(1)
	st.usage.stored(int64(len(order)), int64(stored), units)
	byShard := func(a, b int32) int { return cmp.Compare(routes[a].index, routes[b].index) }
	slices.SortStableFunc(order, byShard)
	buf := make([]byte, 0, size)
	seqs := make([]string, n)
	ids := make([]string, n)
	nowMs := now.UnixMilli()
	for len(order) > 0 {
		sh := routes[order[0]]
		k := 1
		for k < len(order) && routes[order[k]] == sh {
			k++
		}
		group := order[:k]
		var stored bool
		if buf, stored = st.appendGroup(sh, entries, group, buf, nowMs, seqs); !stored {
			// sh closed after routing. The set that closed it was published first, so routing
			// again finds the open shards now holding these keys; the stable sort keeps request
			// order within each of them.
			set := st.shards.Load()
			for _, i := range group {
				routes[i] = set.route(hashes[i])
			}
			slices.SortStableFunc(group, byShard)
			continue
		}
		order = order[k:]
	}
	for i, sh := range routes {
		if sh != nil {
			ids[i] = sh.id
			res[i].ShardId, res[i].SequenceNumber = &ids[i], &seqs[i]
		}
	}
	return &awskinesis.PutRecordsOutput{
		Records:           res,
		FailedRecordCount: ptr(int32(failed)),
		EncryptionType:    types.EncryptionTypeNone,
	}
}

// entryFaults runs the per-entry fault hook, marking failed entries in res and clearing their
// routes. It returns how many failed.
func (l *Log) entryFaults(st *stream, entries []types.PutRecordsRequestEntry, routes []*shard, res []types.PutRecordsResultEntry) int {
	f := l.entryFault.Load()
	if f == nil || *f == nil {
		return 0
	}
	failed := 0
	for i := range entries {
		code, msg := (*f)(st.name, i, entries[i])
		if code == "" {
			continue
		}
		if msg == "" {
			msg = l.entryFaultMessage(code, st.name, routes[i].id)
		}
		res[i].ErrorCode, res[i].ErrorMessage = ptr(code), ptr(msg)
		routes[i] = nil
		failed++
	}
	return failed
}

// writeQuota holds the entries that survived the fault hook to their shards' write quotas, in
// request order, as AWS does: an entry over its shard's quota fails alone (marked in res, its
// route cleared) and the others go on. It returns how many failed. A shard that a reshard closes
// after routing passes its entries to its children uncharged, a moment's leeway that does not
// matter to a test.
func (l *Log) writeQuota(st *stream, entries []types.PutRecordsRequestEntry, routes []*shard, res []types.PutRecordsResultEntry, now time.Time) int {
	if l.quotas == nil {
		return 0
	}
	failed := 0
	for i, sh := range routes {
		if sh == nil || l.quotas.admitWrite(sh, now, len(entries[i].Data)+len(*entries[i].PartitionKey)) {
			continue
		}
		const code = "ProvisionedThroughputExceededException"
		res[i].ErrorCode, res[i].ErrorMessage = ptr(code), ptr(l.entryFaultMessage(code, st.name, sh.id))
		routes[i] = nil
		failed++
	}
	st.usage.throttledRecords.Add(int64(failed))
	return failed
}

// appendGroup copies the payloads of entries idx (all routed to sh, in request order) into buf,
// then appends them to sh, storing each one's sequence number in seqs. The sequence numbers of
// the group share one string. It returns buf extended by the payloads, and true; or, if sh has
// closed since the entries were routed, buf as it was and false, having stored nothing.
func (st *stream) appendGroup(sh *shard, entries []types.PutRecordsRequestEntry, idx []int32, buf []byte, nowMs int64, seqs []string) ([]byte, bool) {
	off := len(buf)
	for _, i := range idx {
		buf = append(buf, entries[i].Data...)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return buf[:off], false
	}
	seqBuf := make([]byte, 0, seqLen*len(idx))
	arrival := sh.arrivalLocked(nowMs)
	for k := range idx {
		seqBuf = appendSeq(seqBuf, st.incarnation, uint64(sh.index), sh.last+1+uint64(k))
	}
	all := string(seqBuf)
	for k, i := range idx {
		e := &entries[i]
		end := off + len(e.Data)
		seq := all[k*seqLen : (k+1)*seqLen]
		sh.appendLocked(record{data: buf[off:end:end], key: *e.PartitionKey, seq: seq, arrival: arrival})
		seqs[i] = seq
		off = end
	}
	sh.wakeLocked()
	return buf, true
}

// appendOne stores a copy of one record in the open shard that holds hash key h, and returns
// that shard and the record's sequence number.
func (st *stream) appendOne(h hashKey, data []byte, key string, nowMs int64) (*shard, string) {
	d := bytes.Clone(data)
	if d == nil {
		d = []byte{}
	}
	sh := st.shards.Load().route(h)
	sh.mu.Lock()
	for sh.closed {
		// A reshard closed sh after it was routed to. It published the set that replaced sh
		// before closing it, so routing again finds an open shard (unless yet another reshard
		// closed that one too, and round we go).
		sh.mu.Unlock()
		sh = st.shards.Load().route(h)
		sh.mu.Lock()
	}
	defer sh.mu.Unlock()
	seq := formatSeq(st.incarnation, uint64(sh.index), sh.last+1)
	sh.appendLocked(record{data: d[:len(d):len(d)], key: key, seq: seq, arrival: sh.arrivalLocked(nowMs)})
	sh.wakeLocked()
	return sh, seq
}
