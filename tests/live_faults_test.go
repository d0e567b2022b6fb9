package tests_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Fault tests against kinesalite and dynalite: each fault ends in a clear error or a
// recovery. Helpers here are prefixed "ft".

// ftPrompt bounds how long a call that must fail may take before the test calls it a hang.
const ftPrompt = 20 * time.Second

// ftClosedEndpoint is the address of a 127.0.0.1 port that refuses connections: one that was
// listened on and closed.
func ftClosedEndpoint(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// ftAWSConfig is the live config with the SDK's retries bounded to two attempts.
func ftAWSConfig(env *liveEnv) aws.Config {
	cfg := env.awsConfig.Copy()
	cfg.RetryMaxAttempts = 2
	return cfg
}

func ftKinesisAt(cfg aws.Config, endpoint string) *awskinesis.Client {
	return awskinesis.NewFromConfig(cfg, func(o *awskinesis.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

func ftDynamoDBOption(endpoint string) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }
}

// ftLeaseTableConfig is a grouped subscriber that builds its clients from awsCfg: Kinesis on
// the emulator, the lease table on dynamoDBEndpoint.
func ftLeaseTableConfig(env *liveEnv, awsCfg *aws.Config, table string, create bool, dynamoDBEndpoint string) kinesis.SubscriberConfig {
	return kinesis.SubscriberConfig{
		AWSConfig:      awsCfg,
		KinesisOptions: []func(*awskinesis.Options){env.kinesisOptions},
		Group: kinesis.GroupConfig{
			Name:             itName("group"),
			LeaseTable:       table,
			CreateLeaseTable: create,
			DynamoDBOptions:  []func(*dynamodb.Options){ftDynamoDBOption(dynamoDBEndpoint)},
		},
	}
}

// ftSubscribe calls Subscribe and returns its error and how long it took. A call that has
// not returned within ftPrompt is reported as a hang; Close then ends it.
func ftSubscribe(t testing.TB, sub *kinesis.Subscriber, stream string) (error, time.Duration) {
	t.Helper()
	type result struct {
		err error
		at  time.Duration
	}
	start := time.Now()
	done := make(chan result, 1)
	go func() {
		ch, err := sub.Subscribe(context.Background(), stream)
		done <- result{err, time.Since(start)}
		if err == nil {
			for range ch { // a subscription was not expected; drain it until Close
			}
		}
	}()
	select {
	case r := <-done:
		return r.err, r.at
	case <-time.After(ftPrompt):
		t.Errorf("Subscribe(%q) has not returned after %s: it hangs instead of reporting the failure", stream, ftPrompt)
	}
	_ = sub.Close()
	select {
	case r := <-done:
		return r.err, r.at
	case <-time.After(itWait):
		t.Fatalf("Subscribe(%q) did not return even after Close", stream)
	}
	return nil, 0
}

// ftPublish publishes one message and returns the error and how long it took. A call that
// has not returned within ftPrompt is reported as a hang; cancelling the message's context
// then ends it.
func ftPublish(t testing.TB, pub *kinesis.Publisher, stream string) (error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msg := message.NewMessage(watermill.NewUUID(), []byte("fault"))
	msg.SetContext(ctx)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- pub.Publish(stream, msg) }()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(ftPrompt):
		t.Errorf("Publish to %q has not returned after %s: it hangs instead of reporting the failure", stream, ftPrompt)
	}
	cancel()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(itWait):
		t.Fatalf("Publish to %q did not return even after its context was cancelled", stream)
	}
	return nil, 0
}

// ftCheckErr fails unless err is set and its text holds every one of wants.
func ftCheckErr(t testing.TB, what string, err error, took time.Duration, wants ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	t.Logf("%s: after %s: %v", what, took.Round(time.Millisecond), err)
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: the error does not mention %q: %v", what, w, err)
		}
	}
}

// TestLiveFault_LeaseTableMissing: LeaseTable names a table that does not exist and
// CreateLeaseTable is off: NewSubscriber fails with lease.ErrTableNotFound, naming the table
// and the one option that would create it.
func TestLiveFault_LeaseTableMissing(t *testing.T) {
	env := newLiveEnv(t)
	awsCfg := env.awsConfig
	table := itName("missing-leases")
	start := time.Now()
	_, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
		AWSConfig:      &awsCfg,
		KinesisOptions: []func(*awskinesis.Options){env.kinesisOptions},
		Group: kinesis.GroupConfig{
			Name:            itName("group"),
			LeaseTable:      table,
			DynamoDBOptions: []func(*dynamodb.Options){env.dynamoDBOptions},
		},
	}, nil)
	ftCheckErr(t, "NewSubscriber with a missing lease table", err, time.Since(start), table)
	if !errors.Is(err, lease.ErrTableNotFound) {
		t.Errorf("errors.Is(err, lease.ErrTableNotFound) is false: %v", err)
	}
	// One setting, the one this user set LeaseTable next to; not the store's own as well.
	if err != nil && (!strings.Contains(err.Error(), "or set SubscriberConfig.Group.CreateLeaseTable") || strings.Contains(err.Error(), "DynamoDBConfig")) {
		t.Errorf("the error does not name SubscriberConfig.Group.CreateLeaseTable alone: %v", err)
	}
}

// TestLiveFault_StreamMissing: with CreateStream off, Subscribe (with and without a group),
// SubscribeInitialize and Publish to a stream that does not exist fail with
// kinesis.ErrStreamNotFound, naming the stream.
func TestLiveFault_StreamMissing(t *testing.T) {
	env := newLiveEnv(t)
	stream := itName("no-such-stream")
	store := env.leaseStore(t, newCallCounter())
	for _, group := range []string{"", itName("group")} {
		name := "group"
		if group == "" {
			name = "no group"
		}
		t.Run("Subscribe/"+name, func(t *testing.T) {
			cfg := itSubscriberConfig(env.kinesisClient(), nil, group, "")
			if group != "" {
				cfg.Group.LeaseStore = store
			}
			sub, err := kinesis.NewSubscriber(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			err, took := ftSubscribe(t, sub, stream)
			ftCheckErr(t, "Subscribe", err, took, stream)
			if !errors.Is(err, kinesis.ErrStreamNotFound) {
				t.Errorf("errors.Is(err, kinesis.ErrStreamNotFound) is false: %v", err)
			}
			err = sub.SubscribeInitialize(stream)
			ftCheckErr(t, "SubscribeInitialize", err, 0, stream)
			if !errors.Is(err, kinesis.ErrStreamNotFound) {
				t.Errorf("SubscribeInitialize: errors.Is(err, kinesis.ErrStreamNotFound) is false: %v", err)
			}
		})
	}
	t.Run("Publish", func(t *testing.T) {
		pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{Client: env.kinesisClient()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		err, took := ftPublish(t, pub, stream)
		ftCheckErr(t, "Publish", err, took, stream)
		if !errors.Is(err, kinesis.ErrStreamNotFound) {
			t.Errorf("errors.Is(err, kinesis.ErrStreamNotFound) is false: %v", err)
		}
	})
}

// TestLiveFault_EndpointRefusedAtStart: the Kinesis or the DynamoDB endpoint refuses
// connections from the start. Subscribe, Publish and NewSubscriber fail promptly with an error
// that names the stream (or table) and the refused connection.
func TestLiveFault_EndpointRefusedAtStart(t *testing.T) {
	env := newLiveEnv(t)
	dead := ftClosedEndpoint(t)
	awsCfg := ftAWSConfig(env)
	stream := itName("refused")
	store := env.leaseStore(t, newCallCounter())

	subCases := []struct {
		name   string
		client *awskinesis.Client
		group  string
		create bool
	}{
		{"no group", ftKinesisAt(awsCfg, dead), "", false},
		{"group", ftKinesisAt(awsCfg, dead), itName("group"), false},
		{"CreateStream", ftKinesisAt(awsCfg, dead), "", true},
		{"SDK default retries", ftKinesisAt(env.awsConfig, dead), itName("group"), false},
	}
	for _, tc := range subCases {
		t.Run("Kinesis/Subscribe/"+tc.name, func(t *testing.T) {
			cfg := itSubscriberConfig(tc.client, nil, tc.group, "")
			if tc.group != "" {
				cfg.Group.LeaseStore = store
			}
			cfg.CreateStream = tc.create
			sub, err := kinesis.NewSubscriber(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			err, took := ftSubscribe(t, sub, stream)
			ftCheckErr(t, "Subscribe", err, took, stream, "connection refused")
		})
	}
	for _, create := range []bool{false, true} {
		t.Run(fmt.Sprintf("Kinesis/Publish/CreateStream=%v", create), func(t *testing.T) {
			pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
				Client:       ftKinesisAt(awsCfg, dead),
				CreateStream: create,
				MaxRetries:   2,
				RetryBackoff: 10 * time.Millisecond,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			err, took := ftPublish(t, pub, stream)
			ftCheckErr(t, "Publish", err, took, stream, "connection refused")
		})
	}
	for _, create := range []bool{false, true} {
		t.Run(fmt.Sprintf("DynamoDB/NewSubscriber/CreateLeaseTable=%v", create), func(t *testing.T) {
			table := itName("leases")
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := kinesis.NewSubscriber(ftLeaseTableConfig(env, &awsCfg, table, create, dead), nil)
				done <- err
			}()
			select {
			case err := <-done:
				ftCheckErr(t, "NewSubscriber", err, time.Since(start), table, "connection refused")
			case <-time.After(ftPrompt):
				t.Fatalf("NewSubscriber with a refused DynamoDB endpoint has not returned after %s", ftPrompt)
			}
		})
	}
}

// ftRejectingServer answers every request as AWS does a request signed with unknown
// credentials, and counts the requests.
func ftRejectingServer(t testing.TB) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("x-amzn-ErrorType", "UnrecognizedClientException")
		w.Header().Set("x-amzn-RequestId", "ft-"+watermill.NewShortUUID())
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// TestLiveFault_CredentialsRejected: every call is answered with UnrecognizedClientException.
// Subscribe, Publish and NewSubscriber (lease table) fail at once, after one request each (it
// is not retried), with an error that shows it is a credentials problem.
func TestLiveFault_CredentialsRejected(t *testing.T) {
	env := newLiveEnv(t)
	endpoint, requests := ftRejectingServer(t)
	stream := itName("rejected")
	store := env.leaseStore(t, newCallCounter())
	const wantText = "UnrecognizedClientException"
	// The SDK does not retry a 400; the driver should not either. Allow a describe plus a
	// call, no more.
	const maxRequests = 2
	for _, tc := range []struct {
		name   string
		group  string
		create bool
	}{{"no group", "", false}, {"group", itName("group"), false}, {"CreateStream", itName("group"), true}} {
		t.Run("Kinesis/Subscribe/"+tc.name, func(t *testing.T) {
			cfg := itSubscriberConfig(ftKinesisAt(env.awsConfig, endpoint), nil, tc.group, "")
			if tc.group != "" {
				cfg.Group.LeaseStore = store
			}
			cfg.CreateStream = tc.create
			sub, err := kinesis.NewSubscriber(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			before := requests.Load()
			err, took := ftSubscribe(t, sub, stream)
			ftCheckErr(t, "Subscribe", err, took, stream, wantText)
			t.Logf("Subscribe sent %d request(s)", requests.Load()-before)
			if n := requests.Load() - before; n > maxRequests {
				t.Errorf("Subscribe sent %d requests for a rejected credential; want at most %d", n, maxRequests)
			}
		})
	}
	for _, create := range []bool{false, true} {
		t.Run(fmt.Sprintf("Kinesis/Publish/CreateStream=%v", create), func(t *testing.T) {
			pub, err := kinesis.NewPublisher(kinesis.PublisherConfig{
				Client: ftKinesisAt(env.awsConfig, endpoint), CreateStream: create,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			before := requests.Load()
			err, took := ftPublish(t, pub, stream)
			ftCheckErr(t, "Publish", err, took, stream, wantText)
			t.Logf("Publish sent %d request(s)", requests.Load()-before)
			if n := requests.Load() - before; n > maxRequests {
				t.Errorf("Publish sent %d requests for a rejected credential; want at most %d", n, maxRequests)
			}
		})
	}
	for _, create := range []bool{false, true} {
		t.Run(fmt.Sprintf("DynamoDB/NewSubscriber/CreateLeaseTable=%v", create), func(t *testing.T) {
			awsCfg := env.awsConfig
			table := itName("leases")
			before := requests.Load()
			start := time.Now()
			_, err := kinesis.NewSubscriber(ftLeaseTableConfig(env, &awsCfg, table, create, endpoint), nil)
			ftCheckErr(t, "NewSubscriber", err, time.Since(start), table, wantText)
			t.Logf("NewSubscriber sent %d request(s)", requests.Load()-before)
			if n := requests.Load() - before; n > maxRequests {
				t.Errorf("NewSubscriber sent %d requests for a rejected credential; want at most %d", n, maxRequests)
			}
		})
	}
}

// ftProxy forwards TCP connections from a fixed 127.0.0.1 port to a target. stop closes the
// listener and cuts every client connection, so that the port refuses connections and the
// driver sees its connections reset; start listens on the same port again.
//
// The side towards the server is never cut while it may carry a request: kinesalite 3.3.3
// and dynalite 4.0.0 rethrow a request's "aborted" error and die of it, which AWS does not.
// An upstream connection whose client is gone is closed once the server's answer arrives (the
// write to the client fails), or after ftDrain without one (it was idle).
type ftProxy struct {
	t      testing.TB
	target string // host:port
	addr   string // 127.0.0.1:port, the same across restarts

	mu      sync.Mutex
	ln      net.Listener
	clients map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// ftDrain bounds how long an upstream connection outlives its client.
const ftDrain = time.Second

func newFtProxy(t testing.TB, targetEndpoint string) *ftProxy {
	t.Helper()
	p := &ftProxy{t: t, target: strings.TrimPrefix(targetEndpoint, "http://"), clients: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.stop()
		p.wg.Wait() // at most ftDrain
	})
	return p
}

func (p *ftProxy) endpoint() string { return "http://" + p.addr }

func (p *ftProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
}

func (p *ftProxy) forward(client net.Conn) {
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // stopped meanwhile; nothing was sent upstream yet
		p.mu.Unlock()
		_ = client.Close()
		_ = upstream.Close()
		return
	}
	p.clients[client] = struct{}{}
	p.mu.Unlock()
	p.wg.Add(2)
	go func() { // client to server
		defer p.wg.Done()
		_, _ = io.Copy(upstream, client)
		// The client is gone: let the server's answer, or ftDrain, end the upstream side.
		_ = upstream.SetReadDeadline(time.Now().Add(ftDrain))
	}()
	go func() { // server to client
		defer p.wg.Done()
		_, _ = io.Copy(client, upstream)
		_ = client.Close()
		_ = upstream.Close()
		p.mu.Lock()
		delete(p.clients, client)
		p.mu.Unlock()
	}()
}

// stop closes the listener and every client connection.
func (p *ftProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.clients {
		_ = c.Close()
	}
}

// start listens on the same port again.
func (p *ftProxy) start() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listening on %s again: %v", p.addr, err)
	}
	p.serve(ln)
}

// ftLogEntry is one line logged by the driver.
type ftLogEntry struct {
	level, msg string
	err        error
	fields     watermill.LogFields
}

// errText is the entry's error: the err argument, or an "err" field.
func (e ftLogEntry) errText() string {
	if e.err != nil {
		return e.err.Error()
	}
	if err, ok := e.fields["err"].(error); ok {
		return err.Error()
	}
	return ""
}

func (e ftLogEntry) String() string {
	return fmt.Sprintf("%s %q err=%q %v", e.level, e.msg, e.errText(), e.fields)
}

// ftLogger is a watermill logger that keeps every line and signals each new one.
type ftLogger struct {
	root   *ftLogRoot
	fields watermill.LogFields
}

type ftLogRoot struct {
	mu      sync.Mutex
	entries []ftLogEntry
	changed chan struct{}
}

func newFtLogger() *ftLogger {
	return &ftLogger{root: &ftLogRoot{changed: make(chan struct{}, 1)}}
}

func (l *ftLogger) add(level, msg string, err error, fields watermill.LogFields) {
	all := l.fields.Add(fields)
	l.root.mu.Lock()
	l.root.entries = append(l.root.entries, ftLogEntry{level, msg, err, all})
	l.root.mu.Unlock()
	select {
	case l.root.changed <- struct{}{}:
	default:
	}
}

func (l *ftLogger) Error(msg string, err error, fields watermill.LogFields) {
	l.add("ERROR", msg, err, fields)
}
func (l *ftLogger) Warn(msg string, err error, fields watermill.LogFields) {
	l.add("WARN", msg, err, fields)
}
func (l *ftLogger) Info(msg string, fields watermill.LogFields)  { l.add("INFO", msg, nil, fields) }
func (l *ftLogger) Debug(msg string, fields watermill.LogFields) { l.add("DEBUG", msg, nil, fields) }
func (l *ftLogger) Trace(msg string, fields watermill.LogFields) { l.add("TRACE", msg, nil, fields) }
func (l *ftLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return &ftLogger{root: l.root, fields: l.fields.Add(fields)}
}

// matching returns the entries for which pred holds.
func (l *ftLogger) matching(pred func(ftLogEntry) bool) []ftLogEntry {
	l.root.mu.Lock()
	defer l.root.mu.Unlock()
	var out []ftLogEntry
	for _, e := range l.root.entries {
		if pred(e) {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits until at least n entries satisfy pred, and returns them.
func (l *ftLogger) waitFor(t testing.TB, what string, n int, pred func(ftLogEntry) bool) []ftLogEntry {
	t.Helper()
	deadline := time.NewTimer(itWait)
	defer deadline.Stop()
	for {
		if got := l.matching(pred); len(got) >= n {
			return got
		}
		select {
		case <-l.root.changed:
		case <-deadline.C:
			t.Fatalf("%s: not logged within %s; log:\n%s", what, itWait, l.dump())
		}
	}
}

func (l *ftLogger) dump() string {
	l.root.mu.Lock()
	defer l.root.mu.Unlock()
	var b strings.Builder
	for _, e := range l.root.entries {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ftRefused: an entry whose error is a refused connection.
func ftRefused(e ftLogEntry) bool { return strings.Contains(e.errText(), "connection refused") }

// TestLiveFault_KinesisRefusedMidRun: the subscriber reads Kinesis through a proxy that goes
// down mid-run (connections cut, then refused) while messages keep being published straight
// to Kinesis. The failed reads are reported through the logger; once the proxy is back, the
// same subscription delivers every message, none lost.
func TestLiveFault_KinesisRefusedMidRun(t *testing.T) {
	env := newLiveEnv(t)
	start := time.Now()
	stream, shards := itCreateStream(t, env, 2)
	proxy := newFtProxy(t, env.kinesisEndpoint)
	logs := newFtLogger()
	store := env.leaseStore(t, newCallCounter())
	pub := itPublisher(t, env) // straight to kinesalite, never through the proxy

	cfg := itSubscriberConfig(ftKinesisAt(env.awsConfig, proxy.endpoint()), store, itName("group"), itName("worker"))
	cfg.ShardSyncInterval = 300 * time.Millisecond // the coordinator meets the outage too
	sub, ch := itSubscribe(t, cfg, logs, stream)
	col := itCollect(ch, -1)

	first := itPublish(t, pub, stream, itInterleave(shards, itKeys(shards, 25)))
	col.waitAll(t, "the first 50, before the outage", first)

	proxy.stop()
	downAt := time.Now()
	beforeOutage := col.total()
	second := itPublish(t, pub, stream, itInterleave(shards, itKeys(shards, 25)))
	// Down "for a while": until every shard's reader has failed three times in a row and the
	// coordinator has failed to list the shards, each with connection refused.
	for _, id := range itShardIDs(shards) {
		logs.waitFor(t, "reads of "+id+" failing three times in a row with connection refused", 1, func(e ftLogEntry) bool {
			f, _ := e.fields["failures"].(int)
			return ftRefused(e) && e.fields["shard"] == id && f >= 3
		})
	}
	logs.waitFor(t, "the coordinator failing to list shards with connection refused", 1, func(e ftLogEntry) bool {
		// WARN: the next shard sync retries; ERROR once listings keep failing.
		return ftRefused(e) && (e.level == "WARN" || e.level == "ERROR") && strings.Contains(e.msg, "listing shards")
	})
	duringOutage := col.total() - beforeOutage
	proxy.start()
	downFor := time.Since(downAt)
	upAt := time.Now()

	col.waitAll(t, "all 100 after the proxy is back", first, second)
	recoveredIn := time.Since(upAt)
	sentinels := itPublishSentinels(t, pub, stream, shards)
	col.waitAll(t, "the sentinels", sentinels)
	itClose(t, sub, col)

	refused := append(logs.matching(ftRefused), ftLogEntry{msg: "(none)"})
	stopped := logs.matching(func(e ftLogEntry) bool {
		return e.msg == "Shard reader stopped" || strings.HasPrefix(e.msg, "Lease lost")
	})
	n, distinct, dups := col.stats()
	t.Logf("Kinesis outage: proxy down %s; %d deliveries during it; all 100 back %s after restart; %d deliveries, %d distinct, %d redelivered; %d log lines with connection refused, e.g. %v; took %s",
		downFor.Round(time.Millisecond), duringOutage, recoveredIn.Round(time.Millisecond), n, distinct, dups, len(refused)-1, refused[0], time.Since(start).Round(time.Millisecond))
	if duringOutage != 0 {
		t.Errorf("%d messages were delivered while Kinesis was unreachable", duringOutage)
	}
	if distinct != 100+len(sentinels) {
		t.Errorf("%d distinct messages delivered, want %d", distinct, 100+len(sentinels))
	}
	if dups != 0 {
		// A Kinesis outage needs no rewind: the reader keeps its iterator.
		t.Errorf("%d messages were delivered again after a Kinesis outage: %v", dups, col.redelivered())
	}
	if len(stopped) != 0 {
		t.Errorf("a shard reader stopped during a Kinesis outage, instead of retrying: %v", stopped)
	}
	col.checkClean(t, "Kinesis outage")
}

// TestLiveFault_DynamoDBRefusedMidRun: the subscriber reaches its lease table through a proxy
// that goes down for longer than LeaseDuration. The readers cannot renew, stop delivering
// before their leases could expire (reported through the logger), and once the proxy is back
// the same subscription takes its leases again and resumes from the checkpoints: every
// message delivered, none lost, and only messages acked after the last checkpoint written
// before the outage delivered again.
func TestLiveFault_DynamoDBRefusedMidRun(t *testing.T) {
	env := newLiveEnv(t)
	start := time.Now()
	stream, shards := itCreateStream(t, env, 2)
	proxy := newFtProxy(t, env.dynamoDBEndpoint)
	logs := newFtLogger()
	pub := itPublisher(t, env)
	table := itName("leases")
	group := itName("group")
	worker := itName("worker")
	awsCfg := env.awsConfig

	cfg := itSubscriberConfig(env.kinesisClient(), nil, group, worker)
	cfg.AWSConfig = &awsCfg
	cfg.Group.LeaseTable = table
	cfg.Group.CreateLeaseTable = true
	cfg.Group.DynamoDBOptions = []func(*dynamodb.Options){ftDynamoDBOption(proxy.endpoint())}
	cfg.Group.LeaseDuration = time.Second
	cfg.Group.LeaseRenewInterval = 250 * time.Millisecond
	sub, ch := itSubscribe(t, cfg, logs, stream)
	col := itCollect(ch, -1)

	// The test's own view of the table, not through the proxy.
	store, err := lease.NewDynamoDBStore(context.Background(), lease.DynamoDBConfig{
		Client: dynamodb.NewFromConfig(env.awsConfig, env.dynamoDBOptions), TableName: table,
	})
	if err != nil {
		t.Fatal(err)
	}

	first := itPublish(t, pub, stream, itInterleave(shards, itKeys(shards, 25)))
	col.waitAll(t, "the first 50, before the outage", first)
	col.mu.Lock()
	checkpoints := map[string]string{}
	for s, seq := range col.lastAcked {
		checkpoints[s] = seq
	}
	col.mu.Unlock()
	itWaitLeases(t, store, group, stream, itShardIDs(shards), worker, checkpoints)

	proxy.stop()
	downAt := time.Now()
	mark := col.total()
	// Half of the next 50 at once (the readers deliver them until they stop, and their
	// checkpoints cannot be written), half once the readers have stopped.
	second := itPublish(t, pub, stream, itInterleave(shards, itKeys(shards, 13)))
	// A reader that cannot renew pauses (it delivers nothing from then on) and resumes once
	// a renewal succeeds, if nobody took the lease meanwhile.
	stopped := logs.waitFor(t, "every shard reader pausing for want of a renewal", len(shards), func(e ftLogEntry) bool {
		return strings.HasPrefix(e.msg, "Lease not renewed in time; deliveries paused")
	})
	stoppedAfter := time.Since(downAt)
	col.mu.Lock()
	beforeStop := map[string]bool{} // delivered between the outage and the readers stopping
	for _, d := range col.deliveries[mark:] {
		beforeStop[d.UUID] = true
	}
	col.mu.Unlock()
	quietFrom := col.total()
	third := itPublish(t, pub, stream, itInterleave(shards, itKeys(shards, 12)))
	// Keep DynamoDB away for longer than LeaseDuration all told; nothing may be delivered
	// meanwhile, as no reader could renew its lease. This window is an observation,
	// not a synchronisation: no event marks "nothing happened".
	quiet := time.NewTimer(cfg.Group.LeaseDuration)
	<-quiet.C
	deliveredWhileStopped := col.total() - quietFrom
	proxy.start()
	downFor := time.Since(downAt)
	upAt := time.Now()

	col.waitAll(t, "all 100 after the proxy is back", first, second, third)
	recoveredIn := time.Since(upAt)
	sentinels := itPublishSentinels(t, pub, stream, shards)
	col.waitAll(t, "the sentinels", sentinels)
	itClose(t, sub, col)

	refused := append(logs.matching(ftRefused), ftLogEntry{msg: "(none)"})
	renewFailed := logs.matching(func(e ftLogEntry) bool { return strings.HasPrefix(e.msg, "Renewing the lease failed") })
	redelivered := col.redelivered()
	n, distinct, dups := col.stats()
	firstSet := map[string]bool{}
	for _, u := range first {
		firstSet[u] = true
	}
	t.Logf("DynamoDB outage: proxy down %s; readers paused %s after it began (LeaseDuration %s); %d delivered before they paused, %d while paused; all 100 delivered %s after restart; %d deliveries, %d distinct, %d redelivered (%d messages); %d renewal failures and %d lines with connection refused logged, e.g. %v / %v; took %s",
		downFor.Round(time.Millisecond), stoppedAfter.Round(time.Millisecond), cfg.Group.LeaseDuration, len(beforeStop), deliveredWhileStopped,
		recoveredIn.Round(time.Millisecond), n, distinct, dups, len(redelivered), len(renewFailed), len(refused)-1, stopped[0], refused[0], time.Since(start).Round(time.Millisecond))
	if deliveredWhileStopped != 0 {
		t.Errorf("%d messages delivered while no lease could be renewed", deliveredWhileStopped)
	}
	if stoppedAfter > cfg.Group.LeaseDuration {
		t.Errorf("the readers stopped %s after DynamoDB went away; they must stop within LeaseDuration (%s)", stoppedAfter, cfg.Group.LeaseDuration)
	}
	if len(first)+len(second)+len(third) != 100 || distinct != 100+len(sentinels) {
		t.Errorf("%d distinct messages delivered, want %d", distinct, 100+len(sentinels))
	}
	for u, k := range redelivered {
		switch {
		case firstSet[u]:
			t.Errorf("message %s, acked and checkpointed before the outage, was delivered %d times", u, k)
		case !beforeStop[u]:
			t.Errorf("message %s was delivered %d times but was not delivered before the readers paused", u, k)
		}
	}
	if len(renewFailed) == 0 {
		t.Errorf("no failed renewal was logged")
	}
	if len(refused) == 1 {
		t.Errorf("no log line reported the refused connection")
	}
	// The readers resumed on their leases (nobody else could take them), released at Close.
	list, err := store.List(context.Background(), group, stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		if l.Owner != "" || l.Checkpoint == "" {
			t.Errorf("after Close, lease %+v: want released with a checkpoint", l)
		}
	}
}
