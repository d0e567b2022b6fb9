// Package kinesislocal adapts the AWS SDK's Kinesis client to kinesis-local (kinesis-mock), the
// test server that implements enhanced fan-out, for the tests and the bench table.
//
// kinesis-local streams SubscribeToShard events but never sends the initial-response event
// that opens every event stream of an RPC protocol on AWS, and the SDK refuses a stream without
// it ("expected initial-response"). HTTPClient adds that event in front of the body of every
// successful SubscribeToShard response; nothing else is changed. It is for tests only: on AWS
// the event is there, and adding another would break the stream.
package kinesislocal

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/eventstream"
)

// HTTPClient wraps base (nil: a plain *http.Client) so that SubscribeToShard responses carry the
// initial-response event the SDK expects.
func HTTPClient(base aws.HTTPClient) aws.HTTPClient {
	if base == nil {
		base = &http.Client{}
	}
	return addInitialResponse{base: base}
}

type addInitialResponse struct{ base aws.HTTPClient }

func (c addInitialResponse) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.base.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".SubscribeToShard") {
		return resp, err
	}
	first, err := initialResponse()
	if err != nil {
		_ = resp.Body.Close()
		return nil, err
	}
	resp.Body = prefixed{Reader: io.MultiReader(bytes.NewReader(first), resp.Body), Closer: resp.Body}
	return resp, nil
}

// prefixed reads the initial-response event and then the server's body, and closes the latter.
type prefixed struct {
	io.Reader
	io.Closer
}

// initialResponse encodes an empty initial-response event: SubscribeToShardOutput has no
// members.
var initialResponse = sync.OnceValues(func() ([]byte, error) {
	var msg eventstream.Message
	msg.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(eventstream.EventMessageType))
	msg.Headers.Set(eventstream.EventTypeHeader, eventstream.StringValue("initial-response"))
	msg.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
	msg.Payload = []byte("{}")
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, msg); err != nil {
		return nil, fmt.Errorf("kinesislocal: encoding the initial-response event: %w", err)
	}
	return buf.Bytes(), nil
})
