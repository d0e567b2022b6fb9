package memlog

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/eventstream"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// SubscribeToShard's answer goes through the SDK. The event stream of a SubscribeToShardOutput
// is an unexported field the SDK sets while it deserializes an HTTP response, so the only way to
// hand a caller a real output, whose GetStream works as it does against AWS, is to let the SDK
// make one: a private client, built once per Log, sends the already-accepted request to an
// in-process HTTP doer, which answers with a body that the subscription's pump goroutine writes
// AWS's event-stream messages into. The SDK decodes them exactly as it decodes AWS's, so record
// fields, heartbeats, ChildShards and in-stream exceptions reach the caller by the same code.

// placeholderEndpoint is the client's endpoint. No request leaves the process; it only has to
// satisfy the SDK's endpoint rules.
const placeholderEndpoint = "https://memlog.invalid"

// subscriptionKey carries the accepted subscription in the context of the SDK call, from
// SubscribeToShard to the HTTP doer.
type subscriptionKey struct{}

// sdk returns the Log's private SDK client, building it on first use: anonymous credentials (no
// signing), one attempt (a retry would ask the doer for a second response it has no subscription
// for) and the in-process doer.
func (l *Log) sdk() *awskinesis.Client {
	l.fanout.clientOnce.Do(func() {
		l.fanout.client = awskinesis.New(awskinesis.Options{
			Region:       l.region,
			Credentials:  aws.AnonymousCredentials{},
			BaseEndpoint: aws.String(placeholderEndpoint),
			HTTPClient:   subscribeDoer{},
			Retryer:      aws.NopRetryer{},
		})
	})
	return l.fanout.client
}

// ownProtocol gives one SDK call a protocol of its own. A client's protocol holds one
// event-stream codec with per-call scratch state (its decoder and payload buffer), shared by all
// the client's streams without synchronisation, so two subscriptions of one client race, as -race
// reports (aws/smithy-go#714). A protocol per subscription keeps each stream's decoding apart.
func ownProtocol(o *awskinesis.Options) {
	o.Protocol = awsjson.New11(schemas.Kinesis_20131202)
}

// subscribeDoer answers the SDK's SubscribeToShard request with the subscription the request's
// context carries: 200, AWS's event-stream content type, and the subscription's body.
type subscribeDoer struct{}

func (subscribeDoer) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	sub, ok := req.Context().Value(subscriptionKey{}).(*subscription)
	if !ok {
		return nil, errors.New("memlog: the SubscribeToShard transport was called without a subscription")
	}
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}},
		Body:          sub.body,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// subscriptionBody is the response body: the read end of the pipe the pump writes to. Closing it
// (the SDK does when its stream is closed, or has ended) also cancels the subscription's
// context, so a pump waiting for records or timers stops at once rather than at its next write.
type subscriptionBody struct {
	*io.PipeReader
	cancel context.CancelCauseFunc
}

// errBodyClosed is the cause of a subscription's context when the SDK closed the body.
var errBodyClosed = errors.New("memlog: subscription's event stream closed by the reader")

func (b subscriptionBody) Close() error {
	b.cancel(errBodyClosed)
	return b.PipeReader.Close()
}

// streamExceptions are the exceptions SubscribeToShardEventStream models: the SDK decodes these
// into its typed errors. Any other error ending a subscription is sent as an
// InternalFailureException, which is what AWS's side of a stream fails with.
var streamExceptions = map[string]bool{
	"ResourceNotFoundException": true,
	"ResourceInUseException":    true,
	"KMSDisabledException":      true,
	"KMSInvalidStateException":  true,
	"KMSAccessDeniedException":  true,
	"KMSNotFoundException":      true,
	"KMSOptInRequired":          true,
	"KMSThrottlingException":    true,
	"InternalFailureException":  true,
}

// exceptionOf is the exception type and message an error ends a stream with.
func exceptionOf(err error) (typ, msg string) {
	var api smithy.APIError
	if errors.As(err, &api) && streamExceptions[api.ErrorCode()] {
		return api.ErrorCode(), api.ErrorMessage()
	}
	return "InternalFailureException", err.Error()
}

// initialResponse is the first message of the stream. The SDK's awsJson protocol reads one
// before it returns the output (it would carry the output's members; SubscribeToShardOutput has
// none, hence {}), and fails the call without it.
func initialResponse() eventstream.Message {
	var m eventstream.Message
	m.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(eventstream.EventMessageType))
	m.Headers.Set(eventstream.EventTypeHeader, eventstream.StringValue("initial-response"))
	m.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
	m.Payload = []byte("{}")
	return m
}

// eventMessage is a SubscribeToShardEvent carrying payload, the event's JSON.
func eventMessage(payload []byte) eventstream.Message {
	var m eventstream.Message
	m.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(eventstream.EventMessageType))
	m.Headers.Set(eventstream.EventTypeHeader, eventstream.StringValue("SubscribeToShardEvent"))
	m.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
	m.Payload = payload
	return m
}

// exceptionMessage is an in-stream exception of type typ. The SDK ends the stream with it: Err
// returns the SDK's typed error (e.g. *types.ResourceInUseException) with msg as its message.
func exceptionMessage(typ, msg string) eventstream.Message {
	var m eventstream.Message
	m.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(eventstream.ExceptionMessageType))
	m.Headers.Set(eventstream.ExceptionTypeHeader, eventstream.StringValue(typ))
	m.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
	m.Payload, _ = json.Marshal(struct {
		Message string `json:"message"`
	}{msg}) // cannot fail: a struct of one string
	return m
}

// The JSON of a SubscribeToShardEvent, as AWS's awsJson protocol writes it.
type (
	eventJSON struct {
		Records                    []recordJSON `json:"Records"`
		ContinuationSequenceNumber *string      `json:"ContinuationSequenceNumber,omitempty"`
		MillisBehindLatest         int64        `json:"MillisBehindLatest"`
		ChildShards                []childJSON  `json:"ChildShards,omitempty"`
	}
	recordJSON struct {
		SequenceNumber              string      `json:"SequenceNumber"`
		ApproximateArrivalTimestamp json.Number `json:"ApproximateArrivalTimestamp"`
		Data                        []byte      `json:"Data"` // base64, as encoding/json writes a []byte
		PartitionKey                string      `json:"PartitionKey"`
	}
	childJSON struct {
		ShardId      string    `json:"ShardId"`
		ParentShards []string  `json:"ParentShards"`
		HashKeyRange rangeJSON `json:"HashKeyRange"`
	}
	rangeJSON struct {
		StartingHashKey string `json:"StartingHashKey"`
		EndingHashKey   string `json:"EndingHashKey"`
	}
)

// epochSeconds writes an arrival time (Unix ms) as awsJson's epoch seconds with a fraction, plus
// half a millisecond: the SDK reads the number into a float64 and truncates it to whole
// milliseconds, and 1709294400.123 is a float64 just below .123, which would come back as .122.
// Half a millisecond up, truncation lands on the stored millisecond, so an event's
// ApproximateArrivalTimestamp equals GetRecords' for the same record.
func epochSeconds(ms int64) json.Number {
	return json.Number(strconv.FormatFloat((float64(ms)+0.5)/1000, 'f', 4, 64))
}

func childrenJSON(cs []types.ChildShard) []childJSON {
	out := make([]childJSON, len(cs))
	for i, c := range cs {
		out[i] = childJSON{ShardId: deref(c.ShardId), ParentShards: append([]string{}, c.ParentShards...)}
		if r := c.HashKeyRange; r != nil {
			out[i].HashKeyRange = rangeJSON{StartingHashKey: deref(r.StartingHashKey), EndingHashKey: deref(r.EndingHashKey)}
		}
	}
	return out
}
