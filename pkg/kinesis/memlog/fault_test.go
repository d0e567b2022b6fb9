package memlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
)

// The hook sees each call's operation, stream and, where there is one, shard.
func TestFaultSeesCalls(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	var mu sync.Mutex
	var calls []memlog.Call
	l.SetFault(func(_ context.Context, c memlog.Call) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
		return nil
	})
	rec := put(t, l, "s", "k", "x")
	it := iterOf(t, l, "s", *rec.ShardId, types.ShardIteratorTypeTrimHorizon)
	get(t, l, it, 0)
	if _, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/s"),
		Records: entries(3, 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")}); err != nil {
		t.Fatal(err)
	}
	createStream(t, l, "t", 1)
	if _, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String("t")}); err != nil {
		t.Fatal(err)
	}
	want := []memlog.Call{
		{Op: "PutRecord", Stream: "s", ShardID: *rec.ShardId},
		{Op: "GetShardIterator", Stream: "s", ShardID: *rec.ShardId},
		{Op: "GetRecords", Stream: "s", ShardID: *rec.ShardId},
		{Op: "PutRecords", Stream: "s"},
		{Op: "ListShards", Stream: "s"},
		{Op: "DescribeStreamSummary", Stream: "s"},
		{Op: "CreateStream", Stream: "t"},
		{Op: "DeleteStream", Stream: "t"},
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls\n%v\nwant\n%v", calls, want)
	}
}

// A fault fails the call before it does anything; removing the hook ends it.
func TestFaultFailsAndThrottles(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	rec := put(t, l, "s", "k", "x")
	throttled := *rec.ShardId
	l.SetFault(func(_ context.Context, c memlog.Call) error {
		switch {
		case c.Op == "GetRecords" && c.ShardID == throttled:
			return &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard " + c.ShardID)}
		case c.Op == "PutRecord":
			return &types.InternalFailureException{Message: aws.String("boom")}
		}
		return nil
	})
	it := iterOf(t, l, "s", throttled, types.ShardIteratorTypeTrimHorizon)
	_, err := l.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	wantErr[*types.ProvisionedThroughputExceededException](t, err, "Rate exceeded for shard "+throttled)
	other := shardName(0)
	if other == throttled {
		other = shardName(1)
	}
	get(t, l, iterOf(t, l, "s", other, types.ShardIteratorTypeTrimHorizon), 0) // not throttled

	_, err = l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("y")})
	wantErr[*types.InternalFailureException](t, err, "boom")

	l.SetFault(nil)
	out := get(t, l, it, 0) // the same iterator works once the throttling ends
	if got := payloads(out.Records); len(got) != 1 || got[0] != "x" {
		t.Errorf("after the fault: %q, want [x] (the failed put must not be stored)", got)
	}
}

// A hook can hold a call until the test releases it, or until the caller gives up.
func TestFaultDelays(t *testing.T) {
	l, _ := newStream(t, "s", 1)
	entered := make(chan struct{})
	release := make(chan struct{})
	l.SetFault(func(ctx context.Context, c memlog.Call) error {
		if c.Op != "PutRecord" {
			return nil
		}
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	in := &awskinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("held")}

	done := make(chan error, 1)
	go func() { _, err := l.PutRecord(ctx, in); done <- err }()
	<-entered
	if got := readAll(t, l, "s", shardName(0)); len(got) != 0 {
		t.Fatalf("held put already stored %q", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, l, "s", shardName(0)); strings.Join(got, ",") != "held" {
		t.Fatalf("released put stored %q", got)
	}

	// Cancelled while held.
	l.SetFault(func(ctx context.Context, c memlog.Call) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	cctx, cancel := context.WithCancel(ctx)
	go func() { _, err := l.PutRecord(cctx, in); done <- err }()
	<-entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled held put: %v", err)
	}
}

func TestPutRecordsEntryFault(t *testing.T) {
	l, _ := newStream(t, "s", 2)
	l.SetPutRecordsEntryFault(func(stream string, i int, e types.PutRecordsRequestEntry) (string, string) {
		switch {
		case stream != "s":
			return "", ""
		case i%3 == 1:
			return "ProvisionedThroughputExceededException", ""
		case i%3 == 2 && string(e.Data) == "5":
			return "InternalFailure", "custom"
		}
		return "", ""
	})
	recs := entries(9, 0)
	for i := range recs {
		recs[i].PartitionKey = aws.String("same") // one shard, so the read order is the request order
		recs[i].Data = []byte(fmt.Sprint(i))
	}
	out, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if n := aws.ToInt32(out.FailedRecordCount); n != 4 {
		t.Errorf("FailedRecordCount %d, want 4", n)
	}
	var shard string
	for i, r := range out.Records {
		code, msg := aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage)
		switch {
		case i%3 == 1:
			if code != "ProvisionedThroughputExceededException" || !strings.HasPrefix(msg, "Rate exceeded for shard shardId-") ||
				r.SequenceNumber != nil || r.ShardId != nil {
				t.Errorf("entry %d = %s %q %v %v", i, code, msg, r.SequenceNumber, r.ShardId)
			}
		case i == 5:
			if code != "InternalFailure" || msg != "custom" {
				t.Errorf("entry 5 = %s %q", code, msg)
			}
		default:
			if code != "" || r.SequenceNumber == nil {
				t.Errorf("entry %d failed: %s %q", i, code, msg)
			}
			shard = *r.ShardId
		}
	}
	if got := strings.Join(readAll(t, l, "s", shard), ","); got != "0,2,3,6,8" {
		t.Errorf("stored %q, want 0,2,3,6,8", got)
	}
	l.SetPutRecordsEntryFault(nil)
	out, err = l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: recs})
	if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Errorf("without the hook: %v failed, %v", aws.ToInt32(out.FailedRecordCount), err)
	}
}

// Hooks can be swapped while calls run.
func TestFaultSwapWhileRunning(t *testing.T) {
	l, _ := newStream(t, "s", 4)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: entries(10, 10)})
			}
		})
	}
	for i := range 200 {
		if i%2 == 0 {
			l.SetFault(func(context.Context, memlog.Call) error { return nil })
			l.SetPutRecordsEntryFault(func(string, int, types.PutRecordsRequestEntry) (string, string) { return "InternalFailure", "" })
		} else {
			l.SetFault(nil)
			l.SetPutRecordsEntryFault(nil)
		}
	}
	close(stop)
	wg.Wait()
}
