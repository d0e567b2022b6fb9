package kinesis

import (
	"context"
	"log/slog"
	"slices"

	"github.com/ThreeDotsLabs/watermill"
)

// WarnLogger is a watermill.LoggerAdapter with a warning level, which Watermill's interface
// does not have. The driver logs expected trouble that it handles itself, but that an operator
// should see, at WARN: a reader pausing because its lease could not be renewed in time, a
// lease lost to fencing, a lease store or checkpoint write that failed and will be retried.
// With a logger that is not a WarnLogger those lines go to Info, with the field
// "severity": "warn". NewSlogLogger makes one from a *slog.Logger.
type WarnLogger interface {
	watermill.LoggerAdapter
	Warn(msg string, err error, fields watermill.LogFields)
}

// NewSlogLogger is watermill.NewSlogLogger with a WARN level (slog.LevelWarn) for the
// driver's warnings, and its fields in a fixed order: stream, group, worker, shard and
// generation first, the others by name (Watermill's adapter writes them in map order, so the
// same line comes out shuffled each time). A nil logger is slog.Default(), as in Watermill.
func NewSlogLogger(logger *slog.Logger) WarnLogger {
	if logger == nil {
		logger = slog.Default()
	}
	return slogWarnLogger{slog: logger}
}

// slogWarnLogger logs to a *slog.Logger at Watermill's levels (watermill.LevelTrace for
// Trace) and slog.LevelWarn for Warn.
type slogWarnLogger struct {
	slog *slog.Logger
}

var _ WarnLogger = slogWarnLogger{}

// Error logs at slog.LevelError, with err as "error".
func (s slogWarnLogger) Error(msg string, err error, fields watermill.LogFields) {
	s.log(slog.LevelError, msg, err, fields)
}

// Warn logs at slog.LevelWarn, with err as "error" when not nil.
func (s slogWarnLogger) Warn(msg string, err error, fields watermill.LogFields) {
	s.log(slog.LevelWarn, msg, err, fields)
}

// Info logs at slog.LevelInfo.
func (s slogWarnLogger) Info(msg string, fields watermill.LogFields) {
	s.log(slog.LevelInfo, msg, nil, fields)
}

// Debug logs at slog.LevelDebug.
func (s slogWarnLogger) Debug(msg string, fields watermill.LogFields) {
	s.log(slog.LevelDebug, msg, nil, fields)
}

// Trace logs at watermill.LevelTrace.
func (s slogWarnLogger) Trace(msg string, fields watermill.LogFields) {
	s.log(watermill.LevelTrace, msg, nil, fields)
}

// With returns a logger that adds fields to every line.
func (s slogWarnLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return slogWarnLogger{slog: s.slog.With(orderedAttrs(fields)...)}
}

func (s slogWarnLogger) log(level slog.Level, msg string, err error, fields watermill.LogFields) {
	ctx := context.Background()
	if !s.slog.Enabled(ctx, level) {
		return
	}
	args := orderedAttrs(fields)
	if err != nil {
		args = append(args, "error", err)
	}
	s.slog.Log(ctx, level, msg, args...)
}

// leadingFields come first in a line, in this order: what every shard line carries.
var leadingFields = []string{"stream", "group", "worker", "shard", "generation"}

// orderedAttrs is fields as slog arguments: leadingFields first, then the rest by name.
func orderedAttrs(fields watermill.LogFields) []any {
	args := make([]any, 0, 2*len(fields))
	for _, k := range leadingFields {
		if v, ok := fields[k]; ok {
			args = append(args, k, v)
		}
	}
	rest := make([]string, 0, len(fields))
	for k := range fields {
		if !slices.Contains(leadingFields, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		args = append(args, k, fields[k])
	}
	return args
}
