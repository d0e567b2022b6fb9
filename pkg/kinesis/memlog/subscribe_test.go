package memlog_test

import (
	"context"
	"errors"
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

func TestSubscribeToShardValidation(t *testing.T) {
	l, c, arn := fanoutLog(t, 2, memlog.Config{})
	creating := memlog.New(memlog.Config{Now: c.Now, ConsumerActivation: time.Minute})
	createStream(t, creating, "s", 1)
	creatingARN := register(t, creating, "c")
	put(t, l, "s", "k", "r")
	rec := put(t, l, "s", "k", "r")
	other := shardName(0)
	if *rec.ShardId == other {
		other = shardName(1)
	}
	start := aws.ToString(listShards(t, l, "s", nil)[0].SequenceNumberRange.StartingSequenceNumber)

	pos := func(typ types.ShardIteratorType, seq *string, ts *time.Time) *types.StartingPosition {
		return &types.StartingPosition{Type: typ, SequenceNumber: seq, Timestamp: ts}
	}
	tests := []struct {
		name         string
		log          *memlog.Log
		in           awskinesis.SubscribeToShardInput
		want, substr string
	}{
		{"nothing", l, awskinesis.SubscribeToShardInput{}, "ValidationException", "3 validation errors detected"},
		{"no consumer", l, awskinesis.SubscribeToShardInput{ShardId: aws.String(other), StartingPosition: startAt(types.ShardIteratorTypeLatest)},
			"ValidationException", "Value null at 'consumerARN'"},
		{"bad consumer arn", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(streamARN), ShardId: aws.String(other), StartingPosition: startAt(types.ShardIteratorTypeLatest)},
			"ValidationException", "at 'consumerARN' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"no shard", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), StartingPosition: startAt(types.ShardIteratorTypeLatest)},
			"ValidationException", "Value null at 'shardId'"},
		{"bad shard", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String("shard 0"), StartingPosition: startAt(types.ShardIteratorTypeLatest)},
			"ValidationException", "at 'shardId'"},
		{"no position", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other)},
			"ValidationException", "Value null at 'startingPosition'"},
		{"no type", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other), StartingPosition: &types.StartingPosition{}},
			"ValidationException", "Value null at 'startingPosition.type'"},
		{"bad type", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other), StartingPosition: startAt("OLDEST")},
			"ValidationException", "Value 'OLDEST' at 'startingPosition.type' failed to satisfy constraint: Member must satisfy enum value set"},
		{"unknown consumer", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(streamARN + "/consumer/x:1"), ShardId: aws.String(other), StartingPosition: startAt(types.ShardIteratorTypeLatest)},
			"ResourceNotFoundException", "Consumer " + streamARN + "/consumer/x:1 under account 000000000000 not found."},
		{"consumer of another region", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(strings.Replace(arn, "us-east-1", "eu-west-1", 1)), ShardId: aws.String(other), StartingPosition: startAt(types.ShardIteratorTypeLatest)},
			"ResourceNotFoundException", "not found"},
		{"creating consumer", creating, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(creatingARN), ShardId: aws.String(shardName(0)), StartingPosition: startAt(types.ShardIteratorTypeLatest)},
			"ResourceInUseException", "must be in the ACTIVE state"},
		{"unknown shard", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(shardName(7)), StartingPosition: startAt(types.ShardIteratorTypeLatest)},
			"ResourceNotFoundException", "Shard " + shardName(7) + " in stream s under account 000000000000 does not exist"},
		{"at without number", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other), StartingPosition: startAt(types.ShardIteratorTypeAtSequenceNumber)},
			"InvalidArgumentException", "Request specified AT_SEQUENCE_NUMBER and no StartingSequenceNumber."},
		{"trim horizon with number", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other), StartingPosition: pos(types.ShardIteratorTypeTrimHorizon, aws.String(start), nil)},
			"InvalidArgumentException", "Request specified TRIM_HORIZON and also a StartingSequenceNumber."},
		{"number of another shard", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other), StartingPosition: afterSeq(*rec.SequenceNumber)},
			"InvalidArgumentException", "Invalid StartingSequenceNumber. It encodes " + *rec.ShardId},
		{"garbage number", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other), StartingPosition: afterSeq("12345")},
			"InvalidArgumentException", "StartingSequenceNumber 12345"},
		{"timestamp missing", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other), StartingPosition: startAt(types.ShardIteratorTypeAtTimestamp)},
			"InvalidArgumentException", "Must specify timestampInMillis"},
		{"timestamp in the future", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other), StartingPosition: pos(types.ShardIteratorTypeAtTimestamp, nil, aws.Time(c.Now().Add(time.Second)))},
			"InvalidArgumentException", "cannot be greater than the currentTimestampInMillis"},
		{"dry run", l, awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(other), StartingPosition: startAt(types.ShardIteratorTypeLatest), DryRun: aws.Bool(true)},
			"DryRunOperationException", "DryRun flag is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.log.SubscribeToShard(ctx, &tt.in)
			if got := errCode(err); got != tt.want || !strings.Contains(fmt.Sprint(err), tt.substr) {
				t.Errorf("error = %v (%s), want %s containing %q", err, got, tt.want, tt.substr)
			}
			if out != nil {
				t.Errorf("output %v with the error", out)
			}
		})
	}

	// A checkpoint older than the trim horizon is refused, as by GetShardIterator.
	c.Advance(time.Hour)
	expire(t, l, "s", c.Now(), 2)
	_, err := l.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: rec.ShardId,
		StartingPosition: pos(types.ShardIteratorTypeAtSequenceNumber, rec.SequenceNumber, nil)})
	wantErr[*types.InvalidArgumentException](t, err, "older than the trim horizon")
}

// Every starting position gives the records from there on, those stored before the subscription
// in its first event and those stored after it as they come, with the fields GetRecords gives.
func TestSubscribeStartingPositions(t *testing.T) {
	noLeaks(t)
	l, c, _ := fanoutLog(t, 1, memlog.Config{})
	var seqs []string
	for i := range 4 {
		c.Advance(time.Second)
		seqs = append(seqs, *put(t, l, "s", fmt.Sprint("k", i), fmt.Sprint("r", i)).SequenceNumber)
	}
	second := c.Now().Add(-time.Second) // r2 arrived then
	start := aws.ToString(listShards(t, l, "s", nil)[0].SequenceNumberRange.StartingSequenceNumber)
	stored := get(t, l, iterOf(t, l, "s", shardName(0), types.ShardIteratorTypeTrimHorizon), 0).Records

	tests := []struct {
		pos    *types.StartingPosition
		before string // what the first events hold
	}{
		{startAt(types.ShardIteratorTypeTrimHorizon), "r0 r1 r2 r3"},
		{startAt(types.ShardIteratorTypeLatest), ""},
		{&types.StartingPosition{Type: types.ShardIteratorTypeAtTimestamp, Timestamp: &second}, "r2 r3"},
		{&types.StartingPosition{Type: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: &seqs[1]}, "r1 r2 r3"},
		{&types.StartingPosition{Type: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: &start}, "r0 r1 r2 r3"},
		{afterSeq(seqs[1]), "r2 r3"},
		{afterSeq(seqs[3]), ""},
		{afterSeq(start), "r0 r1 r2 r3"},
	}
	var subs []*events
	for i, tt := range tests {
		e := subscribe(t, l, register(t, l, fmt.Sprint("c", i)), shardName(0), tt.pos)
		first := e.event()
		if got := strings.Join(payloads(first.Records), " "); got != tt.before {
			t.Errorf("%s %s: first event holds %q, want %q", tt.pos.Type, aws.ToString(tt.pos.SequenceNumber), got, tt.before)
		}
		if aws.ToInt64(first.MillisBehindLatest) != 0 || first.ChildShards != nil {
			t.Errorf("first event: MillisBehindLatest %d, ChildShards %v; want 0 and none", aws.ToInt64(first.MillisBehindLatest), first.ChildShards)
		}
		for _, r := range first.Records {
			var want types.Record
			for _, s := range stored {
				if *s.SequenceNumber == *r.SequenceNumber {
					want = s
				}
			}
			if string(r.Data) != string(want.Data) || aws.ToString(r.PartitionKey) != aws.ToString(want.PartitionKey) ||
				!aws.ToTime(r.ApproximateArrivalTimestamp).Equal(aws.ToTime(want.ApproximateArrivalTimestamp)) {
				t.Errorf("record %+v, GetRecords has %+v", r, want)
			}
		}
		subs = append(subs, e)
	}
	c.Advance(time.Second)
	put(t, l, "s", "k", "r4")
	for i, e := range subs {
		recs, ev := e.records(1)
		if string(recs[0].Data) != "r4" || aws.ToInt64(ev.MillisBehindLatest) != 0 {
			t.Errorf("subscription %d: then %v, MillisBehindLatest %d; want r4 and 0", i, payloads(recs), aws.ToInt64(ev.MillisBehindLatest))
		}
		if !aws.ToTime(recs[0].ApproximateArrivalTimestamp).Equal(c.Now()) {
			t.Errorf("r4 arrived at %v, want %v", aws.ToTime(recs[0].ApproximateArrivalTimestamp), c.Now())
		}
	}
}

// ApproximateArrivalTimestamp survives the SDK's float64 epoch seconds to the millisecond.
func TestSubscribeArrivalMilliseconds(t *testing.T) {
	noLeaks(t)
	l, c, arn := fanoutLog(t, 1, memlog.Config{})
	var want []time.Time
	for range 50 {
		c.Advance(time.Millisecond + 7*time.Microsecond)
		put(t, l, "s", "k", "x")
		want = append(want, c.Now().Truncate(time.Millisecond))
	}
	recs, _ := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeTrimHorizon)).records(50)
	for i, r := range recs {
		if got := aws.ToTime(r.ApproximateArrivalTimestamp); !got.Equal(want[i]) {
			t.Errorf("record %d arrived at %v, want %v", i, got, want[i])
		}
	}
}

// ContinuationSequenceNumber resumes, as AFTER_SEQUENCE_NUMBER, exactly at the first record not
// yet sent: after a record event, after a heartbeat, and on a shard that never had a record.
func TestSubscribeContinuation(t *testing.T) {
	noLeaks(t)
	l, c, arn := fanoutLog(t, 1, memlog.Config{})
	start := aws.ToString(listShards(t, l, "s", nil)[0].SequenceNumberRange.StartingSequenceNumber)

	e := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeTrimHorizon))
	first := e.event()
	if len(first.Records) != 0 || aws.ToString(first.ContinuationSequenceNumber) != start {
		t.Fatalf("first event on an empty shard: %d records, continuation %s; want none and the StartingSequenceNumber %s",
			len(first.Records), aws.ToString(first.ContinuationSequenceNumber), start)
	}
	var seqs []string
	for i := range 3 {
		seqs = append(seqs, *put(t, l, "s", "k", fmt.Sprint("r", i)).SequenceNumber)
	}
	_, last := e.records(3)
	if got := aws.ToString(last.ContinuationSequenceNumber); got != seqs[2] {
		t.Errorf("continuation after r2 = %s, want r2's %s", got, seqs[2])
	}
	c.Advance(5 * time.Second)
	beat := e.event() // the heartbeat repeats it
	if len(beat.Records) != 0 || aws.ToString(beat.ContinuationSequenceNumber) != seqs[2] {
		t.Errorf("heartbeat: %d records, continuation %s; want none and %s", len(beat.Records), aws.ToString(beat.ContinuationSequenceNumber), seqs[2])
	}
	_ = e.es.Close()
	put(t, l, "s", "k", "r3") // while nobody is subscribed

	for _, tt := range []struct {
		from, want string
	}{
		{aws.ToString(beat.ContinuationSequenceNumber), "r3 r4"},
		{aws.ToString(first.ContinuationSequenceNumber), "r0 r1 r2 r3 r4"},
	} {
		e := subscribe(t, l, register(t, l, "after-"+tt.from[len(tt.from)-6:]), shardName(0), afterSeq(tt.from))
		if tt.want == "r3 r4" {
			put(t, l, "s", "k", "r4")
		}
		if recs, _ := e.records(len(strings.Fields(tt.want))); strings.Join(payloads(recs), " ") != tt.want {
			t.Errorf("resumed after %s: %v, want %s", tt.from, payloads(recs), tt.want)
		}
	}
}

// Events hold at most 1 MiB of data and keys and at most 10,000 records, and resuming from the
// continuation of any of them loses and repeats nothing.
func TestSubscribeEventLimits(t *testing.T) {
	noLeaks(t)
	l, c, arn := fanoutLog(t, 1, memlog.Config{})
	big := make([]types.PutRecordsRequestEntry, 30)
	for i := range big {
		big[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String("big"), Data: []byte(fmt.Sprintf("%-102400d", i))}
	}
	if _, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: big}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second) // so the records are 1 s behind when read
	e := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeTrimHorizon))
	var evs []types.SubscribeToShardEvent
	for n := 0; n < 30; {
		ev := e.event()
		evs = append(evs, ev)
		n += len(ev.Records)
	}
	if len(evs) != 3 || len(evs[0].Records) != 10 || len(evs[1].Records) != 10 {
		t.Fatalf("%d events, want 3 of 10 records (1 MiB each)", len(evs))
	}
	if got := aws.ToInt64(evs[0].MillisBehindLatest); got != 1000 {
		t.Errorf("MillisBehindLatest with 20 records left = %d, want 1000", got)
	}
	if got := aws.ToInt64(evs[2].MillisBehindLatest); got != 0 {
		t.Errorf("MillisBehindLatest at the end = %d, want 0", got)
	}
	for i, ev := range evs[:2] {
		e := subscribe(t, l, register(t, l, fmt.Sprint("resume", i)), shardName(0), afterSeq(*ev.ContinuationSequenceNumber))
		recs, _ := e.records(30 - 10*(i+1))
		if first, last := strings.TrimSpace(string(recs[0].Data)), strings.TrimSpace(string(recs[len(recs)-1].Data)); first != fmt.Sprint(10*(i+1)) || last != "29" {
			t.Errorf("resumed after event %d at %s .. %s, want %d .. 29", i, first, last, 10*(i+1))
		}
	}

	// 10,001 small records go out as 10,000 and 1.
	l, _, arn = fanoutLog(t, 1, memlog.Config{})
	batch := make([]types.PutRecordsRequestEntry, 500)
	for i := range batch {
		batch[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: []byte("x")}
	}
	for range 20 {
		if _, err := l.PutRecords(ctx, &awskinesis.PutRecordsInput{StreamName: aws.String("s"), Records: batch}); err != nil {
			t.Fatal(err)
		}
	}
	put(t, l, "s", "k", "last")
	e = subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeTrimHorizon))
	if a, b := e.event(), e.event(); len(a.Records) != 10000 || len(b.Records) != 1 || string(b.Records[0].Data) != "last" {
		t.Errorf("events of %d and %d records, want 10000 and 1", len(a.Records), len(b.Records))
	}
}

// Only one subscription per consumer and shard: a second within 5 s of the last is refused, a
// second 5 s or more later takes over, and the first ends with ResourceInUseException.
func TestSubscribeTakeover(t *testing.T) {
	noLeaks(t)
	l, c, arn := fanoutLog(t, 2, memlog.Config{})
	first := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	first.event()
	other := subscribe(t, l, arn, shardName(1), startAt(types.ShardIteratorTypeLatest)) // another shard is another subscription
	other.event()

	c.Advance(5*time.Second - time.Millisecond)
	_, err := l.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn),
		ShardId: aws.String(shardName(0)), StartingPosition: startAt(types.ShardIteratorTypeLatest)})
	wantErr[*types.ResourceInUseException](t, err, "Another active subscription exists for this consumer: 000000000000:s:"+shardName(0)+":c")

	c.Advance(time.Millisecond)
	second := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	second.event()
	if _, err := first.end(); !errors.As(err, new(*types.ResourceInUseException)) {
		t.Errorf("the first stream ended with %v, want ResourceInUseException", err)
	}
	// The refused call counted for nothing: 5 s after the second, a third takes over again.
	c.Advance(5 * time.Second)
	third := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	third.event()
	if _, err := second.end(); !errors.As(err, new(*types.ResourceInUseException)) {
		t.Errorf("the second stream ended with %v, want ResourceInUseException", err)
	}
	live := third
	if rec := put(t, l, "s", "k", "x"); *rec.ShardId == shardName(1) {
		live = other
	}
	if recs, _ := live.records(1); string(recs[0].Data) != "x" {
		t.Errorf("the live subscription got %v", payloads(recs))
	}
}

// With nothing to send, a subscription sends an empty event 5 s after its last event, and only
// then: an event with records puts the next heartbeat off.
func TestSubscribeHeartbeat(t *testing.T) {
	noLeaks(t)
	l, c, arn := fanoutLog(t, 1, memlog.Config{})
	t0 := c.Now()
	e := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	first := e.event()
	c.awaitTimer(t, t0.Add(5*time.Second))
	c.Advance(5 * time.Second)
	beat := e.event()
	if len(beat.Records) != 0 || aws.ToInt64(beat.MillisBehindLatest) != 0 ||
		aws.ToString(beat.ContinuationSequenceNumber) != aws.ToString(first.ContinuationSequenceNumber) {
		t.Errorf("heartbeat %+v", beat)
	}
	c.Advance(time.Second) // t0+6
	put(t, l, "s", "k", "x")
	e.records(1)
	c.Advance(4 * time.Second) // t0+10: the heartbeat timer fires, but the last event was 4 s ago
	c.awaitTimer(t, t0.Add(11*time.Second))
	c.Advance(time.Second) // t0+11
	beat = e.event()
	if len(beat.Records) != 0 {
		t.Errorf("heartbeat with %d records", len(beat.Records))
	}
	// Had a heartbeat gone out at t0+10, the next timer would be for t0+15.
	c.awaitTimer(t, t0.Add(16*time.Second))
	if ds := c.deadlines(); len(ds) != 2 {
		t.Errorf("pending timers %v, want the heartbeat's and the end's", ds)
	}
}

// A busy subscription creates no timer per event: it keeps the end's and one heartbeat's.
func TestSubscribeTimers(t *testing.T) {
	noLeaks(t)
	l, c, arn := fanoutLog(t, 1, memlog.Config{})
	e := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	e.event()
	for i := range 200 {
		put(t, l, "s", "k", fmt.Sprint(i))
		e.records(1)
	}
	if n := c.afterCalls(); n != 2 {
		t.Errorf("%d timers for 200 events, want 2", n)
	}
}

// A subscription ends cleanly 5 minutes after it was made, by the Log's clock.
func TestSubscribeLifetime(t *testing.T) {
	noLeaks(t)
	l, c, arn := fanoutLog(t, 1, memlog.Config{})
	t0 := c.Now()
	e := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	e.event()
	c.Advance(5*time.Minute - time.Second)
	if ev := e.event(); len(ev.Records) != 0 { // a heartbeat: still open
		t.Errorf("event %+v", ev)
	}
	c.awaitTimer(t, c.Now().Add(5*time.Second))
	c.Advance(time.Second)
	evs, err := e.end()
	if err != nil || len(evs) != 0 {
		t.Errorf("at 5 minutes: events %v, Err %v; want the end", evs, err)
	}
	// It is over: a new one may start at once.
	if !c.Now().Equal(t0.Add(5 * time.Minute)) {
		t.Fatal(c.Now())
	}
	subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest)).event()
}

// At the end of a closed shard the last event holds the remaining records and ChildShards and no
// ContinuationSequenceNumber, and the stream ends cleanly: for a split, a merge, and a
// subscription made after the close.
func TestSubscribeShardEnd(t *testing.T) {
	noLeaks(t)
	l, _, arn := fanoutLog(t, 2, memlog.Config{})
	subs := map[string]*events{}
	for i := range 2 {
		subs[shardName(i)] = subscribe(t, l, arn, shardName(i), startAt(types.ShardIteratorTypeTrimHorizon))
		subs[shardName(i)].event()
	}
	if _, err := l.MergeShards(ctx, &awskinesis.MergeShardsInput{StreamName: aws.String("s"),
		ShardToMerge: aws.String(shardName(0)), AdjacentShardToMerge: aws.String(shardName(1))}); err != nil {
		t.Fatal(err)
	}
	for id, e := range subs {
		evs, err := e.end()
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s: events %v, Err %v; want one last event and the end", id, evs, err)
		}
		last := evs[0]
		if want := shardName(2) + " of " + shardName(0) + " " + shardName(1) + " [0 340282366920938463463374607431768211455]"; last.ContinuationSequenceNumber != nil || children(last.ChildShards) != want {
			t.Errorf("%s: last event %+v", id, last)
		}
	}

	// The merged shard is split while its subscription holds an event back (the hook), so the
	// last event has both the last record and the ChildShards.
	e := subscribe(t, l, arn, shardName(2), startAt(types.ShardIteratorTypeTrimHorizon))
	e.event()
	put(t, l, "s", "a", "before")
	e.records(1)
	held, release := holdNextEvent(l)
	put(t, l, "s", "b", "last")
	<-held
	if _, err := l.UpdateShardCount(ctx, &awskinesis.UpdateShardCountInput{StreamName: aws.String("s"),
		TargetShardCount: aws.Int32(2), ScalingType: types.ScalingTypeUniformScaling}); err != nil {
		t.Fatal(err)
	}
	close(release)
	evs, err := e.end()
	ir := get(t, l, iterOf(t, l, "s", shardName(2), types.ShardIteratorTypeTrimHorizon), 0)
	if err != nil || len(evs) != 1 || strings.Join(payloads(evs[0].Records), " ") != "last" ||
		evs[0].ContinuationSequenceNumber != nil || children(evs[0].ChildShards) != children(ir.ChildShards) {
		t.Errorf("split: events %+v, Err %v; want one with the last record and GetRecords' ChildShards %s", evs, err, children(ir.ChildShards))
	}

	// Subscribing to a closed shard reads it and ends at once.
	late := subscribe(t, l, register(t, l, "late"), shardName(2), startAt(types.ShardIteratorTypeTrimHorizon))
	evs, err = late.end()
	if err != nil || len(evs) != 1 || strings.Join(payloads(evs[0].Records), " ") != "before last" || children(evs[0].ChildShards) != children(ir.ChildShards) {
		t.Errorf("closed shard: events %+v, Err %v", evs, err)
	}
}

// Errors from the fault hook end the stream, after the events already sent, with the SDK's typed
// exception; others become InternalFailureException; context errors break the stream.
func TestSubscribeFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault error
		check func(t *testing.T, err error)
	}{
		{"modeled", &types.ResourceInUseException{Message: aws.String("taken")}, func(t *testing.T, err error) {
			wantErr[*types.ResourceInUseException](t, err, "taken")
		}},
		{"internal", &types.InternalFailureException{Message: aws.String("oops")}, func(t *testing.T, err error) {
			wantErr[*types.InternalFailureException](t, err, "oops")
		}},
		{"not modeled", &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}, func(t *testing.T, err error) {
			wantErr[*types.InternalFailureException](t, err, "ProvisionedThroughputExceededException: slow down")
		}},
		{"plain", errors.New("boom"), func(t *testing.T, err error) {
			wantErr[*types.InternalFailureException](t, err, "boom")
		}},
		{"context", context.DeadlineExceeded, func(t *testing.T, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Err = %v, want context.DeadlineExceeded", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			l, _, arn := fanoutLog(t, 1, memlog.Config{})
			var mu sync.Mutex
			var calls []memlog.Call
			sent := 0
			l.SetFault(func(_ context.Context, c memlog.Call) error {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, c)
				if c.Op == "SubscribeToShardEvent" {
					if sent++; sent == 2 {
						return tt.fault
					}
				}
				return nil
			})
			e := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeTrimHorizon))
			e.event()
			put(t, l, "s", "k", "x") // the second event fails
			evs, err := e.end()
			if len(evs) != 0 {
				t.Errorf("events after the fault: %v", evs)
			}
			tt.check(t, err)
			mu.Lock()
			defer mu.Unlock()
			want := []memlog.Call{
				{Op: "SubscribeToShard", Stream: "s", ShardID: shardName(0)},
				{Op: "SubscribeToShardEvent", Stream: "s", ShardID: shardName(0)},
				{Op: "PutRecord", Stream: "s", ShardID: shardName(0)},
				{Op: "SubscribeToShardEvent", Stream: "s", ShardID: shardName(0)},
			}
			if fmt.Sprint(calls) != fmt.Sprint(want) {
				t.Errorf("calls\n%v\nwant\n%v", calls, want)
			}
		})
	}
}

// A hook that blocks delays the event, which then carries what was stored meanwhile; records
// trimmed meanwhile are skipped as a reader there would skip them.
func TestSubscribeFaultDelays(t *testing.T) {
	noLeaks(t)
	l, c, arn := fanoutLog(t, 1, memlog.Config{})
	e := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeTrimHorizon))
	e.event()
	held, release := holdNextEvent(l)
	c.Advance(time.Second)
	put(t, l, "s", "k", "r0")
	<-held
	c.Advance(time.Second)
	put(t, l, "s", "k", "r1")
	c.Advance(time.Second)
	put(t, l, "s", "k", "r2")
	expire(t, l, "s", c.Now().Add(-time.Second/2), 2) // r0 and r1
	close(release)
	ev := e.event()
	if got := strings.Join(payloads(ev.Records), " "); got != "r2" {
		t.Errorf("the delayed event holds %q, want r2", got)
	}
}

// Deregistering the consumer ends its subscriptions with ResourceNotFoundException, and so does
// deleting the stream, at the next heartbeat.
func TestSubscribeConsumerGone(t *testing.T) {
	noLeaks(t)
	l, c, arn := fanoutLog(t, 1, memlog.Config{})
	e := subscribe(t, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	e.event()
	if _, err := l.DeregisterStreamConsumer(ctx, &awskinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	_, err := e.end()
	wantErr[*types.ResourceNotFoundException](t, err, arn)
	_, err = l.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn),
		ShardId: aws.String(shardName(0)), StartingPosition: startAt(types.ShardIteratorTypeLatest)})
	wantErr[*types.ResourceNotFoundException](t, err, arn)

	e = subscribe(t, l, register(t, l, "d"), shardName(0), startAt(types.ShardIteratorTypeLatest))
	e.event()
	if _, err := l.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String("s")}); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * time.Second)
	_, err = e.end()
	wantErr[*types.ResourceNotFoundException](t, err, "Stream s under account 000000000000 not found.")
}

// Ending the caller's context or closing the SDK's stream stops the subscription at once; the
// first makes Err report the context's error.
func TestSubscribeStops(t *testing.T) {
	noLeaks(t)
	l, _, arn := fanoutLog(t, 2, memlog.Config{})
	cctx, cancel := context.WithCancel(ctx)
	e := subscribeCtx(t, cctx, l, arn, shardName(0), startAt(types.ShardIteratorTypeLatest))
	e.event()
	cancel()
	if _, err := e.end(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after cancel = %v, want context.Canceled", err)
	}

	// Closing a stream whose events nobody reads stops it too.
	e = subscribe(t, l, arn, shardName(1), startAt(types.ShardIteratorTypeLatest))
	if err := e.es.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	// A context ended before the call fails it before anything starts.
	_, err := l.SubscribeToShard(cctx, &awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn),
		ShardId: aws.String(shardName(1)), StartingPosition: startAt(types.ShardIteratorTypeLatest)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("SubscribeToShard with a done context: %v", err)
	}
}

// Subscribers of several consumers, the shard split under them and puts from several
// goroutines: every record reaches every consumer once and in order per key, under -race.
func TestSubscribeConcurrent(t *testing.T) {
	noLeaks(t)
	l, _, _ := fanoutLog(t, 1, memlog.Config{})
	const consumers, writers, each = 3, 4, 100
	var wg sync.WaitGroup
	got := make([]map[string][]string, consumers) // by consumer, then by key: payloads in order
	for i := range consumers {
		arn := register(t, l, fmt.Sprint("con", i))
		wg.Go(func() { got[i] = readTree(t, l, arn, writers*each) })
	}
	var puts sync.WaitGroup
	for w := range writers {
		puts.Go(func() {
			for n := range each {
				if _, err := l.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String("s"),
					PartitionKey: aws.String(fmt.Sprint("w", w)), Data: fmt.Appendf(nil, "%d", n)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	if _, err := l.UpdateShardCount(ctx, &awskinesis.UpdateShardCountInput{StreamName: aws.String("s"),
		TargetShardCount: aws.Int32(2), ScalingType: types.ScalingTypeUniformScaling}); err != nil {
		t.Fatal(err)
	}
	puts.Wait()
	wg.Wait()
	for i := range consumers {
		for w := range writers {
			var want []string
			for n := range each {
				want = append(want, fmt.Sprint(n))
			}
			if seq := got[i][fmt.Sprint("w", w)]; strings.Join(seq, " ") != strings.Join(want, " ") {
				t.Errorf("consumer %d, writer %d: %d records %v", i, w, len(seq), seq)
			}
		}
	}
}

// readTree reads a stream as an enhanced fan-out consumer does: shard 0 from TRIM_HORIZON, and
// each child shard from TRIM_HORIZON once its parent has ended, in a goroutine per shard, until
// n records have come. It returns the payloads by partition key, in the order they came.
func readTree(t *testing.T, l *memlog.Log, arn string, n int) map[string][]string {
	var mu sync.Mutex
	got := map[string][]string{}
	total := 0
	started := map[string]bool{}
	enough := make(chan struct{})
	var wg sync.WaitGroup
	var read func(shard string)
	read = func(shard string) {
		out, err := l.SubscribeToShard(ctx, &awskinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn),
			ShardId: aws.String(shard), StartingPosition: startAt(types.ShardIteratorTypeTrimHorizon)})
		if err != nil {
			t.Error(err)
			return
		}
		es := out.GetStream()
		defer es.Close()
		for {
			select {
			case <-enough:
				return
			case ev, ok := <-es.Events():
				if !ok {
					if err := es.Err(); err != nil {
						t.Error(err)
					}
					return
				}
				v := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value
				mu.Lock()
				for _, r := range v.Records {
					got[*r.PartitionKey] = append(got[*r.PartitionKey], string(r.Data))
					if total++; total == n {
						close(enough)
					}
				}
				for _, c := range v.ChildShards {
					if id := *c.ShardId; !started[id] {
						started[id] = true
						wg.Go(func() { read(id) })
					}
				}
				mu.Unlock()
			}
		}
	}
	wg.Go(func() { read(shardName(0)) })
	wg.Wait()
	return got
}

// holdNextEvent makes the next event of l's subscriptions wait: held is closed when the pump
// reaches it, and it goes on when release is closed. Later events are not held.
func holdNextEvent(l *memlog.Log) (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	l.SetFault(func(ctx context.Context, c memlog.Call) error {
		if c.Op != "SubscribeToShardEvent" {
			return nil
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			return nil
		}
		close(held)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return held, release
}

// children describes ChildShards for comparison: "id of parents [range]", comma-separated.
func children(cs []types.ChildShard) string {
	var out []string
	for _, c := range cs {
		s := aws.ToString(c.ShardId) + " of " + strings.Join(c.ParentShards, " ")
		if r := c.HashKeyRange; r != nil {
			s += " [" + aws.ToString(r.StartingHashKey) + " " + aws.ToString(r.EndingHashKey) + "]"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}
