package getrecords_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithy "github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/wire/getrecords"
)

// TestErrorAnswersGoToSDK: a 400 or 500 answer reaches the SDK's deserializer, once sent: the
// typed errors come out as without the option, and the fake client saw one request per call.
func TestErrorAnswersGoToSDK(t *testing.T) {
	cases := []struct {
		name, errType, body string
		status              int
		is                  func(error) bool
	}{
		{"expired iterator", "ExpiredIteratorException:http://internal.amazon.com/coral/com.amazon.kinesis/",
			`{"__type":"ExpiredIteratorException","message":"Iterator expired. The iterator was created at time Mon Sep 02 2015"}`, 400,
			func(err error) bool {
				var e *types.ExpiredIteratorException
				return errors.As(err, &e) && e.ErrorMessage() != ""
			}},
		{"throughput exceeded", "ProvisionedThroughputExceededException",
			`{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for shard shardId-000000000000"}`, 400,
			func(err error) bool { var e *types.ProvisionedThroughputExceededException; return errors.As(err, &e) }},
		{"kms throttling", "KMSThrottlingException", `{"message":"slow down"}`, 400,
			func(err error) bool { var e *types.KMSThrottlingException; return errors.As(err, &e) }},
		{"internal failure", "InternalFailure", `{"__type":"InternalFailure"}`, 500,
			func(err error) bool {
				var e smithy.APIError
				return errors.As(err, &e) && e.ErrorCode() == "InternalFailure"
			}},
		{"200 as 206", "", `{"Records":[]}`, 206, // a 2xx that is not 200: the SDK decodes it itself
			func(err error) bool { return err == nil }},
	}
	for _, tc := range cases {
		for _, opts := range [][]func(*kinesis.Options){nil, {getrecords.WithFastDecode}} {
			a := &answer{status: tc.status, body: []byte(tc.body), header: map[string]string{"X-Amzn-ErrorType": tc.errType}}
			_, err := call(a, opts...)
			if !tc.is(err) {
				t.Errorf("%s (fast: %v): error %v (%T) is not the expected one", tc.name, opts != nil, err, err)
			}
			if n := a.httpDos.Load(); n != 1 {
				t.Errorf("%s (fast: %v): %d requests sent, want 1", tc.name, opts != nil, n)
			}
		}
	}
}

// TestTransportErrorGoesToSDK: a failed request comes back as without the option.
func TestTransportErrorGoesToSDK(t *testing.T) {
	cause := errors.New("connection reset by fake peer")
	_, sdkErr := call(&answer{err: cause})
	_, fastErr := call(&answer{err: cause}, getrecords.WithFastDecode)
	if !errors.Is(fastErr, cause) || sdkErr.Error() != fastErr.Error() {
		t.Fatalf("SDK: %v; fast: %v", sdkErr, fastErr)
	}
}

// renameDeserializer stands for a later SDK that names its deserializer otherwise: it replaces
// "OperationDeserializer" with a middleware of another name that delegates to it.
func renameDeserializer(o *kinesis.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		old, err := s.Deserialize.Remove("OperationDeserializer")
		if err != nil {
			return err
		}
		return s.Deserialize.Add(renamed{old}, middleware.After)
	})
}

type renamed struct {
	middleware.DeserializeMiddleware
}

func (renamed) ID() string { return "SomeFutureDeserializer" }

// listDeserializers records the deserialize step's middleware IDs once every option has run.
func listDeserializers(ids *[]string) func(*kinesis.Options) {
	return func(o *kinesis.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			*ids = s.Deserialize.List()
			return nil
		})
	}
}

// TestWithoutOperationDeserializer: when the stack has no "OperationDeserializer", the option
// changes nothing: the same stack, the same output, the same typed errors.
func TestWithoutOperationDeserializer(t *testing.T) {
	var without, with []string
	body := genBody(10, bodyOpts{tricky: true, children: true})
	sdk, err := call(ok200(body), renameDeserializer, listDeserializers(&without))
	if err != nil {
		t.Fatal(err)
	}
	fast, err := call(ok200(body), renameDeserializer, getrecords.WithFastDecode, listDeserializers(&with))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(without, with) || !slices.Contains(with, "SomeFutureDeserializer") || slices.Contains(with, "OperationDeserializer") {
		t.Fatalf("deserialize step %v with the option, %v without", with, without)
	}
	requireSame(t, "renamed deserializer", sdk, fast)

	a := &answer{status: 400, body: []byte(`{"__type":"ExpiredIteratorException","message":"expired"}`)}
	_, err = call(a, renameDeserializer, getrecords.WithFastDecode)
	if e := (*types.ExpiredIteratorException)(nil); !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *types.ExpiredIteratorException", err, err)
	}
}

// TestSwapOnBareStack: on a stack without the SDK's deserializer, the option's stack function
// returns nil and adds nothing.
func TestSwapOnBareStack(t *testing.T) {
	var o kinesis.Options
	getrecords.WithFastDecode(&o)
	if len(o.APIOptions) != 1 {
		t.Fatalf("%d stack functions, want 1", len(o.APIOptions))
	}
	s := middleware.NewStack("GetRecords", smithyhttp.NewStackRequest)
	if err := o.APIOptions[0](s); err != nil {
		t.Fatalf("stack function: %v", err)
	}
	if ids := s.Deserialize.List(); len(ids) != 0 {
		t.Fatalf("deserialize step %v, want it empty", ids)
	}
}

// tracked is a response body that records whether it was read to EOF and closed.
type tracked struct {
	r         io.Reader
	eof, shut bool
	failAfter int // >0: fail the read after this many bytes
	read      int
}

func (b *tracked) Read(p []byte) (int, error) {
	if b.failAfter > 0 && b.read+len(p) > b.failAfter {
		p = p[:b.failAfter-b.read]
		if len(p) == 0 {
			return 0, errors.New("fake read failure")
		}
	}
	n, err := b.r.Read(p)
	b.read += n
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *tracked) Close() error { b.shut = true; return nil }

// TestBodyReadToEOFAndClosed: the body is read to EOF and closed when it decodes, when it does
// not, and when reading it fails (then the error is a DeserializationError and the body is
// closed all the same).
func TestBodyReadToEOFAndClosed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		failAfter int
		wantErr   bool
	}{
		{"decodes", string(genBody(50, bodyOpts{})), 0, false},
		{"malformed", `{"Records":[{"Data":"AA=="}],"MillisBehindLatest":x}`, 0, true},
		{"read fails", string(genBody(50, bodyOpts{})), 1000, true},
	} {
		var body *tracked
		a := ok200([]byte(tc.body))
		a.wrap = func(r io.Reader) io.ReadCloser { body = &tracked{r: r, failAfter: tc.failAfter}; return body }
		_, err := call(a, getrecords.WithFastDecode)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: error %v", tc.name, err)
		}
		var de *smithy.DeserializationError
		if err != nil && !errors.As(err, &de) {
			t.Errorf("%s: error %v (%T) is not a *smithy.DeserializationError", tc.name, err, err)
		}
		if !body.shut || !body.eof && tc.failAfter == 0 {
			t.Errorf("%s: read to EOF %v, closed %v", tc.name, body.eof, body.shut)
		}
		if n := a.httpDos.Load(); n != 1 {
			t.Errorf("%s: %d requests, want 1", tc.name, n)
		}
	}
}

// TestNoSDKDeserializer: should the fast deserializer find no SDK deserializer behind it (Swap
// returning nil, nil), an answer it does not decode goes up as received instead of panicking,
// and a 200 answer is still decoded.
func TestNoSDKDeserializer(t *testing.T) {
	m := getrecords.BareDeserializer()
	cause := errors.New("connection reset by fake peer")
	resp500 := &smithyhttp.Response{Response: &http.Response{StatusCode: 500, Body: http.NoBody}}
	md := middleware.Metadata{}
	md.Set("k", "v")
	for _, tc := range []struct {
		name string
		raw  any
		err  error
	}{
		{"500", resp500, nil},
		{"transport error", nil, cause},
		{"not HTTP", "raw", nil},
	} {
		next := middleware.DeserializeHandlerFunc(func(context.Context, middleware.DeserializeInput) (
			middleware.DeserializeOutput, middleware.Metadata, error,
		) {
			return middleware.DeserializeOutput{RawResponse: tc.raw}, md, tc.err
		})
		out, gotMD, err := m.HandleDeserialize(context.Background(), middleware.DeserializeInput{}, next)
		if out.RawResponse != tc.raw || out.Result != nil || err != tc.err || gotMD.Get("k") != "v" {
			t.Errorf("%s: got %v, %v, %v", tc.name, out, gotMD, err)
		}
	}

	body := genBody(3, bodyOpts{})
	next := middleware.DeserializeHandlerFunc(func(context.Context, middleware.DeserializeInput) (
		middleware.DeserializeOutput, middleware.Metadata, error,
	) {
		return middleware.DeserializeOutput{RawResponse: &smithyhttp.Response{Response: &http.Response{
			StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
			Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}}}}}, md, nil
	})
	out, _, err := m.HandleDeserialize(context.Background(), middleware.DeserializeInput{}, next)
	want, _ := getrecords.Decode(body)
	got, ok := out.Result.(*kinesis.GetRecordsOutput)
	if err != nil || !ok {
		t.Fatalf("200: result %T, error %v", out.Result, err)
	}
	requireEqualOutputs(t, "200 without an SDK deserializer", want, got)
}

// TestKeepBuf: a body buffer goes back to the pool only if it is at most 16 MiB (the largest
// answer) and at most 4 times the body it held plus 64 KiB.
func TestKeepBuf(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		capacity, body int
		keep           bool
	}{
		{0, 0, true},
		{getrecords.PoolSlack, 0, true},
		{getrecords.PoolSlack + 1, 0, false},
		{300 << 10, 300 << 10, true},
		{4*(100<<10) + getrecords.PoolSlack, 100 << 10, true},
		{4*(100<<10) + getrecords.PoolSlack + 1, 100 << 10, false},
		{4 * mib, 4 * mib, true},
		{16 * mib, 13 * mib, true}, // a backlog of 1 KiB records: 13 MiB answers, reused
		{16*mib + 1, 16 * mib, false},
		{4 * mib, 10 << 10, false}, // a large answer's buffer after a small one
	} {
		if got := getrecords.KeepBuf(tc.capacity, tc.body); got != tc.keep {
			t.Errorf("capacity %d, body %d: keep %v, want %v", tc.capacity, tc.body, got, tc.keep)
		}
	}
	if getrecords.MaxPooled != 16*mib || getrecords.PoolSlack != 64<<10 {
		t.Fatalf("MaxPooled %d, PoolSlack %d", getrecords.MaxPooled, getrecords.PoolSlack)
	}
}

// TestUnrecognisedAnswersGoToSDK: an answer that is not JSON by its Content-Type (a proxy's
// HTML page with status 200) and a JSON body that Decode refuses both reach the SDK's
// deserializer, and the call fails exactly as it does without WithFastDecode: the SDK's words
// and types, not a second opinion. The one body the SDK panics on fails with Decode's error.
func TestUnrecognisedAnswersGoToSDK(t *testing.T) {
	html := &answer{status: 200, header: map[string]string{"Content-Type": "text/html"}, body: []byte("<html><body>Gateway says hello</body></html>")}
	for _, tc := range []struct {
		name string
		a    func() *answer
	}{
		{"an HTML page", func() *answer { return &answer{status: html.status, header: html.header, body: html.body} }},
		{"a JSON body Decode refuses", func() *answer { return ok200([]byte(`{"Records":[{"Data":"!!"}]}`)) }},
		{"a body cut short", func() *answer { return ok200([]byte(`{"Records":[{"Data":"AAAA"`)) }},
	} {
		_, sdkErr := call(tc.a())
		_, fastErr := call(tc.a(), getrecords.WithFastDecode)
		var de *smithy.DeserializationError
		if sdkErr == nil || fastErr == nil || fastErr.Error() != sdkErr.Error() || !errors.As(fastErr, &de) {
			t.Errorf("%s: with WithFastDecode %v (%T), want the SDK's own error %v", tc.name, fastErr, fastErr, sdkErr)
		}
	}
	_, err := call(ok200([]byte(`{"Records":[{"ApproximateArrivalTimestamp":"NaN"}]}`)), getrecords.WithFastDecode)
	var de *smithy.DeserializationError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("a NaN timestamp: %v (%T), want a *smithy.DeserializationError saying the SDK panicked", err, err)
	}
}

// TestJSONContentTypes: the Content-Types whose answers Decode reads.
func TestJSONContentTypes(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/x-amz-json-1.1":                true,
		"Application/X-Amz-Json-1.1":                true,
		"application/x-amz-json-1.1; charset=utf-8": true,
		"application/json":                          true,
		"application/x-amz-cbor-1.1":                false,
		"application/x-amz-json-1.0":                false,
		"text/html":                                 false,
		"":                                          false,
	} {
		body := genBody(2, bodyOpts{})
		a := ok200(body)
		a.header = map[string]string{"Content-Type": ct}
		out, err := call(a, getrecords.WithFastDecode)
		if err != nil || len(out.Records) != 2 {
			t.Errorf("Content-Type %q: %v, %v; the SDK reads the same body", ct, out, err)
		}
		if got := getrecords.IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}
