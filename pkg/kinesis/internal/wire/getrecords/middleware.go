package getrecords

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
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
// SDK's deserializer with one that decodes a 200 answer with Decode and hands everything else
// (an error status, a transport error, a response that is not HTTP) to the SDK's deserializer,
// with the response already received: no second request, and the SDK's typed errors
// (*types.ExpiredIteratorException and the others) unchanged.
//
// If the stack has no deserializer named "OperationDeserializer" (a later SDK may rename it),
// the option leaves the stack as it is and the call works exactly as it would without it.
func WithFastDecode(o *kinesis.Options) {
	o.APIOptions = append(o.APIOptions, swapDeserializer)
}

// swapDeserializer puts the fast deserializer in the SDK's one's place. Swap fails only when
// the ID is not on the stack, and then it has changed nothing: not finding it is not an
// error of the call's, so the call goes on with the SDK's deserializer, whatever it is named.
func swapDeserializer(s *middleware.Stack) error {
	m := &deserializer{}
	sdk, err := s.Deserialize.Swap(sdkDeserializerID, m)
	if err != nil || sdk == nil {
		return nil
	}
	m.sdk = sdk
	return nil
}

// deserializer is the fast deserialize middleware; sdk is the one it replaced.
type deserializer struct {
	sdk middleware.DeserializeMiddleware
}

// ID keeps the SDK's ID (see sdkDeserializerID).
func (*deserializer) ID() string { return sdkDeserializerID }

// HandleDeserialize sends the request (next), then decodes a 200 answer itself. Like the SDK's
// deserializer it reads the body to EOF and closes it, and returns a decoding failure as a
// *smithy.DeserializationError; like it, it opens an "OperationDeserializer" tracing span. It
// does not record the SDK's client.call.deserialization_duration metric, whose timer is
// private to the kinesis package.
func (m *deserializer) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleDeserialize(ctx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || !ok || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return m.sdk.HandleDeserialize(ctx, in, received{out, md, err})
	}
	_, span := tracing.StartSpan(ctx, sdkDeserializerID)
	defer span.End()

	buf := bufs.Get().(*bytes.Buffer)
	defer putBuf(buf)
	if n := resp.ContentLength; n > 0 && n <= maxPooled {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead spare bytes to see EOF
	}
	_, rerr := buf.ReadFrom(resp.Body)
	if cerr := resp.Body.Close(); cerr != nil {
		middleware.GetLogger(ctx).Logf(logging.Warn, "failed to close HTTP response body, this may affect connection reuse: %v", cerr)
	}
	if rerr != nil {
		return out, md, &smithy.DeserializationError{Err: fmt.Errorf("getrecords: read body: %w", rerr)}
	}
	res, err := Decode(buf.Bytes())
	if err != nil {
		return out, md, err
	}
	out.Result = res
	return out, md, nil
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

// maxPooled bounds the buffers kept for reuse: a GetRecords answer is at most 10 MiB of
// records, base64 adds a third; a buffer grown beyond that by something else is let go.
const maxPooled = 16 << 20

// bufs holds body buffers between calls: Decode copies what it keeps, so a buffer is free
// again as soon as Decode returns, and a reader's next answer reuses it.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooled {
		b.Reset()
		bufs.Put(b)
	}
}
