package kinesis

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// One retry layer. The driver retries Kinesis calls itself, each where it knows what a retry
// means: Publish sends rejected entries again up to PublisherConfig.MaxRetries, a reader backs
// off throttled reads up to 1 s and failed ones up to 10 s, the group retries at its next
// lease sync. The SDK's standard retryer (3 attempts, backoff up to 20 s, a retry quota) ran
// under all of it: a throttled PutRecords went out 3 times per retry of the driver's (12 HTTP
// requests for MaxRetries 3). So every Kinesis call goes out with the SDK's retries off
// (awscall.OneRetryLayer), through the user's client as well as one built from AWSConfig.
//
// The lease store's DynamoDB calls keep the SDK's retryer: the driver never sends a failed
// lease call again at once (a renewal, a lease sync, a heartbeat is made again at its next
// interval, on fresh state), and each is bounded by the driver's context, so the SDK's
// retries are the only layer there.
func oneRetryLayer(api KinesisAPI) KinesisAPI { return awscall.OneRetryLayer(api) }

// explainDynamoDBSetup is the option of the DynamoDB client a Subscriber builds from AWSConfig:
// a lease table that cannot be reached for want of a region or credentials says so.
func explainDynamoDBSetup(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, awscall.ExplainSetup)
}
