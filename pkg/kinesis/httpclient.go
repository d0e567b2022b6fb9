package kinesis

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// maxIdleConnsPerHost is how many idle connections per host the clients a Subscriber builds
// from AWSConfig keep. Each shard reader has a GetRecords call out or waits between two, and
// renews its lease on its own, so a subscriber reading many shards uses about as many
// connections to each service as it has shards. With the SDK's default of 10 idle connections
// per host, all others were closed after each call and opened again (with a TLS handshake) for
// the next. Connections that are never needed are never opened, so the bound costs nothing for
// small streams; past it, connections are opened afresh as before.
const maxIdleConnsPerHost = 1024

// raiseIdleConns is the transport option that gives the SDK's HTTP client room for
// maxIdleConnsPerHost idle connections per host.
func raiseIdleConns(t *http.Transport) {
	t.MaxIdleConns = maxIdleConnsPerHost
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
}

// pooled is the option that raises the idle connections of the HTTP client the SDK made for a
// client of one service (client says where its options keep it), for a config with no
// HTTPClient of its own: the SDK has resolved its default by the time options run. It runs
// before the caller's options, which may replace it.
func pooled[O, C any](cfg aws.Config, client func(*O) *C) []func(*O) {
	if cfg.HTTPClient != nil {
		return nil
	}
	return []func(*O){func(o *O) {
		c := client(o)
		if b, ok := any(*c).(*awshttp.BuildableClient); ok {
			*c = any(b.WithTransportOptions(raiseIdleConns)).(C)
		}
	}}
}

// kinesisPooled is pooled for the Kinesis client.
func kinesisPooled(cfg aws.Config) []func(*awskinesis.Options) {
	return pooled(cfg, func(o *awskinesis.Options) *awskinesis.HTTPClient { return &o.HTTPClient })
}

// dynamoDBPooled is pooled for the lease table's DynamoDB client.
func dynamoDBPooled(cfg aws.Config) []func(*dynamodb.Options) {
	return pooled(cfg, func(o *dynamodb.Options) *dynamodb.HTTPClient { return &o.HTTPClient })
}
