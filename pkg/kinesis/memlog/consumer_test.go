package memlog_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// The fan-out operations have the SDK client's signatures, so a Log stands in for the client in
// an interface of them.
type fanOutAPI interface {
	RegisterStreamConsumer(context.Context, *awskinesis.RegisterStreamConsumerInput, ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(context.Context, *awskinesis.DescribeStreamConsumerInput, ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error)
	DeregisterStreamConsumer(context.Context, *awskinesis.DeregisterStreamConsumerInput, ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error)
	ListStreamConsumers(context.Context, *awskinesis.ListStreamConsumersInput, ...func(*awskinesis.Options)) (*awskinesis.ListStreamConsumersOutput, error)
	SubscribeToShard(context.Context, *awskinesis.SubscribeToShardInput, ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error)
}

var (
	_ fanOutAPI = (*memlog.Log)(nil)
	_ fanOutAPI = (*awskinesis.Client)(nil)
)

func describeConsumer(l *memlog.Log, in *awskinesis.DescribeStreamConsumerInput) (*types.ConsumerDescription, error) {
	out, err := l.DescribeStreamConsumer(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ConsumerDescription, nil
}

func TestRegisterStreamConsumer(t *testing.T) {
	l, c := newLog(t)
	createStream(t, l, "s", 1)
	out, err := l.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(streamARN), ConsumerName: aws.String("app-1.x_y"), Tags: map[string]string{"k": "v"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := out.Consumer
	wantARN := fmt.Sprintf("%s/consumer/app-1.x_y:%d", streamARN, c.Now().Unix())
	if aws.ToString(got.ConsumerARN) != wantARN || aws.ToString(got.ConsumerName) != "app-1.x_y" ||
		got.ConsumerStatus != types.ConsumerStatusCreating || !aws.ToTime(got.ConsumerCreationTimestamp).Equal(c.Now()) {
		t.Errorf("Consumer = %+v, want ARN %s, CREATING, created %v", got, wantARN, c.Now())
	}

	// With no ConsumerActivation the consumer is ACTIVE by the next call, however named.
	for _, in := range []*awskinesis.DescribeStreamConsumerInput{
		{ConsumerARN: aws.String(wantARN)},
		{StreamARN: aws.String(streamARN), ConsumerName: aws.String("app-1.x_y")},
		{ConsumerARN: aws.String(wantARN), StreamARN: aws.String(streamARN), ConsumerName: aws.String("app-1.x_y")},
	} {
		d, err := describeConsumer(l, in)
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(d.ConsumerARN) != wantARN || d.ConsumerStatus != types.ConsumerStatusActive ||
			aws.ToString(d.StreamARN) != streamARN || aws.ToString(d.ConsumerName) != "app-1.x_y" {
			t.Errorf("ConsumerDescription = %+v", d)
		}
	}
}

// A consumer is CREATING until ConsumerActivation has passed on the Log's clock, and cannot
// subscribe until then.
func TestConsumerActivation(t *testing.T) {
	l, c, arn := fanoutLog(t, 1, memlog.Config{ConsumerActivation: 10 * time.Second})
	status := func() types.ConsumerStatus {
		d, err := describeConsumer(l, &awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
		if err != nil {
			t.Fatal(err)
		}
		return d.ConsumerStatus
	}
	sub := func() error {
		_, err := l.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn),
			ShardId: aws.String(shardName(0)), StartingPosition: startAt(types.ShardIteratorTypeLatest)})
		return err
	}
	if s := status(); s != types.ConsumerStatusCreating {
		t.Errorf("status at once = %s, want CREATING", s)
	}
	wantErr[*types.ResourceInUseException](t, sub(), arn, "is in the CREATING state", "must be in the ACTIVE state")
	c.Advance(10*time.Second - time.Millisecond)
	if s := status(); s != types.ConsumerStatusCreating {
		t.Errorf("status after 9.999 s = %s, want CREATING", s)
	}
	c.Advance(time.Millisecond)
	if s := status(); s != types.ConsumerStatusActive {
		t.Errorf("status after 10 s = %s, want ACTIVE", s)
	}
	noLeaks(t)
	subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest)).event()
}

func TestRegisterStreamConsumerErrors(t *testing.T) {
	l := memlog.New(memlog.Config{ConsumerLimit: 2})
	createStream(t, l, "s", 1)
	register(t, l, "taken")
	tests := []struct {
		name         string
		arn, cname   *string
		want, substr string
	}{
		{"no stream", nil, aws.String("c"), "ValidationException", "Value null at 'streamARN' failed to satisfy constraint: Member must not be null"},
		{"no name", aws.String(streamARN), nil, "ValidationException", "Value null at 'consumerName'"},
		{"both missing", nil, nil, "ValidationException", "2 validation errors detected"},
		{"empty name", aws.String(streamARN), aws.String(""), "ValidationException", "have length greater than or equal to 1"},
		{"long name", aws.String(streamARN), aws.String(strings.Repeat("n", 129)), "ValidationException", "have length less than or equal to 128"},
		{"bad name", aws.String(streamARN), aws.String("a/b"), "ValidationException", "[a-zA-Z0-9_.-]+"},
		{"bad arn", aws.String("s"), aws.String("c"), "ValidationException", "Value 's' at 'streamARN'"},
		{"unknown stream", aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/nope"), aws.String("c"), "ResourceNotFoundException", "Stream nope under account 000000000000 not found."},
		{"other region", aws.String("arn:aws:kinesis:eu-west-1:000000000000:stream/s"), aws.String("c"), "ResourceNotFoundException", "not found"},
		{"taken", aws.String(streamARN), aws.String("taken"), "ResourceInUseException", "Consumer taken under stream s already exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{StreamARN: tt.arn, ConsumerName: tt.cname})
			if got := errCode(err); got != tt.want || !strings.Contains(fmt.Sprint(err), tt.substr) {
				t.Errorf("error = %v (%s), want %s containing %q", err, got, tt.want, tt.substr)
			}
		})
	}
	register(t, l, "second")
	_, err := l.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("third")})
	wantErr[*types.LimitExceededException](t, err, "Consumer limit of 2 for stream s")

	// The limit is per stream.
	createStream(t, l, "t", 1)
	if _, err := l.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/t"), ConsumerName: aws.String("third"),
	}); err != nil {
		t.Errorf("a consumer of another stream: %v", err)
	}
}

func TestDescribeAndDeregisterStreamConsumerErrors(t *testing.T) {
	l, _ := newLog(t)
	createStream(t, l, "s", 1)
	arn := register(t, l, "c")
	stale := arn[:strings.LastIndexByte(arn, ':')] + ":1"
	tests := []struct {
		name         string
		in           awskinesis.DescribeStreamConsumerInput
		want, substr string
	}{
		{"nothing", awskinesis.DescribeStreamConsumerInput{}, "InvalidArgumentException", "Either ConsumerARN or both ConsumerName and StreamARN"},
		{"name alone", awskinesis.DescribeStreamConsumerInput{ConsumerName: aws.String("c")}, "InvalidArgumentException", "Either ConsumerARN"},
		{"stream alone", awskinesis.DescribeStreamConsumerInput{StreamARN: aws.String(streamARN)}, "InvalidArgumentException", "Either ConsumerARN"},
		{"bad consumer arn", awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(streamARN)}, "ValidationException", "at 'consumerARN' failed to satisfy constraint"},
		{"bad name", awskinesis.DescribeStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("a b")}, "ValidationException", "at 'consumerName'"},
		{"unknown name", awskinesis.DescribeStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("x")}, "ResourceNotFoundException", "Consumer x under stream " + streamARN},
		{"unknown arn", awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(streamARN + "/consumer/x:1")}, "ResourceNotFoundException", "not found"},
		{"an earlier consumer of the name", awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(stale)}, "ResourceNotFoundException", stale},
		{"unknown stream", awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/t/consumer/c:1")}, "ResourceNotFoundException", "not found"},
		{"other account", awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(strings.Replace(arn, "000000000000", "111111111111", 1))}, "ResourceNotFoundException", "not found"},
		{"arn and another name", awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn), StreamARN: aws.String(streamARN), ConsumerName: aws.String("d")}, "InvalidArgumentException", "does not refer to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.DescribeStreamConsumer(ctx, &tt.in)
			if got := errCode(err); got != tt.want || !strings.Contains(fmt.Sprint(err), tt.substr) {
				t.Errorf("Describe: error = %v (%s), want %s containing %q", err, got, tt.want, tt.substr)
			}
			_, err = l.DeregisterStreamConsumer(ctx, &awskinesis.DeregisterStreamConsumerInput{
				ConsumerARN: tt.in.ConsumerARN, StreamARN: tt.in.StreamARN, ConsumerName: tt.in.ConsumerName,
			})
			if got := errCode(err); got != tt.want {
				t.Errorf("Deregister: error = %v (%s), want %s", err, got, tt.want)
			}
		})
	}
}

func TestDeregisterStreamConsumer(t *testing.T) {
	l, _ := newLog(t)
	createStream(t, l, "s", 1)
	for _, byARN := range []bool{true, false} {
		in := &awskinesis.DeregisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("c")}
		if arn := register(t, l, "c"); byARN {
			in = &awskinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(arn)}
		}
		if _, err := l.DeregisterStreamConsumer(ctx, in); err != nil {
			t.Fatal(err)
		}
		_, err := describeConsumer(l, &awskinesis.DescribeStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("c")})
		wantErr[*types.ResourceNotFoundException](t, err)
		if _, err := l.DeregisterStreamConsumer(ctx, in); errCode(err) != "ResourceNotFoundException" {
			t.Errorf("deregistering again: %v, want ResourceNotFoundException", err)
		}
	}
}

func listConsumers(t testing.TB, l *memlog.Log, in *awskinesis.ListStreamConsumersInput) *awskinesis.ListStreamConsumersOutput {
	t.Helper()
	out, err := l.ListStreamConsumers(ctx, in)
	if err != nil {
		t.Fatalf("ListStreamConsumers: %v", err)
	}
	return out
}

func consumerNames(cs []types.Consumer) string {
	var names []string
	for _, c := range cs {
		names = append(names, aws.ToString(c.ConsumerName))
	}
	return strings.Join(names, " ")
}

func TestListStreamConsumers(t *testing.T) {
	l, c := newLog(t)
	createStream(t, l, "s", 1)
	if out := listConsumers(t, l, &awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN)}); out.Consumers == nil ||
		len(out.Consumers) != 0 || out.NextToken != nil {
		t.Errorf("no consumers: %+v", out)
	}
	for _, n := range []string{"e", "b", "d", "a", "c"} {
		register(t, l, n)
	}
	all := listConsumers(t, l, &awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN)})
	if got := consumerNames(all.Consumers); got != "a b c d e" || all.NextToken != nil {
		t.Errorf("listing = %q, NextToken %v; want a b c d e and none", got, all.NextToken)
	}
	for _, cons := range all.Consumers {
		if cons.ConsumerStatus != types.ConsumerStatusActive || !strings.HasPrefix(aws.ToString(cons.ConsumerARN), streamARN+"/consumer/") {
			t.Errorf("consumer %+v", cons)
		}
	}

	// Pages of two, with a consumer deregistered and another registered between pages.
	page := listConsumers(t, l, &awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), MaxResults: aws.Int32(2)})
	if got := consumerNames(page.Consumers); got != "a b" || page.NextToken == nil {
		t.Fatalf("first page = %q, NextToken %v", got, page.NextToken)
	}
	if _, err := l.DeregisterStreamConsumer(ctx, &awskinesis.DeregisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("c")}); err != nil {
		t.Fatal(err)
	}
	register(t, l, "bb")
	var got []string
	for tok := page.NextToken; tok != nil; {
		p := listConsumers(t, l, &awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), MaxResults: aws.Int32(2), NextToken: tok})
		got = append(got, consumerNames(p.Consumers))
		tok = p.NextToken
	}
	if strings.Join(got, " | ") != "bb d | e" {
		t.Errorf("later pages = %q, want bb d | e", got)
	}

	tok := page.NextToken
	createStream(t, l, "t", 1)
	tests := []struct {
		name         string
		in           awskinesis.ListStreamConsumersInput
		want, substr string
	}{
		{"no stream", awskinesis.ListStreamConsumersInput{}, "ValidationException", "Value null at 'streamARN'"},
		{"max 0", awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), MaxResults: aws.Int32(0)}, "ValidationException", "have value greater than or equal to 1"},
		{"max 10001", awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), MaxResults: aws.Int32(10001)}, "ValidationException", "have value less than or equal to 10000"},
		{"empty token", awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), NextToken: aws.String("")}, "ValidationException", "at 'nextToken'"},
		{"garbage token", awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), NextToken: aws.String("xyz")}, "InvalidArgumentException", "Invalid NextToken."},
		{"another stream's token", awskinesis.ListStreamConsumersInput{StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/t"), NextToken: tok}, "InvalidArgumentException", "was not issued for stream"},
		{"unknown stream", awskinesis.ListStreamConsumersInput{StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/u")}, "ResourceNotFoundException", "Stream u"},
		{"wrong creation time", awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), StreamCreationTimestamp: aws.Time(c.Now().Add(-time.Hour))}, "ResourceNotFoundException", "with creation timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.ListStreamConsumers(ctx, &tt.in)
			if got := errCode(err); got != tt.want || !strings.Contains(fmt.Sprint(err), tt.substr) {
				t.Errorf("error = %v (%s), want %s containing %q", err, got, tt.want, tt.substr)
			}
		})
	}
	if out := listConsumers(t, l, &awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), StreamCreationTimestamp: aws.Time(c.Now())}); len(out.Consumers) != 5 {
		t.Errorf("with the right creation time: %d consumers, want 5", len(out.Consumers))
	}
	c.Advance(301 * time.Second)
	_, err := l.ListStreamConsumers(ctx, &awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN), NextToken: tok})
	wantErr[*types.ExpiredNextTokenException](t, err, "has expired")
}

// Consumers belong to the stream: deleting it takes them, and a stream created again under its
// name starts with none.
func TestConsumersVanishWithStream(t *testing.T) {
	l, _ := newLog(t)
	createStream(t, l, "s", 1)
	arn := register(t, l, "c")
	if _, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String("s")}); err != nil {
		t.Fatal(err)
	}
	_, err := describeConsumer(l, &awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
	wantErr[*types.ResourceNotFoundException](t, err)
	createStream(t, l, "s", 1)
	_, err = describeConsumer(l, &awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
	wantErr[*types.ResourceNotFoundException](t, err)
	if out := listConsumers(t, l, &awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN)}); len(out.Consumers) != 0 {
		t.Errorf("the new stream has consumers %v", consumerNames(out.Consumers))
	}
	register(t, l, "c") // the name is free again
}

// The fault hook runs first in every consumer operation, with the stream the request names.
func TestConsumerFaults(t *testing.T) {
	l, _ := newLog(t)
	createStream(t, l, "s", 1)
	arn := register(t, l, "c")
	var mu sync.Mutex
	var calls []memlog.Call
	l.SetFault(func(_ context.Context, c memlog.Call) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
		return &types.LimitExceededException{Message: aws.String("Rate exceeded")}
	})
	_, err1 := l.RegisterStreamConsumer(ctx, &awskinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN)})
	_, err2 := l.DescribeStreamConsumer(ctx, &awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
	_, err3 := l.DeregisterStreamConsumer(ctx, &awskinesis.DeregisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("c")})
	_, err4 := l.ListStreamConsumers(ctx, &awskinesis.ListStreamConsumersInput{StreamARN: aws.String(streamARN)})
	_, err5 := l.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(shardName(0))})
	for _, err := range []error{err1, err2, err3, err4, err5} {
		wantErr[*types.LimitExceededException](t, err, "Rate exceeded")
	}
	want := []memlog.Call{
		{Op: "RegisterStreamConsumer", Stream: "s"},
		{Op: "DescribeStreamConsumer", Stream: "s"},
		{Op: "DeregisterStreamConsumer", Stream: "s"},
		{Op: "ListStreamConsumers", Stream: "s"},
		{Op: "SubscribeToShard", Stream: "s", ShardID: shardName(0)},
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls\n%v\nwant\n%v", calls, want)
	}
}
