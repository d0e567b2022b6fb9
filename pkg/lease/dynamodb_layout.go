package lease

import (
	"fmt"
	"hash/fnv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDBLeaseBuckets is how many partitions the leases of one consumer group on one stream
// are spread over in a DynamoDBStore's table. DynamoDB serves at most 1,000 write and 3,000
// read capacity units a second per partition key; at 4,000 shards a group's renewals and
// checkpoints are about 1,600 writes a second, which one key cannot take. Over 16 keys each
// takes about a sixteenth, under half of what a partition serves. Changing it moves every
// lease to another partition: it is part of the table layout, not a tuning knob.
const DynamoDBLeaseBuckets = 16

// DynamoDBPartitionKey is the partition key of the item of the lease k in a DynamoDBStore's
// table: stream + "|" + group + "|" + the lease's bucket as two decimal digits, e.g.
// "orders|billing|07". The bucket is the FNV-1a (32-bit) hash of the shard id modulo
// DynamoDBLeaseBuckets, so that every worker, and a capacity plan, puts a shard in the same
// partition without asking the table.
func DynamoDBPartitionKey(k Key) string {
	return bucketPartitionKey(k.Group, k.Stream, leaseBucket(k.ShardID))
}

// bucketPartitionKey is the partition key of one bucket of a group's leases.
func bucketPartitionKey(group, stream string, bucket int) string {
	return partitionKey(group, stream) + pkSeparator + fmt.Sprintf("%02d", bucket)
}

// leaseBucket is the bucket of a shard; see DynamoDBPartitionKey.
func leaseBucket(shardID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(shardID)) // a hash.Hash never fails to write
	return int(h.Sum32() % DynamoDBLeaseBuckets)
}

// DynamoDBMemberPartitionKey is the partition key of the member records (heartbeats) of a
// group on a stream: "#" + stream + "|" + group. All of a group's member records share it:
// there is one per worker, written once per lease sync, far from a partition's limits.
func DynamoDBMemberPartitionKey(group, stream string) string {
	return memberPartitionKey(group, stream)
}

// DynamoDBItemSize is the size in bytes of the item a DynamoDBStore keeps for l, as DynamoDB
// counts it for capacity units: a write takes one write unit per started kilobyte of it, a
// strongly consistent read one read unit per started 4 KB. It is worked out from the item the
// store writes, so it follows the layout when attributes change.
func DynamoDBItemSize(l Lease) int { return itemSize(leaseToItem(l)) }

// DynamoDBMemberItemSize is the size in bytes of m's member record, as DynamoDBItemSize counts
// it for a lease.
func DynamoDBMemberItemSize(m Member) int { return itemSize(memberToItem(m)) }

// itemSize follows DynamoDB's rules for item sizes: the UTF-8 length of every attribute name
// plus the size of its value.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is the size of one attribute value: strings and binaries their length, a number
// about one byte per two significant digits plus one, a boolean or null one byte, a list or map
// three bytes plus one per element plus the elements (and a map's element names), a set the
// sum of its elements.
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value) // Go strings are the UTF-8 bytes DynamoDB counts
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for name, e := range v.Value {
			n += 1 + len(name) + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, e := range v.Value {
			n += numberSize(e)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, e := range v.Value {
			n += len(e)
		}
		return n
	default:
		return 0
	}
}

// numberSize is DynamoDB's approximate size of a number: (significant digits + 1) / 2 + 1
// bytes. Leading and trailing zeros are not significant (DynamoDB keeps a mantissa and an
// exponent); zero counts as one digit.
func numberSize(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimLeft(s, "+-")
	s = strings.ReplaceAll(s, ".", "")
	s = strings.TrimRight(strings.TrimLeft(s, "0"), "0")
	digits := max(1, utf8.RuneCountInString(s))
	return (digits+1)/2 + 1
}
