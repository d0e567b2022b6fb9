package getrecords

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	smithy "github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	"github.com/aws/smithy-go/tracing"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// sdkDeserializerID is the ID of the deserialize middleware the SDK adds to every operation
// (kinesis v1.56: deserializeResponseMiddleware). The fast one takes its place and its ID, so
// that middleware placed relative to it stays where it was.
const sdkDeserializerID = "OperationDeserializer"

// WithFastDecode is an option for Client.GetRecords (pass it among the call's optFns, never
// to another operation: it decodes every 200 answer as a GetRecords one). It replaces the
// SDK's deserializer with one that decodes a 200 JSON answer with Decode and hands everything
// else (an error status, a transport error, a response that is not HTTP, an answer that is not
// JSON or that Decode refuses) to the SDK's deserializer,
// with the response already received: no second request, and the SDK's typed errors
// (*types.ExpiredIteratorException and the others) unchanged.
//
// If the stack has no deserializer named "OperationDeserializer" (a later SDK may rename it),
// the option leaves the stack as it is and the call works exactly as it would without it.
//
// A stack function of the caller's (in APIOptions) that wraps or replaces the middleware named
// "OperationDeserializer" is bypassed for 200 answers when it runs before this option (the
// client's APIOptions all do): the option takes its place and hands it only what is not a 200
// answer. One that runs after it (a later optFn of the call) wraps or replaces the fast
// deserializer instead of the SDK's.
func WithFastDecode(o *kinesis.Options) {
	o.APIOptions = append(o.APIOptions, swapDeserializer)
}

// swapDeserializer puts the fast deserializer in the SDK's one's place, if it finds it there:
// not finding it is not an error of the call's, so the call goes on with the SDK's
// deserializer, whatever it is named. Should Swap fail all the same, it has changed nothing.
func swapDeserializer(s *middleware.Stack) error {
	sdk, ok := s.Deserialize.Get(sdkDeserializerID)
	if !ok || sdk == nil {
		return nil
	}
	m := &deserializer{sdk: sdk}
	if prev, err := s.Deserialize.Swap(sdkDeserializerID, m); err == nil && prev != nil {
		m.sdk = prev
	}
	return nil
}

// deserializer is the fast deserialize middleware; sdk is the one it replaced (never nil on a
// stack that swapDeserializer built; HandleDeserialize copes with nil all the same).
type deserializer struct {
	sdk middleware.DeserializeMiddleware
}

// ID keeps the SDK's ID (see sdkDeserializerID).
func (*deserializer) ID() string { return sdkDeserializerID }

// HandleDeserialize sends the request (next), then decodes a 200 answer in JSON itself. Like
// the SDK's deserializer it reads the body to EOF and closes it; like it, it opens an
// "OperationDeserializer" tracing span. It does not record the SDK's
// client.call.deserialization_duration metric, whose timer is private to the kinesis package.
//
// Whatever it does not recognise goes to the SDK's deserializer, which says what is wrong in
// its own words and types: an answer whose Content-Type is not JSON (a proxy's HTML page, a
// CBOR answer), and a body Decode refuses (handed over again from the bytes already read).
// Decode is never looser than the SDK (doc.go), so a body it refuses is one the SDK refuses
// too, or one that the SDK reads and Decode does not: either way the SDK's answer stands.
func (m *deserializer) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleDeserialize(ctx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || !ok || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return m.toSDK(ctx, in, out, md, err)
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		return m.refusedToSDK(ctx, in, out, md, &smithy.DeserializationError{
			Err: fmt.Errorf("getrecords: an answer with status 200 and Content-Type %q, not JSON", resp.Header.Get("Content-Type"))})
	}
	_, span := tracing.StartSpan(ctx, sdkDeserializerID)
	defer span.End()

	buf := bufs.Get().(*bytes.Buffer)
	defer putBuf(buf)
	if n := resp.ContentLength; n > 0 && n <= maxGrow { // trusted only as far as an answer goes
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead spare bytes to see EOF
	}
	_, rerr := buf.ReadFrom(resp.Body)
	if cerr := resp.Body.Close(); cerr != nil {
		middleware.GetLogger(ctx).Logf(logging.Warn, "failed to close HTTP response body, this may affect connection reuse: %v", cerr)
	}
	if rerr != nil {
		return out, md, &smithy.DeserializationError{Err: fmt.Errorf("getrecords: read body: %w", rerr)}
	}
	res, derr := Decode(buf.Bytes())
	if derr != nil {
		// A copy: the buffer goes back to the pool when this returns, and the SDK's body
		// closing middleware (outside this one) and the error's response may read the body
		// after that. The path is rare; the copy costs nothing that matters.
		resp.Body = io.NopCloser(bytes.NewReader(bytes.Clone(buf.Bytes())))
		return m.refusedToSDK(ctx, in, out, md, derr)
	}
	out.Result = res
	return out, md, nil
}

// refusedToSDK hands a 200 answer this deserializer does not read (derr says why) to the SDK's
// deserializer. The SDK panics on some bodies (a timestamp "NaN"); bad input must never take
// the process down, so a panic becomes the error it should have been, with derr's words.
func (m *deserializer) refusedToSDK(ctx context.Context, in middleware.DeserializeInput, out middleware.DeserializeOutput, md middleware.Metadata, derr error) (
	rout middleware.DeserializeOutput, rmd middleware.Metadata, err error,
) {
	if m.sdk == nil {
		return out, md, derr
	}
	defer func() {
		if p := recover(); p != nil {
			rout, rmd, err = out, md, fmt.Errorf("getrecords: the SDK's deserializer panicked (%v) on an answer this one refuses: %w", p, derr)
		}
	}()
	return m.toSDK(ctx, in, out, md, nil)
}

// toSDK hands an answer next already returned to the SDK's deserializer.
func (m *deserializer) toSDK(ctx context.Context, in middleware.DeserializeInput, out middleware.DeserializeOutput, md middleware.Metadata, err error) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	if m.sdk == nil { // no deserializer to hand it to: the answer goes up as received
		return out, md, err
	}
	return m.sdk.HandleDeserialize(ctx, in, received{out, md, err})
}

// isJSON reports a Content-Type that Decode reads: Kinesis answers application/x-amz-json-1.1
// (kinesalite echoes the request's, which is that too); application/json is the same body.
// Parameters (a charset) and case do not matter.
func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(mt)
	return strings.EqualFold(mt, "application/x-amz-json-1.1") || strings.EqualFold(mt, "application/json")
}

// received replays to the SDK's deserializer the answer that next already returned.
type received struct {
	out middleware.DeserializeOutput
	md  middleware.Metadata
	err error
}

func (r received) HandleDeserialize(context.Context, middleware.DeserializeInput) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	return r.out, r.md, r.err
}

// maxGrow bounds what a Content-Length may make a buffer grow to before the body is read: a
// GetRecords answer is at most 10 MiB of records, base64 adds a third. A larger (or absent)
// Content-Length is not trusted: the buffer then grows as the body comes.
const maxGrow = 16 << 20

// maxPooled and poolSlack bound the buffers kept for reuse (see putBuf).
const (
	maxPooled = maxGrow
	poolSlack = 64 << 10
)

// bufs holds body buffers between calls: Decode copies what it keeps, so a buffer is free
// again as soon as Decode returns, and a reader's next answer reuses it.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putBuf keeps b for reuse only if it is at most maxPooled and at most 4 times the body it just
// held plus poolSlack. A buffer keeps the size of the largest body it has held: pooled whatever
// its size, one large answer's buffer would go on serving every later small answer, megabytes
// held for kilobytes. Answers of a steady size keep reusing their buffers; after a large
// answer, the first small one lets its buffer go. maxPooled is as large as an answer gets: a
// backlog of 1 KiB records answers 13 MiB a read, and a lower bound gave each such read a
// fresh buffer (found in review).
func putBuf(b *bytes.Buffer) {
	if keepBuf(b.Cap(), b.Len()) {
		b.Reset()
		bufs.Put(b)
	}
}

// keepBuf is putBuf's rule, for a buffer of capacity c that held a body of n bytes.
func keepBuf(c, n int) bool { return c <= maxPooled && c <= 4*n+poolSlack }
