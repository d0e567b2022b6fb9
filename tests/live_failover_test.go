//go:build unix

package tests_test

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// The multi-process failover test (issue 4): three processes of tests/worker consume one
// 6-shard kinesalite stream as one consumer group, with their leases in dynalite, while the test
// publishes keyed sequences. One is killed (SIGKILL), one paused past the lease duration
// (SIGSTOP, SIGCONT) and one closed (SIGTERM). Helpers here are prefixed "lf".
//
// The workers run with short but realistic settings (lfLeaseDuration and below). The driver's
// defaults, meant for production, are LeaseDuration 10 s, LeaseRenewInterval 3.3 s,
// LeaseSyncInterval 2 s, CheckpointInterval 5 s, PollInterval 400 ms and HandoffTimeout 10 s;
// every figure this test reports is for the short settings.
const (
	lfLeaseDuration      = 3 * time.Second
	lfLeaseRenewInterval = time.Second
	lfLeaseSyncInterval  = 500 * time.Millisecond
	lfCheckpointInterval = 500 * time.Millisecond
	lfPollInterval       = 100 * time.Millisecond
	lfHandoffTimeout     = 3 * time.Second
	lfMaxInFlight        = 1

	lfShards       = 6
	lfKeysPerShard = 2                     // 12 keys, two on each shard
	lfProduceEvery = 50 * time.Millisecond // one record per key each time: 240 records/s
	lfMonitorEvery = 100 * time.Millisecond
	lfPhaseTimeout = 20 * time.Second // bound of each wait; the phases take a few seconds
	// lfTolerance widens tenures for the millisecond stamps of the workers' lines.
	lfTolerance = 50 * time.Millisecond
)

// lfReport logs a figure in the test log and on stdout, so that it shows in the CI log
// without -v too, after the test's label (lfLabel).
func lfReport(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := lfLabel(t) + ": " + fmt.Sprintf(format, args...)
	t.Log(msg)
	fmt.Println(msg)
}

// lfLabel names the test in its figures: "failover" in this file's test, and the name less
// "TestLive" elsewhere ("rollout/surge_on" in a subtest of TestLiveRollout).
func lfLabel(t testing.TB) string {
	name := t.Name()
	if strings.HasPrefix(name, "TestLiveFailover") {
		return "failover"
	}
	name = strings.TrimPrefix(name, "TestLive")
	return strings.ToLower(name[:1]) + name[1:]
}

func lfMS(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// ---------------------------------------------------------------------------------------------
// The worker processes and what they print.

// lfBuildWorker builds tests/worker with the go command on PATH.
func lfBuildWorker(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH, so the worker program cannot be built: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "worker")
	start := time.Now()
	out, err := exec.Command(goCmd, "build", "-o", bin, "github.com/watermill-kinesis/watermill-kinesis/tests/worker").CombinedOutput()
	if err != nil {
		t.Fatalf("building tests/worker: %v\n%s", err, out)
	}
	t.Logf("built tests/worker in %s", time.Since(start).Round(time.Millisecond))
	return bin
}

// lfLine is one JSON line of a worker: a delivery, or an event when Event is set.
type lfLine struct {
	Worker  string `json:"worker"`
	Shard   string `json:"shard"`
	Seq     string `json:"seq"`
	Key     string `json:"key"`
	UUID    string `json:"uuid"`
	Payload string `json:"payload"`
	T       int64  `json:"t"`
	Event   string `json:"event"`
	Err     string `json:"err"`
	CloseMS int64  `json:"close_ms"`
}

// lfRec names one produced record: the n-th record of a key.
type lfRec struct {
	key string
	n   int
}

type lfDelivery struct {
	worker, shard, seq, key, uuid string
	seqN                          *big.Int
	n                             int
	t                             time.Time // when the worker received it
	line                          int       // position in the worker's output
}

type lfEvent struct {
	worker, event, shard, err string
	closeMS                   int64
	t                         time.Time
	line                      int // position in the worker's output
}

// lfRecord gathers every worker's lines. Waiters are woken by closing changed, which is then
// replaced: a broadcast.
type lfRecord struct {
	mu         sync.Mutex
	deliveries []lfDelivery
	events     []lfEvent
	bad        []string
	lines      map[string]int          // lines read from each worker
	lastAt     map[[2]string]time.Time // (worker, shard) → time of its latest delivery
	distinct   map[lfRec]int           // deliveries of each record
	changed    chan struct{}
}

func newLfRecord() *lfRecord {
	return &lfRecord{
		lines: map[string]int{}, lastAt: map[[2]string]time.Time{}, distinct: map[lfRec]int{},
		changed: make(chan struct{}),
	}
}

func (r *lfRecord) add(worker string, raw []byte) {
	var l lfLine
	err := json.Unmarshal(raw, &l)
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { close(r.changed); r.changed = make(chan struct{}) }()
	if err != nil {
		r.bad = append(r.bad, fmt.Sprintf("%s: %q: %v", worker, raw, err))
		return
	}
	t := time.UnixMilli(l.T)
	line := r.lines[worker]
	r.lines[worker]++
	if l.Event != "" {
		r.events = append(r.events, lfEvent{worker: worker, event: l.Event, shard: l.Shard, err: l.Err, closeMS: l.CloseMS, t: t, line: line})
		return
	}
	d := lfDelivery{worker: worker, shard: l.Shard, seq: l.Seq, key: l.Key, uuid: l.UUID, t: t, line: line}
	var ok bool
	d.seqN, ok = new(big.Int).SetString(l.Seq, 10)
	i := strings.LastIndexByte(l.Payload, ':')
	if !ok || i < 0 || l.Worker != worker || l.Payload[:i] != l.Key {
		r.bad = append(r.bad, fmt.Sprintf("%s: malformed delivery %q", worker, raw))
		return
	}
	if d.n, err = strconv.Atoi(l.Payload[i+1:]); err != nil {
		r.bad = append(r.bad, fmt.Sprintf("%s: malformed payload %q", worker, raw))
		return
	}
	r.deliveries = append(r.deliveries, d)
	r.lastAt[[2]string{worker, d.shard}] = t
	r.distinct[lfRec{d.key, d.n}]++
}

// waitFor waits until cond, called with r locked, holds.
func (r *lfRecord) waitFor(t *testing.T, what string, cond func(r *lfRecord) bool) {
	t.Helper()
	if !r.waitUntil(cond) {
		t.Fatalf("waited %s for %s", lfPhaseTimeout, what)
	}
}

// waitUntil waits at most lfPhaseTimeout until cond, called with r locked, holds, and says
// whether it did.
func (r *lfRecord) waitUntil(cond func(r *lfRecord) bool) bool {
	deadline := time.NewTimer(lfPhaseTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok, changed := cond(r), r.changed
		r.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// deliveredSince: every shard got a delivery at or after since from some worker but exclude.
func (r *lfRecord) deliveredSince(shards []string, exclude string, since time.Time) bool {
	for _, s := range shards {
		found := false
		for ws, at := range r.lastAt {
			if ws[1] == s && ws[0] != exclude && !at.Before(since) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// firstSince returns, per shard, when a worker other than exclude first got one of its
// records at or after since.
func (r *lfRecord) firstSince(shards []string, exclude string, since time.Time) map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := map[string]time.Time{}
	want := map[string]bool{}
	for _, s := range shards {
		want[s] = true
	}
	for _, d := range r.deliveries {
		if want[d.shard] && d.worker != exclude && !d.t.Before(since) {
			if f, ok := first[d.shard]; !ok || d.t.Before(f) {
				first[d.shard] = d.t
			}
		}
	}
	return first
}

// event returns the first event of worker named name (on shard, if not "") at or after since.
func (r *lfRecord) event(worker, name, shard string, since time.Time) (lfEvent, bool) {
	for _, e := range r.events {
		if e.worker == worker && e.event == name && (shard == "" || e.shard == shard) && !e.t.Before(since) {
			return e, true
		}
	}
	return lfEvent{}, false
}

func (r *lfRecord) snapshot() ([]lfDelivery, []lfEvent, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]lfDelivery(nil), r.deliveries...), append([]lfEvent(nil), r.events...), append([]string(nil), r.bad...)
}

// lfWorker is one worker process.
type lfWorker struct {
	name    string
	cmd     *exec.Cmd
	stderr  string
	stdin   io.WriteCloser // never written; its end tells the worker that the test is gone
	started time.Time
	exited  chan struct{}
	state   *os.ProcessState // set before exited is closed
	waitErr error
}

// lfStartWorker starts a worker; its stdout is parsed into rec, its stderr kept in a file that
// the test log shows if the test fails. The process is killed when the test ends, whatever
// happened.
func lfStartWorker(t *testing.T, bin, name string, args []string, rec *lfRecord) *lfWorker {
	t.Helper()
	w := &lfWorker{name: name, stderr: filepath.Join(t.TempDir(), name+".stderr"), exited: make(chan struct{})}
	errFile, err := os.Create(w.stderr)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = exec.Command(bin, append(args, "-worker-id", name, "-stdin-lifeline")...)
	w.cmd.Stderr = errFile
	// The write end stays open in this process: if it dies without its cleanups (killed by
	// go test's -timeout), the worker sees the end of stdin and exits.
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	lfDieWithTest(w.cmd)
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.started = time.Now()
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("starting worker %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			rec.add(name, sc.Bytes())
		}
		// Wait only once stdout is read to its end, as os/exec requires.
		w.waitErr = w.cmd.Wait()
		w.state = w.cmd.ProcessState
		close(w.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-w.exited:
		default:
			_ = w.cmd.Process.Kill() // also ends a stopped process
			select {
			case <-w.exited:
			case <-time.After(10 * time.Second):
				t.Errorf("worker %s (pid %d) did not exit after SIGKILL", name, w.cmd.Process.Pid)
			}
		}
		errFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(w.stderr)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("last lines of worker %s's stderr:\n%s", name, strings.Join(lines, "\n"))
		}
	})
	return w
}

// lfDieWithTest asks Linux to SIGKILL the worker when the test process dies (Pdeathsig), which
// also ends a worker that the test left stopped (SIGSTOP), deaf to the end of its stdin. The
// field exists on Linux only; it is set by name so that this file builds on every Unix.
func lfDieWithTest(cmd *exec.Cmd) {
	attr := &syscall.SysProcAttr{}
	if f := reflect.ValueOf(attr).Elem().FieldByName("Pdeathsig"); f.IsValid() && f.Type() == reflect.TypeOf(syscall.SIGKILL) {
		f.Set(reflect.ValueOf(syscall.SIGKILL))
	}
	cmd.SysProcAttr = attr
}

func (w *lfWorker) signal(t *testing.T, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %s to worker %s: %v", sig, w.name, err)
	}
	return at
}

// waitExit waits for the process to end and returns its exit status (-1 if killed by a signal).
func (w *lfWorker) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-w.exited:
	case <-time.After(lfPhaseTimeout):
		t.Fatalf("worker %s did not exit within %s", w.name, lfPhaseTimeout)
	}
	return w.state.ExitCode()
}

// stderrLines returns the lines of the worker's stderr that contain s.
func (w *lfWorker) stderrLines(s string) []string {
	b, _ := os.ReadFile(w.stderr)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			lines = append(lines, l)
		}
	}
	return lines
}

// lfWorkerArgs is a worker's command line (less its -worker-id) for a member of group on
// stream, with the short settings, on the lease table named table.
func lfWorkerArgs(env *liveEnv, table, stream, group string) []string {
	return []string{
		"-stream", stream, "-group", group, "-lease-table", table,
		"-kinesis-endpoint", env.kinesisEndpoint, "-dynamodb-endpoint", env.dynamoDBEndpoint,
		"-region", env.awsConfig.Region,
		"-lease-duration", lfLeaseDuration.String(), "-lease-renew-interval", lfLeaseRenewInterval.String(),
		"-lease-sync-interval", lfLeaseSyncInterval.String(), "-checkpoint-interval", lfCheckpointInterval.String(),
		"-poll-interval", lfPollInterval.String(), "-handoff-timeout", lfHandoffTimeout.String(),
		"-max-in-flight", strconv.Itoa(lfMaxInFlight),
	}
}

// ---------------------------------------------------------------------------------------------
// The lease table, as the workers see it.

// lfSnap is one read of the group's leases: sent at before, answered at at.
type lfSnap struct {
	before, at time.Time
	leases     []lease.Lease
}

func (s lfSnap) counts() map[string]int {
	c := map[string]int{}
	for _, l := range s.leases {
		if l.Owner != "" {
			c[l.Owner]++
		}
	}
	return c
}

func (s lfSnap) shardsOf(owner string) []string {
	var ids []string
	for _, l := range s.leases {
		if l.Owner == owner {
			ids = append(ids, l.ShardID)
		}
	}
	return ids
}

// spread reports whether the leases are all owned, each of the workers holding want of them.
func (s lfSnap) spread(want map[string]int) bool {
	if len(s.leases) != lfShards {
		return false
	}
	c := s.counts()
	total := 0
	for _, n := range c {
		total += n
	}
	if total != lfShards || len(c) != len(want) {
		return false
	}
	for w, n := range want {
		if c[w] != n {
			return false
		}
	}
	return true
}

func (s lfSnap) String() string {
	parts := make([]string, 0, len(s.leases))
	for _, l := range s.leases {
		p := l.PendingOwner
		if p != "" {
			p = "←" + p
		}
		parts = append(parts, fmt.Sprintf("%s:%q%s", strings.TrimPrefix(l.ShardID, "shardId-"), l.Owner, p))
	}
	return strings.Join(parts, " ")
}

// lfMonitor reads the lease table every lfMonitorEvery and keeps every read.
type lfMonitor struct {
	store         lease.Store
	group, stream string

	// readMu makes reads one at a time, so that they are kept in the order they were made.
	readMu sync.Mutex

	mu      sync.Mutex
	snaps   []lfSnap
	errs    int
	lastErr error
	changed chan struct{}

	stopCh, done chan struct{}
}

func startLfMonitor(t *testing.T, store lease.Store, group, stream string) *lfMonitor {
	m := &lfMonitor{store: store, group: group, stream: stream, changed: make(chan struct{}),
		stopCh: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	t.Cleanup(m.stop)
	return m
}

func (m *lfMonitor) run() {
	defer close(m.done)
	tick := time.NewTicker(lfMonitorEvery)
	defer tick.Stop()
	for {
		if _, err := m.readAndKeep(); err != nil {
			m.mu.Lock()
			m.errs++
			m.lastErr = err
			m.mu.Unlock()
		}
		select {
		case <-m.stopCh:
			return
		case <-tick.C:
		}
	}
}

func (m *lfMonitor) read() (lfSnap, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before := time.Now()
	list, err := m.store.List(ctx, m.group, m.stream)
	return lfSnap{before: before, at: time.Now(), leases: list}, err
}

// readAndKeep reads the leases and keeps the read.
func (m *lfMonitor) readAndKeep() (lfSnap, error) {
	m.readMu.Lock()
	defer m.readMu.Unlock()
	snap, err := m.read()
	if err != nil {
		return snap, err
	}
	m.mu.Lock()
	m.snaps = append(m.snaps, snap)
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	return snap, nil
}

// readNow is one read outside the ticks, also kept.
func (m *lfMonitor) readNow(t *testing.T) lfSnap {
	t.Helper()
	snap, err := m.readAndKeep()
	if err != nil {
		t.Fatalf("reading the lease table: %v", err)
	}
	return snap
}

func (m *lfMonitor) stop() {
	select {
	case <-m.stopCh:
	default:
		close(m.stopCh)
	}
	<-m.done
}

// waitFor waits until the latest read satisfies cond, and returns that read.
func (m *lfMonitor) waitFor(t *testing.T, what string, cond func(lfSnap) bool) lfSnap {
	t.Helper()
	deadline := time.NewTimer(lfPhaseTimeout)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		var last lfSnap
		if n := len(m.snaps); n > 0 {
			last = m.snaps[n-1]
		}
		changed, errs, lastErr := m.changed, m.errs, m.lastErr
		m.mu.Unlock()
		if last.at.After(time.Time{}) && cond(last) {
			return last
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waited %s for %s; last lease read: %s (%d failed reads, last: %v)", lfPhaseTimeout, what, last, errs, lastErr)
		}
	}
}

func (m *lfMonitor) failures() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errs
}

func (m *lfMonitor) all() []lfSnap {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]lfSnap(nil), m.snaps...)
}

// lfHeld is a span in which the reads prove that owner held a shard's lease: two reads showed
// it with the same generation (every change of owner changes the generation), so it held the
// lease from the moment the first read was served to the moment the last one was. A read the
// monitor missed can only make the proven spans shorter, never wrong.
type lfHeld struct {
	shard, owner string
	generation   int64
	from, to     time.Time
}

func (h lfHeld) covers(t time.Time) bool {
	return t.After(h.from.Add(lfTolerance)) && t.Before(h.to.Add(-lfTolerance))
}

// lfHolds turns the reads into proven spans: runs of reads with the same owner and generation.
func lfHolds(snaps []lfSnap) []lfHeld {
	var out []lfHeld
	open := map[string]int{} // shard → index in out of its current run
	for _, s := range snaps {
		for _, l := range s.leases {
			if j, ok := open[l.ShardID]; ok && out[j].owner == l.Owner && out[j].generation == l.Generation {
				out[j].to = s.before
				continue
			}
			delete(open, l.ShardID)
			if l.Owner != "" {
				open[l.ShardID] = len(out)
				out = append(out, lfHeld{shard: l.ShardID, owner: l.Owner, generation: l.Generation, from: s.at, to: s.before})
			}
		}
	}
	return out
}

// lfTenure is one reader of one shard in one worker, as the worker's output shows it: its
// deliveries, and how it ended. The output is in order, since one goroutine prints the
// deliveries; a reader's end hook (revoked or lost) runs before the worker can start another
// reader of the shard, but may print before the messages the reader sent last: at most
// MaxInFlight deliveries that continue the tenure's sequence after its end event are its own
// (inFlight), whatever follows starts the next tenure.
type lfTenure struct {
	worker, shard string
	deliveries    []lfDelivery
	end           string    // "revoked", "lost", or "" (the process was killed)
	endAt         time.Time // when the end hook ran
	inFlight      int       // deliveries printed after the end event
}

func (te *lfTenure) continues(d lfDelivery) bool {
	last := te.deliveries[len(te.deliveries)-1]
	if d.seqN.Cmp(last.seqN) <= 0 {
		return false
	}
	for i := len(te.deliveries) - 1; i >= 0; i-- {
		if p := te.deliveries[i]; p.key == d.key {
			return d.n == p.n+1
		}
	}
	return true
}

// lfTenures splits each worker's deliveries into tenures, and counts its acquired events.
func lfTenures(deliveries []lfDelivery, events []lfEvent) (tenures []*lfTenure, acquired map[[2]string]int) {
	type item struct {
		line int
		d    *lfDelivery
		e    *lfEvent
	}
	items := map[string][]item{}
	for i := range deliveries {
		d := &deliveries[i]
		items[d.worker] = append(items[d.worker], item{line: d.line, d: d})
	}
	for i := range events {
		e := &events[i]
		items[e.worker] = append(items[e.worker], item{line: e.line, e: e})
	}
	acquired = map[[2]string]int{}
	workers := make([]string, 0, len(items))
	for w := range items {
		workers = append(workers, w)
	}
	sort.Strings(workers)
	for _, w := range workers {
		its := items[w]
		sort.Slice(its, func(i, j int) bool { return its[i].line < its[j].line })
		cur := map[string]*lfTenure{}
		carry := map[string]int{} // after an end event: deliveries that may still be the tenure's
		ended := map[string]bool{}
		for _, it := range its {
			if e := it.e; e != nil {
				switch e.event {
				case "acquired":
					acquired[[2]string{w, e.shard}]++
				case "revoked", "lost":
					if te := cur[e.shard]; te != nil && !ended[e.shard] {
						te.end, te.endAt = e.event, e.t
						ended[e.shard], carry[e.shard] = true, lfMaxInFlight
					}
				}
				continue
			}
			d := *it.d
			te := cur[d.shard]
			switch {
			case te != nil && !ended[d.shard]:
			case te != nil && carry[d.shard] > 0 && te.continues(d):
				carry[d.shard]--
				te.inFlight++
			default:
				te = &lfTenure{worker: w, shard: d.shard}
				cur[d.shard], ended[d.shard] = te, false
				tenures = append(tenures, te)
			}
			te.deliveries = append(te.deliveries, d)
		}
	}
	return tenures, acquired
}

// lfSeqLess orders checkpoints: "" and a reset's start position (lease.Start: nothing of it
// finished yet) first, sequence numbers as numbers, SHARD_END last.
func lfSeqLess(a, b string) bool {
	rank := func(s string) (int, *big.Int) {
		if _, start, _ := lease.ParseStart(s); start || s == "" {
			return 0, nil
		}
		if s == lease.ShardEnd {
			return 2, nil
		}
		n, _ := new(big.Int).SetString(s, 10)
		return 1, n
	}
	ra, na := rank(a)
	rb, nb := rank(b)
	if ra != rb || ra != 1 {
		return ra < rb
	}
	return na.Cmp(nb) < 0
}

// ---------------------------------------------------------------------------------------------
// The stream and the producer.

// lfCreateStream creates a stream and returns its shards.
func lfCreateStream(t *testing.T, env *liveEnv, shards int32) (string, []types.Shard) {
	t.Helper()
	client := env.kinesisClient()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := "failover-" + watermill.NewShortUUID()
	if _, err := client.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatal(err)
	}
	waiter := awskinesis.NewStreamExistsWaiter(client, func(o *awskinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 500*time.Millisecond
	})
	if err := waiter.Wait(ctx, &awskinesis.DescribeStreamInput{StreamName: aws.String(stream)}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := client.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Shards) != int(shards) {
		t.Fatalf("stream %s has %d shards, want %d", stream, len(out.Shards), shards)
	}
	return stream, out.Shards
}

// lfKeys picks perShard partition keys for each shard (Kinesis puts a key on the shard whose
// hash key range holds the MD5 of the key), and returns them with their shards.
func lfKeys(t *testing.T, shards []types.Shard, perShard int) map[string]string {
	t.Helper()
	keys := map[string]string{}
	count := map[string]int{}
	for i := 0; len(keys) < perShard*len(shards); i++ {
		if i > 100000 {
			t.Fatal("could not find keys for every shard")
		}
		key := fmt.Sprintf("key-%03d", i)
		sum := md5.Sum([]byte(key))
		h := new(big.Int).SetBytes(sum[:])
		for _, s := range shards {
			lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
			hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
			if h.Cmp(lo) >= 0 && h.Cmp(hi) <= 0 {
				if id := aws.ToString(s.ShardId); count[id] < perShard {
					count[id]++
					keys[key] = id
				}
				break
			}
		}
	}
	return keys
}

// lfProducer publishes, every lfProduceEvery, the next number of every key until stopped.
type lfProducer struct {
	mu       sync.Mutex
	produced map[string]int   // key → last number published
	uuids    map[lfRec]string // the UUID each record was published with
	err      error
	stopCh   chan struct{}
	done     chan struct{}
}

func startLfProducer(t *testing.T, env *liveEnv, stream string, keys []string) *lfProducer {
	pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
		Client:       env.kinesisClient(),
		PartitionKey: kinesis.PartitionKeyFromMetadata("key"),
		RetryBackoff: 20 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &lfProducer{produced: map[string]int{}, uuids: map[lfRec]string{}, stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer pub.Close()
		tick := time.NewTicker(lfProduceEvery)
		defer tick.Stop()
		for n := 1; ; n++ {
			batch := make([]*message.Message, 0, len(keys))
			for _, k := range keys {
				msg := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("%s:%d", k, n)))
				msg.Metadata.Set("key", k)
				batch = append(batch, msg)
			}
			if err := pub.Publish(stream, batch...); err != nil {
				p.mu.Lock()
				p.err = fmt.Errorf("publishing number %d: %w", n, err)
				p.mu.Unlock()
				return
			}
			p.mu.Lock()
			for _, msg := range batch {
				k := msg.Metadata.Get("key")
				p.produced[k] = n
				p.uuids[lfRec{k, n}] = msg.UUID
			}
			p.mu.Unlock()
			select {
			case <-p.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(p.stop)
	return p
}

// stop stops publishing and returns how many records were published.
func (p *lfProducer) stop() {
	select {
	case <-p.stopCh:
	default:
		close(p.stopCh)
	}
	<-p.done
}

// published returns the last number published of each key.
func (p *lfProducer) published() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := make(map[string]int, len(p.produced))
	for k, n := range p.produced {
		last[k] = n
	}
	return last
}

// lfCaughtUp waits until the records published so far have been delivered and checkpointed, so
// that a fault hits a group that reads at the tip of each shard, not one catching up after the
// previous fault (whose backlog would all be delivered twice).
func lfCaughtUp(t *testing.T, p *lfProducer, rec *lfRecord, mon *lfMonitor, what string) {
	t.Helper()
	last := p.published()
	start := time.Now()
	rec.waitFor(t, "the group to catch up "+what, func(r *lfRecord) bool {
		for k, n := range last {
			if r.distinct[lfRec{k, n}] == 0 {
				return false
			}
		}
		return true
	})
	delivered := time.Since(start)
	// The newest of those records on each shard: its checkpoint must reach it.
	upTo := map[string]string{}
	deliveries, _, _ := rec.snapshot()
	for _, d := range deliveries {
		if d.n == last[d.key] && lfSeqLess(upTo[d.shard], d.seq) {
			upTo[d.shard] = d.seq
		}
	}
	mon.waitFor(t, "the group to checkpoint what it caught up with "+what, func(s lfSnap) bool {
		for _, l := range s.leases {
			if lfSeqLess(l.Checkpoint, upTo[l.ShardID]) {
				return false
			}
		}
		return len(s.leases) == lfShards
	})
	t.Logf("caught up %s: delivered in %s, checkpointed in %s", what, delivered.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func (p *lfProducer) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, last := range p.produced {
		n += last
	}
	return n
}

// ---------------------------------------------------------------------------------------------
// The test.

// TestLiveFailover_KillPauseClose runs three worker processes of one group on a 6-shard stream
// while keyed sequences are published, and measures:
//
//   - convergence: from starting the second and third worker until the leases are 2/2/2;
//   - crash failover: from SIGKILL of one worker until another delivers its shards' records
//     (goal: at most LeaseDuration + 2 LeaseSyncIntervals);
//   - paused owner: SIGSTOP for twice the lease duration; its shards move, and after SIGCONT it
//     loses them ("lost" hook), writes no checkpoint (checkpoints only move forward) and
//     delivers nothing more of them but what was in flight;
//   - graceful handoff: from SIGTERM (Close) until another worker delivers the closed worker's
//     shards' records (goal with the production defaults: under 3 s);
//
// and checks at the end that every record was delivered at least once, that each key's
// numbers arrived in increasing order, without gaps, within each tenure of a shard, and how
// many records the crash made come twice against those acked since the last checkpoint.
func TestLiveFailover_KillPauseClose(t *testing.T) {
	// In parallel with the other tests of processes (TestLiveFailover_KillPauseClose,
	// TestLiveRollout, TestLiveExamplesRun), which mostly wait on timers and on their
	// processes, once the package's sequential tests are done: each costs the package's run
	// less than its own length.
	t.Parallel()
	env := newLiveEnv(t)
	bin := lfBuildWorker(t)
	testStart := time.Now()

	store, table := env.leaseTable(t, newCallCounter())
	stream, shards := lfCreateStream(t, env, lfShards)
	keyShard := lfKeys(t, shards, lfKeysPerShard)
	keys := make([]string, 0, len(keyShard))
	for k := range keyShard {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	const group = "failover"

	rec := newLfRecord()
	mon := startLfMonitor(t, store, group, stream)
	prod := startLfProducer(t, env, stream, keys)
	args := lfWorkerArgs(env, table, stream, group)
	lfReport(t, "settings: LeaseDuration %s, LeaseRenewInterval %s, LeaseSyncInterval %s, CheckpointInterval %s, PollInterval %s, HandoffTimeout %s, MaxInFlight %d (production defaults: 10s, 3.3s, 2s, 5s, 400ms, 10s, 1); %d shards, %d keys, %d records/s",
		lfLeaseDuration, lfLeaseRenewInterval, lfLeaseSyncInterval, lfCheckpointInterval, lfPollInterval, lfHandoffTimeout, lfMaxInFlight,
		lfShards, len(keys), int(float64(len(keys))*float64(time.Second)/float64(lfProduceEvery)))

	// 1. One worker takes every lease; two more join and the group evens out to 2/2/2.
	w1 := lfStartWorker(t, bin, "w1", args, rec)
	first := mon.waitFor(t, "w1 to hold all six leases", func(s lfSnap) bool { return s.spread(map[string]int{"w1": lfShards}) })
	lfReport(t, "first worker: holds all %d leases %s after its start", lfShards, lfMS(first.at.Sub(w1.started)))

	w2 := lfStartWorker(t, bin, "w2", args, rec)
	w3 := lfStartWorker(t, bin, "w3", args, rec)
	even := mon.waitFor(t, "the leases to spread 2/2/2", func(s lfSnap) bool {
		return s.spread(map[string]int{"w1": 2, "w2": 2, "w3": 2})
	})
	convergence := even.at.Sub(w2.started)
	lfReport(t, "convergence: 2/2/2 %s after starting the second and third worker (%s)", lfMS(convergence), even)

	// 2. Crash: SIGKILL w1; the others take its shards once its leases expire.
	lfCaughtUp(t, prod, rec, mon, "before the kill")
	before := mon.readNow(t)
	dead := before.shardsOf("w1")
	if len(dead) == 0 {
		t.Fatalf("w1 holds no lease before the kill: %s", before)
	}
	tKill := w1.signal(t, syscall.SIGKILL)
	if code := w1.waitExit(t); code != -1 {
		t.Errorf("w1 exit status after SIGKILL: %d", code)
	}
	atKill := mon.readNow(t) // w1's last checkpoints: the new owners start after them
	rec.waitFor(t, "another worker to deliver the killed worker's shards", func(r *lfRecord) bool {
		return r.deliveredSince(dead, "w1", tKill)
	})
	crashFirst, crashAll := lfSpan(rec.firstSince(dead, "w1", tKill), tKill)
	crashGoal := lfLeaseDuration + 2*lfLeaseSyncInterval
	lfReport(t, "crash failover: first record of the killed worker's %d shards delivered by another worker %s after SIGKILL, all of them after %s (goal <= LeaseDuration + 2 LeaseSyncIntervals = %s: %s)",
		len(dead), lfMS(crashFirst), lfMS(crashAll), lfMS(crashGoal), lfVerdict(crashAll <= crashGoal))
	if crashAll > 2*crashGoal {
		t.Errorf("crash failover took %s, more than twice the goal (%s)", crashAll, crashGoal)
	}
	mon.waitFor(t, "the leases to spread 3/3 over w2 and w3", func(s lfSnap) bool {
		return s.spread(map[string]int{"w2": 3, "w3": 3})
	})

	// 3. Pause: SIGSTOP w2 for twice the lease duration; w3 takes its shards; SIGCONT.
	lfCaughtUp(t, prod, rec, mon, "before the pause")
	before = mon.readNow(t)
	paused := before.shardsOf("w2")
	stopFor := 2 * lfLeaseDuration
	tStop := w2.signal(t, syscall.SIGSTOP)
	atStop := mon.readNow(t)
	rec.waitFor(t, "w3 to deliver the paused worker's shards", func(r *lfRecord) bool {
		return r.deliveredSince(paused, "w2", tStop)
	})
	pauseFirst, pauseAll := lfSpan(rec.firstSince(paused, "w2", tStop), tStop)
	lfReport(t, "paused owner: its %d shards delivered by another worker %s (first) and %s (all) after SIGSTOP (goal <= %s: %s)",
		len(paused), lfMS(pauseFirst), lfMS(pauseAll), lfMS(crashGoal), lfVerdict(pauseAll <= crashGoal))
	mon.waitFor(t, "w3 to hold all six leases", func(s lfSnap) bool { return s.spread(map[string]int{"w3": lfShards}) })
	// The pause is a chosen length, not a wait for an event: the process is frozen.
	if rest := stopFor - time.Since(tStop); rest > 0 {
		<-time.After(rest)
	}
	tCont := w2.signal(t, syscall.SIGCONT)
	lfReport(t, "paused owner: SIGCONT %s after SIGSTOP", lfMS(tCont.Sub(tStop)))
	rec.waitFor(t, "the resumed worker to report its shards lost", func(r *lfRecord) bool {
		for _, s := range paused {
			if _, ok := r.event("w2", "lost", s, tCont.Add(-lfTolerance)); !ok {
				return false
			}
		}
		return true
	})
	rebalanced := mon.waitFor(t, "the leases to spread 3/3 over w2 and w3 again", func(s lfSnap) bool {
		return s.spread(map[string]int{"w2": 3, "w3": 3})
	})
	lfReport(t, "rebalance after the resume: 3/3 %s after SIGCONT", lfMS(rebalanced.at.Sub(tCont)))

	// 4. Graceful: SIGTERM w3 (Close checkpoints and releases); w2 takes its shards at once.
	lfCaughtUp(t, prod, rec, mon, "before the close")
	before = mon.readNow(t)
	closing := before.shardsOf("w3")
	tTerm := w3.signal(t, syscall.SIGTERM)
	rec.waitFor(t, "w2 to deliver the closed worker's shards", func(r *lfRecord) bool {
		return r.deliveredSince(closing, "w3", tTerm)
	})
	termFirst, termAll := lfSpan(rec.firstSince(closing, "w3", tTerm), tTerm)
	handoffGoal := 3 * time.Second
	lfReport(t, "graceful handoff: the closed worker's %d shards delivered by another worker %s (first) and %s (all) after SIGTERM, with LeaseSyncInterval %s (goal < %s with the production defaults, where LeaseSyncInterval is 2 s; here: %s)",
		len(closing), lfMS(termFirst), lfMS(termAll), lfLeaseSyncInterval, lfMS(handoffGoal), lfVerdict(termAll < handoffGoal))
	if code := w3.waitExit(t); code != 0 {
		t.Errorf("w3 exit status after SIGTERM: %d, want 0", code)
	}
	mon.waitFor(t, "w2 to hold all six leases", func(s lfSnap) bool { return s.spread(map[string]int{"w2": lfShards}) })

	// 5. Drain: stop publishing, wait for every record, close the last worker.
	prod.stop()
	if prod.err != nil {
		t.Fatal(prod.err)
	}
	total := prod.total()
	// Not fatal: the checks below say which records are missing.
	if !rec.waitUntil(func(r *lfRecord) bool { return len(r.distinct) >= total }) {
		t.Errorf("waited %s for all %d records to be delivered", lfPhaseTimeout, total)
	}
	tLast := w2.signal(t, syscall.SIGTERM)
	if code := w2.waitExit(t); code != 0 {
		t.Errorf("w2 exit status after SIGTERM: %d, want 0", code)
	}
	mon.readNow(t)
	mon.stop()
	t.Logf("workers closed %s after the last SIGTERM", time.Since(tLast).Round(time.Millisecond))

	// 6. Checks over everything that was delivered and every lease read.
	deliveries, events, bad := rec.snapshot()
	for _, b := range bad {
		t.Errorf("unparsable worker output: %s", b)
	}
	snaps := mon.all()
	tenures, acquired := lfTenures(deliveries, events)
	lfCheckAtLeastOnce(t, prod, deliveries, keyShard)
	lfCheckTenures(t, tenures, acquired, lfHolds(snaps), tCont)
	lfCheckCheckpoints(t, snaps)
	lfCheckLost(t, events, paused, tCont)
	lfCheckCloses(t, events, []string{"w2", "w3"})

	crashDup := lfDuplicates(deliveries, "w1", dead, tKill, tStop)
	crashSince := lfAfterCheckpoint(deliveries, "w1", atKill, dead, tKill)
	crashLast := lfDeliveredWithin(deliveries, "w1", dead, tKill.Add(-lfCheckpointInterval), tKill)
	lfReport(t, "crash duplicates: %d records of the killed worker delivered again by the new owners; it had delivered %d after its last checkpoint (per the lease table at the kill) and %d in the last CheckpointInterval (%s) before the kill",
		crashDup, crashSince, crashLast, lfCheckpointInterval)
	if crashDup > crashSince {
		t.Errorf("the new owners redelivered %d records of the killed worker, more than the %d it delivered after its last checkpoint: they started before the checkpoint", crashDup, crashSince)
	}
	pauseDup := lfDuplicates(deliveries, "w2", paused, tStop, tCont)
	pauseSince := lfAfterCheckpoint(deliveries, "w2", atStop, paused, tStop)
	pauseLast := lfDeliveredWithin(deliveries, "w2", paused, tStop.Add(-lfCheckpointInterval), tStop)
	lfReport(t, "pause duplicates: %d records of the paused worker delivered again by the new owner; it had delivered %d after its last checkpoint and %d in the last CheckpointInterval before SIGSTOP",
		pauseDup, pauseSince, pauseLast)
	if pauseDup > pauseSince {
		t.Errorf("the new owner redelivered %d records of the paused worker, more than the %d it delivered after its last checkpoint", pauseDup, pauseSince)
	}
	termDup := lfDuplicates(deliveries, "w3", closing, tTerm, tLast)
	lfReport(t, "graceful duplicates: %d records of the closed worker delivered again (at most the %d in flight, one per shard)", termDup, len(closing)*lfMaxInFlight)
	if termDup > len(closing)*lfMaxInFlight {
		t.Errorf("%d records of the closed worker were delivered again, more than its %d in flight", termDup, len(closing)*lfMaxInFlight)
	}
	for _, line := range w2.stderrLines("Lease lost") {
		lfReport(t, "the resumed worker's log: %s", line)
	}
	distinct := map[lfRec]bool{}
	for _, d := range deliveries {
		distinct[lfRec{d.key, d.n}] = true
	}
	lfReport(t, "totals: %d records published, %d deliveries, %d duplicates, %d lease reads (%d failed), %d tenures; the test took %s",
		total, len(deliveries), len(deliveries)-len(distinct), len(snaps), mon.failures(), len(tenures), time.Since(testStart).Round(time.Millisecond))
}

func lfVerdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// lfSpan returns the earliest and latest of the times, less since.
func lfSpan(first map[string]time.Time, since time.Time) (earliest, latest time.Duration) {
	earliest = -1
	for _, at := range first {
		d := at.Sub(since)
		if earliest < 0 || d < earliest {
			earliest = d
		}
		if d > latest {
			latest = d
		}
	}
	return earliest, latest
}

func lfShardSet(shards []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range shards {
		m[s] = true
	}
	return m
}

// lfDuplicates counts the records of worker on shards that another worker delivered again
// between from and to.
func lfDuplicates(deliveries []lfDelivery, worker string, shards []string, from, to time.Time) int {
	in := lfShardSet(shards)
	mine := map[lfRec]bool{}
	for _, d := range deliveries {
		if d.worker == worker && in[d.shard] && d.t.Before(from.Add(lfTolerance)) {
			mine[lfRec{d.key, d.n}] = true
		}
	}
	again := map[lfRec]bool{}
	for _, d := range deliveries {
		if d.worker != worker && in[d.shard] && !d.t.Before(from) && d.t.Before(to) && mine[lfRec{d.key, d.n}] {
			again[lfRec{d.key, d.n}] = true
		}
	}
	return len(again)
}

// lfAfterCheckpoint counts the records worker delivered on shards, before until, after their
// checkpoints in snap.
func lfAfterCheckpoint(deliveries []lfDelivery, worker string, snap lfSnap, shards []string, until time.Time) int {
	in := lfShardSet(shards)
	cp := map[string]string{}
	for _, l := range snap.leases {
		cp[l.ShardID] = l.Checkpoint
	}
	seen := map[lfRec]bool{}
	for _, d := range deliveries {
		if d.worker == worker && in[d.shard] && d.t.Before(until.Add(lfTolerance)) && lfSeqLess(cp[d.shard], d.seq) {
			seen[lfRec{d.key, d.n}] = true
		}
	}
	return len(seen)
}

func lfDeliveredWithin(deliveries []lfDelivery, worker string, shards []string, from, to time.Time) int {
	in := lfShardSet(shards)
	n := 0
	for _, d := range deliveries {
		if d.worker == worker && in[d.shard] && d.t.After(from) && !d.t.After(to) {
			n++
		}
	}
	return n
}

// lfCheckAtLeastOnce: every published record was delivered, with the UUID it was published
// with, from the shard its key hashes to.
func lfCheckAtLeastOnce(t *testing.T, p *lfProducer, deliveries []lfDelivery, keyShard map[string]string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	got := map[lfRec]bool{}
	wrong := 0
	for _, d := range deliveries {
		r := lfRec{d.key, d.n}
		got[r] = true
		if (p.uuids[r] != d.uuid || keyShard[d.key] != d.shard) && wrong < 5 {
			wrong++
			t.Errorf("%s delivered %s:%d from %s with UUID %s; it was published with UUID %q to %s", d.worker, d.key, d.n, d.shard, d.uuid, p.uuids[r], keyShard[d.key])
		}
	}
	missing := 0
	for k, last := range p.produced {
		for n := 1; n <= last; n++ {
			if !got[lfRec{k, n}] {
				if missing < 10 {
					t.Errorf("record %s:%d was never delivered", k, n)
				}
				missing++
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d records were never delivered", missing)
	}
}

// lfCheckTenures: within each tenure every key's numbers go up by one, in sequence order; a
// worker has no more tenures of a shard than it acquired it; and no delivery fell in a span in
// which the lease table proves that another worker held the shard, except what the reader had
// in flight when it lost the lease: at most MaxInFlight deliveries at the end of a tenure that
// ended lost. That is the resumed worker's allowance: a send its reader was blocked in when the
// process was stopped may complete when it resumes, before the reader sees its lease deadline.
// tCont is when the paused worker was resumed; a test without a pause passes the zero time.
func lfCheckTenures(t *testing.T, tenures []*lfTenure, acquired map[[2]string]int, holds []lfHeld, tCont time.Time) {
	t.Helper()
	problems := 0
	report := func(format string, args ...any) {
		if problems < 10 {
			t.Errorf(format, args...)
		}
		problems++
	}
	perShard := map[[2]string]int{}
	afterResume := 0
	for _, te := range tenures {
		perShard[[2]string{te.worker, te.shard}]++
		last := map[string]lfDelivery{}
		resumed := 0
		for i, d := range te.deliveries {
			if i > 0 && d.seqN.Cmp(te.deliveries[i-1].seqN) <= 0 {
				report("%s delivered %s seq %s after seq %s within one tenure", d.worker, d.shard, d.seq, te.deliveries[i-1].seq)
			}
			if p, ok := last[d.key]; ok && d.n != p.n+1 {
				report("%s delivered %s:%d after %s:%d within one tenure of %s", d.worker, d.key, d.n, p.key, p.n, d.shard)
			}
			last[d.key] = d
			if !tCont.IsZero() && te.end == "lost" && !d.t.Before(tCont) {
				resumed++
			}
			inFlight := te.end == "lost" && i >= len(te.deliveries)-lfMaxInFlight
			for _, h := range holds {
				if h.shard == d.shard && h.owner != d.worker && h.covers(d.t) && !inFlight {
					report("%s delivered %s:%d of %s at %s, while the lease table shows %s holding it (generation %d, %s to %s)",
						d.worker, d.key, d.n, d.shard, d.t.Format("15:04:05.000"), h.owner, h.generation, h.from.Format("15:04:05.000"), h.to.Format("15:04:05.000"))
				}
			}
		}
		if resumed > lfMaxInFlight {
			report("%s delivered %d records of %s after SIGCONT in a tenure it had lost; at most %d were in flight", te.worker, resumed, te.shard, lfMaxInFlight)
		}
		afterResume += resumed
	}
	for ws, n := range perShard {
		if n > acquired[ws] {
			report("%s delivered %s in %d tenures but acquired it %d times", ws[0], ws[1], n, acquired[ws])
		}
	}
	resume := ""
	if !tCont.IsZero() {
		resume = fmt.Sprintf("; the resumed worker delivered %d records of its lost shards after SIGCONT (in flight; allowed %d per shard)", afterResume, lfMaxInFlight)
	}
	lfReport(t, "order: %d tenures; each key in order without gaps within a tenure, no tenure without an acquisition, no delivery while the lease table shows another owner: %s%s",
		len(tenures), lfVerdict(problems == 0), resume)
	if problems > 10 {
		t.Errorf("%d tenure and order problems in all", problems)
	}
}

// lfCheckCheckpoints: no read of the lease table saw a shard's checkpoint move back, which is
// what a checkpoint of a fenced (paused, then resumed) owner would have done.
func lfCheckCheckpoints(t *testing.T, snaps []lfSnap) {
	t.Helper()
	last := map[string]lease.Lease{}
	moves, back := 0, 0
	for _, s := range snaps {
		for _, l := range s.leases {
			p, ok := last[l.ShardID]
			if ok && lfSeqLess(l.Checkpoint, p.Checkpoint) {
				back++
				t.Errorf("the checkpoint of %s moved back from %s (owner %q) to %s (owner %q) at %s",
					l.ShardID, p.Checkpoint, p.Owner, l.Checkpoint, l.Owner, s.at.Format("15:04:05.000"))
			}
			if ok && l.Checkpoint != p.Checkpoint {
				moves++
			}
			last[l.ShardID] = l
		}
	}
	lfReport(t, "checkpoints: %d moves seen in %d lease reads, none backwards: %s", moves, len(snaps), lfVerdict(back == 0))
}

// lfCheckLost: after SIGCONT the paused worker reported each of its shards lost (no
// checkpoint allowed), not revoked.
func lfCheckLost(t *testing.T, events []lfEvent, paused []string, tCont time.Time) {
	t.Helper()
	for _, s := range paused {
		var first *lfEvent
		for i, e := range events {
			if e.worker == "w2" && e.shard == s && (e.event == "lost" || e.event == "revoked") && !e.t.Before(tCont.Add(-lfTolerance)) {
				first = &events[i]
				break
			}
		}
		switch {
		case first == nil:
			t.Errorf("the resumed worker reported nothing for %s after SIGCONT", s)
		case first.event != "lost":
			t.Errorf("the resumed worker reported %s as %s after SIGCONT, want lost", s, first.event)
		default:
			lfReport(t, "paused owner: %s reported lost %s after SIGCONT", s, lfMS(first.t.Sub(tCont)))
		}
	}
}

// lfCheckCloses: each worker closed with SIGTERM reported a clean Close.
func lfCheckCloses(t *testing.T, events []lfEvent, workers []string) {
	t.Helper()
	for _, w := range workers {
		found := false
		for _, e := range events {
			if e.worker == w && e.event == "closed" {
				found = true
				if e.err != "" {
					t.Errorf("worker %s: Close failed: %s", w, e.err)
				}
				lfReport(t, "%s: Close took %d ms", w, e.closeMS)
			}
			if e.worker == w && e.event == "error" {
				t.Errorf("worker %s: %s", w, e.err)
			}
		}
		if !found {
			t.Errorf("worker %s did not report its Close", w)
		}
	}
}
