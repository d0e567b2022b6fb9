package lease_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// failGetItem makes every GetItem of cc fail, as a read-back that times out.
func failGetItem(cc *countingClient) {
	cc.setFault(func(method string) error {
		if method == "GetItem" {
			return errors.New("injected: read timeout")
		}
		return nil
	})
}

// TestDynamoDBStoreHandoffCalls checks what each handoff write costs: one UpdateItem when it
// applies, plus one consistent GetItem when its condition fails, and no call at all when the
// answer is known without asking.
func TestDynamoDBStoreHandoffCalls(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, _ := newTableStore(t, cc, c, "handoffcalls")
	ctx := t.Context()
	free, err := s.Create(ctx, lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0"})
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Take(ctx, free, "worker-a")
	if err != nil {
		t.Fatal(err)
	}

	calls := func(what string, f func(), updates, gets int) {
		t.Helper()
		u, g := cc.count("UpdateItem"), cc.count("GetItem")
		f()
		if du, dg := cc.count("UpdateItem")-u, cc.count("GetItem")-g; du != updates || dg != gets {
			t.Fatalf("%s made %d UpdateItem and %d GetItem calls, want %d and %d", what, du, dg, updates, gets)
		}
	}
	calls("RequestHandoff of a lease observed free", func() {
		if _, err := s.RequestHandoff(ctx, free, "worker-b"); !errors.Is(err, lease.ErrLeaseChanged) {
			t.Fatalf("RequestHandoff of a free lease: %v", err)
		}
	}, 0, 0)
	calls("Handoff of a free lease", func() {
		if _, err := s.Handoff(ctx, free); !errors.Is(err, lease.ErrLeaseLost) {
			t.Fatalf("Handoff of a free lease: %v", err)
		}
	}, 0, 0)
	calls("Handoff with nobody pending", func() {
		if _, err := s.Handoff(ctx, held); !errors.Is(err, lease.ErrNoPendingOwner) {
			t.Fatalf("Handoff with nobody pending: %v", err)
		}
	}, 1, 1)
	calls("RequestHandoff", func() {
		if _, err := s.RequestHandoff(ctx, held, "worker-b"); err != nil {
			t.Fatal(err)
		}
	}, 1, 0)
	calls("RequestHandoff by a second thief", func() {
		if _, err := s.RequestHandoff(ctx, held, "worker-c"); !errors.Is(err, lease.ErrLeaseChanged) {
			t.Fatalf("second request: %v", err)
		}
	}, 1, 1)
	var handed lease.Lease
	calls("Handoff", func() {
		if handed, err = s.Handoff(ctx, held); err != nil {
			t.Fatal(err)
		}
	}, 1, 0)
	if handed.Owner != "worker-b" || handed.Generation != held.Generation+1 || handed.PendingOwner != "" {
		t.Fatalf("Handoff result = %+v", handed)
	}
	calls("Handoff by the old owner", func() {
		if _, err := s.Handoff(ctx, held); !errors.Is(err, lease.ErrLeaseLost) {
			t.Fatalf("Handoff by the old owner: %v", err)
		}
	}, 1, 1)
}

// TestDynamoDBStoreHandoffReadBackFails: when the read that tells why a handoff failed fails
// too, the answer is ErrLeaseLost (never ErrNoPendingOwner: the caller must not go on reading a
// shard it may have lost), with the read's error in the message.
func TestDynamoDBStoreHandoffReadBackFails(t *testing.T) {
	c := dynamoClient(t)
	cc := &countingClient{inner: c}
	s, table := newTableStore(t, cc, c, "handoffreadback")
	held, err := s.Create(t.Context(), lease.Lease{Group: "g", Stream: "s", ShardID: "shard-0", Owner: "worker-a"})
	if err != nil {
		t.Fatal(err)
	}
	failGetItem(cc)
	_, err = s.Handoff(t.Context(), held) // nobody pending: the condition fails
	var ce *lease.ConditionError
	if !errors.As(err, &ce) || !errors.Is(err, lease.ErrLeaseLost) || ce.Op != lease.OpHandoff {
		t.Fatalf("Handoff with a failing read-back: %v, want a handoff ConditionError matching ErrLeaseLost", err)
	}
	if errors.Is(err, lease.ErrNoPendingOwner) {
		t.Fatalf("Handoff with a failing read-back: %v matches ErrNoPendingOwner", err)
	}
	for _, want := range []string{table, "injected: read timeout", "shard-0"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}

	// RequestHandoff answers as Take does: ErrLeaseChanged.
	stale := held
	stale.Generation++
	_, err = s.RequestHandoff(t.Context(), stale, "worker-b")
	if !errors.As(err, &ce) || !errors.Is(err, lease.ErrLeaseChanged) || ce.Op != lease.OpRequestHandoff {
		t.Fatalf("RequestHandoff with a failing read-back: %v, want a request-handoff ConditionError matching ErrLeaseChanged", err)
	}
	if !strings.Contains(err.Error(), "injected: read timeout") {
		t.Fatalf("error %q does not carry the read's error", err)
	}
	cc.setFault(nil)
	if got := storedLease(t, s); got.Counter != held.Counter || got.PendingOwner != "" || got.Owner != "worker-a" {
		t.Fatalf("failed handoff writes changed the lease: %+v, want %+v", got, held)
	}
}
