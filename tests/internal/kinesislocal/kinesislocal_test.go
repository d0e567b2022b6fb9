package kinesislocal_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/kinesislocal"
)

// TestSubscribeToShard reads records pushed by kinesis-local through the SDK with HTTPClient:
// the three put before the subscription and one put while it is open, in order. Without
// HTTPClient the SDK refuses kinesis-local's stream, which is why the package exists.
func TestSubscribeToShard(t *testing.T) {
	endpoint := os.Getenv("KINESIS_MOCK_ENDPOINT")
	if endpoint == "" {
		t.Skip("KINESIS_MOCK_ENDPOINT is not set: run `make test`, which starts kinesis-local")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := awskinesis.New(awskinesis.Options{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint), HTTPClient: kinesislocal.HTTPClient(nil),
	})
	stream := "efo-" + time.Now().Format("150405.000000")
	if _, err := client.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: &stream, ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	var arn string
	for {
		out, err := client.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: &stream})
		if err != nil {
			t.Fatal(err)
		}
		if out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			arn = *out.StreamDescriptionSummary.StreamARN
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var shard string
	for i := range 3 {
		out, err := client.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: &stream, PartitionKey: aws.String("k"), Data: []byte{byte('a' + i)}})
		if err != nil {
			t.Fatal(err)
		}
		shard = aws.ToString(out.ShardId)
	}
	reg, err := client.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{StreamARN: &arn, ConsumerName: aws.String("c1")})
	if err != nil {
		t.Fatal(err)
	}
	for {
		d, err := client.DescribeStreamConsumer(ctx, &awskinesis.DescribeStreamConsumerInput{ConsumerARN: reg.Consumer.ConsumerARN})
		if err != nil {
			t.Fatal(err)
		}
		if d.ConsumerDescription.ConsumerStatus == types.ConsumerStatusActive {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every record goes to the shard of its key, "k"; the check without HTTPClient uses the
	// other shard, since kinesis-local holds a subscription a client gave up until it next writes to it.
	subscribe := func(c *awskinesis.Client, shard string) (*awskinesis.SubscribeToShardOutput, error) {
		return c.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{
			ConsumerARN: reg.Consumer.ConsumerARN, ShardId: aws.String(shard),
			StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
		})
	}
	plain := awskinesis.New(awskinesis.Options{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	})
	if out, err := subscribe(plain, other(shard)); err == nil {
		_ = out.GetStream().Close()
		t.Fatalf("SubscribeToShard without HTTPClient succeeded: kinesis-local now sends the initial-response event, and HTTPClient would add a second one")
	} else if !strings.Contains(err.Error(), "initial-response") {
		t.Fatalf("SubscribeToShard without HTTPClient: %v; want the SDK's initial-response error", err)
	}
	out, err := subscribe(client, shard)
	if err != nil {
		t.Fatal(err)
	}
	es := out.GetStream()
	defer es.Close()
	var got []string
	for ev := range es.Events() {
		e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !ok {
			t.Fatalf("unexpected event %T", ev)
		}
		for _, r := range e.Value.Records {
			got = append(got, string(r.Data))
		}
		if len(got) == 3 { // the first event: now one more while the stream is open
			if _, err := client.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: &stream, PartitionKey: aws.String("k"), Data: []byte("late")}); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) >= 4 {
			break
		}
	}
	if err := es.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if want := []string{"a", "b", "c", "late"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("records %q, want %q", got, want)
	}
}

// other is the shard of a 2-shard stream that is not shard.
func other(shard string) string {
	if shard == "shardId-000000000000" {
		return "shardId-000000000001"
	}
	return "shardId-000000000000"
}
