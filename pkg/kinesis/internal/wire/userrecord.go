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
	Sub        int // index in the aggregate (the sub-sequence number)
	// NotAggregate is why a record that starts with the KPL magic is not a valid aggregate;
	// it is then delivered whole, as a raw record, as the KCL does.
	NotAggregate error
}

// ParsePosition splits a checkpoint into its sequence number and, inside an aggregate, the
// sub-sequence number of the last user record done (inside false for a plain sequence number).
// Reading resumes inside at the record seq itself: the user records of an aggregate there up
// to sub are done, and so is the whole record if it is not an aggregate (the KCL checkpoints
// a plain record as sub-sequence number 0; see DropDone).
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
		seq := aws.ToString(rec.SequenceNumber)
		skipping := skipSeq != "" && seq == skipSeq
		users, err := kpl.Deaggregate(rec.Data)
		if err != nil {
			if skipping {
				continue // delivered whole, as one record: (seq, any sub) says it is done
			}
			out = append(out, UserRecord{Rec: rec, Seq: seq, NotAggregate: err})
			continue
		}
		for _, ur := range users {
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
			})
		}
	}
	return out
}

// DropDone drops the first of records when a resume inside skipSeq (ParsePosition) read it
// and it is not a KPL aggregate: a checkpoint seq:sub of a plain record means the record is
// done (the KCL writes sub-sequence number 0 for one), and only an aggregate has user records
// left to deliver after it. An aggregate kept whole (KeepKPLAggregates) is delivered again:
// which of its user records are done is not the reader's to judge.
func DropDone(records []types.Record, skipSeq string) []types.Record {
	if skipSeq == "" || len(records) == 0 || aws.ToString(records[0].SequenceNumber) != skipSeq || kpl.IsAggregated(records[0].Data) {
		return records
	}
	return records[1:]
}

// RecordDone reports whether a checkpoint seq:sub inside the record rec at seq covers all of it:
// a plain record, or one with the KPL magic that is not a valid aggregate (delivered whole), is
// done at any sub; an aggregate is done once sub reaches its last user record.
func RecordDone(rec types.Record, sub int) bool {
	if !kpl.IsAggregated(rec.Data) {
		return true
	}
	users, err := kpl.Deaggregate(rec.Data)
	return err != nil || len(users)-1 <= sub
}
