//go:build !race

// Watermill's TestReconnect (v1.5.1) appends to the slice of published messages in one
// goroutine and reads it in another without synchronisation (pubsub/tests/test_pubsub.go,
// lines 1086 and 1120), so the race detector fails it whatever the driver does. It is built
// only without -race; `make test` runs it in a run of its own.

package tests_test

import (
	"os"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
)

// TestLiveReconnect is Watermill's reconnect test: 10,000 messages from 100 publishers to a
// consumer group while kinesalite and dynalite are restarted twice (they keep their data on
// disk, so the restart is an outage, not a reset); nothing may be lost.
func TestLiveReconnect(t *testing.T) {
	k, d := os.Getenv("RESTARTABLE_KINESIS_URL"), os.Getenv("RESTARTABLE_DYNAMODB_URL")
	restart := os.Getenv("EMULATORS_RESTART_COMMAND")
	if k == "" || d == "" || restart == "" {
		t.Skip("RESTARTABLE_KINESIS_URL, RESTARTABLE_DYNAMODB_URL and EMULATORS_RESTART_COMMAND " +
			"are not set: run `make test`, or `scripts/with-emulators.sh go test ./tests/`")
	}
	env := newLiveEnv(t)
	env.kinesisEndpoint, env.dynamoDBEndpoint = k, d
	b := newLiveBackendOn(t, env, 4)
	features := tests.Features{
		ConsumerGroups:        true,
		Persistent:            true,
		RestartServiceCommand: []string{"bash", "-c", restart},
	}
	tests.TestReconnect(t, tests.TestContext{TestID: tests.NewTestID(), Features: features},
		func(t *testing.T) (message.Publisher, message.Subscriber) { return b.PubSub(t, "test") })
}
