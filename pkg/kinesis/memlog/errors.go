package memlog

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// The limits Kinesis enforces, named as AWS documents them.
const (
	maxNameLen        = 128
	maxKeyChars       = 256
	defaultRecordKiB  = 1024                // default maximum record size (data + key)
	maxRecordKiB      = 10240               // largest MaxRecordSizeInKiB a stream may have
	maxBlobBytes      = maxRecordKiB * 1024 // the API's own bound on one Data blob
	maxPutRecords     = 500                 // entries per PutRecords
	maxPutBytes       = 5 * 1024 * 1024     // data + keys per PutRecords
	maxGetLimit       = 10000               // records per GetRecords
	maxGetBytes       = 10 * 1024 * 1024    // data + keys per GetRecords
	maxListResults    = 10000               // shards per ListShards page
	defaultListLimit  = 1000                // ListShards page without MaxResults
	maxIteratorLen    = 512                 // characters of a shard iterator
	iteratorLifetime  = 5 * time.Minute     // after this a shard iterator is expired
	nextTokenLifetime = 300 * time.Second   // after this a ListShards NextToken is expired
	onDemandShards    = 4                   // shards of a new ON_DEMAND stream
	amzTimeLayout     = "Mon Jan 02 15:04:05 MST 2006"
)

func errNotFound(format string, args ...any) error {
	return &types.ResourceNotFoundException{Message: ptr(fmt.Sprintf(format, args...))}
}

func errInvalid(format string, args ...any) error {
	return &types.InvalidArgumentException{Message: ptr(fmt.Sprintf(format, args...))}
}

func errInUse(format string, args ...any) error {
	return &types.ResourceInUseException{Message: ptr(fmt.Sprintf(format, args...))}
}

func errLimit(format string, args ...any) error {
	return &types.LimitExceededException{Message: ptr(fmt.Sprintf(format, args...))}
}

func errThroughput(msg string) error {
	return &types.ProvisionedThroughputExceededException{Message: ptr(msg)}
}

// errDryRun is what AWS answers a valid request that has DryRun set.
func errDryRun() error {
	return &types.DryRunOperationException{Message: ptr("Request would have succeeded, but DryRun flag is set.")}
}

func (l *Log) errStreamNotFound(name string) error {
	return errNotFound("Stream %s under account %s not found.", name, l.account)
}

func (l *Log) errShardNotFound(shardID, stream string) error {
	return errNotFound("Shard %s in stream %s under account %s does not exist", shardID, stream, l.account)
}

// errShardLimit is AWS's answer to a request that would take the account's open shards (now
// open) over the shard quota by adding more.
func (l *Log) errShardLimit(open, more int) error {
	return errLimit("This request would exceed the shard limit for the account %s in %s. "+
		"Current shard count for the account: %d. Limit: %d. Number of additional shards that "+
		"would have resulted from this request: %d.", l.account, l.region, open, l.shardLimit, more)
}

// openShardsLocked counts the open shards of every stream, which is what the shard quota limits.
// The caller holds l.mu, so no stream is created, deleted or resharded meanwhile.
func (l *Log) openShardsLocked() int {
	open := 0
	for _, st := range *l.streams.Load() {
		open += len(st.shards.Load().open)
	}
	return open
}

// field names a request member in a validation message. Entry members of PutRecords are
// "records.N.member.name" with N counted from 1. It is a value, not a string, so the hot path
// builds no names unless something is wrong.
type field struct {
	name  string
	entry int // 0 for a top-level member, else the 1-based entry index
}

func (f field) String() string {
	if f.entry == 0 {
		return f.name
	}
	return "records." + strconv.Itoa(f.entry) + ".member." + f.name
}

func top(name string) field { return field{name: name} }

// checks collects a request's schema violations so one ValidationException lists them all, in
// AWS's words ("2 validation errors detected: Value ... at 'x' failed to satisfy constraint: ...").
type checks struct {
	msgs []string
}

// fail records that f does not satisfy "Member must <rule>". value is quoted into the message;
// nil prints as null, as AWS does for a missing member.
func (c *checks) fail(value *string, f field, rule string) {
	v := "null"
	if value != nil {
		v = "'" + *value + "'"
	}
	c.msgs = append(c.msgs, fmt.Sprintf("Value %s at '%s' failed to satisfy constraint: Member must %s", v, f, rule))
}

// failBlob is fail for a binary member, whose value AWS does not print.
func (c *checks) failBlob(f field, rule string) {
	c.msgs = append(c.msgs, fmt.Sprintf("Value at '%s' failed to satisfy constraint: Member must %s", f, rule))
}

func (c *checks) err() error {
	switch len(c.msgs) {
	case 0:
		return nil
	case 1:
		return &types.ValidationException{Message: ptr("1 validation error detected: " + c.msgs[0])}
	}
	return &types.ValidationException{Message: ptr(fmt.Sprintf("%d validation errors detected: %s",
		len(c.msgs), strings.Join(c.msgs, "; ")))}
}

// required records a missing member and reports whether it is present.
func (c *checks) required(f field, v *string) bool {
	if v == nil {
		c.fail(nil, f, "not be null")
		return false
	}
	return true
}

// name checks a stream name or shard id: both are [a-zA-Z0-9_.-]{1,128}.
func (c *checks) name(f field, s string) {
	switch {
	case len(s) < 1:
		c.fail(&s, f, "have length greater than or equal to 1")
	case utf8.RuneCountInString(s) > maxNameLen:
		c.fail(&s, f, "have length less than or equal to 128")
	case !validName(s):
		c.fail(&s, f, "satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
	}
}

func validName(s string) bool {
	if len(s) < 1 || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		ok := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '-'
		if !ok {
			return false
		}
	}
	return true
}

// partitionKey checks a partition key: present, 1..256 Unicode characters.
func (c *checks) partitionKey(f field, k *string) {
	if !c.required(f, k) {
		return
	}
	switch {
	case len(*k) == 0:
		c.fail(k, f, "have length greater than or equal to 1")
	case len(*k) > maxKeyChars && utf8.RuneCountInString(*k) > maxKeyChars:
		c.fail(k, f, "have length less than or equal to 256")
	}
}

// data checks a record's Data blob against the API's absolute bound; the stream's own maximum
// record size is checked once the stream is known.
func (c *checks) data(f field, d []byte) {
	switch {
	case d == nil:
		c.failBlob(f, "not be null")
	case len(d) > maxBlobBytes:
		c.failBlob(f, "have length less than or equal to "+strconv.Itoa(maxBlobBytes))
	}
}

// amzTime formats a time as AWS's messages do: "Thu Jan 22 01:22:02 UTC 2015".
func amzTime(t time.Time) string { return t.UTC().Format(amzTimeLayout) }
