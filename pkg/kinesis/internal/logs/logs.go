// Package logs holds the one logging rule the layers below pkg/kinesis share: an expected
// fencing or retry event is a WARN, on a logger that has that level, else an INFO marked as a
// warning. It owns no state and imports nothing of this module.
package logs

import "github.com/ThreeDotsLabs/watermill"

// Warner is a logger with a WARN level. pkg/kinesis.WarnLogger has the same method set, so a
// logger the application gives as one is one here too.
type Warner interface {
	watermill.LoggerAdapter
	Warn(msg string, err error, fields watermill.LogFields)
}

// Warn logs at WARN if the logger has that level, else at INFO with "severity": "warn".
func Warn(l watermill.LoggerAdapter, msg string, err error, fields watermill.LogFields) {
	if w, ok := l.(Warner); ok {
		w.Warn(msg, err, fields)
		return
	}
	fields = fields.Copy().Add(watermill.LogFields{"severity": "warn"})
	if err != nil {
		fields["err"] = err
	}
	l.Info(msg, fields)
}
