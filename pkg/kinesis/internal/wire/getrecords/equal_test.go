package getrecords_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	smithytime "github.com/aws/smithy-go/time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/getrecords"
)

// maxDepth is the SDK's JSON nesting limit (encoding/json's), counting the top-level object.
const maxDepth = 10_000

// sameAsSDK are bodies that the SDK decodes: WithFastDecode must give what it gives.
func sameAsSDK() map[string]string {
	bodies := map[string]string{
		"empty 200 body":      ``,
		"empty object":        `{}`,
		"closed shard":        `{"Records":[],"NextShardIterator":null,"MillisBehindLatest":0,"ChildShards":[]}`,
		"nulls everywhere":    `{"Records":null,"NextShardIterator":null,"MillisBehindLatest":null,"ChildShards":null}`,
		"null members":        `{"Records":[{"Data":null,"PartitionKey":null,"SequenceNumber":null,"EncryptionType":null,"ApproximateArrivalTimestamp":null}]}`,
		"null elements":       `{"Records":[null,{"SequenceNumber":"1"},null],"ChildShards":[null,{"ParentShards":[null,"a",null]}]}`,
		"empty strings":       `{"Records":[{"Data":"","PartitionKey":"","SequenceNumber":"","EncryptionType":""}],"NextShardIterator":""}`,
		"whitespace":          " \t\r\n{ \"Records\" : [ { \"Data\" : \"AA==\" , \"SequenceNumber\" : \"1\" } , null ] , \"MillisBehindLatest\" : 12345 } \n",
		"other order":         `{"MillisBehindLatest":7,"ChildShards":[{"HashKeyRange":{"EndingHashKey":"9","StartingHashKey":"0"},"ShardId":"s"}],"NextShardIterator":"it","Records":[{"PartitionKey":"p","Data":"YQ==","SequenceNumber":"9"}]}`,
		"unknown members":     `{"Foo":{"a":[1,{"b":null}],"c":"d\"e"},"Records":[{"X":[[[]]],"Data":"YWI=","Y":-1.5e-7,"Z":true}],"Bar":[],"Baz":false}`,
		"duplicates":          `{"Records":[{"Data":"AA=="}],"Records":[{"Data":"AQ==","Data":"Ag==","PartitionKey":"a","PartitionKey":"b"}],"MillisBehindLatest":1,"MillisBehindLatest":2}`,
		"duplicate then null": `{"NextShardIterator":"a","NextShardIterator":null,"Records":[{"Data":"AA==","Data":null}]}`,
		"escaped names":       `{"Record\u0073":[{"Dat\u0061":"AA==","Partition\u004bey":"k"}],"Next\u0053hardIterator":"x"}`,
		"escaped data":        `{"Records":[{"Data":"YW\nJj\r\/\/8="}]}`,
		"escaped strings":     `{"Records":[{"PartitionKey":"\"\\\/\b\f\n\r\t\u0000\u001f\u00e9\u20ac\ud83d\ude00"}]}`,
		"bad surrogates":      `{"Records":[{"PartitionKey":"a\ud800b\udc00c\ud800\u0041\ud83d\ud83d\ude00\udbff"}]}`,
		"raw invalid utf8":    "{\"Records\":[{\"PartitionKey\":\"\xff\xfe\xed\xa0\x80\",\"SequenceNumber\":\"\xff\\n\xc3\"}]}",
		"raw utf8":            `{"Records":[{"PartitionKey":"ключ-🔑","SequenceNumber":"€"}]}`,
		"encryption":          `{"Records":[{"Data":"AA==","EncryptionType":"KMS"},{"Data":"AA==","EncryptionType":"NONE"},{"Data":"AA=="}]}`,
		"big millis":          `{"MillisBehindLatest":9223372036854775807}`,
		"negative millis":     `{"MillisBehindLatest":-9223372036854775808}`,
		"minus zero millis":   `{"MillisBehindLatest":-0}`,
		"SDK int quirk":       `{"MillisBehindLatest":-92233720368547758089}`, // the SDK reads MinInt64
		"SDK int quirk 2":     `{"MillisBehindLatest":-9223372036854775808.5e3}`,
		"SDK int quirk 3":     `{"Records":[{"ApproximateArrivalTimestamp":-9223372036854775808e-10},{"ApproximateArrivalTimestamp":-92233720368547758081e-11}]}`,
		"timestamp forms":     `{"Records":[{"ApproximateArrivalTimestamp":1.441215410867E9},{"ApproximateArrivalTimestamp":1441215410.867},{"ApproximateArrivalTimestamp":1441215410},{"ApproximateArrivalTimestamp":-1.5},{"ApproximateArrivalTimestamp":0},{"ApproximateArrivalTimestamp":-0.0},{"ApproximateArrivalTimestamp":1e-400},{"ApproximateArrivalTimestamp":1e300},{"ApproximateArrivalTimestamp":-1e300},{"ApproximateArrivalTimestamp":1.7976931348623157e308},{"ApproximateArrivalTimestamp":9223372036854775.807}]}`,
		"timestamp strings":   `{"Records":[{"ApproximateArrivalTimestamp":"Infinity"},{"ApproximateArrivalTimestamp":"-INFINITY"},{"ApproximateArrivalTimestamp":"infinit\u0079"}]}`,
		"trailing bytes":      `{"MillisBehindLatest":1} trailing {"bytes" are not read`,
		"trailing brace":      `{}}`,
		"deep unknown":        `{"x":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`, // the deepest the SDK takes
		"big hash key range":  `{"ChildShards":[{"ShardId":"shardId-000000000004","ParentShards":["shardId-000000000001","shardId-000000000002"],"HashKeyRange":{"StartingHashKey":"170141183460469231731687303715884105728","EndingHashKey":"340282366920938463463374607431768211455"}}]}`,
		"hash key range null": `{"ChildShards":[{"ShardId":"s","ParentShards":null,"HashKeyRange":null},{"HashKeyRange":{}},{"ParentShards":[]}]}`,
	}
	for _, n := range []int{0, 1, 100, 1000} {
		bodies[fmt.Sprintf("%d records", n)] = string(genBody(n, bodyOpts{}))
		bodies[fmt.Sprintf("%d records, encryption", n)] = string(genBody(n, bodyOpts{encryption: true}))
		bodies[fmt.Sprintf("%d records, tricky, children", n)] = string(genBody(n, bodyOpts{tricky: true, children: true, encryption: true}))
	}
	return bodies
}

// TestMatchesSDK: for every body the SDK decodes, the call with WithFastDecode returns an
// output deeply equal to the SDK's (see requireSame for what is compared), and Decode alone
// returns the same.
func TestMatchesSDK(t *testing.T) {
	for name, body := range sameAsSDK() {
		sdk, fast, sdkErr, fastErr := bothWays([]byte(body))
		if sdkErr != nil || fastErr != nil {
			t.Fatalf("%s: SDK error %v, fast error %v", name, sdkErr, fastErr)
		}
		requireSame(t, name, sdk, fast)
		direct, err := getrecords.Decode([]byte(body))
		if err != nil {
			t.Fatalf("%s: Decode: %v", name, err)
		}
		requireEqualOutputs(t, name+" (Decode)", sdk, direct)
	}
}

// TestTimestampsMatchSDK: epoch seconds become the SDK's time to the nanosecond, in both the
// forms AWS writes (1441215410.867 and 1.441215410867E9), for thousands of random values and
// the edges of float64 and int64 milliseconds; once against smithy-go's ParseEpochSeconds
// directly, once through the client.
func TestTimestampsMatchSDK(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	edges := []float64{0, -0.0, 1e-300, -1e-300, 0.0005, -0.0005, 0.001, 0.9999999, 9223372036854775.807,
		9223372036854775.808, -9223372036854775.808, -9223372036854775.809, 1e300, -1e300,
		math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1)}
	var b strings.Builder
	b.WriteString(`{"Records":[`)
	for i := range 4000 {
		var secs float64
		switch {
		case i < len(edges):
			secs = edges[i]
		case i%3 == 0: // a Kinesis-like arrival time, milliseconds
			secs = float64(1_400_000_000_000+rng.Int64N(400_000_000_000)) / 1000
		case i%3 == 1: // any precision
			secs = rng.Float64() * 4e9
		default: // any magnitude
			secs = math.Float64frombits(rng.Uint64())
		}
		if math.IsNaN(secs) {
			secs = 1
		}
		if got, want := getrecords.EpochTime(secs), smithytime.ParseEpochSeconds(secs); !got.Equal(want) || got != want {
			t.Fatalf("%v (%x): got %v, SDK %v", secs, math.Float64bits(secs), got, want)
		}
		if math.IsInf(secs, 0) {
			continue
		}
		if i > 0 {
			b.WriteString(",")
		}
		text := strconv.FormatFloat(secs, 'f', -1, 64) // 1441215410.867
		if i%2 == 1 {
			text = strconv.FormatFloat(secs, 'E', -1, 64) // 1.441215410867E+09
		}
		fmt.Fprintf(&b, `{"ApproximateArrivalTimestamp":%s}`, text)
	}
	b.WriteString("]}")
	sdk, fast, sdkErr, fastErr := bothWays([]byte(b.String()))
	if sdkErr != nil || fastErr != nil {
		t.Fatalf("SDK error %v, fast error %v", sdkErr, fastErr)
	}
	requireSame(t, "random timestamps", sdk, fast)
}

// TestEscapedStringsMatchSDK: random strings of escapes (surrogate pairs, lone and mismatched
// surrogates), plain bytes and invalid UTF-8 decode exactly as the SDK decodes them, in one
// answer of a thousand partition keys.
func TestEscapedStringsMatchSDK(t *testing.T) {
	pieces := []string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0041`, `\u00e9`, `\u20AC`,
		`\ud83d\ude00`, `\ud83d`, `\ude00`, `\uDBFF\uDFFF`, `\ud800\u0041`, `\u0000`, "a", "é", "\xff", "\xed\xa0\x80", "\xc3", " "}
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	b.WriteString(`{"Records":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"PartitionKey":"`)
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteString(`"}`)
	}
	b.WriteString("]}")
	sdk, fast, sdkErr, fastErr := bothWays([]byte(b.String()))
	if sdkErr != nil || fastErr != nil {
		t.Fatalf("SDK error %v, fast error %v", sdkErr, fastErr)
	}
	requireSame(t, "escaped strings", sdk, fast)
}
