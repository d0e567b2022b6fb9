package getrecords_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	smithy "github.com/aws/smithy-go"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/getrecords"
)

// refused are bodies the SDK refuses; each is named by what the error must say.
var refused = []struct{ body, says string }{
	{` `, "unexpected end of body"},
	{`null`, "expected '{'"},
	{`[]`, "expected '{'"},
	{`"x"`, "expected '{'"},
	{`{`, "unexpected end of body"},
	{`{"Records":[`, "unexpected end of body"},
	{`{"Records":[{"Data":"AA==`, "unterminated string"},
	{`{"Records":[{"Data":"AA=="}]`, "unexpected end of body"},
	{`{"Records":[{"Data":"AA=="},]}`, "expected a value"},
	{`{"Records":[{"Data":"AA=="}}`, "expected ',' or ']'"},
	{`{"Records":{}}`, "expected '[' (Records)"},
	{`{"Records":[1]}`, "expected '{' (a record)"},
	{`{"Records":[[]]}`, "expected '{' (a record)"},
	{`{"Records":[{"Data":1}]}`, "expected a base64 string"},
	{`{"Records":[{"Data":"AA="}]}`, "invalid base64"},
	{`{"Records":[{"Data":"A==="}]}`, "invalid base64"},
	{`{"Records":[{"Data":"!!!!"}]}`, "invalid base64"},
	{"{\"Records\":[{\"Data\":\"\xff\\n\"}]}", "invalid base64"},
	{`{"Records":[{"Data":"\u0041A="}]}`, "invalid base64"},
	{"{\"Records\":[{\"Data\":\"AAAA\n\n\r\n\"}]}", "control character"}, // base64 alone would skip them
	{"{\"Records\":[{\"Data\":\"AA\r\nAA\"}]}", "control character"},
	{"{\"Records\":[{\"Data\":\"AAA\x00\"}]}", "control character"},
	{`{"Records":[{"PartitionKey":1}]}`, "expected a string"},
	{`{"Records":[{"PartitionKey":true}]}`, "expected a string"},
	{`{"Records":[{"SequenceNumber":{}}]}`, "expected a string"},
	{`{"Records":[{"EncryptionType":[]}]}`, "expected a string"},
	{`{"Records":[{"PartitionKey":"a` + "\n" + `"}]}`, "control character"},
	{`{"Records":[{"PartitionKey":"\x"}]}`, "invalid escape"},
	{`{"Records":[{"PartitionKey":"\'"}]}`, "invalid escape"},
	{`{"Records":[{"PartitionKey":"\u12"}]}`, "invalid \\u escape"},
	{`{"Records":[{"PartitionKey":"\u12`, "incomplete \\u escape"},
	{`{"Records":[{"PartitionKey":"\`, "unterminated escape"},
	{`{"Records":[{"ApproximateArrivalTimestamp":"1441215410"}]}`, "timestamp is a string"},
	{`{"Records":[{"ApproximateArrivalTimestamp":"NaN"}]}`, "timestamp is a string"},
	{`{"Records":[{"ApproximateArrivalTimestamp":1e400}]}`, "timestamp out of range"},
	{`{"Records":[{"ApproximateArrivalTimestamp":-1e309}]}`, "timestamp out of range"},
	{`{"Records":[{"ApproximateArrivalTimestamp":true}]}`, "expected a value"},
	{`{"Records":[{"ApproximateArrivalTimestamp":01}]}`, "expected ',' or '}'"},
	{`{"Records":[{"ApproximateArrivalTimestamp":1.}]}`, "no digits after the decimal point"},
	{`{"Records":[{"ApproximateArrivalTimestamp":1e}]}`, "no digits in the exponent"},
	{`{"Records":[{"ApproximateArrivalTimestamp":-}]}`, "expected a value"},
	{`{"Records":[{"ApproximateArrivalTimestamp":+1}]}`, "expected a value"},
	{`{"MillisBehindLatest":9223372036854775808}`, "not an int64"},
	{`{"MillisBehindLatest":1.5}`, "not an int64"},
	{`{"MillisBehindLatest":1e3}`, "not an int64"},
	{`{"MillisBehindLatest":"1"}`, "expected an integer"},
	{`{"NextShardIterator":nul}`, "expected a string"},
	{`{"ChildShards":[{"ParentShards":[1]}]}`, "expected a string"},
	{`{"ChildShards":[{"HashKeyRange":[]}]}`, "expected '{' (HashKeyRange)"},
	{`{"ChildShards":[{"ParentShards":{}}]}`, "expected '[' (ParentShards)"},
	{`{"ChildShards":{}}`, "expected '[' (ChildShards)"},
	{`{"ChildShards":["x"]}`, "expected '{' (a child shard)"},
	{`{"x":1,}`, "expected a member name"},
	{`{,}`, "expected a member name"},
	{`{"x" 1}`, "expected ':'"},
	{`{"x":1 "y":2}`, "expected ',' or '}'"},
	{`{"x":[1 2]}`, "expected ',' or ']'"},
	{`{"x":tru}`, "invalid literal"},
	{`{"x":nulL}`, "invalid literal"},
	{`{"x":"` + "\x00" + `"}`, "control character"},
	{`{"x":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, "nesting deeper than 10000"},
	{`{"Records":[{"x":` + strings.Repeat("{\"a\":", maxDepth-2) + "1" + strings.Repeat("}", maxDepth-2) + `}]}`, "nesting deeper than 10000"},
}

// TestRefusesWhatSDKRefuses: each malformed body fails both ways (the SDK panicking counts);
// Decode's error is a *smithy.DeserializationError that says what is wrong and at which offset.
func TestRefusesWhatSDKRefuses(t *testing.T) {
	for _, tc := range refused {
		_, sdkErr := call(ok200([]byte(tc.body)))
		if sdkErr == nil {
			t.Errorf("%q: the SDK decodes it: the table is wrong", tc.body)
		}
		out, err := getrecords.Decode([]byte(tc.body))
		if err == nil {
			t.Errorf("%q: Decode returned %+v, want an error", tc.body, out)
			continue
		}
		var de *smithy.DeserializationError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), " at offset ") {
			t.Errorf("%q: error %v (%T), want a *smithy.DeserializationError saying %q at an offset", tc.body, err, err, tc.says)
		}
		_, fastErr := call(ok200([]byte(tc.body)), getrecords.WithFastDecode)
		if !errors.As(fastErr, &de) {
			t.Errorf("%q: through the client, error %v (%T)", tc.body, fastErr, fastErr)
		}
	}
}

// TestTruncatedBodies: every proper prefix of a valid answer fails, both ways.
func TestTruncatedBodies(t *testing.T) {
	body := genBody(3, bodyOpts{tricky: true, children: true, encryption: true})
	for n := 1; n < len(body); n++ {
		if _, err := getrecords.Decode(body[:n]); err == nil {
			t.Fatalf("the %d-byte prefix decodes: %q", n, body[:n])
		}
	}
	for _, n := range []int{1, len(body) / 3, len(body) / 2, len(body) - 1} {
		if _, err := call(ok200(body[:n])); err == nil {
			t.Fatalf("the SDK decodes the %d-byte prefix", n)
		}
	}
}

// TestDataIsCapped: appending to one record's Data reallocates; the next record, which shares
// the buffer, is untouched.
func TestDataIsCapped(t *testing.T) {
	out, err := getrecords.Decode([]byte(`{"Records":[{"Data":"YWJj"},{"Data":"ZGVm","PartitionKey":"k"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	first := out.Records[0].Data
	if cap(first) != len(first) {
		t.Fatalf("cap %d, len %d", cap(first), len(first))
	}
	_ = append(first, 'X', 'Y', 'Z', 'W')
	if got := string(out.Records[1].Data); got != "def" || *out.Records[1].PartitionKey != "k" {
		t.Fatalf("second record %q %q after an append to the first", got, *out.Records[1].PartitionKey)
	}
}

// TestKeepsNothingOfBody: the output does not change when the body's buffer is reused.
func TestKeepsNothingOfBody(t *testing.T) {
	body := genBody(20, bodyOpts{tricky: true, children: true, encryption: true})
	out, err := getrecords.Decode(bytes.Clone(body))
	if err != nil {
		t.Fatal(err)
	}
	scratch := bytes.Clone(body)
	again, err := getrecords.Decode(scratch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range scratch {
		scratch[i] = 'X'
	}
	requireEqualOutputs(t, "after overwriting the body", out, again)
}
