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
