package kinesis_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"

	wmkinesis "github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// NewSlogLogger writes WARN at slog's warning level, and every line's fields in one order:
// stream, group, worker, shard, generation, then the rest by name, also for fields given
// through With.
func TestNewSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: watermill.LevelTrace,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	log := wmkinesis.NewSlogLogger(slog.New(h))
	fields := watermill.LogFields{"reason": "free", "shard": "s-1", "generation": 2, "stream": "orders", "worker": "w1", "group": "billing", "from": "w0"}
	for range 3 { // map order varies from call to call; the line must not
		log.Info("Lease taken", fields)
	}
	log.Warn("Lease not renewed in time", errors.New("no renewal for 8s"), watermill.LogFields{"shard": "s-1"})
	log.With(watermill.LogFields{"stream": "orders", "a": 1}).Error("Reads keep failing", errors.New("boom"), watermill.LogFields{"shard": "s-2"})
	log.Trace("traced", nil)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=INFO msg="Lease taken" stream=orders group=billing worker=w1 shard=s-1 generation=2 from=w0 reason=free`,
		`level=INFO msg="Lease taken" stream=orders group=billing worker=w1 shard=s-1 generation=2 from=w0 reason=free`,
		`level=INFO msg="Lease taken" stream=orders group=billing worker=w1 shard=s-1 generation=2 from=w0 reason=free`,
		`level=WARN msg="Lease not renewed in time" shard=s-1 error="no renewal for 8s"`,
		`level=ERROR msg="Reads keep failing" stream=orders a=1 shard=s-2 error=boom`,
		`level=DEBUG-4 msg=traced`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
}
