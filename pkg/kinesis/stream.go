package kinesis

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis/internal/awscall"
)

// Kinesis limits the driver checks itself before calling, so that bad input gets an error
// naming the message instead of a rejected request (or, on some emulators, none at all).
const (
	maxStreamNameLength   = 128
	maxPartitionKeyLength = 256                    // Unicode characters
	maxRecordSize         = 1 << 20                // data + partition key, bytes
	maxPutRecordsEntries  = 500                    // records per PutRecords call
	maxPutRecordsSize     = 5 << 20                // data + keys per PutRecords call, bytes
	minReadInterval       = 200 * time.Millisecond // Kinesis allows 5 reads per second per shard
)

// validateStreamName checks a stream name against Kinesis's rule [a-zA-Z0-9_.-]{1,128}.
func validateStreamName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the stream name (the topic) is empty", ErrInvalidStreamName)
	}
	if len(name) > maxStreamNameLength {
		return fmt.Errorf("%w: %q is %d characters long; Kinesis allows at most %d", ErrInvalidStreamName, name, len(name), maxStreamNameLength)
	}
	for i, c := range name { // by character, so that the error shows 'é', not its first byte
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' {
			continue
		}
		return fmt.Errorf("%w: %q has %q at byte %d; Kinesis allows only letters, digits, '_', '.' and '-'", ErrInvalidStreamName, name, c, i)
	}
	return nil
}

// validatePartitionKey checks Kinesis's 1..256 Unicode characters.
func validatePartitionKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: partition key is empty; Kinesis needs 1 to %d characters", ErrInvalidMessage, maxPartitionKeyLength)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: partition key %q is not valid UTF-8", ErrInvalidMessage, key)
	}
	if n := utf8.RuneCountInString(key); n > maxPartitionKeyLength {
		return fmt.Errorf("%w: partition key is %d characters long; Kinesis allows at most %d", ErrInvalidMessage, n, maxPartitionKeyLength)
	}
	return nil
}

// maxEnsureFailures is how many DescribeStreamSummary calls in a row may fail for throttling or
// a transient error before ensureStream reports the error: with the backoff below (up to 1 s),
// 3 to 6 s of a Kinesis that does not answer; a call refused for the account's 20 calls per
// second, as a fleet starting at once is, waits awscall.QuotaBackoff instead, so eight refusals
// in a row are very unlikely before half a minute.
const maxEnsureFailures = awscall.FailuresBeforeError

// streamReadyTimeout bounds the wait for a stream to become ACTIVE (AWS takes under a minute).
const streamReadyTimeout = 3 * time.Minute

// ensureStream makes sure the stream exists and is ACTIVE, creating it with shards shards
// when create is true. It waits for a stream being created, bounded by ctx and
// streamReadyTimeout.
//
// Each call is bounded by callTimeout (RequestTimeout); a call that outlasts it counts as a
// transient failure.
func ensureStream(ctx context.Context, client KinesisAPI, stream string, create bool, shards int32, callTimeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, streamReadyTimeout)
	defer cancel()
	var lastErr error
	failures := 0 // consecutive calls that failed for throttling or a transient error
	for attempt := 0; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := client.DescribeStreamSummary(callCtx, &awskinesis.DescribeStreamSummaryInput{StreamName: &stream})
		cancel()
		class := awscall.Classify(ctx, err)
		if err != nil && (class == awscall.Transient || class == awscall.Throttled) {
			// The SDK does not retry (sdk.go): these rounds ride out a blip or throttling,
			// but a Kinesis that cannot be reached is reported, not waited for.
			failures++
			lastErr = err
			if failures >= maxEnsureFailures {
				return fmt.Errorf("kinesis: describing stream %q failed %d times: %w", stream, failures, err)
			}
		} else {
			failures = 0
		}
		switch {
		case err == nil:
			if out.StreamDescriptionSummary != nil && out.StreamDescriptionSummary.StreamStatus == types.StreamStatusDeleting {
				return fmt.Errorf("kinesis: stream %q is being deleted", stream)
			}
			if out.StreamDescriptionSummary == nil || out.StreamDescriptionSummary.StreamStatus != types.StreamStatusCreating {
				return nil
			}
		case class == awscall.NotFound && create:
			callCtx, cancel := context.WithTimeout(ctx, callTimeout)
			_, cerr := client.CreateStream(callCtx, &awskinesis.CreateStreamInput{StreamName: &stream, ShardCount: &shards})
			cancel()
			var inUse *types.ResourceInUseException
			if cerr != nil && !errors.As(cerr, &inUse) {
				return fmt.Errorf("kinesis: creating stream %q with %d shards: %w", stream, shards, cerr)
			}
		case class == awscall.NotFound:
			return fmt.Errorf("%w: %q (create it, or set CreateStream in the config): %w", ErrStreamNotFound, stream, err)
		case class == awscall.Fatal:
			return fmt.Errorf("kinesis: describing stream %q: %w", stream, err)
		}
		wait := awscall.Backoff(attempt, 50*time.Millisecond, time.Second)
		if err != nil && class == awscall.Throttled { // refused for the account's rate
			wait = awscall.QuotaBackoff(failures - 1)
		}
		if err := awscall.Sleep(ctx, wait); err != nil {
			if lastErr != nil {
				return fmt.Errorf("kinesis: waiting for stream %q to become active: %w (last error: %w)", stream, err, lastErr)
			}
			return fmt.Errorf("kinesis: waiting for stream %q to become active: %w", stream, err)
		}
	}
}

// ValidateStreamName reports whether name is a stream name Kinesis accepts (1 to 128 letters,
// digits, '_', '.' and '-'); the error matches ErrInvalidStreamName and says what is wrong.
func ValidateStreamName(name string) error { return validateStreamName(name) }
