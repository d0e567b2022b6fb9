package kinesis_test

import (
	"strings"
	"testing"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/memlog"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// Item 6: SubscriberConfig.Validate rejects a Group.Name that is not valid UTF-8, or longer
// than 1916 bytes (DynamoDB's 2048-byte partition key holds the stream, up to 128 bytes, a
// "|", the group and the "|NN" of a lease partition), with an error that names the Group.Name
// field; a group of exactly 1916 bytes, or of valid multi-byte UTF-8, is accepted.
func TestRegress_ConsumerGroupValidated(t *testing.T) {
	// 1916 bytes is what the lease table's keys leave: with the longest stream name, the
	// partition key of a lease is then exactly DynamoDB's 2048 bytes, and a member record's
	// is shorter.
	longest, stream := strings.Repeat("g", 1916), strings.Repeat("s", 128)
	if n := len(lease.DynamoDBPartitionKey(lease.Key{Group: longest, Stream: stream, ShardID: "shardId-000000000000"})); n != 2048 {
		t.Fatalf("a lease partition key of a 1916-byte group on a 128-byte stream is %d bytes, want 2048", n)
	}
	if n := len(lease.DynamoDBMemberPartitionKey(longest, stream)); n > 2048 {
		t.Fatalf("a member partition key of a 1916-byte group on a 128-byte stream is %d bytes, over 2048", n)
	}
	client := memlog.New(memlog.Config{})
	cases := []struct {
		name   string
		group  string
		reject bool
	}{
		{"ascii", "billing", false},
		{"multi-byte UTF-8", "facturación-請求", false},
		{"1916 bytes", strings.Repeat("g", 1916), false},
		{"1916 bytes of multi-byte UTF-8", strings.Repeat("é", 958), false},
		{"1917 bytes", strings.Repeat("g", 1917), true},
		{"4000 bytes", strings.Repeat("g", 4000), true},
		{"invalid byte 0xff", "billing\xff", true},
		{"truncated multi-byte sequence", "billing\xc3", true},
		{"lone continuation byte", "\x80billing", true},
		{"surrogate half encoded", "bill\xed\xa0\x80ing", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := kinesis.SubscriberConfig{Client: client, Group: kinesis.GroupConfig{Name: tc.group, LeaseStore: lease.NewMemoryStore()}}
			err := cfg.Validate()
			if !tc.reject {
				if err != nil {
					t.Fatalf("Validate rejected group of %d bytes: %v", len(tc.group), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted Group.Name %q (%d bytes); want an error naming Group.Name", rgClip(tc.group), len(tc.group))
			}
			if !strings.Contains(err.Error(), "Group.Name") {
				t.Errorf("Validate's error does not name the Group.Name field: %v", err)
			}
			// NewSubscriber validates too.
			if s, nerr := kinesis.NewSubscriber(cfg, nil); nerr == nil {
				_ = s.Close()
				t.Errorf("NewSubscriber accepted Group.Name %q", rgClip(tc.group))
			}
		})
	}
}

func rgClip(s string) string {
	if len(s) > 24 {
		return s[:24] + "..."
	}
	return s
}
