package scale_test

// The meter: every lease-table call that reaches the table, per instance and per operation,
// priced as DynamoDB would charge it, per partition key.
//
// The cost model is an ESTIMATE of a DynamoDBStore on the bucketed layout of
// pkg/lease/dynamodb_layout.go (lease.DynamoDBLeaseBuckets partitions per group and stream),
// worked out from what the MemoryStore answered, not measured on DynamoDB (no DynamoDB, nor an
// emulator, takes part in the run):
//
//   - List: one strongly consistent Query per lease bucket (each its own partition key),
//     ceil(sum of the returned items' sizes / 4096) RCU per page (pages of at most 1 MB), and at
//     least 1 RCU per page even when the bucket is empty.
//   - Members: one strongly consistent Query of the member partition, priced the same way.
//   - a write (Create = PutItem; Take, Renew, Checkpoint, Release, RequestHandoff, Handoff,
//     Heartbeat, NotifyMember = UpdateItem; DeleteFinished, RemoveMember = DeleteItem): ceil(item size / 1024)
//     WCU on the item's partition, the larger of the item before and after, also when its
//     condition fails (DynamoDB charges a failed conditional write).
//   - a failed Take, RequestHandoff or Handoff is followed by a strongly consistent GetItem in
//     the DynamoDB store (notFoundOrChanged, whyHandoffFailed): ceil(size / 4096) RCU on the
//     item's partition. Renew, Checkpoint and Release tell nothing apart and read nothing back;
//     a failed Create, DeleteFinished or RemoveMember reads nothing back either.
//   - a call that the DynamoDB store would not send (input it rejects, a context that ended
//     before it was sent, an owner write of a lease held free) costs nothing and is not counted.
//
// Item sizes come from lease.DynamoDBItemSize and lease.DynamoDBMemberItemSize; partition keys
// from lease.DynamoDBPartitionKey and lease.DynamoDBMemberPartitionKey. What it leaves out:
// DynamoDB's adaptive capacity and burst, transactions (none are used), the 1 KB rounding of
// item sizes that are near a boundary before and after an update being different (the larger
// is charged), and the store's DescribeTable at start.

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// writeCost is what a write costs, before knowing whether it succeeded.
type writeCost struct {
	key      lease.Key // the lease written (its partition is lease.DynamoDBPartitionKey)
	pk       string    // the partition key, when it is not a lease's (member records)
	size     int       // the item's size, the larger of before and after
	readBack bool      // a failed condition is followed by a strongly consistent GetItem
	unsent   bool      // the DynamoDB store answers without a request
}

func (c writeCost) partition() string {
	if c.pk != "" {
		return c.pk
	}
	return lease.DynamoDBPartitionKey(c.key)
}

// sizeOf is the largest item size of the leases given (a zero Lease, as a failed call
// returns, is skipped).
func sizeOf(ls ...lease.Lease) int {
	n := 0
	for _, l := range ls {
		if l.ShardID != "" {
			n = max(n, lease.DynamoDBItemSize(l))
		}
	}
	return n
}

// withCounter is l as Create stores it.
func withCounter(l lease.Lease, c int64) lease.Lease {
	l.Counter, l.Generation = c, 0
	return l
}

// ownerWrite is the cost of an owner-side write of held; after are the lease as written.
func ownerWrite(held lease.Lease, after ...lease.Lease) writeCost {
	return writeCost{key: held.Key(), size: sizeOf(append([]lease.Lease{held}, after...)...), unsent: held.Owner == ""}
}

func memberWrite(m lease.Member) writeCost {
	return writeCost{pk: lease.DynamoDBMemberPartitionKey(m.Group, m.Stream), size: lease.DynamoDBMemberItemSize(m)}
}

func ceilDiv(a, b int) int64 { return int64((a + b - 1) / b) }

// writeUnits is ceil(size/1024), at least 1.
func writeUnits(size int) int64 { return max(1, ceilDiv(size, 1024)) }

// readUnits is a strongly consistent GetItem of an item of size bytes: ceil(size/4096), at
// least 1 (also for an item that is not there).
func readUnits(size int) int64 { return max(1, ceilDiv(size, 4096)) }

// queryUnits is a strongly consistent Query of one partition that returns bytes of items:
// pages of at most 1 MB, each ceil(its bytes/4096) RCU, at least 1.
func queryUnits(bytes int) int64 {
	const page = 1 << 20
	full, rest := bytes/page, bytes%page
	u := int64(full) * (page / 4096)
	if rest > 0 || full == 0 {
		u += readUnits(rest)
	}
	return u
}

// count is what one instance, one operation or one partition key used.
type count struct {
	reads, writes int64 // lease-store calls that reached the table: List and Members; the others
	failed        int64 // writes whose condition failed
	rcu, wcu      int64
	memberItems   int64 // member records read (Members)
}

func (c *count) add(o count) {
	c.reads += o.reads
	c.writes += o.writes
	c.failed += o.failed
	c.rcu += o.rcu
	c.wcu += o.wcu
	c.memberItems += o.memberItems
}

func (c count) minus(o count) count {
	return count{c.reads - o.reads, c.writes - o.writes, c.failed - o.failed, c.rcu - o.rcu, c.wcu - o.wcu, c.memberItems - o.memberItems}
}

// meter holds the running totals; snapshots of it, taken at the edges of a window, give the
// window's figures.
type meter struct {
	mu      sync.Mutex
	inst    []count            // by instance index
	instOps []map[string]count // by instance index, then lease.Op* name
	ops     map[string]*count  // by lease.Op* name
	keys    map[string]*count  // by partition key
	buckets map[[2]string][]string
	sizes   map[lease.Key]sizeEntry // see itemLocked
}

func newMeter() *meter {
	return &meter{ops: map[string]*count{}, keys: map[string]*count{}, buckets: map[[2]string][]string{}, sizes: map[lease.Key]sizeEntry{}}
}

// register makes room for instance i.
func (m *meter) register(i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.inst) <= i {
		m.inst = append(m.inst, count{})
		m.instOps = append(m.instOps, map[string]count{})
	}
}

// sent reports whether a call that returned err reached the table: it succeeded, or a
// condition failed. Anything else (a context that ended, input the store rejects) was never
// sent as a DynamoDB request.
func sent(err error) bool {
	var ce *lease.ConditionError
	return err == nil || errors.As(err, &ce)
}

func (m *meter) charge(who int, op string, c count, perKey map[string]count) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inst[who].add(c)
	io := m.instOps[who][op]
	io.add(c)
	m.instOps[who][op] = io
	o := m.ops[op]
	if o == nil {
		o = &count{}
		m.ops[op] = o
	}
	o.add(c)
	for k, kc := range perKey {
		e := m.keys[k]
		if e == nil {
			e = &count{}
			m.keys[k] = e
		}
		e.add(kc)
	}
}

func (m *meter) write(who int, op string, err error, c writeCost) {
	if !sent(err) || c.unsent {
		return
	}
	u := count{writes: 1, wcu: writeUnits(c.size)}
	if err != nil {
		u.failed = 1
		if c.readBack {
			u.rcu = readUnits(c.size)
		}
	}
	m.charge(who, op, u, map[string]count{c.partition(): {wcu: u.wcu, rcu: u.rcu}})
}

// list prices a List: one Query per bucket, each over what the bucket's partition returned.
func (m *meter) list(who int, group, stream string, out []lease.Lease, err error) {
	if !sent(err) {
		return
	}
	keys := m.bucketKeys(group, stream)
	m.mu.Lock()
	bytes := make(map[string]int, len(keys))
	for _, k := range keys {
		bytes[k] = 0
	}
	for _, l := range out {
		pk, size := m.itemLocked(l)
		bytes[pk] += size
	}
	m.mu.Unlock()
	perKey := make(map[string]count, len(bytes))
	total := count{reads: 1}
	for k, b := range bytes {
		u := queryUnits(b)
		perKey[k] = count{rcu: u}
		total.rcu += u
	}
	m.charge(who, lease.OpList, total, perKey)
}

// sizeKey is everything an item's size depends on: its strings, and its numbers as DynamoDB
// sizes them (by their significant digits).
type sizeKey struct {
	group, stream, shard, owner, checkpoint, pending, parents string
	gen, ctr                                                  int
}

type sizeEntry struct {
	k    sizeKey
	pk   string
	size int
}

// itemLocked is the partition key and size of l's item, as lease.DynamoDBPartitionKey and
// lease.DynamoDBItemSize say, remembered per shard until the item changes in a way that can
// change its size: every List asks about every lease, and asking the layout each time was a
// quarter of the run's CPU. The numbers (generation, counter) are given to DynamoDBItemSize
// as a number of as many significant digits, which DynamoDB sizes the same. m.mu is held.
func (m *meter) itemLocked(l lease.Lease) (string, int) {
	k := sizeKey{l.Group, l.Stream, l.ShardID, l.Owner, l.Checkpoint, l.PendingOwner, strings.Join(l.Parents, "\x00"),
		significantDigits(l.Generation), significantDigits(l.Counter)}
	if e, ok := m.sizes[l.Key()]; ok && e.k == k {
		return e.pk, e.size
	}
	rep := l
	rep.Generation, rep.Counter = ones(k.gen), ones(k.ctr)
	e := sizeEntry{k: k, pk: lease.DynamoDBPartitionKey(l.Key()), size: lease.DynamoDBItemSize(rep)}
	m.sizes[l.Key()] = e
	return e.pk, e.size
}

// significantDigits of a non-negative n: trailing zeros do not count, zero is one digit.
func significantDigits(n int64) int {
	if n < 0 {
		n = -n
	}
	for n != 0 && n%10 == 0 {
		n /= 10
	}
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// ones is the number 11...1 of d digits.
func ones(d int) int64 {
	var n int64
	for range d {
		n = n*10 + 1
	}
	return n
}

func (m *meter) members(who int, op, group, stream string, out []lease.Member, err error) {
	if !sent(err) {
		return
	}
	bytes := 0
	for _, mb := range out {
		bytes += lease.DynamoDBMemberItemSize(mb)
	}
	u := queryUnits(bytes)
	m.charge(who, op, count{reads: 1, rcu: u, memberItems: int64(len(out))},
		map[string]count{lease.DynamoDBMemberPartitionKey(group, stream): {rcu: u}})
}

// bucketKeys are the partition keys of the lease buckets of a group on a stream, found by
// asking lease.DynamoDBPartitionKey about made-up shard ids until every bucket showed up:
// an empty bucket is queried (and charged) as well.
func (m *meter) bucketKeys(group, stream string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ks, ok := m.buckets[[2]string{group, stream}]; ok {
		return ks
	}
	seen := map[string]bool{}
	var ks []string
	for i := 0; len(ks) < lease.DynamoDBLeaseBuckets && i < 1_000_000; i++ {
		k := lease.DynamoDBPartitionKey(lease.Key{Group: group, Stream: stream, ShardID: fmt.Sprintf("shardId-%012d", i)})
		if !seen[k] {
			seen[k] = true
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	m.buckets[[2]string{group, stream}] = ks
	return ks
}

// listUnits is what one List of the given leases costs (for the reference figure).
func listUnits(ls []lease.Lease, m *meter) int64 {
	if len(ls) == 0 {
		return 0
	}
	bytes := map[string]int{}
	for _, k := range m.bucketKeys(ls[0].Group, ls[0].Stream) {
		bytes[k] = 0
	}
	for _, l := range ls {
		bytes[lease.DynamoDBPartitionKey(l.Key())] += lease.DynamoDBItemSize(l)
	}
	var u int64
	for _, b := range bytes {
		u += queryUnits(b)
	}
	return u
}

// snapshot is the meter's totals at one fake instant.
type snapshot struct {
	at      time.Time
	inst    []count
	instOps []map[string]count
	ops     map[string]count
	keys    map[string]count
}

func (m *meter) snapshot() snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := snapshot{at: time.Now(), inst: append([]count(nil), m.inst...), ops: map[string]count{}, keys: map[string]count{}}
	for _, io := range m.instOps {
		c := make(map[string]count, len(io))
		for k, v := range io {
			c[k] = v
		}
		s.instOps = append(s.instOps, c)
	}
	for k, c := range m.ops {
		s.ops[k] = *c
	}
	for k, c := range m.keys {
		s.keys[k] = *c
	}
	return s
}

// window is what was used between two snapshots.
type window struct {
	secs    float64
	inst    []count
	instOps []map[string]count
	ops     map[string]count
	keys    map[string]count
}

func between(a, b snapshot) window {
	w := window{secs: b.at.Sub(a.at).Seconds(), inst: make([]count, len(b.inst)), ops: map[string]count{}, keys: map[string]count{}}
	for i := range b.inst {
		var before count
		if i < len(a.inst) {
			before = a.inst[i]
		}
		w.inst[i] = b.inst[i].minus(before)
		ops := map[string]count{}
		for k, c := range b.instOps[i] {
			var was count
			if i < len(a.instOps) {
				was = a.instOps[i][k]
			}
			ops[k] = c.minus(was)
		}
		w.instOps = append(w.instOps, ops)
	}
	for k, c := range b.ops {
		w.ops[k] = c.minus(a.ops[k])
	}
	for k, c := range b.keys {
		w.keys[k] = c.minus(a.keys[k])
	}
	return w
}

func (w window) total() count {
	var t count
	for _, c := range w.inst {
		t.add(c)
	}
	return t
}

// hottest is the partition key with the most RCU (rcu true) or WCU in the window.
func (w window) hottest(rcu bool) (string, int64) {
	best, bestU := "", int64(-1)
	for _, k := range sortedKeys(w.keys) {
		u := w.keys[k].wcu
		if rcu {
			u = w.keys[k].rcu
		}
		if u > bestU {
			best, bestU = k, u
		}
	}
	return best, max(bestU, 0)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestCostModel checks the model's arithmetic and that the remembered item sizes are the
// layout's own.
func TestCostModel(t *testing.T) {
	for _, c := range []struct {
		bytes int
		want  int64
	}{{0, 1}, {1, 1}, {4096, 1}, {4097, 2}, {1 << 20, 256}, {1<<20 + 1, 257}, {3<<20 + 5000, 770}} {
		if got := queryUnits(c.bytes); got != c.want {
			t.Errorf("queryUnits(%d) = %d, want %d", c.bytes, got, c.want)
		}
	}
	if writeUnits(0) != 1 || writeUnits(1024) != 1 || writeUnits(1025) != 2 {
		t.Errorf("writeUnits: %d %d %d", writeUnits(0), writeUnits(1024), writeUnits(1025))
	}
	m := newMeter()
	base := lease.Lease{Group: scaleGroup, Stream: scaleStream, ShardID: "shardId-000000000042"}
	for _, l := range []lease.Lease{
		base,
		{Group: scaleGroup, Stream: scaleStream, ShardID: base.ShardID, Owner: "w001", Generation: 100, Counter: 1234500},
		{Group: scaleGroup, Stream: scaleStream, ShardID: base.ShardID, Owner: "w001", Generation: 700, Counter: 9876500}, // remembered
		{Group: scaleGroup, Stream: scaleStream, ShardID: base.ShardID, Owner: "w001", Generation: 3, Counter: 9, Checkpoint: "4900000001"},
		{Group: scaleGroup, Stream: scaleStream, ShardID: base.ShardID, Owner: "w002", Generation: 10, Counter: 987654321012, PendingOwner: "w003", Parents: []string{"a", "b"}},
		{Group: scaleGroup, Stream: scaleStream, ShardID: base.ShardID, Checkpoint: lease.ShardEnd, Generation: 0, Counter: 0},
	} {
		m.mu.Lock()
		pk, size := m.itemLocked(l)
		m.mu.Unlock()
		if want := lease.DynamoDBItemSize(l); size != want {
			t.Errorf("remembered size of %+v = %d, the layout says %d", l, size, want)
		}
		if want := lease.DynamoDBPartitionKey(l.Key()); pk != want {
			t.Errorf("remembered key of %+v = %q, the layout says %q", l, pk, want)
		}
	}
	if n := len(m.bucketKeys(scaleGroup, scaleStream)); n != lease.DynamoDBLeaseBuckets {
		t.Errorf("found %d bucket keys, want %d", n, lease.DynamoDBLeaseBuckets)
	}
}

// peak is the busiest second of a window on any one partition key: DynamoDB throttles a
// partition by the second (with some burst capacity), so a burst that a window's average
// hides may still be throttled.
type peak struct {
	rcu, wcu   float64
	rkey, wkey string
}

// peakTracker turns snapshots taken as the run samples into per-second rates per key.
type peakTracker struct{ last snapshot }

// tick takes a snapshot once a second has passed since the last, and raises p with the rates
// of that second.
func (t *peakTracker) tick(m *meter, p *peak) {
	if time.Since(t.last.at) < time.Second {
		return
	}
	s := m.snapshot()
	secs := s.at.Sub(t.last.at).Seconds()
	for _, k := range sortedKeys(s.keys) {
		d := s.keys[k].minus(t.last.keys[k])
		if r := float64(d.rcu) / secs; r > p.rcu {
			p.rcu, p.rkey = r, k
		}
		if r := float64(d.wcu) / secs; r > p.wcu {
			p.wcu, p.wkey = r, k
		}
	}
	t.last = s
}
