package kclref_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/watermill-kinesis/watermill-kinesis/tests/internal/kclref"
)

// row is one lease row played through Apply, with the helpers a scenario
// needs: apply a write, expect it to fail, read the row as the KCL would.
type row struct {
	t     *testing.T
	item  map[string]types.AttributeValue
	multi bool
}

func (r *row) apply(w kclref.Write) {
	r.t.Helper()
	next, err := kclref.Apply(r.item, w)
	if err != nil {
		r.t.Fatalf("%s: %v", w.Op, err)
	}
	r.item = next
}

func (r *row) refused(w kclref.Write) {
	r.t.Helper()
	next, err := kclref.Apply(r.item, w)
	if !errors.Is(err, kclref.ErrConditionFailed) {
		r.t.Fatalf("%s: err = %v, want ErrConditionFailed", w.Op, err)
	}
	if !reflect.DeepEqual(next, r.item) {
		r.t.Fatalf("%s: a refused write changed the row", w.Op)
	}
}

func (r *row) read() kclref.Lease {
	r.t.Helper()
	if err := kclref.CheckAsWritten(r.item, r.multi); err != nil {
		r.t.Fatalf("row no longer as the KCL writes it: %v", err)
	}
	l, err := kclref.Decode(r.item, r.multi)
	if err != nil {
		r.t.Fatal(err)
	}
	return l
}

func TestKCL2Lifecycle(t *testing.T) {
	r := &row{t: t}
	r.apply(kclref.CreateWrite(newLease(), false, kclref.KCL2))
	r.refused(kclref.CreateWrite(newLease(), false, kclref.KCL2))

	a := r.read()
	r.apply(kclref.TakeWrite(a, "worker-a", kclref.KCL2))
	a = r.read()
	if a.LeaseOwner != "worker-a" || a.LeaseCounter != 1 || a.OwnerSwitchesSinceCheckpoint != 0 {
		t.Fatalf("after taking an unowned lease: %+v", a)
	}
	r.apply(kclref.RenewWrite(a, kclref.KCL2))
	a.LeaseCounter++ // the KCL bumps its copy after a successful renew
	r.apply(kclref.CheckpointWrite(a, kclref.ESN(seqA, 2), false))
	a = r.read()
	if a.Checkpoint != kclref.ESN(seqA, 2) || a.LeaseCounter != 3 || a.PendingCheckpoint != nil {
		t.Fatalf("after checkpoint: %+v", a)
	}

	// Worker B saw counter 3 stand still for the failover time and takes it.
	r.apply(kclref.TakeWrite(a, "worker-b", kclref.KCL2))
	got := r.read()
	if got.LeaseOwner != "worker-b" || got.LeaseCounter != 4 || got.OwnerSwitchesSinceCheckpoint != 1 {
		t.Fatalf("after the steal: %+v", got)
	}
	// A, still holding counter 3, can neither renew nor checkpoint.
	r.refused(kclref.RenewWrite(a, kclref.KCL2))
	r.refused(kclref.CheckpointWrite(a, kclref.ESN(seqB, 0), false))

	// B prepares, then checkpoints: pending goes, switches reset to 0.
	r.apply(kclref.PrepareCheckpointWrite(got, kclref.ESN(seqB, 0), []byte("s"), false))
	got = r.read()
	if got.PendingCheckpoint == nil || *got.PendingCheckpoint != kclref.ESN(seqB, 0) || string(got.PendingCheckpointState) != "s" {
		t.Fatalf("after prepare: %+v", got)
	}
	r.apply(kclref.CheckpointWrite(got, kclref.ShardEnd, false))
	got = r.read()
	if got.Checkpoint != kclref.ShardEnd || got.PendingCheckpoint != nil || got.PendingCheckpointState != nil || got.OwnerSwitchesSinceCheckpoint != 0 {
		t.Fatalf("after SHARD_END: %+v", got)
	}
	if v := r.item["checkpoint"].(*types.AttributeValueMemberS).Value; v != "SHARD_END" {
		t.Fatalf("checkpoint attribute %q", v)
	}
}

func TestKCL3GracefulHandoff(t *testing.T) {
	r := &row{t: t, multi: true}
	r.apply(kclref.CreateWrite(multi(newLease()), true, kclref.KCL35))
	r.apply(kclref.AssignWrite(r.read(), "worker-a"))
	a := r.read()
	if a.LeaseOwner != "worker-a" || a.LeaseCounter != 1 {
		t.Fatalf("after assign: %+v", a)
	}

	// The leader moves the lease to B: owner fields change, the counter not.
	r.apply(kclref.HandoffWrite(a, "worker-b"))
	h := r.read()
	if h.LeaseOwner != "worker-b" || h.CheckpointOwner != "worker-a" || h.LeaseCounter != a.LeaseCounter {
		t.Fatalf("after handoff: %+v", h)
	}
	r.refused(kclref.HandoffWrite(a, "worker-c")) // a handoff is already under way

	// A's plain renew fails on checkpointOwner; having re-read, it renews
	// without that condition and may still checkpoint.
	r.refused(kclref.RenewWrite(a, kclref.KCL35))
	r.apply(kclref.RenewWrite(h, kclref.KCL35))
	h.LeaseCounter++
	r.apply(kclref.CheckpointWrite(h, kclref.ESN(seqA, 0), true))
	h = r.read()

	// A finishes: assign to the current leaseOwner.
	r.apply(kclref.AssignWrite(h, h.LeaseOwner))
	b := r.read()
	if b.LeaseOwner != "worker-b" || b.CheckpointOwner != "" || b.LeaseCounter != h.LeaseCounter+1 {
		t.Fatalf("after the transfer: %+v", b)
	}
	// As the KCL's condition is written, finishing a handoff is not counted
	// as an owner switch.
	if b.OwnerSwitchesSinceCheckpoint != 0 {
		t.Fatalf("ownerSwitchesSinceCheckpoint = %d", b.OwnerSwitchesSinceCheckpoint)
	}
	r.refused(kclref.RenewWrite(h, kclref.KCL35))
	r.refused(kclref.AssignWrite(h, "worker-a")) // A's view is stale
}

func TestEvict(t *testing.T) {
	held := newLease()
	held.LeaseOwner, held.LeaseCounter = "worker-a", 5
	for _, v := range []kclref.Version{kclref.KCL2, kclref.KCL3} {
		r := &row{t: t}
		r.apply(kclref.CreateWrite(held, false, v))
		other := held
		other.LeaseOwner = "worker-z"
		r.refused(kclref.EvictWrite(other, v))
		r.apply(kclref.EvictWrite(held, v))
		if got := r.read(); got.LeaseOwner != "" || got.LeaseCounter != 6 {
			t.Fatalf("version %d after evict: %+v", v, got)
		}
	}
	// 3.x during a handoff: only checkpointOwner goes, the target keeps it.
	held.LeaseOwner, held.CheckpointOwner = "worker-b", "worker-a"
	r := &row{t: t}
	r.apply(kclref.CreateWrite(held, false, kclref.KCL3))
	r.apply(kclref.EvictWrite(held, kclref.KCL3))
	if got := r.read(); got.LeaseOwner != "worker-b" || got.CheckpointOwner != "" {
		t.Fatalf("evict during handoff: %+v", got)
	}
}

// 2.x's evict has no existence condition, so on a deleted row it upserts a
// fragment the KCL cannot read; 3.x added the leaseKey condition for this.
func TestEvictOnMissingRow(t *testing.T) {
	l := newLease()
	frag, err := kclref.Apply(nil, kclref.EvictWrite(l, kclref.KCL2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kclref.Decode(frag, false); err == nil {
		t.Fatalf("Decode accepted the fragment %v", frag)
	}
	if _, err := kclref.Apply(nil, kclref.EvictWrite(l, kclref.KCL3)); !errors.Is(err, kclref.ErrConditionFailed) {
		t.Fatalf("3.x evict on a missing row: %v", err)
	}
}

func TestTakeBackFromHandoff(t *testing.T) {
	// 3.x: a lease given back to the worker that was handing it off counts
	// as an owner switch; the checkpointOwner is removed.
	l := newLease()
	l.LeaseOwner, l.CheckpointOwner, l.LeaseCounter = "worker-b", "worker-a", 7
	w := kclref.TakeWrite(l, "worker-a", kclref.KCL3)
	if _, ok := w.Updates["ownerSwitchesSinceCheckpoint"]; !ok {
		t.Fatal("no owner switch counted")
	}
	if u := w.Updates["checkpointOwner"]; u.Action != types.AttributeActionDelete {
		t.Fatalf("checkpointOwner update %v", u)
	}
	if _, ok := kclref.TakeWrite(l, "worker-a", kclref.KCL2).Updates["checkpointOwner"]; ok {
		t.Fatal("2.x knows no checkpointOwner")
	}
}

func TestRequestInputs(t *testing.T) {
	l := fullLease()
	in := kclref.RenewWrite(l, kclref.KCL3).UpdateItemInput("leases")
	if *in.TableName != "leases" || !reflect.DeepEqual(in.Key, map[string]types.AttributeValue{"leaseKey": s(l.LeaseKey)}) {
		t.Fatalf("UpdateItemInput: %+v", in)
	}
	if !reflect.DeepEqual(in.Expected["leaseCounter"].Value, n("41")) || !reflect.DeepEqual(in.AttributeUpdates["leaseCounter"].Value, n("42")) {
		t.Fatalf("renew guard: %+v %+v", in.Expected, in.AttributeUpdates)
	}
	if _, ok := in.Expected["checkpointOwner"]; ok {
		t.Fatal("a worker that knows of the handoff renews without the checkpointOwner condition")
	}
	put := kclref.CreateWrite(newLease(), false, kclref.KCL2).PutItemInput("leases")
	if e := put.Expected["leaseKey"]; e.Exists == nil || *e.Exists {
		t.Fatalf("create condition: %+v", put.Expected)
	}
}
