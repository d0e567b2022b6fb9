package kinesis

import (
	"strings"
	"testing"
	"time"
)

// TestHealthProblems: the rules of Subscriber.Health, one case each.
func TestHealthProblems(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return at.Add(-d) }
	base := Health{At: at, ReadWithin: 4 * time.Second, StuckWithin: 40 * time.Second, LeaseSyncWithin: 6 * time.Second}
	shard := func(mod func(*ShardHealth)) ShardHealth {
		s := ShardHealth{ShardID: "shardId-000000000001", Started: ago(time.Minute), LastRead: ago(time.Second)}
		if mod != nil {
			mod(&s)
		}
		return s
	}
	sub := func(group string, sync time.Time, shards ...ShardHealth) SubscriptionHealth {
		return SubscriptionHealth{Stream: "orders", ConsumerGroup: group, LastLeaseSync: sync, Shards: shards}
	}
	tests := []struct {
		name   string
		closed bool
		subs   []SubscriptionHealth
		want   []string // a substring of each problem, in order
	}{
		{name: "no subscription", want: nil},
		{name: "reading, group synced", subs: []SubscriptionHealth{sub("billing", ago(time.Second), shard(nil))}},
		{name: "reading, no group", subs: []SubscriptionHealth{sub("", time.Time{}, shard(nil))}},
		{name: "closed", closed: true, want: []string{"the subscriber is closed"}},
		{name: "a read too long ago", subs: []SubscriptionHealth{sub("", time.Time{}, shard(func(s *ShardHealth) { s.LastRead = ago(5 * time.Second) }))},
			want: []string{`stream "orders", shard shardId-000000000001: no successful read for 5s (limit 4s)`}},
		{name: "just within the limit", subs: []SubscriptionHealth{sub("", time.Time{}, shard(func(s *ShardHealth) { s.LastRead = ago(4 * time.Second) }))}},
		{name: "no read since a start too long ago", subs: []SubscriptionHealth{sub("", time.Time{}, shard(func(s *ShardHealth) { s.LastRead = time.Time{} }))},
			want: []string{"no successful read since the reader started for 1m0s"}},
		{name: "a new reader not read yet", subs: []SubscriptionHealth{sub("", time.Time{}, shard(func(s *ShardHealth) { s.LastRead, s.Started = time.Time{}, ago(time.Second) }))}},
		{name: "waiting on its handlers needs no read", subs: []SubscriptionHealth{sub("", time.Time{}, shard(func(s *ShardHealth) {
			s.LastRead, s.Holding, s.LastProgress = ago(time.Hour), true, ago(30*time.Second)
		}))}},
		{name: "holding with no delivery or ack for too long", subs: []SubscriptionHealth{sub("", time.Time{}, shard(func(s *ShardHealth) {
			s.LastRead, s.Holding, s.LastProgress = ago(time.Hour), true, ago(41*time.Second)
		}))}, want: []string{"shard shardId-000000000001: stuck: holds records, and delivered none and saw none acked for 41s (limit 40s)"}},
		{name: "holding since a recent read", subs: []SubscriptionHealth{sub("", time.Time{}, shard(func(s *ShardHealth) {
			s.LastRead, s.Holding = ago(39*time.Second), true
		}))}},
		{name: "paused", subs: []SubscriptionHealth{sub("billing", ago(time.Second), shard(func(s *ShardHealth) { s.Paused, s.Holding = true, true }))},
			want: []string{"shard shardId-000000000001: paused"}},
		{name: "no lease sync yet", subs: []SubscriptionHealth{sub("billing", time.Time{})},
			want: []string{`group "billing": no lease sync has succeeded yet`}},
		{name: "lease store silent", subs: []SubscriptionHealth{sub("billing", ago(7*time.Second), shard(nil))},
			want: []string{"the lease store has not answered a lease sync for 7s (limit 6s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := base
			h.Subscriptions = tt.subs
			got := healthProblems(h, tt.closed)
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("problem %d: %q, want it to say %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}
