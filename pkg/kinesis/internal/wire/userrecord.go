package wire

import (
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/kpl"
)

// UserRecord is one thing a reader delivers: a Kinesis record, or one user record of a KPL
// aggregate. A user record has its own partition key and data, and the aggregate's sequence
// number and arrival time.
type UserRecord struct {
	Rec        types.Record
	Seq        string // the Kinesis record's sequence number (the aggregate's, for a user record)
	Aggregated bool
	Sub        int  // index in the aggregate (the sub-sequence number)
	Last       bool // the aggregate's last user record: once it is done, the whole record is
	// NotAggregate is why a record that starts with the KPL magic is not a valid aggregate;
	// it is then delivered whole, as a raw record, as the KCL does.
	NotAggregate error
}

// Position is where the user record sits in the shard, as a checkpoint: the sequence number,
// or, for a user record of an aggregate other than its last, the sequence number, ':' and the
// sub-sequence number. A restart from such a checkpoint resumes inside the aggregate instead of
// replaying all of it; the last user record's checkpoint is the plain sequence number, since
// then the whole Kinesis record is done.
func (u *UserRecord) Position() string {
	if !u.Aggregated || u.Last {
		return u.Seq
	}
	return aws.ToString(u.Rec.SequenceNumber) // seq:sub, as Expand wrote it
}

// ParsePosition splits a checkpoint into its sequence number and, inside an aggregate, the
// sub-sequence number of the last user record done (inside false for a plain sequence number).
func ParsePosition(cp string) (seq string, sub int, inside bool) {
	seq, subText, found := strings.Cut(cp, ":")
	if !found {
		return cp, 0, false
	}
	n, err := strconv.Atoi(subText)
	if err != nil || n < 0 {
		// Not a checkpoint this package wrote; the whole record counts as done.
		return seq, 0, false
	}
	return seq, n, true
}

// Expand turns a GetRecords batch into user records: KPL aggregates become their user records
// (unless keepAggregates), and a resume inside an aggregate drops the user records of that
// aggregate up to and including skipThrough. It returns nil when the batch holds no aggregate
// to unpack: the reader then delivers the batch's records as they are, without a copy of each.
func Expand(records []types.Record, keepAggregates bool, skipSeq string, skipThrough int) []UserRecord {
	if keepAggregates || !slices.ContainsFunc(records, func(rec types.Record) bool { return kpl.IsAggregated(rec.Data) }) {
		return nil
	}
	out := make([]UserRecord, 0, len(records))
	for _, rec := range records {
		if keepAggregates || !kpl.IsAggregated(rec.Data) {
			out = append(out, UserRecord{Rec: rec, Seq: aws.ToString(rec.SequenceNumber)})
			continue
		}
		users, err := kpl.Deaggregate(rec.Data)
		if err != nil {
			out = append(out, UserRecord{Rec: rec, Seq: aws.ToString(rec.SequenceNumber), NotAggregate: err})
			continue
		}
		seq := aws.ToString(rec.SequenceNumber)
		skipping := skipSeq != "" && seq == skipSeq
		for i, ur := range users {
			if skipping && ur.SubSequenceNumber <= skipThrough {
				continue
			}
			// The Unmarshaler sees the user record's own key, and as its sequence number the
			// aggregate's with the sub-sequence number appended, so that what it derives from
			// the sequence number (the UUID of a raw payload) is unique per user record.
			key, userSeq := ur.PartitionKey, seq+":"+strconv.Itoa(ur.SubSequenceNumber)
			out = append(out, UserRecord{
				Rec: types.Record{
					Data:                        ur.Data,
					PartitionKey:                &key,
					SequenceNumber:              &userSeq,
					ApproximateArrivalTimestamp: rec.ApproximateArrivalTimestamp,
					EncryptionType:              rec.EncryptionType,
				},
				Seq:        seq,
				Aggregated: true,
				Sub:        ur.SubSequenceNumber,
				Last:       i == len(users)-1,
			})
		}
	}
	return out
}
