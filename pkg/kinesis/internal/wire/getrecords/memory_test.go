package getrecords_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"
	"weak"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/getrecords"
)

// answerStrings lists every string of out that Decode carves (EncryptionType is a constant).
func answerStrings(out *kinesis.GetRecordsOutput) []string {
	var list []string
	add := func(p *string) {
		if p != nil {
			list = append(list, *p)
		}
	}
	for _, r := range out.Records {
		add(r.SequenceNumber)
		add(r.PartitionKey)
		list = append(list, string(r.EncryptionType))
	}
	add(out.NextShardIterator)
	for _, c := range out.ChildShards {
		add(c.ShardId)
		list = append(list, c.ParentShards...)
		if c.HashKeyRange != nil {
			add(c.HashKeyRange.StartingHashKey)
			add(c.HashKeyRange.EndingHashKey)
		}
	}
	return list
}

// TestStringsDoNotShareData: the records' Data slices are carved one after the other from one
// buffer, and no string of the answer lies in it: a string kept alive does not keep the Data.
func TestStringsDoNotShareData(t *testing.T) {
	body := genBody(500, bodyOpts{tricky: true, children: true, encryption: true})
	out, err := getrecords.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, total := ^uintptr(0), uintptr(0), uintptr(0)
	for _, r := range out.Records {
		p := uintptr(unsafe.Pointer(unsafe.SliceData(r.Data)))
		lo, hi, total = min(lo, p), max(hi, p+uintptr(cap(r.Data))), total+uintptr(cap(r.Data))
	}
	strs := answerStrings(out)
	if len(strs) < 2*len(out.Records) {
		t.Fatalf("%d strings for %d records", len(strs), len(out.Records))
	}
	for _, s := range strs {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); len(s) > 0 && p < hi && p+uintptr(len(s)) > lo {
			t.Fatalf("string %q at %#x lies among the Data slices [%#x, %#x)", s, p, lo, hi)
		}
	}
	if hi-lo != total { // so [lo, hi) is one buffer, not a span over several allocations
		t.Fatalf("the Data slices span %d bytes for %d bytes of Data: not one buffer carved in order", hi-lo, total)
	}
}

// TestKeptStringFreesData: once the answer is dropped, a sequence number kept alive does not
// keep the Data buffer alive (it did when strings and Data shared one buffer), and its own
// chunk stays.
func TestKeptStringFreesData(t *testing.T) {
	seq, data, text := keepSequenceNumber(t)
	for range 3 {
		runtime.GC()
	}
	if data.Value() != nil {
		t.Fatal("the Data buffer is still alive with only a sequence number kept")
	}
	if text.Value() == nil {
		t.Fatal("the sequence number's chunk was freed while the string is alive")
	}
	runtime.KeepAlive(seq)
}

// keepSequenceNumber decodes an answer and returns one of its sequence numbers, with weak
// pointers to its Data buffer and to the string's bytes; the answer itself is dropped.
func keepSequenceNumber(t *testing.T) (string, weak.Pointer[byte], weak.Pointer[byte]) {
	t.Helper()
	out, err := getrecords.Decode(genBody(200, bodyOpts{encryption: true}))
	if err != nil {
		t.Fatal(err)
	}
	seq := *out.Records[100].SequenceNumber
	return seq, weak.Make(&out.Records[100].Data[0]), weak.Make(unsafe.StringData(seq))
}

// TestUnevenStrings: strings much longer than the first record's fill the text arena's chunks
// beyond the guess; they still decode as the SDK decodes them.
func TestUnevenStrings(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"Records":[{"Data":"","PartitionKey":"k","SequenceNumber":"1"}`)
	for i := range 3000 {
		fmt.Fprintf(&b, `,{"Data":"AA==","PartitionKey":"%s","SequenceNumber":"%d"}`, strings.Repeat("p", 1+i%250), i)
	}
	b.WriteString(`],"NextShardIterator":"` + strings.Repeat("i", 300) + `"}`)
	sdk, fast, sdkErr, fastErr := bothWays([]byte(b.String()))
	if sdkErr != nil || fastErr != nil {
		t.Fatalf("SDK error %v, fast error %v", sdkErr, fastErr)
	}
	requireSame(t, "uneven strings", sdk, fast)
}
