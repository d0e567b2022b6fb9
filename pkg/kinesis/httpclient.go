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

// kinesisPooled raises the idle connections of the HTTP client the SDK made for a Kinesis
// client, for a config with no HTTPClient of its own (the SDK has resolved its default by the
// time options run). It runs before the caller's KinesisOptions, which may replace it.
func kinesisPooled(cfg aws.Config) []func(*awskinesis.Options) {
	if cfg.HTTPClient != nil {
		return nil
	}
	return []func(*awskinesis.Options){func(o *awskinesis.Options) {
		if b, ok := o.HTTPClient.(*awshttp.BuildableClient); ok {
			o.HTTPClient = b.WithTransportOptions(raiseIdleConns)
		}
	}}
}

// dynamoDBPooled is kinesisPooled for the lease table's DynamoDB client.
func dynamoDBPooled(cfg aws.Config) []func(*dynamodb.Options) {
	if cfg.HTTPClient != nil {
		return nil
	}
	return []func(*dynamodb.Options){func(o *dynamodb.Options) {
		if b, ok := o.HTTPClient.(*awshttp.BuildableClient); ok {
			o.HTTPClient = b.WithTransportOptions(raiseIdleConns)
		}
	}}
}
