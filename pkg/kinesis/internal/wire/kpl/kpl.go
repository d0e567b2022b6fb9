package kpl

import (
	"bytes"
	"crypto/md5"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

const (
	magicLen  = 4
	digestLen = md5.Size
	// overhead is what an aggregate adds around its protobuf message.
	overhead = magicLen + digestLen
)

var magic = [magicLen]byte{0xF3, 0x89, 0x9A, 0xC2}

// Field numbers of the AggregatedRecord, Record and Tag messages.
const (
	fieldPartitionKeyTable    protowire.Number = 1
	fieldExplicitHashKeyTable protowire.Number = 2
	fieldRecords              protowire.Number = 3

	fieldPartitionKeyIndex    protowire.Number = 1
	fieldExplicitHashKeyIndex protowire.Number = 2
	fieldData                 protowire.Number = 3
	fieldTags                 protowire.Number = 4

	fieldTagKey   protowire.Number = 1
	fieldTagValue protowire.Number = 2
)

// Magic returns the four bytes that start every aggregated record. It returns an array rather
// than exposing a variable so that no caller can change the prefix for everybody else.
func Magic() [4]byte { return magic }

// IsAggregated reports whether data starts with the aggregation magic, whether or not the rest
// is a valid aggregate. Use it to skip Deaggregate for ordinary records cheaply; a record it
// accepts may still be rejected by Deaggregate, and is then an ordinary record too.
func IsAggregated(data []byte) bool {
	return len(data) >= magicLen && [magicLen]byte(data[:magicLen]) == magic
}

// Record is one user record unpacked from an aggregate.
type Record struct {
	// PartitionKey is the user record's own partition key, which usually differs from the
	// partition key of the Kinesis record that carried the aggregate.
	PartitionKey string
	// ExplicitHashKey is the user record's explicit hash key, normally a decimal number, or ""
	// if it has none.
	ExplicitHashKey string
	// Data aliases the input to Deaggregate rather than copying it, because data is the bulk of
	// an aggregate and a Kinesis client hands out buffers that are the caller's. Its
	// capacity equals its length, so appending to it can never overwrite the next record's
	// bytes; modifying it in place modifies the input.
	Data []byte
	// SubSequenceNumber is the record's zero-based position in the aggregate. Together with the
	// carrying record's sequence number it identifies the user record, as in the KCL.
	SubSequenceNumber int
}

// The reasons Deaggregate gives. Every one of them means the record is not a usable aggregate and
// should be delivered as a raw record, as the KCL does.
const (
	// ReasonNotAggregated: the record does not start with the magic.
	ReasonNotAggregated Reason = iota + 1
	// ReasonTooShort: the record has the magic but no room for a message and a checksum.
	ReasonTooShort
	// ReasonChecksum: the MD5 digest does not match the message.
	ReasonChecksum
	// ReasonMalformed: the message is not valid protobuf wire format (truncated, bad tag,
	// varint over 64 bits, unbalanced group, reserved wire type).
	ReasonMalformed
	// ReasonMissingField: a required field (Record.partition_key_index, Record.data, Tag.key)
	// is absent.
	ReasonMissingField
	// ReasonIndexOutOfRange: a key index points past the end of its table.
	ReasonIndexOutOfRange
	// ReasonNoRecords: the message holds no records, which no producer writes.
	ReasonNoRecords
)

// Deaggregate unpacks the user records of a KPL aggregated record, in order.
//
// It returns a *FormatError, and no records, if data is not a complete, valid aggregate: no
// magic, too short, wrong checksum, invalid protobuf, a missing required field, a key index
// outside its table, or no records at all. A consumer should then deliver data as one raw record,
// as the KCL does. Fields the format does not define are skipped, as protobuf requires, and so
// is a defined field sent with the wrong wire type.
//
// Deaggregate is meant for untrusted input: it never panics and sizes every allocation from
// fields it has already found in the input, so a hostile record costs memory in proportion to
// its own size. It makes at most four allocations whatever the number of records: the result,
// the two key tables, and one string holding all keys, which the PartitionKey and
// ExplicitHashKey fields share. Data is not copied: see Record.Data.
func Deaggregate(data []byte) ([]Record, error) {
	if !IsAggregated(data) {
		return nil, formatErr(ReasonNotAggregated, 0, "")
	}
	if len(data) <= overhead {
		return nil, formatErr(ReasonTooShort, len(data), "%d bytes, need more than %d", len(data), overhead)
	}
	msgEnd := len(data) - digestLen
	msg := data[magicLen:msgEnd]
	if sum := md5.Sum(msg); !bytes.Equal(sum[:], data[msgEnd:]) {
		return nil, formatErr(ReasonChecksum, msgEnd, "")
	}

	// The first pass checks the message's outer structure and counts what is in it, so that
	// the second can allocate exactly once for each table and for the result. The records are
	// decoded in a third pass, once the tables are complete: protobuf allows fields in any
	// order, so a record may come before the keys it refers to.
	var nPK, nEHK, nRec, keyBytes int
	err := walk(msg, magicLen, func(num protowire.Number, v []byte, _ int) error {
		switch num {
		case fieldPartitionKeyTable:
			nPK++
			keyBytes += len(v)
		case fieldExplicitHashKeyTable:
			nEHK++
			keyBytes += len(v)
		default:
			nRec++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if nRec == 0 {
		return nil, formatErr(ReasonNoRecords, magicLen, "")
	}

	var keys strings.Builder
	keys.Grow(keyBytes)
	pks := make([]string, 0, nPK)
	ehks := make([]string, 0, nEHK)
	// The first pass has checked the structure, so walk cannot fail from here on; its errors
	// are returned all the same, so that a mistake here shows up as an error, not a panic.
	err = walk(msg, magicLen, func(num protowire.Number, v []byte, _ int) error {
		switch num {
		case fieldPartitionKeyTable:
			pks = append(pks, appendKey(&keys, v))
		case fieldExplicitHashKeyTable:
			ehks = append(ehks, appendKey(&keys, v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	recs := make([]Record, 0, nRec)
	err = walk(msg, magicLen, func(num protowire.Number, v []byte, off int) error {
		if num != fieldRecords {
			return nil
		}
		r, err := decodeRecord(v, off, len(recs), pks, ehks)
		recs = append(recs, r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// walk calls fn with the value of each partition_key_table, explicit_hash_key_table and records
// field of the AggregatedRecord message msg, in order, and skips all other fields. off is the
// offset in the aggregate of each value, for error reports; base is that of msg.
func walk(msg []byte, base int, fn func(num protowire.Number, v []byte, off int) error) error {
	for b := msg; len(b) > 0; {
		at := base + len(msg) - len(b)
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireErr(at, n, "field tag")
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType &&
			(num == fieldPartitionKeyTable || num == fieldExplicitHashKeyTable || num == fieldRecords):
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n < 0 {
				return wireErr(at, n, "field %d", num)
			}
			if err := fn(num, v, base+len(msg)-len(b)+n-len(v)); err != nil {
				return err
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return wireErr(at, n, "field %d", num)
			}
		}
		b = b[n:]
	}
	return nil
}

// appendKey copies key into keys and returns the copy. Every key shares the builder's buffer,
// which was grown to hold them all, so the tables cost one allocation rather than one per key;
// a string returned earlier stays valid even if the buffer were to grow, as a Builder never
// rewrites bytes it has written.
func appendKey(keys *strings.Builder, key []byte) string {
	start := keys.Len()
	keys.Write(key)
	return keys.String()[start:]
}

// decodeRecord decodes msg, the Record message at offset base in the aggregate, as the user
// record at position i.
func decodeRecord(msg []byte, base, i int, pks, ehks []string) (Record, error) {
	var (
		pkIdx, ehkIdx             uint64
		hasPK, hasEHK, hasData    bool
		data                      []byte
		pkIdxOff, ehkIdxOff, tagN int
	)
	for b := msg; len(b) > 0; {
		at := base + len(msg) - len(b)
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Record{}, wireErr(at, n, "record %d: field tag", i)
		}
		b = b[n:]
		// Later occurrences of a singular field override earlier ones, as protobuf specifies.
		switch {
		case num == fieldPartitionKeyIndex && typ == protowire.VarintType:
			pkIdx, n = protowire.ConsumeVarint(b)
			hasPK, pkIdxOff = true, at
		case num == fieldExplicitHashKeyIndex && typ == protowire.VarintType:
			ehkIdx, n = protowire.ConsumeVarint(b)
			hasEHK, ehkIdxOff = true, at
		case num == fieldData && typ == protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
			hasData = true
		case num == fieldTags && typ == protowire.BytesType:
			var tag []byte
			tag, n = protowire.ConsumeBytes(b)
			if n >= 0 {
				if err := checkTag(tag, base+len(msg)-len(b)+n-len(tag), i, tagN); err != nil {
					return Record{}, err
				}
				tagN++
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return Record{}, wireErr(at, n, "record %d: field %d", i, num)
		}
		b = b[n:]
	}
	end := base + len(msg)
	switch {
	case !hasPK:
		return Record{}, formatErr(ReasonMissingField, end, "record %d: no partition_key_index", i)
	case !hasData:
		return Record{}, formatErr(ReasonMissingField, end, "record %d: no data", i)
	case pkIdx >= uint64(len(pks)):
		return Record{}, formatErr(ReasonIndexOutOfRange, pkIdxOff, "record %d: partition_key_index %d, partition key table size %d",
			i, pkIdx, len(pks))
	case hasEHK && ehkIdx >= uint64(len(ehks)):
		return Record{}, formatErr(ReasonIndexOutOfRange, ehkIdxOff, "record %d: explicit_hash_key_index %d, explicit hash key table size %d",
			i, ehkIdx, len(ehks))
	}
	r := Record{PartitionKey: pks[pkIdx], Data: data[:len(data):len(data)], SubSequenceNumber: i}
	if hasEHK {
		r.ExplicitHashKey = ehks[ehkIdx]
	}
	return r, nil
}

// checkTag checks that the Tag submessage msg, at offset base, is well formed and has its
// required key. The KCL rejects an aggregate with a bad tag, so Deaggregate does too, although
// it does not return tags.
func checkTag(msg []byte, base, rec, tag int) error {
	hasKey := false
	for b := msg; len(b) > 0; {
		at := base + len(msg) - len(b)
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return wireErr(at, n, "record %d, tag %d: field tag", rec, tag)
		}
		b = b[n:]
		switch {
		case (num == fieldTagKey || num == fieldTagValue) && typ == protowire.BytesType:
			_, n = protowire.ConsumeBytes(b)
			hasKey = hasKey || num == fieldTagKey
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return wireErr(at, n, "record %d, tag %d: field %d", rec, tag, num)
		}
		b = b[n:]
	}
	if !hasKey {
		return formatErr(ReasonMissingField, base+len(msg), "record %d, tag %d: no key", rec, tag)
	}
	return nil
}
