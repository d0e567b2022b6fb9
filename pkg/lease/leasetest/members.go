package leasetest

import (
	"strings"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

func memberCases() []testCase {
	return []testCase{
		{"JoinThenHeartbeatsCount", testHeartbeat},
		{"HeartbeatOfAnotherIncarnationFenced", testHeartbeatOtherIncarnation},
		{"FenceMember", testFenceMember},
		{"LeadingMembers", testLeadingMembers},
		{"RosterAndSeenKept", testRosterAndSeen},
		{"NotifyMember", testNotifyMember},
		{"FenceMemberThatMoved", testFenceMemberMoved},
		{"LeaseIncarnation", testLeaseIncarnation},
		{"MembersOrderedAndIsolated", testMembersIsolation},
		{"MembersAreNotLeases", testMembersNotLeases},
		{"RemoveMember", testRemoveMember},
		{"RemoveMemberThatMoved", testRemoveMemberMoved},
		{"MemberInvalidInput", testMemberInvalid},
	}
}

// heartbeat joins worker (incarnation 100 + the number of members joined so far) or, once it
// joined, heartbeats it, with Changes 0.
func (e *env) heartbeat(group, stream, worker string) lease.Member {
	e.t.Helper()
	m := lease.Member{Group: group, Stream: stream, Worker: worker}
	inc, joined := e.joined[m.Key()]
	if !joined {
		inc = int64(100 + len(e.joined))
		e.joined[m.Key()] = inc
	}
	m.Incarnation = inc
	var err error
	if joined {
		m, err = e.s.Heartbeat(e.ctx, m)
	} else {
		m, err = e.s.Join(e.ctx, m)
	}
	if err != nil {
		e.t.Fatalf("Heartbeat %s of group %q stream %q: %v", worker, group, stream, err)
	}
	return m
}

func (e *env) members(group, stream string) []lease.Member {
	e.t.Helper()
	ms, err := e.s.Members(e.ctx, group, stream)
	if err != nil {
		e.t.Fatalf("Members of group %q stream %q: %v", group, stream, err)
	}
	return ms
}

func testHeartbeat(e *env) {
	first := e.heartbeat(e.group, e.stream, "worker-a")
	want := lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a", Counter: 1, Incarnation: first.Incarnation}
	if first != want {
		e.t.Fatalf("first Heartbeat = %+v, want %+v", first, want)
	}
	second := e.heartbeat(e.group, e.stream, "worker-a")
	want.Counter = 2
	if second != want {
		e.t.Fatalf("second Heartbeat = %+v, want %+v", second, want)
	}
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0] != want {
		e.t.Fatalf("Members = %+v, want [%+v]", got, want)
	}
	// Changes is kept as the last heartbeat wrote it.
	third, err := e.s.Heartbeat(e.ctx, lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a", Incarnation: want.Incarnation, Changes: 7})
	want.Counter, want.Changes = 3, 7
	if err != nil || third != want {
		e.t.Fatalf("Heartbeat with changes 7 = %+v, %v; want %+v", third, err, want)
	}
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0] != want {
		e.t.Fatalf("Members after a heartbeat with changes 7 = %+v, want [%+v]", got, want)
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
	}
	if len(names) != 3 || names[0] != "worker-a" || names[1] != "worker-b" || names[2] != "worker-c" {
		e.t.Fatalf("Members = %v, want worker-a, worker-b, worker-c (ordered, this group and stream only)", names)
	}
	if got := e.members(other, e.stream); len(got) != 1 || got[0].Worker != "worker-x" {
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
	if err := e.s.RemoveMember(e.ctx, m); err != nil {
		e.t.Fatalf("RemoveMember %+v: %v", m, err)
	}
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0].Worker != "worker-b" {
		e.t.Fatalf("Members after removing worker-a = %+v, want worker-b only", got)
	}
	if err := e.s.RemoveMember(e.ctx, m); err != nil {
		e.t.Fatalf("RemoveMember of a member already gone: %v, want nil", err)
	}
	_, err := e.s.Heartbeat(e.ctx, m)
	wantCondition(e.t, err, lease.ErrMemberFenced, lease.OpHeartbeat, m.Key())
	m.Incarnation++
	again, err := e.s.Join(e.ctx, m)
	if err != nil || again.Counter != 1 || again.Incarnation != m.Incarnation {
		e.t.Fatalf("Join after RemoveMember = %+v, %v; want a new record with Counter 1 and incarnation %d", again, err, m.Incarnation)
	}
}

func testRemoveMemberMoved(e *env) {
	observed := e.heartbeat(e.group, e.stream, "worker-a")
	e.heartbeat(e.group, e.stream, "worker-a")
	err := e.s.RemoveMember(e.ctx, observed)
	wantCondition(e.t, err, lease.ErrMemberChanged, lease.OpRemoveMember, observed.Key())
	// The same counter under another incarnation is another run of the worker: kept.
	other := observed
	other.Counter, other.Incarnation = 2, observed.Incarnation+1
	err = e.s.RemoveMember(e.ctx, other)
	wantCondition(e.t, err, lease.ErrMemberChanged, lease.OpRemoveMember, observed.Key())
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0].Counter != 2 {
		e.t.Fatalf("Members after a refused RemoveMember = %+v, want worker-a with Counter 2", got)
	}
}

func testMemberInvalid(e *env) {
	_, err := e.s.Heartbeat(e.ctx, lease.Member{Group: e.group, Stream: e.stream, Incarnation: 1})
	wantInvalid(e.t, err, "Heartbeat with no worker", "worker")
	_, err = e.s.Join(e.ctx, lease.Member{Stream: e.stream, Worker: "worker-a", Incarnation: 1})
	wantInvalid(e.t, err, "Join with no group", "consumer group")
	_, err = e.s.Join(e.ctx, lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a"})
	wantInvalid(e.t, err, "Join with incarnation 0", "incarnation")
	err = e.s.FenceMember(e.ctx, lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a", Counter: 1})
	wantInvalid(e.t, err, "FenceMember with incarnation 0", "incarnation")
	_, err = e.s.Members(e.ctx, e.group, "")
	wantInvalid(e.t, err, "Members with no stream", "stream name")
	err = e.s.RemoveMember(e.ctx, lease.Member{Group: e.group, Stream: e.stream})
	wantInvalid(e.t, err, "RemoveMember with no worker", "worker")
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

func testHeartbeatOtherIncarnation(e *env) {
	m := e.heartbeat(e.group, e.stream, "worker-a")
	// The same worker joins again (a restart): the old incarnation's heartbeats fail.
	next, err := e.s.Join(e.ctx, lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a", Incarnation: m.Incarnation + 1})
	if err != nil || next.Counter != 1 {
		e.t.Fatalf("Join of a new incarnation = %+v, %v; want Counter 1", next, err)
	}
	_, err = e.s.Heartbeat(e.ctx, m)
	wantCondition(e.t, err, lease.ErrMemberFenced, lease.OpHeartbeat, m.Key())
	if got, err := e.s.Heartbeat(e.ctx, next); err != nil || got.Counter != 2 {
		e.t.Fatalf("Heartbeat of the new incarnation = %+v, %v; want Counter 2", got, err)
	}
	_, err = e.s.Heartbeat(e.ctx, lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-never", Incarnation: 5})
	wantCondition(e.t, err, lease.ErrMemberFenced, lease.OpHeartbeat, lease.Key{Group: e.group, Stream: e.stream, ShardID: "worker-never"})
}

func testFenceMember(e *env) {
	e.heartbeat(e.group, e.stream, "worker-a")
	m := e.heartbeat(e.group, e.stream, "worker-a")
	if err := e.s.FenceMember(e.ctx, m); err != nil {
		e.t.Fatalf("FenceMember %+v: %v", m, err)
	}
	if err := e.s.FenceMember(e.ctx, m); err != nil {
		e.t.Fatalf("FenceMember again: %v, want nil", err)
	}
	got := e.members(e.group, e.stream)
	want := m
	want.Fenced = true
	if len(got) != 1 || got[0] != want {
		e.t.Fatalf("Members after FenceMember = %+v, want [%+v]", got, want)
	}
	_, err := e.s.Heartbeat(e.ctx, m)
	wantCondition(e.t, err, lease.ErrMemberFenced, lease.OpHeartbeat, m.Key())
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0] != want {
		e.t.Fatalf("Members after a fenced heartbeat = %+v, want [%+v] unchanged", got, want)
	}
	next, err := e.s.Join(e.ctx, lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a", Incarnation: m.Incarnation + 1})
	if err != nil || next.Fenced || next.Counter != 1 {
		e.t.Fatalf("Join after a fence = %+v, %v; want an unfenced record with Counter 1", next, err)
	}
	gone := lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-gone", Incarnation: 3, Counter: 1}
	if err := e.s.FenceMember(e.ctx, gone); err != nil {
		e.t.Fatalf("FenceMember of a member with no record: %v, want nil", err)
	}
}

func testFenceMemberMoved(e *env) {
	observed := e.heartbeat(e.group, e.stream, "worker-a")
	e.heartbeat(e.group, e.stream, "worker-a")
	err := e.s.FenceMember(e.ctx, observed)
	wantCondition(e.t, err, lease.ErrMemberChanged, lease.OpFenceMember, observed.Key())
	other := observed
	other.Counter, other.Incarnation = 2, observed.Incarnation+1
	err = e.s.FenceMember(e.ctx, other)
	wantCondition(e.t, err, lease.ErrMemberChanged, lease.OpFenceMember, observed.Key())
	if got := e.members(e.group, e.stream); len(got) != 1 || got[0].Fenced || got[0].Counter != 2 {
		e.t.Fatalf("Members after refused fences = %+v, want worker-a unfenced at Counter 2", got)
	}
}

// testLeaseIncarnation: Create stores 0, Renew and Checkpoint store the held lease's
// Incarnation, a handoff request keeps it, and a change of owner clears it.
func testLeaseIncarnation(e *env) {
	fresh := e.lease("shardId-000000000000")
	fresh.Incarnation = 40
	created := e.create(fresh)
	if created.Incarnation != 0 {
		e.t.Fatalf("created with Incarnation 40: stored %d, want 0", created.Incarnation)
	}
	held := e.take(created, "worker-a")
	if held.Incarnation != 0 {
		e.t.Fatalf("taken lease has Incarnation %d, want 0", held.Incarnation)
	}
	held.Incarnation = 41
	held = e.renew(held)
	if held.Incarnation != 41 {
		e.t.Fatalf("renewed with Incarnation 41: got %d", held.Incarnation)
	}
	e.stored(held)
	held.Incarnation = 42
	held = e.checkpoint(held, "100")
	if held.Incarnation != 42 {
		e.t.Fatalf("checkpointed with Incarnation 42: got %d", held.Incarnation)
	}
	asked := e.request(held, "worker-b")
	if asked.Incarnation != 42 {
		e.t.Fatalf("after a handoff request: Incarnation %d, want 42 kept", asked.Incarnation)
	}
	held.Incarnation = 0
	held = e.renew(held)
	if held.Incarnation != 0 {
		e.t.Fatalf("renewed with Incarnation 0: got %d", held.Incarnation)
	}
	e.stored(held)
	held.Incarnation = 43
	held = e.renew(held)
	taken := e.take(held, "worker-c")
	if taken.Incarnation != 0 {
		e.t.Fatalf("taken from an owner with Incarnation 43: got %d, want 0", taken.Incarnation)
	}
	e.stored(taken)
	taken.Incarnation = 44
	taken = e.renew(taken)
	if released := e.release(taken); released.Incarnation != 0 {
		e.t.Fatalf("released: Incarnation %d, want 0", released.Incarnation)
	}
	other := e.take(e.create(e.lease("shardId-000000000001")), "worker-a")
	other.Incarnation = 45
	other = e.renew(other)
	other = e.request(other, "worker-b")
	if handed := e.handoff(other); handed.Incarnation != 0 {
		e.t.Fatalf("handed over: Incarnation %d, want 0", handed.Incarnation)
	}
}

func testLeadingMembers(e *env) {
	for _, w := range []string{"worker-d", "worker-b", "worker-a", "worker-c"} {
		e.heartbeat(e.group, e.stream, w)
	}
	e.heartbeat(e.group+"-other", e.stream, "worker-0")
	for n, want := range map[int]string{0: "", 1: "worker-a", 3: "worker-a,worker-b,worker-c", 9: "worker-a,worker-b,worker-c,worker-d"} {
		got, err := e.s.LeadingMembers(e.ctx, e.group, e.stream, n)
		var names []string
		for _, m := range got {
			names = append(names, m.Worker)
		}
		if err != nil || strings.Join(names, ",") != want {
			e.t.Fatalf("LeadingMembers(%d) = %v, %v; want %q", n, names, err, want)
		}
	}
}

// testRosterAndSeen: a Join and a Heartbeat store the Roster and Seen they are given, and
// Members and LeadingMembers return them.
func testRosterAndSeen(e *env) {
	m := lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a", Incarnation: 9, Roster: -77, Seen: 5}
	joined, err := e.s.Join(e.ctx, m)
	if err != nil || joined.Roster != -77 || joined.Seen != 5 {
		e.t.Fatalf("Join = %+v, %v; want Roster -77 and Seen 5", joined, err)
	}
	m.Roster, m.Seen = 12345678901234, 6
	beat, err := e.s.Heartbeat(e.ctx, m)
	if err != nil || beat.Roster != m.Roster || beat.Seen != 6 || beat.Counter != 2 {
		e.t.Fatalf("Heartbeat = %+v, %v; want Roster %d, Seen 6, Counter 2", beat, err, m.Roster)
	}
	for _, read := range [][]lease.Member{e.members(e.group, e.stream), e.leading(1)} {
		if len(read) != 1 || read[0] != beat {
			e.t.Fatalf("read back %+v, want [%+v]", read, beat)
		}
	}
}

func (e *env) leading(n int) []lease.Member {
	e.t.Helper()
	ms, err := e.s.LeadingMembers(e.ctx, e.group, e.stream, n)
	if err != nil {
		e.t.Fatalf("LeadingMembers(%d): %v", n, err)
	}
	return ms
}

// testNotifyMember: NotifyMember moves Asked, a Heartbeat keeps it, a Join starts it over, and
// a member with no record is not made one.
func testNotifyMember(e *env) {
	m := e.heartbeat(e.group, e.stream, "worker-a")
	for range 2 {
		if err := e.s.NotifyMember(e.ctx, e.group, e.stream, "worker-a"); err != nil {
			e.t.Fatalf("NotifyMember: %v", err)
		}
	}
	beat := e.heartbeat(e.group, e.stream, "worker-a")
	if beat.Asked != 2 || beat.Counter != m.Counter+1 {
		e.t.Fatalf("Heartbeat after two NotifyMember = %+v, want Asked 2 and the counter moved", beat)
	}
	if err := e.s.NotifyMember(e.ctx, e.group, e.stream, "worker-none"); err != nil {
		e.t.Fatalf("NotifyMember of a member with no record: %v, want nil", err)
	}
	if got := e.members(e.group, e.stream); len(got) != 1 {
		e.t.Fatalf("Members after notifying a member with no record = %+v, want worker-a alone", got)
	}
	again, err := e.s.Join(e.ctx, lease.Member{Group: e.group, Stream: e.stream, Worker: "worker-a", Incarnation: m.Incarnation + 1})
	if err != nil || again.Asked != 0 {
		e.t.Fatalf("Join = %+v, %v; want Asked 0", again, err)
	}
}
