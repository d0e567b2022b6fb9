package quota_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// The polling groups' run: one shard written at half its write quota (500 small records a
// second, in batches of 50 every 100 ms, ten partition keys), read by three consumer groups,
// each one instance with its own lease store at the driver's defaults. The shard's five reads
// a second are shared by the three.
const (
	groupsStream   = "polled"
	groupsCount    = 3
	groupsKeys     = 10
	groupsBatch    = 50
	groupsEvery    = 100 * time.Millisecond
	groupsProduce  = 30 * time.Second // how long the producer writes
	groupsDrainCap = 30 * time.Second // how long the end waits for the last deliveries
	// groupsMaxLag bounds a record's time from PutRecords to its delivery. A group that keeps
	// up reads at least once every 1 to 2 s (three groups in turn on five reads a second, with
	// backoff after a throttled read); one that falls behind grows its lag without bound over
	// the run, far past this.
	groupsMaxLag = 5 * time.Second
)

// delivery is one message a group's handler received.
type delivery struct {
	id  int
	key string
	at  time.Time
}

// groupsRun is the run's shared record: what was published when, and what each group got.
type groupsRun struct {
	mu        sync.Mutex
	published map[int]time.Time // record id -> when its PutRecords returned
	keys      map[int]string
	got       [groupsCount][]delivery
	putFailed int
}

func TestQuotaThreePollingGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lg := newLogs()
		l := memlog.New(memlog.Config{Quotas: &memlog.Quotas{}})
		if _, err := l.CreateStream(context.Background(), &awskinesis.CreateStreamInput{StreamName: aws.String(groupsStream), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		run := &groupsRun{published: map[int]time.Time{}, keys: map[int]string{}}
		subs := make([]*kinesis.Subscriber, groupsCount)
		var handlers sync.WaitGroup
		for g := range groupsCount {
			sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
				Client:      l,
				Group:       kinesis.GroupConfig{Name: "group-" + strconv.Itoa(g), LeaseStore: lease.NewMemoryStore()},
				Unmarshaler: kinesis.RawMarshaler{}, // the records are the run's ids
			}, lg.logger(watermill.LogFields{"group": g}))
			if err != nil {
				t.Fatal(err)
			}
			subs[g] = sub
			ch, err := sub.Subscribe(context.Background(), groupsStream)
			if err != nil {
				t.Fatalf("group %d: Subscribe: %v", g, err)
			}
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				for msg := range ch {
					run.deliver(g, msg)
					msg.Ack()
				}
			}()
		}
		began := time.Now()
		run.produce(t, l)
		produced := time.Since(began)
		for time.Since(began) < produced+groupsDrainCap && !run.allDelivered() {
			time.Sleep(100 * time.Millisecond)
		}
		for _, sub := range subs {
			if err := sub.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		handlers.Wait()
		run.check(t, l, lg, time.Since(began))
	})
}

// produce writes groupsBatch records every groupsEvery for groupsProduce.
func (r *groupsRun) produce(t *testing.T, l *memlog.Log) {
	next := 0
	for start := time.Now(); time.Since(start) < groupsProduce; {
		entries := make([]types.PutRecordsRequestEntry, groupsBatch)
		for i := range entries {
			key := "key-" + strconv.Itoa(next%groupsKeys)
			entries[i] = types.PutRecordsRequestEntry{Data: []byte(strconv.Itoa(next)), PartitionKey: aws.String(key)}
			r.mu.Lock()
			r.keys[next] = key
			r.mu.Unlock()
			next++
		}
		out, err := l.PutRecords(context.Background(), &awskinesis.PutRecordsInput{StreamName: aws.String(groupsStream), Records: entries})
		if err != nil {
			t.Fatalf("PutRecords: %v", err)
		}
		now := time.Now()
		r.mu.Lock()
		for i, res := range out.Records {
			id, _ := strconv.Atoi(string(entries[i].Data))
			if res.ErrorCode != nil {
				r.putFailed++
				delete(r.keys, id)
				continue
			}
			r.published[id] = now
		}
		r.mu.Unlock()
		time.Sleep(groupsEvery)
	}
}

// deliver records a message group g received.
func (r *groupsRun) deliver(g int, msg *message.Message) {
	id, err := strconv.Atoi(string(msg.Payload))
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		id = -1 // counted as missing its record
	}
	r.got[g] = append(r.got[g], delivery{id: id, key: r.keys[id], at: time.Now()})
}

func (r *groupsRun) allDelivered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for g := range groupsCount {
		if len(uniqueIDs(r.got[g])) < len(r.published) {
			return false
		}
	}
	return true
}

func uniqueIDs(ds []delivery) map[int]bool {
	ids := make(map[int]bool, len(ds))
	for _, d := range ds {
		ids[d.id] = true
	}
	return ids
}

// check asserts that every group delivered every record, once, in per-key order, within
// groupsMaxLag, and that nothing reached the application as an error; and logs the figures.
func (r *groupsRun) check(t *testing.T, l *memlog.Log, lg *logs, elapsed time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.putFailed > 0 {
		t.Errorf("%d records refused at half the shard's write quota", r.putFailed)
	}
	for g := range groupsCount {
		ds := r.got[g]
		ids := uniqueIDs(ds)
		missing := 0
		for id := range r.published {
			if !ids[id] {
				missing++
			}
		}
		last := map[string]int{}
		outOfOrder, dup := 0, len(ds)-len(ids)
		var lags []time.Duration
		for _, d := range ds {
			if prev, ok := last[d.key]; ok && d.id <= prev {
				outOfOrder++
			}
			last[d.key] = d.id
			lags = append(lags, d.at.Sub(r.published[d.id]))
		}
		p50, p99, maxLag := percentile(lags, 50), percentile(lags, 99), percentile(lags, 100)
		t.Logf("group %d: %d of %d records delivered (%d duplicates), lag p50 %v, p99 %v, max %v",
			g, len(ids), len(r.published), dup, p50, p99, maxLag)
		if missing > 0 {
			t.Errorf("group %d: %d records never delivered", g, missing)
		}
		if outOfOrder > 0 || dup > 0 {
			t.Errorf("group %d: %d deliveries out of per-key order, %d duplicates", g, outOfOrder, dup)
		}
		if maxLag > groupsMaxLag {
			t.Errorf("group %d: a record took %v from PutRecords to delivery (bound %v): the group does not keep up", g, maxLag, groupsMaxLag)
		}
	}
	u := l.Usage(groupsStream)
	secs := elapsed.Seconds()
	t.Logf("shard reads: %d GetRecords in %.0f s (%.2f/s, quota 5/s), %d throttled (%.0f%%); %d throttled reads logged at DEBUG",
		u.GetRecordsCalls, secs, float64(u.GetRecordsCalls)/secs, u.GetRecordsThrottled,
		100*float64(u.GetRecordsThrottled)/float64(max(u.GetRecordsCalls, 1)), lg.count("DEBUG", "Read throttled"))
	t.Logf("writes: %d records, %d bytes, %d PUT payload units, %d throttled", u.Records, u.Bytes, u.PayloadUnits, u.ThrottledRecords)
	if errs := lg.at("ERROR"); len(errs) > 0 {
		t.Errorf("logged at ERROR:\n%s", strings.Join(errs, "\n"))
	}
	if warns := lg.at("WARN"); len(warns) > 0 {
		t.Logf("logged at WARN:\n%s", strings.Join(warns, "\n"))
	}
}
