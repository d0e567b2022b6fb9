//go:build unix

package tests_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
)

// The examples in _examples/, run as a user runs them, against kinesalite and dynalite: the
// consumer group in two processes (TestLiveExampleConsumerGroup), and the others once each
// (TestLiveExamplesRun). Helpers here are prefixed "ex".

// exTimeout bounds each wait; every step takes a few seconds at the example's lease settings.
const exTimeout = 30 * time.Second

// exEnv skips the test without the servers, and returns the environment for the examples: the
// SDK's endpoint settings for both servers, which is all that takes an example off memlog and
// where its SDK clients go, as for a user in the shell of scripts/with-emulators.sh, with a
// region and dummy credentials.
func exEnv(t *testing.T) []string {
	t.Helper()
	k, d := os.Getenv("AWS_ENDPOINT_URL_KINESIS"), os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if k == "" || d == "" {
		t.Skip("AWS_ENDPOINT_URL_KINESIS and AWS_ENDPOINT_URL_DYNAMODB are not set: run `make test`, which starts " +
			"kinesalite and dynalite, or `scripts/with-emulators.sh go test -run TestLiveExample ./tests/`")
	}
	return append(os.Environ(), "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_ENDPOINT_URL_KINESIS="+k, "AWS_ENDPOINT_URL_DYNAMODB="+d)
}

// exBuild builds the example _examples/name with the go command on PATH.
func exBuild(t *testing.T, name string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH, so the example cannot be built: %v", err)
	}
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command(goCmd, "build", "-o", bin, "github.com/watermill-kinesis/watermill-kinesis/_examples/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("building _examples/%s: %v\n%s", name, err, out)
	}
	return bin
}

// exLine is one line a process printed, on stdout or stderr.
type exLine struct {
	stderr bool
	text   string
}

// exProc is a running example. Its stdout and stderr are read line by line from pipes; waiters
// are woken by closing changed, which is then replaced.
type exProc struct {
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	lines   []exLine
	changed chan struct{}

	exited chan struct{}
	state  *os.ProcessState // set before exited is closed
}

func exStart(t *testing.T, bin, name string, env, args []string) *exProc {
	t.Helper()
	p := &exProc{name: name, changed: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	exDieWithTest(p.cmd)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	var reading sync.WaitGroup
	read := func(r io.Reader, isStderr bool) {
		defer reading.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, exLine{stderr: isStderr, text: sc.Text()})
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}
	reading.Add(2)
	go read(stdout, false)
	go read(stderr, true)
	go func() {
		reading.Wait() // os/exec: Wait only once the pipes are read to their end
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, p.output())
		}
	})
	return p
}

// exDieWithTest asks Linux to SIGKILL the example when the test process dies (Pdeathsig); the
// field exists on Linux only, so it is set by name. The examples also get a -duration.
func exDieWithTest(cmd *exec.Cmd) {
	attr := &syscall.SysProcAttr{}
	if f := reflect.ValueOf(attr).Elem().FieldByName("Pdeathsig"); f.IsValid() && f.Type() == reflect.TypeOf(syscall.SIGKILL) {
		f.Set(reflect.ValueOf(syscall.SIGKILL))
	}
	cmd.SysProcAttr = attr
}

func (p *exProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.lines {
		tag := "out"
		if l.stderr {
			tag = "err"
		}
		fmt.Fprintf(&b, "  %s| %s\n", tag, l.text)
	}
	return b.String()
}

// waitLine waits for a line at index from or later that match accepts, and returns its index
// and text.
func (p *exProc) waitLine(t *testing.T, what string, from int, match func(exLine) bool) (int, string) {
	t.Helper()
	deadline := time.NewTimer(exTimeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			if match(p.lines[i]) {
				l := p.lines[i]
				p.mu.Unlock()
				return i, l.text
			}
		}
		from = len(p.lines)
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.exited:
			// The readers are done: every line is in; look once more, then give up.
			p.mu.Lock()
			n := len(p.lines)
			p.mu.Unlock()
			if from == n {
				t.Fatalf("%s exited (%v) before %s", p.name, p.state, what)
			}
		case <-deadline.C:
			t.Fatalf("waited %s for %s", exTimeout, what)
		}
	}
}

// len is how many lines have been read so far.
func (p *exProc) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// matching returns the lines, of stderr or stdout, that match.
func (p *exProc) matching(stderr bool, match func(string) bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		if l.stderr == stderr && match(l.text) {
			out = append(out, l.text)
		}
	}
	return out
}

func (p *exProc) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(exTimeout):
		t.Fatalf("%s did not exit within %s", p.name, exTimeout)
	}
	return p.state.ExitCode()
}

// exField returns the value of key in a log/slog text line ("" if absent), unquoted.
func exField(line, key string) string {
	m := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(key) + `=("(?:[^"\\]|\\.)*"|\S*)`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	if v, err := strconv.Unquote(m[1]); err == nil {
		return v
	}
	return m[1]
}

// exLease matches a stderr line with message msg, of shard if not "".
func exLease(msg, shard string) func(exLine) bool {
	return func(l exLine) bool {
		return l.stderr && exField(l.text, "msg") == msg && (shard == "" || exField(l.text, "shard") == shard)
	}
}

// exHandledRE is what the consumer-group example prints for each message: the time, the
// worker, the payload and the shard.
var exHandledRE = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  (\S+)  handled (\S+)  from (shardId-\d+)$`)

// exPublishedRE is what it prints for each click it published: the time and the payload.
var exPublishedRE = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  published (click-\d+)$`)

// exHandled matches a stdout line of a message handled by worker, from shard if not "".
func exHandled(worker, shard string) func(exLine) bool {
	return func(l exLine) bool {
		m := exHandledRE.FindStringSubmatch(l.text)
		return !l.stderr && m != nil && m[1] == worker && (shard == "" || m[3] == shard)
	}
}

// exPublished is the payloads p printed as published.
func exPublished(p *exProc) map[string]bool {
	clicks := map[string]bool{}
	for _, l := range p.matching(false, exPublishedRE.MatchString) {
		clicks[exPublishedRE.FindStringSubmatch(l)[1]] = true
	}
	return clicks
}

// exWaitHandled waits until w has handled every payload of want at line from or later; it
// deletes them from want as they come.
func exWaitHandled(t *testing.T, w *exProc, what string, from int, want map[string]bool) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	w.waitLine(t, what, from, func(l exLine) bool {
		if m := exHandledRE.FindStringSubmatch(l.text); !l.stderr && m != nil {
			delete(want, m[2])
		}
		return len(want) == 0
	})
}

// TestLiveExampleConsumerGroup runs _examples/consumer-group as the README tells a user to, in
// three processes on the emulators: a publisher that is no member of the group
// (-publish-only), and two instances. The first instance takes both shards; the second joins
// and gets one handed over; both handle messages; the second is stopped with SIGINT (Ctrl-C),
// releases its lease, and the first takes the shard back. Then the publisher is stopped, and
// every click it printed as published must be printed as handled by one of the instances, the
// check the README shows a user; a last publisher with -clicks 3 publishes three and exits.
func TestLiveExampleConsumerGroup(t *testing.T) {
	env := exEnv(t)
	bin := exBuild(t, "consumer-group")
	id := watermill.NewShortUUID()
	args := func(more ...string) []string {
		return append([]string{"-stream", "example-clicks-" + id, "-group", "example-" + id,
			"-duration", "3m"}, more...) // -duration: a safety net only
	}

	// 1. The publisher starts; w1 takes both shards and handles messages.
	start := time.Now()
	pub := exStart(t, bin, "publisher", env, args("-publish-only"))
	w1 := exStart(t, bin, "w1", env, args("-worker-id", "w1"))
	_, first := w1.waitLine(t, "w1 to take a lease", 0, exLease("Lease taken", ""))
	shards := map[string]bool{exField(first, "shard"): true}
	w1.waitLine(t, "w1 to take a second lease", 0, func(l exLine) bool {
		return exLease("Lease taken", "")(l) && !shards[exField(l.text, "shard")]
	})
	w1.waitLine(t, "w1 to handle a message", 0, exHandled("w1", ""))
	t.Logf("w1 holds both shards and handles messages %s after its start", time.Since(start).Round(time.Millisecond))

	// 2. w2 joins: w1 hands it one shard over; each handles the messages of its own.
	joined := time.Now()
	w2 := exStart(t, bin, "w2", env, args("-worker-id", "w2"))
	_, taken := w2.waitLine(t, "w2 to take a lease", 0, exLease("Lease taken", ""))
	moved := exField(taken, "shard")
	if r := exField(taken, "reason"); r != "handed over" {
		t.Errorf("w2 took %s for reason %q, want \"handed over\": %s", moved, r, taken)
	}
	iHanded, handed := w1.waitLine(t, "w1 to log the handover of "+moved, 0, exLease("Lease handed over", moved))
	if to := exField(handed, "to"); to != "w2" {
		t.Errorf("w1 handed %s over to %q, want w2: %s", moved, to, handed)
	}
	kept := ""
	for _, l := range w1.matching(true, func(s string) bool { return exField(s, "msg") == "Lease taken" }) {
		if s := exField(l, "shard"); s != moved {
			kept = s
		}
	}
	w2.waitLine(t, "w2 to handle a message of "+moved, 0, exHandled("w2", moved))
	if other := w2.matching(false, func(s string) bool { return !exHandled("w2", moved)(exLine{text: s}) }); len(other) > 0 {
		t.Errorf("w2 holds %s only, but printed: %q", moved, other)
	}
	w1.waitLine(t, "w1 to handle a message of "+kept+" after the handover", w1.len(), exHandled("w1", kept))
	t.Logf("shards spread: w1 reads %s, w2 reads %s, %s after w2's start", kept, moved, time.Since(joined).Round(time.Millisecond))

	// 3. Ctrl-C on w2: it releases its lease and exits; w1 takes the shard back.
	stopped := time.Now()
	if err := w2.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := w2.waitExit(t); code != 0 {
		t.Errorf("w2 exit status after SIGINT: %d", code)
	}
	released := w2.matching(true, func(s string) bool {
		return exField(s, "msg") == "Lease released" && exField(s, "shard") == moved
	})
	if len(released) != 1 || exField(released[0], "reason") != "subscription closing" {
		t.Errorf("w2 logged %d \"Lease released\" lines for %s, want one with reason \"subscription closing\": %q", len(released), moved, released)
	}
	iTaken, back := w1.waitLine(t, "w1 to take "+moved+" back", iHanded+1, exLease("Lease taken", moved))
	if r := exField(back, "reason"); r != "free" {
		t.Errorf("w1 took %s back for reason %q, want \"free\" (w2 released it): %s", moved, r, back)
	}
	w1.waitLine(t, "w1 to handle a message of "+moved, iTaken+1, exHandled("w1", moved))
	t.Logf("takeover: w1 took %s back and handled a message of it %s after w2's SIGINT",
		moved, time.Since(stopped).Round(time.Millisecond))

	// 4. Ctrl-C on the publisher: every click it printed as published was handled, by w2 before
	// it stopped or by w1. w2 has exited, so its lines are all in; w1's may still come.
	if err := pub.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := pub.waitExit(t); code != 0 {
		t.Errorf("publisher exit status after SIGINT: %d", code)
	}
	missing := exPublished(pub)
	published := len(missing)
	if published == 0 {
		t.Fatal("the publisher printed no published click")
	}
	from := w1.len()
	for _, p := range []*exProc{w1, w2} {
		for _, l := range p.matching(false, exHandledRE.MatchString) {
			delete(missing, exHandledRE.FindStringSubmatch(l)[2])
		}
	}
	exWaitHandled(t, w1, fmt.Sprintf("w1 to handle the %d of %d published clicks not handled yet", len(missing), published), from, missing)
	t.Logf("all %d published clicks handled", published)

	// 5. A publisher with -clicks 3 publishes click-1 to click-3 and exits by itself; w1 handles
	// them (again: the first publisher's had the same names).
	from = w1.len()
	pub3 := exStart(t, bin, "publisher-3", env, args("-publish-only", "-clicks", "3"))
	if code := pub3.waitExit(t); code != 0 {
		t.Errorf("publisher -clicks 3 exit status: %d", code)
	}
	want := exPublished(pub3)
	if len(want) != 3 || !want["click-1"] || !want["click-2"] || !want["click-3"] {
		t.Errorf("publisher -clicks 3 published %v, want click-1 to click-3", want)
	}
	exWaitHandled(t, w1, "w1 to handle the three clicks of -clicks 3", from, want)

	// 6. Ctrl-C on w1: it releases both leases and exits.
	if err := w1.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := w1.waitExit(t); code != 0 {
		t.Errorf("w1 exit status after SIGINT: %d", code)
	}
	if n := len(w1.matching(true, func(s string) bool { return exField(s, "msg") == "Lease released" })); n != 2 {
		t.Errorf("w1 logged %d \"Lease released\" lines, want 2 (both shards)", n)
	}
	for _, p := range []*exProc{w1, w2, pub, pub3} {
		if bad := p.matching(true, func(s string) bool { return exField(s, "level") == "ERROR" }); len(bad) > 0 {
			t.Errorf("%s logged errors:\n%s", p.name, strings.Join(bad, "\n"))
		}
	}
	for _, p := range []*exProc{w1, w2} {
		if got := p.matching(false, func(s string) bool { return !exHandledRE.MatchString(s) }); len(got) > 0 {
			t.Errorf("%s printed lines that are not handled messages: %q", p.name, got)
		}
	}
	for _, p := range []*exProc{pub, pub3} {
		if got := p.matching(false, func(s string) bool { return !exPublishedRE.MatchString(s) }); len(got) > 0 {
			t.Errorf("%s printed lines that are not published clicks: %q", p.name, got)
		}
	}
}

// TestLiveExamplesRun runs the other examples once each on the emulators and checks what they
// print, as their READMEs describe it.
func TestLiveExamplesRun(t *testing.T) {
	// In parallel with the other tests of processes (TestLiveFailover_KillPauseClose,
	// TestLiveRollout, TestLiveExamplesRun), which mostly wait on timers and on their
	// processes, once the package's sequential tests are done: each costs the package's run
	// less than its own length.
	t.Parallel()
	env := exEnv(t)
	for _, c := range []struct {
		name string
		want []*regexp.Regexp // lines of stdout
	}{
		{"quickstart", []*regexp.Regexp{
			regexp.MustCompile(`^handled .*shard=shardId-000000000000`),
			regexp.MustCompile(`^handled .*shard=shardId-000000000001`),
			regexp.MustCompile(`^done: 10 messages published and handled$`),
		}},
		{"router", []*regexp.Regexp{
			regexp.MustCompile(`^  failed: card network timeout$`),
			regexp.MustCompile(`^  recovered panic: card reader on fire$`),
			regexp.MustCompile(`^receipt +receipt-for-payment-1  correlation_id=checkout-101$`),
			regexp.MustCompile(`^receipt +receipt-for-payment-2  correlation_id=checkout-102$`),
			regexp.MustCompile(`^receipt +receipt-for-payment-3  correlation_id=checkout-103$`),
			regexp.MustCompile(`^dead letter  payment-4  reason="card declined"  topic=payments  handler=charge  correlation_id=checkout-104$`),
		}},
		{"replay", []*regexp.Regexp{
			regexp.MustCompile(`^replayed  event-5 `),
			regexp.MustCompile(`^replayed  event-8 `),
			regexp.MustCompile(`^done: 4 events replayed$`),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := exBuild(t, c.name)
			p := exStart(t, bin, c.name, env, nil)
			if code := p.waitExit(t); code != 0 {
				t.Fatalf("exit status %d", code)
			}
			for _, re := range c.want {
				if len(p.matching(false, re.MatchString)) == 0 {
					t.Errorf("no line of stdout matches %s", re)
				}
			}
			if c.name == "replay" {
				if got := p.matching(false, regexp.MustCompile(`^replayed  event-[1-4] `).MatchString); len(got) > 0 {
					t.Errorf("the first batch was replayed too: %q", got)
				}
			}
			if bad := p.matching(true, func(s string) bool { return strings.Contains(s, "ERROR") }); len(bad) > 0 {
				t.Errorf("errors on stderr:\n%s", strings.Join(bad, "\n"))
			}
		})
	}
}
