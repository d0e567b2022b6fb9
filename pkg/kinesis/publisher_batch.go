package kinesis

import (
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
)

// pendingRecord is a message on its way out: its encoded entry and where it stands.
type pendingRecord struct {
	index int // position in the Publish call
	msg   *message.Message
	entry types.PutRecordsRequestEntry
	size  int // data + key, bytes

	// Set by the stream's dispatcher, under its mu, from submit until the record is settled;
	// the Publish call reads them once its submit returned.
	state     recordState
	call      *callWait // the call waiting for the record
	queuedAt  time.Time // when it was last queued (Linger counts from the oldest)
	written   bool      // Kinesis accepted the record
	err       error     // why the last attempt failed
	retryable bool      // err is one a retry may pass

	// members are the messages packed into this record when it is a KPL aggregate (index and
	// msg are then the first member's); nil for a record of one message.
	members []*pendingRecord
}

// messages are the messages a record carries: its members, or itself.
func (r *pendingRecord) messages() []*pendingRecord {
	if r.members != nil {
		return r.members
	}
	return []*pendingRecord{r}
}

// aggregateByKey packs the records of each partition key, in order, into KPL aggregates of up
// to maxRecordSize. An aggregate of one would only add overhead, so it stays a plain record;
// so does a record too large to fit in an aggregate with its framing.
func aggregateByKey(records []*pendingRecord) []*pendingRecord {
	byKey := map[string][]*pendingRecord{}
	var keys []string
	for _, r := range records {
		k := *r.entry.PartitionKey
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	out := make([]*pendingRecord, 0, len(keys))
	agg := kpl.NewAggregator(maxRecordSize)
	var members []*pendingRecord
	flush := func() {
		switch len(members) {
		case 0:
		case 1:
			out = append(out, members[0])
		default:
			key := agg.PartitionKey()
			data := agg.Build()
			out = append(out, &pendingRecord{
				index: members[0].index, msg: members[0].msg,
				entry:   types.PutRecordsRequestEntry{Data: data, PartitionKey: &key},
				size:    len(data) + len(key),
				members: members,
			})
		}
		agg.Reset()
		members = nil
	}
	for _, k := range keys {
		for _, r := range byKey[k] {
			if !agg.Add(k, "", r.entry.Data) {
				flush()
				if !agg.Add(k, "", r.entry.Data) {
					out = append(out, r)
					continue
				}
			}
			members = append(members, r)
		}
		flush()
	}
	return out
}

// rounds splits records so that each round holds at most one record per partition key, in
// the order given: record k of a key goes in round k. Writing the rounds one after another
// keeps per-key order whatever entries a PutRecords call rejects.
func rounds(records []*pendingRecord) [][]*pendingRecord {
	seen := make(map[string]int, len(records))
	var out [][]*pendingRecord
	for _, r := range records {
		k := *r.entry.PartitionKey
		n := seen[k]
		seen[k] = n + 1
		if n == len(out) {
			out = append(out, nil)
		}
		out[n] = append(out[n], r)
	}
	return out
}
