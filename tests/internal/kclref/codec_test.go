package kclref_test

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/kclref"
)

func s(v string) types.AttributeValue     { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue     { return &types.AttributeValueMemberN{Value: v} }
func ss(v ...string) types.AttributeValue { return &types.AttributeValueMemberSS{Value: v} }
func b(v []byte) types.AttributeValue     { return &types.AttributeValueMemberB{Value: v} }

var stream = kclref.StreamIdentifier("123456789012", "orders", 1700000000)

// newLease is what the KCL's shard syncer creates for a shard found at
// start-up with initial position TRIM_HORIZON.
func newLease() kclref.Lease {
	return kclref.Lease{
		LeaseKey:       "shardId-000000000002",
		Checkpoint:     kclref.TrimHorizon,
		ParentShardIDs: []string{"shardId-000000000001", "shardId-000000000000"},
		HashKeyRange:   &kclref.HashKeyRange{StartingHashKey: "0", EndingHashKey: "340282366920938463463374607431768211455"},
	}
}

func fullLease() kclref.Lease {
	tp := 12.5
	return kclref.Lease{
		LeaseKey:                     "shardId-000000000002",
		LeaseOwner:                   "worker-b",
		LeaseCounter:                 41,
		OwnerSwitchesSinceCheckpoint: 2,
		Checkpoint:                   kclref.ESN(seqA, 3),
		PendingCheckpoint:            &kclref.ExtendedSequenceNumber{SequenceNumber: seqB, SubSequenceNumber: 1},
		PendingCheckpointState:       []byte("app-state"),
		ParentShardIDs:               []string{"shardId-000000000000"},
		ChildShardIDs:                []string{"shardId-000000000003", "shardId-000000000004"},
		HashKeyRange:                 &kclref.HashKeyRange{StartingHashKey: "0", EndingHashKey: "170141183460469231731687303715884105727"},
		ThroughputKBps:               &tp,
		CheckpointOwner:              "worker-a",
	}
}

func multi(l kclref.Lease) kclref.Lease {
	l.ShardID = l.LeaseKey
	l.StreamIdentifier = stream
	l.LeaseKey = kclref.MultiStreamLeaseKey(stream, l.ShardID)
	return l
}

func TestEncodeNewLeaseExactly(t *testing.T) {
	want := map[string]types.AttributeValue{
		"leaseKey":                     s("shardId-000000000002"),
		"leaseCounter":                 n("0"),
		"ownerSwitchesSinceCheckpoint": n("0"),
		"checkpoint":                   s("TRIM_HORIZON"),
		"checkpointSubSequenceNumber":  n("0"),
		"parentShardId":                ss("shardId-000000000000", "shardId-000000000001"),
		"startingHashKey":              s("0"),
		"endingHashKey":                s("340282366920938463463374607431768211455"),
		"entityType":                   s("LEASE"),
	}
	if got := kclref.Encode(newLease(), false); !reflect.DeepEqual(got, want) {
		t.Fatalf("Encode =\n%#v\nwant\n%#v", got, want)
	}
	// Before 3.5 the same lease has no entityType.
	delete(want, "entityType")
	if got := kclref.EncodeAs(newLease(), false, kclref.KCL2); !reflect.DeepEqual(got, want) {
		t.Fatalf("EncodeAs(KCL2) =\n%#v\nwant\n%#v", got, want)
	}
}

func TestEncodeMultiStream(t *testing.T) {
	got := kclref.Encode(multi(newLease()), true)
	if v := got["leaseKey"].(*types.AttributeValueMemberS).Value; v != "123456789012:orders:1700000000:shardId-000000000002" {
		t.Errorf("leaseKey = %q", v)
	}
	if !reflect.DeepEqual(got["streamName"], s("123456789012:orders:1700000000")) || !reflect.DeepEqual(got["shardId"], s("shardId-000000000002")) {
		t.Errorf("streamName/shardId = %#v %#v", got["streamName"], got["shardId"])
	}
}

func TestEncodeVersionFields(t *testing.T) {
	l := fullLease()
	for _, tt := range []struct {
		v                               kclref.Version
		owner, throughput, entity, want bool
	}{
		{v: kclref.KCL2},
		{v: kclref.KCL3, owner: true, throughput: true},
		{v: kclref.KCL35, owner: true, throughput: true, entity: true},
	} {
		item := kclref.EncodeAs(l, false, tt.v)
		_, owner := item["checkpointOwner"]
		_, tp := item["throughputKBps"]
		_, et := item["entityType"]
		if owner != tt.owner || tp != tt.throughput || et != tt.entity {
			t.Errorf("version %d: checkpointOwner %v throughputKBps %v entityType %v", tt.v, owner, tp, et)
		}
	}
	item := kclref.Encode(l, false)
	if !reflect.DeepEqual(item["throughputKBps"], n("12.5")) || !reflect.DeepEqual(item["pendingCheckpointState"], b([]byte("app-state"))) ||
		!reflect.DeepEqual(item["pendingCheckpointSubSequenceNumber"], n("1")) || !reflect.DeepEqual(item["checkpointSubSequenceNumber"], n("3")) {
		t.Errorf("field encodings: %#v", item)
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		l     kclref.Lease
		multi bool
	}{
		{"new", newLease(), false},
		{"full", fullLease(), false},
		{"new multi-stream", multi(newLease()), true},
		{"full multi-stream", multi(fullLease()), true},
		{"shard end", kclref.Lease{LeaseKey: "shardId-000000000000", LeaseOwner: "w", LeaseCounter: 9, Checkpoint: kclref.ShardEnd}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			item := kclref.Encode(tt.l, tt.multi)
			got, err := kclref.Decode(item, tt.multi)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.l
			want.ParentShardIDs = sorted(want.ParentShardIDs)
			want.ChildShardIDs = sorted(want.ChildShardIDs)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Decode(Encode) =\n%+v\nwant\n%+v", got, want)
			}
			if err := kclref.CheckAsWritten(item, tt.multi); err != nil {
				t.Fatalf("CheckAsWritten: %v", err)
			}
		})
	}
}

func sorted(v []string) []string {
	if v == nil {
		return nil
	}
	out := slices.Clone(v)
	slices.Sort(out)
	return out
}

func TestDecodeIgnoresUnknownAttributes(t *testing.T) {
	item := kclref.Encode(newLease(), false)
	item["ourOwnAttribute"] = n("7")
	item["heartbeat"] = s("whatever")
	if _, err := kclref.Decode(item, false); err != nil {
		t.Fatal(err)
	}
}

func TestNonLeaseRows(t *testing.T) {
	leader := map[string]types.AttributeValue{"leaseKey": s("Leader"), "entityType": s("LEADER")}
	if kclref.IsLease(leader) {
		t.Fatal("a LEADER row is not a lease")
	}
	if _, err := kclref.Decode(leader, false); !errors.Is(err, kclref.ErrNotLease) {
		t.Fatalf("Decode = %v, want ErrNotLease", err)
	}
	if _, err := kclref.Decode(leader, true); !errors.Is(err, kclref.ErrNotLease) {
		t.Fatalf("multi-stream Decode = %v, want ErrNotLease", err)
	}
	old := kclref.EncodeAs(newLease(), false, kclref.KCL3)
	if !kclref.IsLease(old) {
		t.Fatal("a row without entityType is a lease")
	}
	// A non-string entityType reads as absent, so the row is a lease, but no
	// KCL would write it.
	odd := kclref.Encode(newLease(), false)
	odd["entityType"] = n("1")
	if !kclref.IsLease(odd) {
		t.Fatal("a non-S entityType counts as absent")
	}
	if err := kclref.CheckAsWritten(odd, false); err == nil {
		t.Fatal("CheckAsWritten accepted a numeric entityType")
	}
}

// mutate returns a copy of the encoded full lease with change applied.
func mutate(multiStream bool, change func(map[string]types.AttributeValue)) map[string]types.AttributeValue {
	l := fullLease()
	if multiStream {
		l = multi(l)
	}
	item := maps.Clone(kclref.Encode(l, multiStream))
	change(item)
	return item
}

func TestDecodeStrictFailures(t *testing.T) {
	tests := []struct {
		name   string
		multi  bool
		change func(map[string]types.AttributeValue)
		attr   string
	}{
		{"no leaseKey", false, func(m map[string]types.AttributeValue) { delete(m, "leaseKey") }, "leaseKey"},
		{"leaseKey N", false, func(m map[string]types.AttributeValue) { m["leaseKey"] = n("1") }, "leaseKey"},
		{"no leaseCounter", false, func(m map[string]types.AttributeValue) { delete(m, "leaseCounter") }, "leaseCounter"},
		{"leaseCounter S", false, func(m map[string]types.AttributeValue) { m["leaseCounter"] = s("41") }, "leaseCounter"},
		{"leaseCounter fraction", false, func(m map[string]types.AttributeValue) { m["leaseCounter"] = n("4.5") }, "leaseCounter"},
		{"leaseCounter overflow", false, func(m map[string]types.AttributeValue) { m["leaseCounter"] = n("9223372036854775808") }, "leaseCounter"},
		{"no ownerSwitches", false, func(m map[string]types.AttributeValue) { delete(m, "ownerSwitchesSinceCheckpoint") }, "ownerSwitchesSinceCheckpoint"},
		{"leaseOwner N", false, func(m map[string]types.AttributeValue) { m["leaseOwner"] = n("3") }, "leaseOwner"},
		{"leaseOwner empty", false, func(m map[string]types.AttributeValue) { m["leaseOwner"] = s("") }, "leaseOwner"},
		{"no checkpoint", false, func(m map[string]types.AttributeValue) { delete(m, "checkpoint") }, "checkpoint"},
		{"checkpoint N", false, func(m map[string]types.AttributeValue) { m["checkpoint"] = n(seqA) }, "checkpoint"},
		{"checkpoint garbage", false, func(m map[string]types.AttributeValue) { m["checkpoint"] = s("trim_horizon") }, "checkpoint"},
		{"checkpoint sub S", false, func(m map[string]types.AttributeValue) { m["checkpointSubSequenceNumber"] = s("3") }, "checkpointSubSequenceNumber"},
		{"parents S", false, func(m map[string]types.AttributeValue) { m["parentShardId"] = s("shardId-000000000000") }, "parentShardId"},
		{"children L", false, func(m map[string]types.AttributeValue) {
			m["childShardIds"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{s("x")}}
		}, "childShardIds"},
		{"pending N", false, func(m map[string]types.AttributeValue) { m["pendingCheckpoint"] = n(seqB) }, "pendingCheckpoint"},
		{"pending sub S", false, func(m map[string]types.AttributeValue) { m["pendingCheckpointSubSequenceNumber"] = s("1") }, "pendingCheckpointSubSequenceNumber"},
		{"state S", false, func(m map[string]types.AttributeValue) { m["pendingCheckpointState"] = s("app-state") }, "pendingCheckpointState"},
		{"state N (the create path's slip)", false, func(m map[string]types.AttributeValue) { m["pendingCheckpointState"] = n("3") }, "pendingCheckpointState"},
		{"hash key not a number", false, func(m map[string]types.AttributeValue) { m["endingHashKey"] = s("ff") }, "endingHashKey"},
		{"hash range inverted", false, func(m map[string]types.AttributeValue) {
			m["startingHashKey"] = s("170141183460469231731687303715884105728")
		}, "startingHashKey"},
		{"hash key N", false, func(m map[string]types.AttributeValue) { m["startingHashKey"] = n("0") }, "startingHashKey"},
		{"throughput S", false, func(m map[string]types.AttributeValue) { m["throughputKBps"] = s("12.5") }, "throughputKBps"},
		{"checkpointOwner empty", false, func(m map[string]types.AttributeValue) { m["checkpointOwner"] = s("") }, "checkpointOwner"},
		{"checkpointOwner SS", false, func(m map[string]types.AttributeValue) { m["checkpointOwner"] = ss("worker-a") }, "checkpointOwner"},
		{"multi: no streamName", true, func(m map[string]types.AttributeValue) { delete(m, "streamName") }, "streamName"},
		{"multi: no shardId", true, func(m map[string]types.AttributeValue) { delete(m, "shardId") }, "shardId"},
		{"multi: streamName not an identifier", true, func(m map[string]types.AttributeValue) { m["streamName"] = s("orders") }, "streamName"},
		{"multi: creation epoch 0", true, func(m map[string]types.AttributeValue) { m["streamName"] = s("123456789012:orders:0") }, "streamName"},
		{"multi: key mismatch", true, func(m map[string]types.AttributeValue) { m["leaseKey"] = s("shardId-000000000002") }, "leaseKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kclref.Decode(mutate(tt.multi, tt.change), tt.multi)
			var ae *kclref.AttrError
			if !errors.As(err, &ae) || ae.Attr != tt.attr {
				t.Fatalf("Decode error = %v, want an AttrError on %s", err, tt.attr)
			}
		})
	}
}

// These shapes the KCL reads without complaint but never writes.
func TestDecodeToleratesButCheckAsWrittenRejects(t *testing.T) {
	tests := []struct {
		name   string
		change func(map[string]types.AttributeValue)
	}{
		{"no checkpoint sub-sequence", func(m map[string]types.AttributeValue) { delete(m, "checkpointSubSequenceNumber") }},
		{"pending without its sub-sequence", func(m map[string]types.AttributeValue) { delete(m, "pendingCheckpointSubSequenceNumber") }},
		{"pending sub-sequence alone", func(m map[string]types.AttributeValue) { delete(m, "pendingCheckpoint") }},
		{"empty pending checkpoint", func(m map[string]types.AttributeValue) { m["pendingCheckpoint"] = s("") }},
		{"starting hash key alone", func(m map[string]types.AttributeValue) { delete(m, "endingHashKey") }},
		{"negative counter", func(m map[string]types.AttributeValue) { m["leaseCounter"] = n("-1") }},
		{"entityType lower case", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			item := mutate(false, func(map[string]types.AttributeValue) {})
			if tt.change != nil {
				tt.change(item)
			} else {
				item["entityType"] = s("lease") // not LEASE: a 3.5 KCL skips it
			}
			_, derr := kclref.Decode(item, false)
			if tt.change != nil && derr != nil {
				t.Fatalf("Decode rejected a row the KCL reads: %v", derr)
			}
			if err := kclref.CheckAsWritten(item, false); err == nil {
				t.Fatal("CheckAsWritten accepted it")
			}
		})
	}
	// The KCL reads the missing sub-sequence numbers as 0.
	item := mutate(false, func(m map[string]types.AttributeValue) {
		delete(m, "checkpointSubSequenceNumber")
		delete(m, "pendingCheckpointSubSequenceNumber")
	})
	l, err := kclref.Decode(item, false)
	if err != nil || l.Checkpoint.SubSequenceNumber != 0 || l.PendingCheckpoint.SubSequenceNumber != 0 {
		t.Fatalf("Decode = %+v, %v", l, err)
	}
}

func TestJavaDouble(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 5: "5.0", 12.5: "12.5", 0.001: "0.001", 0.0001: "1.0E-4",
		1234567.125: "1234567.125", 1e7: "1.0E7", 12345678.9: "1.23456789E7", -2.25: "-2.25",
	} {
		if got := kclref.JavaDouble(f); got != want {
			t.Errorf("JavaDouble(%v) = %q, want %q", f, got, want)
		}
	}
}
