package getrecords

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithy "github.com/aws/smithy-go"
)

// maxRecords is the most records one GetRecords answer holds (its Limit's maximum): the guess
// that sizes the record slice never goes above it, whatever the first record's size suggests.
const maxRecords = 10_000

// Decode decodes the body of a GetRecords answer (awsJson 1.1, HTTP 200) into the output the
// SDK's own deserializer would return for it: same fields, same nil and empty slices, same
// strings (escapes included), same timestamps to the nanosecond, same errors for the bodies it
// refuses, all as *smithy.DeserializationError. body is not retained: the output's Data slices
// live in one buffer of their own and its strings in another, see the package documentation.
func Decode(body []byte) (*kinesis.GetRecordsOutput, error) {
	out := &kinesis.GetRecordsOutput{}
	if len(body) == 0 { // the SDK does not parse an empty body: it is an empty output
		return out, nil
	}
	d := decoder{scanner: scanner{b: body}}
	if err := d.output(out); err != nil {
		return nil, &smithy.DeserializationError{Err: err}
	}
	return out, nil
}

// decoder fills one output. Every Data slice it makes is carved from data (see reserve), every
// string from text (see keep), each allocated when first needed. The *string and *time.Time
// fields point into chunks of strs and times rather than one allocation each.
type decoder struct {
	scanner
	data  []byte // the Data slices' buffer
	text  []byte // the text arena: the strings' bytes, in chunks
	kept  int    // bytes of strings in the text arena's previous chunks (see textChunk)
	strs  []string
	times []time.Time
	guess int // records expected, from the first record's size; sizes the chunks
}

// name is a member name as the SDK compares it with its schema: unescaped.
func (d *decoder) name(raw []byte) []byte {
	if d.esc {
		return d.unquote(raw)
	}
	return raw
}

// object reads the object that comes next (what names it in an error) and calls each with the
// name of every member that is not null, unescaped, positioned at its value: the SDK leaves a
// member that is null unset. each must read the value.
func (d *decoder) object(what string, each func(name []byte) error) error {
	if err := d.openAs('{', what); err != nil {
		return err
	}
	for first := true; ; first = false {
		raw, more, err := d.member(first)
		if err != nil || !more {
			return err
		}
		if d.null() {
			continue
		}
		if err := each(d.name(raw)); err != nil {
			return err
		}
	}
}

// array reads the array that comes next and calls each, positioned at every element; a null
// element is left to each.
func (d *decoder) array(what string, each func() error) error {
	if err := d.openAs('[', what); err != nil {
		return err
	}
	for first := true; ; first = false {
		more, err := d.elem(first)
		if err != nil || !more {
			return err
		}
		if err := each(); err != nil {
			return err
		}
	}
}

// output reads the top-level object. Like the SDK, it stops at its closing brace: whatever
// follows is not read.
func (d *decoder) output(out *kinesis.GetRecordsOutput) error {
	return d.object("'{'", func(name []byte) (err error) {
		switch string(name) {
		case "Records":
			out.Records, err = d.records()
		case "NextShardIterator":
			out.NextShardIterator, err = d.newString()
		case "MillisBehindLatest":
			out.MillisBehindLatest, err = d.newInt64()
		case "ChildShards":
			out.ChildShards, err = d.childShards()
		default:
			err = d.skip()
		}
		return err
	})
}

// records reads the Records array; a null element is a zero Record, as in the SDK.
func (d *decoder) records() ([]types.Record, error) {
	var recs []types.Record
	if d.guess > 0 { // a second Records member: the first one's first record made the guess
		recs = make([]types.Record, 0, d.guess)
	}
	err := d.array("'[' (Records)", func() error {
		if recs == nil {
			return d.firstRecord(&recs)
		}
		recs = append(recs, types.Record{})
		if d.null() {
			return nil
		}
		return d.record(&recs[len(recs)-1])
	})
	if err != nil {
		return nil, err
	}
	if recs == nil {
		recs = []types.Record{}
	}
	return recs, nil
}

// firstRecord reads the first record, guesses from its size how many the answer holds (a
// quarter more, for records of uneven size) and makes recs with room for them: one allocation
// instead of a dozen.
func (d *decoder) firstRecord(recs *[]types.Record) error {
	var r types.Record
	start := d.i
	if !d.null() {
		if err := d.record(&r); err != nil {
			return err
		}
	}
	d.guess = min((len(d.b)-d.i)/(d.i-start+1)*5/4+1, maxRecords)
	*recs = append(make([]types.Record, 0, d.guess+1), r)
	return nil
}

func (d *decoder) record(r *types.Record) error {
	return d.object("'{' (a record)", func(name []byte) (err error) {
		switch string(name) {
		case "Data":
			r.Data, err = d.blob()
		case "PartitionKey":
			r.PartitionKey, err = d.newString()
		case "SequenceNumber":
			r.SequenceNumber, err = d.newString()
		case "EncryptionType":
			r.EncryptionType, err = d.encryptionType()
		case "ApproximateArrivalTimestamp":
			r.ApproximateArrivalTimestamp, err = d.newTime()
		default:
			err = d.skip()
		}
		return err
	})
}

// childShards reads ChildShards (present once the shard is closed); a null element is a zero
// ChildShard, as in the SDK.
func (d *decoder) childShards() ([]types.ChildShard, error) {
	list := make([]types.ChildShard, 0, 2)
	err := d.array("'[' (ChildShards)", func() error {
		list = append(list, types.ChildShard{})
		if d.null() {
			return nil
		}
		return d.childShard(&list[len(list)-1])
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}

func (d *decoder) childShard(c *types.ChildShard) error {
	return d.object("'{' (a child shard)", func(name []byte) (err error) {
		switch string(name) {
		case "ShardId":
			c.ShardId, err = d.newString()
		case "ParentShards":
			c.ParentShards, err = d.stringList()
		case "HashKeyRange":
			c.HashKeyRange, err = d.hashKeyRange()
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) hashKeyRange() (*types.HashKeyRange, error) {
	h := &types.HashKeyRange{}
	err := d.object("'{' (HashKeyRange)", func(name []byte) (err error) {
		switch string(name) {
		case "StartingHashKey":
			h.StartingHashKey, err = d.newString()
		case "EndingHashKey":
			h.EndingHashKey, err = d.newString()
		default:
			err = d.skip()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// stringList reads ParentShards; a null element is "", as in the SDK.
func (d *decoder) stringList() ([]string, error) {
	list := make([]string, 0, 2)
	err := d.array("'[' (ParentShards)", func() error {
		s := ""
		if !d.null() {
			var err error
			if s, err = d.string(); err != nil {
				return err
			}
		}
		list = append(list, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}
