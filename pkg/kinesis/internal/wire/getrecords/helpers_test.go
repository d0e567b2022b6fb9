package getrecords_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmw "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/getrecords"
)

// answer is what the fake HTTP client returns for one call; it travels in the call's context,
// so one client serves every test (and every fuzz input).
type answer struct {
	status  int
	header  map[string]string
	body    []byte
	err     error                         // a transport error instead of a response
	wrap    func(io.Reader) io.ReadCloser // the body as the client hands it over
	httpDos atomic.Int64                  // requests sent for this answer
}

type answerKey struct{}

type fakeHTTP struct{}

func (fakeHTTP) Do(req *http.Request) (*http.Response, error) {
	a := req.Context().Value(answerKey{}).(*answer)
	a.httpDos.Add(1)
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	if a.err != nil {
		return nil, a.err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.1")
	h.Set("X-Amzn-Requestid", "c0ffee00-1111-2222-3333-444455556666")
	for k, v := range a.header {
		h.Set(k, v)
	}
	var body io.ReadCloser = io.NopCloser(bytes.NewReader(a.body))
	if a.wrap != nil {
		body = a.wrap(bytes.NewReader(a.body))
	}
	return &http.Response{StatusCode: a.status, Status: strconv.Itoa(a.status), Header: h,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: int64(len(a.body)),
		Body: body, Request: req}, nil
}

// client is a real Kinesis client on the fake HTTP client: the SDK's whole middleware stack
// runs, signing and retry classification included; NopRetryer makes every call one request.
var client = kinesis.New(kinesis.Options{
	Region:       "us-east-1",
	Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	BaseEndpoint: aws.String("http://127.0.0.1:1"),
	HTTPClient:   fakeHTTP{},
	Retryer:      aws.NopRetryer{},
})

// call runs one GetRecords call on a. The SDK panics on some bodies (a "NaN" timestamp):
// that is reported as an error, so that the tests can say both sides failed.
func call(a *answer, optFns ...func(*kinesis.Options)) (out *kinesis.GetRecordsOutput, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	ctx := context.WithValue(context.Background(), answerKey{}, a)
	return client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("it")}, optFns...)
}

func ok200(body []byte) *answer { return &answer{status: 200, body: body} }

// bothWays runs body through the client with and without WithFastDecode.
func bothWays(body []byte) (sdk, fast *kinesis.GetRecordsOutput, sdkErr, fastErr error) {
	sdk, sdkErr = call(ok200(body))
	fast, fastErr = call(ok200(body), getrecords.WithFastDecode)
	return
}

// requireSame fails unless the two outputs are deeply equal. ResultMetadata is compared apart:
// it holds the response's arrival time, which differs between any two calls, so what is
// compared of it is the request ID and the raw response's status; every other field is
// compared with reflect.DeepEqual (nil and empty slices differ there, pointers are followed).
func requireSame(t testing.TB, name string, sdk, fast *kinesis.GetRecordsOutput) {
	t.Helper()
	if (sdk == nil) != (fast == nil) {
		t.Fatalf("%s: SDK output %v, fast output %v", name, sdk, fast)
	}
	if sdk == nil {
		return
	}
	idA, _ := awsmw.GetRequestIDMetadata(sdk.ResultMetadata)
	idB, _ := awsmw.GetRequestIDMetadata(fast.ResultMetadata)
	if idA != idB {
		t.Errorf("%s: request ID %q (SDK) vs %q (fast)", name, idA, idB)
	}
	ra, _ := awsmw.GetRawResponse(sdk.ResultMetadata).(*smithyhttp.Response)
	rb, _ := awsmw.GetRawResponse(fast.ResultMetadata).(*smithyhttp.Response)
	if (ra == nil) != (rb == nil) || ra != nil && ra.StatusCode != rb.StatusCode {
		t.Errorf("%s: raw responses differ: %v vs %v", name, ra, rb)
	}
	requireEqualOutputs(t, name, sdk, fast)
}

// requireEqualOutputs compares everything but ResultMetadata; on a difference it names the
// first record that differs.
func requireEqualOutputs(t testing.TB, name string, want, got *kinesis.GetRecordsOutput) {
	t.Helper()
	a, b := *want, *got
	a.ResultMetadata, b.ResultMetadata = middleware.Metadata{}, middleware.Metadata{}
	if reflect.DeepEqual(a, b) {
		return
	}
	for i := range min(len(a.Records), len(b.Records)) {
		if !reflect.DeepEqual(a.Records[i], b.Records[i]) {
			t.Fatalf("%s: record %d differs:\nwant %s\ngot  %s", name, i, show(a.Records[i]), show(b.Records[i]))
		}
	}
	t.Fatalf("%s: outputs differ:\nwant %s\ngot  %s", name, show(a), show(b))
}

// show prints pointers' targets, and nil apart from empty.
func show(v any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s + " " + deref(v)
}

func deref(v any) string {
	rv := reflect.ValueOf(v)
	var parts []string
	for i := range rv.NumField() {
		f := rv.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			parts = append(parts, fmt.Sprintf("%s=%q", rv.Type().Field(i).Name, fmt.Sprint(f.Elem().Interface())))
		}
	}
	return strings.Join(parts, " ")
}

// bodyOpts shapes a generated answer.
type bodyOpts struct {
	encryption bool // EncryptionType on every third record
	tricky     bool // escapes in keys, unknown members with nested values, whitespace, order
	children   bool // ChildShards with ParentShards and HashKeyRange
}

// genBody builds a GetRecords answer of n records, each with a ~150-byte payload (an envelope's
// size in the B3 benchmark) and timestamps written as Kinesis writes them (1441215410.867).
func genBody(n int, o bodyOpts) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	var b strings.Builder
	b.WriteString(`{"Records":[`)
	ts := 1.7e9
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		payload := fmt.Sprintf(`{"uuid":"%016x","metadata":{"trace":"%016x"},"payload":"order %08d"}`,
			rng.Uint64(), rng.Uint64(), i)
		payload += strings.Repeat(" ", max(0, 150-len(payload)))
		ts += float64(rng.IntN(50)) / 1000
		key := fmt.Sprintf("key-%d", rng.IntN(1000))
		if o.tricky && i%7 == 3 {
			key = `k\"\u00e9\/\n\ud83d\ude00-` + strconv.Itoa(i)
		}
		rec := fmt.Sprintf(`{"SequenceNumber":"4965%052d","ApproximateArrivalTimestamp":%.3f,"Data":"%s","PartitionKey":"%s"`,
			rng.Int64(), ts, base64.StdEncoding.EncodeToString([]byte(payload)), key)
		if o.tricky && i%4 == 2 { // members in another order, whitespace between tokens
			rec = fmt.Sprintf("{ \"PartitionKey\" :\t\"%s\" ,\n\"Data\":\"%s\" , \"ApproximateArrivalTimestamp\" : %.12E,\r\"SequenceNumber\":\"%d\"",
				key, base64.StdEncoding.EncodeToString([]byte(payload)), ts, rng.Int64())
		}
		b.WriteString(rec)
		if o.encryption && i%3 == 0 {
			b.WriteString(`,"EncryptionType":"KMS"`)
		}
		if o.tricky && i%5 == 1 {
			b.WriteString(`,"Unknown":{"a":[1,2.5e3,-0.5E-2,true,false,null,"x\"y",{},[]],"b":{"c":{"d":[[]]}}}`)
		}
		b.WriteString("}")
	}
	b.WriteString(`],"NextShardIterator":"AAAAAAAAAAHsW8zCWf9164uy8Epue6WS3w6wmj4a4USt+CNvcd`)
	if o.tricky {
		b.WriteString(`\/x`)
	}
	b.WriteString(`","MillisBehindLatest":` + strconv.Itoa(n*17))
	if o.children {
		b.WriteString(`,"ChildShards":[{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000000","shardId-000000000001"],` +
			`"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"340282366920938463463374607431768211455"}},` +
			`{"ShardId":"shardId-000000000003","ParentShards":["shardId-000000000000"],"HashKeyRange":{"StartingHashKey":"1","EndingHashKey":"2"}}]`)
	}
	b.WriteString("}")
	return []byte(b.String())
}
