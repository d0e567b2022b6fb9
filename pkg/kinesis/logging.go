package kinesis

import (
	"context"
	"log/slog"

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

// warn logs at WARN if the logger has that level, else at INFO marked as a warning.
func warn(l watermill.LoggerAdapter, msg string, err error, fields watermill.LogFields) {
	if w, ok := l.(WarnLogger); ok {
		w.Warn(msg, err, fields)
		return
	}
	fields = fields.Copy().Add(watermill.LogFields{"severity": "warn"})
	if err != nil {
		fields["err"] = err
	}
	l.Info(msg, fields)
}

// NewSlogLogger is watermill.NewSlogLogger with a WARN level (slog.LevelWarn) for the
// driver's warnings. A nil logger is slog.Default(), as in Watermill.
func NewSlogLogger(logger *slog.Logger) WarnLogger {
	if logger == nil {
		logger = slog.Default()
	}
	return slogWarnLogger{LoggerAdapter: watermill.NewSlogLogger(logger), slog: logger}
}

// slogWarnLogger adds Warn to Watermill's slog adapter; With keeps both in step.
type slogWarnLogger struct {
	watermill.LoggerAdapter
	slog *slog.Logger
}

var _ WarnLogger = slogWarnLogger{}

// Warn logs at slog.LevelWarn, with the fields as attributes and err as "error".
func (s slogWarnLogger) Warn(msg string, err error, fields watermill.LogFields) {
	args := make([]any, 0, 2*len(fields)+2)
	for k, v := range fields {
		args = append(args, k, v)
	}
	if err != nil {
		args = append(args, "error", err)
	}
	s.slog.Log(context.Background(), slog.LevelWarn, msg, args...)
}

// With returns a logger that adds fields to every line, Warn's included.
func (s slogWarnLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	args := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		args = append(args, k, v)
	}
	return slogWarnLogger{LoggerAdapter: s.LoggerAdapter.With(fields), slog: s.slog.With(args...)}
}
