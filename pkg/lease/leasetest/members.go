package leasetest

import (
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// memberCases run only against a store that implements lease.Membership; a store without it
// skips them.
func memberCases() []testCase {
	cases := []testCase{
		{"HeartbeatCreatesThenCounts", testHeartbeat},
		{"MembersOrderedAndIsolated", testMembersIsolation},
		{"MembersAreNotLeases", testMembersNotLeases},
		{"RemoveMember", testRemoveMember},
		{"RemoveMemberThatMoved", testRemoveMemberMoved},
		{"NotifyMember", testNotifyMember},
		{"MemberInvalidInput", testMemberInvalid},
	}
	for i, tc := range cases {
		cases[i].run = func(e *env) {
			ms, ok := e.s.(lease.Membership)
			if !ok {
				e.t.Skip("the store does not implement lease.Membership")
			}
			e.ms = ms
			tc.run(e)
		}
	}
	return cases
}

func (e *env) heartbeat(group, stream, worker string) lease.Member {
	e.t.Helper()
	m, err := e.ms.Heartbeat(e.ctx, lease.Member{Group: group, Stream: stream, Worker: worker})
	if err != nil {
		e.t.Fatalf("Heartbeat %s of group %q stream %q: %v", worker, group, stream, err)
	}
	return m
}

func (e *env) members(group, stream string) []lease.Member {
	e.t.Helper()
	ms, err := e.ms.Members(e.ctx, group, stream)
	if err != nil {
		e.t.Fatalf("Members of group %q stream %q: %v", group, stream, err)
	}
	return ms
}

// testHeartbeat: the first Heartbeat creates the record with Counter 1 and Notices 0, whatever
// the member passed carries, and each one after adds 1 to the Counter.
func testHeartbeat(e *env) {
	first, err := e.ms.Heartbeat(e.ctx, lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a", Counter: 7, Notices: 3})
	want := lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a", Counter: 1}
	if err != nil || first != want {
		e.t.Fatalf("first Heartbeat = %+v, %v; want %+v", first, err, want)
	}
	second := e.heartbeat(e.group, e.stream, "worker-a")
	want.Counter = 2
	if second != want {
		e.t.Fatalf("second Heartbeat = %+v, want %+v", second, want)
	}
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0] != want {
		e.t.Fatalf("Members = %+v, want [%+v]", got, want)
	}
}

func testMembersIsolation(e *env) {
	other := e.group + "-other"
	for _, w := range []string{"worker-c", "worker-a", "worker-b"} {
		e.heartbeat(e.group, e.stream, w)
	}
	e.heartbeat(other, e.stream, "worker-x")
	e.heartbeat(e.group, "stream-b", "worker-y")
	got := e.members(e.group, e.stream)
	var names []string
	for _, m := range got {
		names = append(names, m.Worker)
		if m.Group != e.group || m.Stream != e.stream {
			e.t.Fatalf("Members of group %q stream %q returned %+v", e.group, e.stream, m)
		}
	}
	if len(names) != 3 || names[0] != "worker-a" || names[1] != "worker-b" || names[2] != "worker-c" {
		e.t.Fatalf("Members = %v, want worker-a, worker-b, worker-c (ordered, this group and stream only)", names)
	}
	if got := e.members(other, e.stream); len(got) != 1 || got[0].Worker != "worker-x" || got[0].Group != other {
		e.t.Fatalf("Members of the other group = %+v, want worker-x only", got)
	}
	if got := e.members(e.group+"-none", e.stream); len(got) != 0 {
		e.t.Fatalf("Members of a group with none = %+v, want none", got)
	}
}

func testMembersNotLeases(e *env) {
	e.create(e.lease("shardId-000000000000"))
	e.heartbeat(e.group, e.stream, "worker-a")
	if got := e.list(); len(got) != 1 || got[0].ShardID != "shardId-000000000000" {
		e.t.Fatalf("List = %+v, want the one lease and no member record", got)
	}
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0].Worker != "worker-a" {
		e.t.Fatalf("Members = %+v, want worker-a and no lease", got)
	}
}

func testRemoveMember(e *env) {
	m := e.heartbeat(e.group, e.stream, "worker-a")
	e.heartbeat(e.group, e.stream, "worker-b")
	if err := e.ms.RemoveMember(e.ctx, m); err != nil {
		e.t.Fatalf("RemoveMember %+v: %v", m, err)
	}
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0].Worker != "worker-b" {
		e.t.Fatalf("Members after removing worker-a = %+v, want worker-b only", got)
	}
	if err := e.ms.RemoveMember(e.ctx, m); err != nil {
		e.t.Fatalf("RemoveMember of a member already gone: %v, want nil", err)
	}
	if again := e.heartbeat(e.group, e.stream, "worker-a"); again.Counter != 1 {
		e.t.Fatalf("Heartbeat after RemoveMember = %+v, want a new record with Counter 1", again)
	}
}

func testRemoveMemberMoved(e *env) {
	observed := e.heartbeat(e.group, e.stream, "worker-a")
	e.heartbeat(e.group, e.stream, "worker-a")
	err := e.ms.RemoveMember(e.ctx, observed)
	wantCondition(e.t, err, lease.ErrMemberChanged, lease.OpRemoveMember, observed.Key())
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0].Counter != 2 {
		e.t.Fatalf("Members after a refused RemoveMember = %+v, want worker-a with Counter 2", got)
	}
}

// testNotifyMember: NotifyMember moves Notices, which the next Heartbeat returns (Counter moved
// by one), and a member with no record is not made one.
func testNotifyMember(e *env) {
	m := e.heartbeat(e.group, e.stream, "worker-a")
	for range 2 {
		if err := e.ms.NotifyMember(e.ctx, m); err != nil {
			e.t.Fatalf("NotifyMember: %v", err)
		}
	}
	beat := e.heartbeat(e.group, e.stream, "worker-a")
	if beat.Notices != 2 || beat.Counter != m.Counter+1 {
		e.t.Fatalf("Heartbeat after two NotifyMember = %+v, want Notices 2 and the counter moved by one", beat)
	}
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0] != beat {
		e.t.Fatalf("Members = %+v, want [%+v]", got, beat)
	}
	none := lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-none"}
	if err := e.ms.NotifyMember(e.ctx, none); err != nil {
		e.t.Fatalf("NotifyMember of a member with no record: %v, want nil", err)
	}
	if got := e.members(e.group, e.stream); len(got) != 1 {
		e.t.Fatalf("Members after notifying a member with no record = %+v, want worker-a alone", got)
	}
}

func testMemberInvalid(e *env) {
	_, err := e.ms.Heartbeat(e.ctx, lease.Member{Group: e.group, Stream: e.stream})
	wantInvalid(e.t, err, "Heartbeat with no worker", "worker")
	_, err = e.ms.Heartbeat(e.ctx, lease.Member{Stream: e.stream, Worker: "worker-a"})
	wantInvalid(e.t, err, "Heartbeat with no group", "consumer group")
	_, err = e.ms.Members(e.ctx, e.group, "")
	wantInvalid(e.t, err, "Members with no stream", "stream name")
	err = e.ms.RemoveMember(e.ctx, lease.Member{Group: e.group, Stream: e.stream})
	wantInvalid(e.t, err, "RemoveMember with no worker", "worker")
	err = e.ms.NotifyMember(e.ctx, lease.Member{Group: e.group, Worker: "worker-a"})
	wantInvalid(e.t, err, "NotifyMember with no stream", "stream name")
}

func finishedCases() []testCase {
	return []testCase{
		{"DeleteFinished", testDeleteFinished},
		{"DeleteFinishedRefusesUnfinished", testDeleteUnfinished},
		{"DeleteFinishedRefusesMoved", testDeleteFinishedMoved},
	}
}

func testDeleteFinished(e *env) {
	held := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	done := e.checkpoint(held, lease.ShardEnd)
	e.create(e.lease("shardId-000000000001"))
	if err := e.s.DeleteFinished(e.ctx, done); err != nil {
		e.t.Fatalf("DeleteFinished of %+v: %v", done, err)
	}
	if got := e.list(); len(got) != 1 || got[0].ShardID != "shardId-000000000001" {
		e.t.Fatalf("List after DeleteFinished = %+v, want only the other lease", got)
	}
	if err := e.s.DeleteFinished(e.ctx, done); err != nil {
		e.t.Fatalf("DeleteFinished of a lease already gone: %v, want nil", err)
	}
}

func testDeleteUnfinished(e *env) {
	held := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	held = e.checkpoint(held, "100")
	err := e.s.DeleteFinished(e.ctx, held)
	wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpDeleteFinished, held.Key())
	e.stored(held)
}

func testDeleteFinishedMoved(e *env) {
	held := e.take(e.create(e.lease("shardId-000000000000")), "worker-a")
	done := e.checkpoint(held, lease.ShardEnd)
	released := e.release(done)
	err := e.s.DeleteFinished(e.ctx, done)
	wantCondition(e.t, err, lease.ErrLeaseChanged, lease.OpDeleteFinished, done.Key())
	e.stored(released)
}
