package quota_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// PollInterval's default leaves room for a second group (config.go): two groups at the
// defaults polling an idle shard for a minute stay within its five reads a second, on
// average (a reader's random wait averages PollInterval).
func TestQuotaTwoPollingGroupsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream, groups, run = "idle", 2, time.Minute
		l := memlog.New(memlog.Config{Quotas: &memlog.Quotas{}})
		if _, err := l.CreateStream(context.Background(), &awskinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		subs := make([]*kinesis.Subscriber, 0, groups)
		for g := range groups {
			sub, err := kinesis.NewSubscriber(kinesis.SubscriberConfig{
				Client: l,
				Group:  kinesis.GroupConfig{Name: "group-" + strconv.Itoa(g), LeaseStore: lease.NewMemoryStore()},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sub.Subscribe(context.Background(), stream); err != nil {
				t.Fatalf("group %d: Subscribe: %v", g, err)
			}
			subs = append(subs, sub)
		}
		time.Sleep(run) // fake time: the readers poll meanwhile
		u := l.Usage(stream)
		for _, sub := range subs {
			if err := sub.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		rate := float64(u.GetRecordsCalls) / run.Seconds()
		t.Logf("%d GetRecords in %s (%.2f/s), %d throttled", u.GetRecordsCalls, run, rate, u.GetRecordsThrottled)
		// The rate counts the readers' first reads too. With each wait up to a quarter shorter
		// (and none longer), it was 5.3-5.4/s, 18-22 reads refused.
		if rate > 5.1 || u.GetRecordsThrottled*100 > u.GetRecordsCalls {
			t.Errorf("%.2f GetRecords/s from two groups at the defaults, %d refused; want at most 5/s (the shard's read quota) and under 1%% refused", rate, u.GetRecordsThrottled)
		}
	})
}
