package kinesis

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

// FanOutConfig is SubscriberConfig.FanOut: reading with enhanced fan-out.
//
// Subscribe registers the stream consumer (or finds it: the group's instances share one) and
// waits until it is ACTIVE; each shard reader then subscribes to its shard from the checkpoint
// and subscribes again before Kinesis ends the subscription (after 5 minutes). Leases,
// fencing, handoff, checkpoints and resharding are those of polling. Close never deregisters
// the consumer, since other instances read through it: DeregisterConsumer does, explicitly.
type FanOutConfig struct {
	// Enabled turns enhanced fan-out on. Default: false.
	Enabled bool
	// ConsumerName is the name of the stream consumer: 1 to 128 characters of a-z, A-Z, 0-9,
	// '_', '.' and '-', unique per stream. Default: Group.Name (which must then be such a name).
	ConsumerName string
	// RegisterTimeout bounds how long Subscribe waits for a consumer it registered, or found
	// being created or deleted, to become ACTIVE. AWS takes some seconds. Default: 2 minutes.
	RegisterTimeout time.Duration
}

// GroupConfig makes a Subscriber one instance of a consumer group (SubscriberConfig.Group).
// With Name empty there is no group: LeaseStore, LeaseTable and CreateLeaseTable are then
// refused (a store with no group is a group name lost on the way), and the other settings are
// unused.
type GroupConfig struct {
	// Name names the group. Instances that share it, on one stream, share its shards: each
	// shard is read by one of them at a time, through leases in LeaseStore, and progress is
	// checkpointed there. It must be valid UTF-8 of at most 1916 bytes, so that the stream
	// name, a "|", the group and the "|NN" that ends the partition key of a lease (one of 16
	// per group) fit DynamoDB's 2048-byte partition key. Default: empty, no group.
	Name string
	// LeaseStore keeps the group's leases and checkpoints: lease.NewDynamoDBStore for
	// instances in many processes, lease.NewMemoryStore for one. Required with Name unless
	// LeaseTable is set.
	LeaseStore lease.Store
	// LeaseTable, when LeaseStore is nil, is the DynamoDB table of the leases: NewSubscriber
	// opens it with lease.NewDynamoDBStore, with a client built from SubscriberConfig.AWSConfig
	// and DynamoDBOptions. One table can serve many groups and streams.
	LeaseTable string
	// CreateLeaseTable creates LeaseTable (on-demand capacity) when it is missing, and waits
	// until it is active. Default: false (a missing table is an error).
	CreateLeaseTable bool
	// DynamoDBOptions adjust the DynamoDB client built for LeaseTable, for example
	// BaseEndpoint.
	DynamoDBOptions []func(*dynamodb.Options)
	// WorkerID names this instance in leases and in its log lines: at most 1000 bytes of
	// UTF-8, without '#'.
	// A second subscription open on one stream beside the first is WorkerID#2, and so on.
	// Give an instance the same WorkerID across restarts (a pod name, say) and it takes its
	// own leases back at once. It must be unique among the group's live instances: a lease
	// held under it is this instance's, read at once, so two live processes sharing one
	// would read each other's shards. Default: host name plus a random UUID.
	WorkerID string

	// CheckpointInterval is how often acked progress is written to the lease store; it is
	// also written when a shard is given up. A crash redelivers at most what was acked in
	// the last interval, so a shorter interval means fewer duplicates after a crash and more
	// lease store writes (one per shard per interval while messages are acked). Default: 5 s.
	CheckpointInterval time.Duration
	// LeaseDuration is how long a lease's counter must be seen standing still, on the
	// observer's own clock, before another instance may take it: a crashed instance's shards
	// move LeaseDuration after the others first see its leases' last counters, within
	// LeaseDuration + 2 LeaseSyncIntervals of the crash. An owner that cannot renew stops
	// delivering at 0.8 × LeaseDuration after its last renewal. Default: 10 s.
	LeaseDuration time.Duration
	// LeaseRenewInterval is how often an owner renews its leases, and the time limit of each
	// renewal and checkpoint call its readers make. Shorter gives an owner that cannot renew
	// more tries before it pauses its shards (at 0.8 × LeaseDuration after its last renewal),
	// at more writes; it must stay above the store's latency and below LeaseDuration.
	// Default: LeaseDuration / 3.
	LeaseRenewInterval time.Duration
	// LeaseSyncInterval is how often a worker reads the group's member records (it heartbeats
	// its own twice per interval, but at most every 250 ms) and, when something changed, lists
	// the leases to take free or expired ones and to even out the group; a quiet group lists
	// them every 30 intervals. Default: 2 s.
	LeaseSyncInterval time.Duration
	// HandoffTimeout is how long a worker that asked for a lease (to even out the group)
	// waits for the owner to hand it over before taking it. The owner lets the messages in
	// flight finish for up to half of it, checkpoints, and hands over; with FanOut, not
	// before 5 s after its own subscription, as Kinesis refuses the next owner's until then. The taker waits at
	// least LeaseDuration, so that an owner that never saw the request has stopped delivering
	// by then. Default: 10 s.
	HandoffTimeout time.Duration

	// Hooks are told when this instance starts and stops reading a shard.
	Hooks ShardHooks
}

// ShardHooks are told when this instance starts, pauses or stops reading a shard of its
// consumer group (GroupConfig.Hooks), for handlers that keep state per shard. Each may be nil. They run on the shard's reader
// goroutine (several shards' hooks may run at once) and hold up that shard while they run.
type ShardHooks struct {
	// OnAcquired is called when this instance starts reading a shard, before the shard's
	// first message is delivered, and again when deliveries resume after a pause (see
	// OnLost).
	OnAcquired func(ShardEvent)
	// OnRevoked is called when this instance gives a shard up while it may still
	// checkpoint: on Close, on the Subscribe context's end, when it hands the shard to
	// another instance, and when the shard is read to its end after a reshard (every
	// message of it acked, SHARD_END written). Messages acked before it returns are
	// checkpointed.
	OnRevoked func(ShardEvent)
	// OnLost is called when this instance lost a shard and may not checkpoint it any more:
	// another instance took the lease, or renewals failed for too long. Its unacked
	// messages will be redelivered by the new owner.
	OnLost func(ShardEvent)
}

// storeWithoutName lists the lease store settings that are set while Name is empty. A store
// with no group to keep is a group name lost on the way (an unset environment variable, say),
// which would otherwise turn an instance of a group into a subscriber that reads every shard
// from InitialPosition and checkpoints nothing. DynamoDBOptions, the timings and the hooks are
// left out: a config (or a helper that sets the endpoints) shared by grouped and ungrouped
// subscribers may carry them, and without a group they are simply unused.
func (g GroupConfig) storeWithoutName() []string {
	if g.Name != "" {
		return nil
	}
	var set []string
	for _, f := range []struct {
		name  string
		isSet bool
	}{
		{"LeaseStore", g.LeaseStore != nil}, {"LeaseTable", g.LeaseTable != ""},
		{"CreateLeaseTable", g.CreateLeaseTable},
	} {
		if f.isSet {
			set = append(set, "Group."+f.name)
		}
	}
	return set
}

// joinAnd lists names for an error: "A is", "A and B are", "A, B and C are".
func joinAnd(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0] + " is"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " are"
}

// maxGroupNameBytes is the longest consumer group name whose leases every stream can hold: the
// DynamoDB lease table's partition key is stream + "|" + group + "|NN" for a lease ("#" + stream
// + "|" + group for the member records), DynamoDB allows 2048 bytes in a partition key, and a
// stream name takes up to 128.
const maxGroupNameBytes = 2048 - maxStreamNameLength - len("|") - leaseKeyOverhead

// leaseKeyOverhead is how many bytes the lease table's longest partition key adds to stream +
// "|" + group: the "|NN" of a lease's bucket (lease.DynamoDBPartitionKey), longer than the "#"
// that starts a member record's (lease.DynamoDBMemberPartitionKey).
// TestRegress_ConsumerGroupValidated checks the bound against those keys.
const leaseKeyOverhead = len("|NN")

// maxWorkerIDBytes is the longest WorkerID: it is the sort key of the worker's member record,
// which DynamoDB bounds at 1024 bytes, with room for the "#n" of a Subscriber's later
// subscriptions.
const maxWorkerIDBytes = 1000

// validateGroupName checks that a consumer group name can key the lease table: DynamoDB keys
// are UTF-8 strings of bounded size. Without it, a bad name passed NewSubscriber and every
// Subscribe then failed with an error that blamed the table.
func validateGroupName(group string) error {
	switch {
	case !utf8.ValidString(group):
		return fmt.Errorf("kinesis: SubscriberConfig.Group.Name %q is not valid UTF-8; the lease table keys leases by group name, and DynamoDB keys are UTF-8 strings", group)
	case len(group) > maxGroupNameBytes:
		return fmt.Errorf("kinesis: SubscriberConfig.Group.Name is %d bytes long (%.40q...); at most %d fit the lease table's key with any stream name", len(group), group, maxGroupNameBytes)
	}
	return nil
}
