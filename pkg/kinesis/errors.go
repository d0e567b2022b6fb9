package kinesis

import (
	"errors"
	"fmt"
	"strings"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/lease"
)

var (
	// ErrPublisherClosed is matched by the error of Publish after Close.
	ErrPublisherClosed = errors.New("kinesis: publisher is closed")
	// ErrSubscriberClosed is matched by the error of Subscribe and SubscribeInitialize after
	// Close.
	ErrSubscriberClosed = errors.New("kinesis: subscriber is closed")
	// ErrNilContext is matched by the error of Subscribe with a nil context.
	ErrNilContext = errors.New("kinesis: nil context")
	// ErrLeaseLost means this instance no longer owns a shard's lease: another instance took it
	// or it could not be renewed in time. The shard's reader stops at once, without a
	// checkpoint; its unacked messages are redelivered by the shard's next owner.
	ErrLeaseLost = lease.ErrLeaseLost
	// ErrStreamNotFound means the stream does not exist. Create it, or set the CreateStream
	// option so that the driver creates it.
	ErrStreamNotFound = awscall.ErrStreamNotFound
	// ErrInvalidStreamName is matched by errors about a topic that is not a valid Kinesis
	// stream name ([a-zA-Z0-9_.-], 1 to 128 characters).
	ErrInvalidStreamName = errors.New("kinesis: invalid stream name")
	// ErrInvalidMessage is matched by every error about a message that cannot be published
	// as it is (bad partition key, record too large, nil message).
	ErrInvalidMessage = errors.New("kinesis: invalid message")
)

// MessageError names a message that could not be published and why.
type MessageError struct {
	Stream string
	// UUID is the message's UUID; Index its position in the Publish call.
	UUID  string
	Index int
	Err   error
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("kinesis: message %d (uuid %q) to stream %q: %v", e.Index, e.UUID, e.Stream, e.Err)
}

func (e *MessageError) Unwrap() error { return e.Err }

// PublishError is returned by Publish when some messages were not written. Messages not listed
// in Failed were written; Publish is not atomic. errors.As finds each *MessageError through
// Unwrap.
type PublishError struct {
	Stream string
	Failed []*MessageError
}

func (e *PublishError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kinesis: %d message(s) not written to stream %q", len(e.Failed), e.Stream)
	const shown = 5
	for i, f := range e.Failed {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(e.Failed)-shown)
			break
		}
		fmt.Fprintf(&b, "; message %d (uuid %q): %v", f.Index, f.UUID, f.Err)
	}
	return b.String()
}

// Unwrap returns the per-message errors, so errors.Is and errors.As see each of them.
func (e *PublishError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f
	}
	return errs
}

// ShardError names the shard a reader failed on. Its fields are Stream, ShardID and Err, the
// cause, which Unwrap returns; errors.As finds it in the errors the Subscriber logs and
// Subscribe returns. (It is defined with the reader, which makes it, and is the same type
// here.)
type ShardError = awscall.ShardError
