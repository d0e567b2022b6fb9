package awscall

import (
	"context"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// recorder keeps, per method, the Options its call's optFns produce.
type recorder map[string]awskinesis.Options

func record[O any](r recorder, name string, optFns []func(*awskinesis.Options)) (*O, error) {
	o := awskinesis.Options{Retryer: nil}
	for _, f := range optFns {
		f(&o)
	}
	r[name] = o
	return nil, nil
}

func (r recorder) PutRecord(_ context.Context, _ *awskinesis.PutRecordInput, f ...func(*awskinesis.Options)) (*awskinesis.PutRecordOutput, error) {
	return record[awskinesis.PutRecordOutput](r, "PutRecord", f)
}
func (r recorder) PutRecords(_ context.Context, _ *awskinesis.PutRecordsInput, f ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	return record[awskinesis.PutRecordsOutput](r, "PutRecords", f)
}
func (r recorder) ListShards(_ context.Context, _ *awskinesis.ListShardsInput, f ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	return record[awskinesis.ListShardsOutput](r, "ListShards", f)
}
func (r recorder) GetShardIterator(_ context.Context, _ *awskinesis.GetShardIteratorInput, f ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	return record[awskinesis.GetShardIteratorOutput](r, "GetShardIterator", f)
}
func (r recorder) GetRecords(_ context.Context, _ *awskinesis.GetRecordsInput, f ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	return record[awskinesis.GetRecordsOutput](r, "GetRecords", f)
}
func (r recorder) DescribeStreamSummary(_ context.Context, _ *awskinesis.DescribeStreamSummaryInput, f ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	return record[awskinesis.DescribeStreamSummaryOutput](r, "DescribeStreamSummary", f)
}
func (r recorder) CreateStream(_ context.Context, _ *awskinesis.CreateStreamInput, f ...func(*awskinesis.Options)) (*awskinesis.CreateStreamOutput, error) {
	return record[awskinesis.CreateStreamOutput](r, "CreateStream", f)
}
func (r recorder) RegisterStreamConsumer(_ context.Context, _ *awskinesis.RegisterStreamConsumerInput, f ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error) {
	return record[awskinesis.RegisterStreamConsumerOutput](r, "RegisterStreamConsumer", f)
}
func (r recorder) DescribeStreamConsumer(_ context.Context, _ *awskinesis.DescribeStreamConsumerInput, f ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error) {
	return record[awskinesis.DescribeStreamConsumerOutput](r, "DescribeStreamConsumer", f)
}
func (r recorder) DeregisterStreamConsumer(_ context.Context, _ *awskinesis.DeregisterStreamConsumerInput, f ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error) {
	return record[awskinesis.DeregisterStreamConsumerOutput](r, "DeregisterStreamConsumer", f)
}
func (r recorder) SubscribeToShard(_ context.Context, _ *awskinesis.SubscribeToShardInput, f ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error) {
	return record[awskinesis.SubscribeToShardOutput](r, "SubscribeToShard", f)
}

// TestOneRetryLayerEveryCall: every method of the wrapped client, Kinesis's and fan-out's,
// goes out with the SDK's retries off and the setup errors explained, after the caller's own
// options (which may not turn the retries back on).
func TestOneRetryLayerEveryCall(t *testing.T) {
	rec := recorder{}
	w := reflect.ValueOf(OneRetryLayer(rec))
	if _, ok := w.Interface().(FanOut); !ok {
		t.Fatal("the wrapper of a fan-out client lost FanOut")
	}
	callerRetries := func(o *awskinesis.Options) { o.Retryer = nil } // a caller's option that clears it
	for i := range w.NumMethod() {
		name := w.Type().Method(i).Name
		m := w.Method(i)
		m.Call([]reflect.Value{reflect.ValueOf(context.Background()), reflect.Zero(m.Type().In(1)), reflect.ValueOf(callerRetries)})
		o, ok := rec[name]
		if !ok {
			t.Errorf("%s did not reach the client", name)
			continue
		}
		if _, ok := o.Retryer.(aws.NopRetryer); !ok || len(o.APIOptions) != 1 {
			t.Errorf("%s: Retryer %T and %d stack options, want aws.NopRetryer and ExplainSetup", name, o.Retryer, len(o.APIOptions))
		}
	}
	if len(rec) != 11 {
		t.Errorf("%d methods called, want the 11 of Kinesis and FanOut", len(rec))
	}
	if _, ok := OneRetryLayer(sdkCalls{rec}).(FanOut); ok {
		t.Error("a client without FanOut gained it")
	}
	if _, ok := Unwrap(OneRetryLayer(OneRetryLayer(rec))).(recorder); !ok {
		t.Error("a second OneRetryLayer wrapped the wrapper")
	}
}
