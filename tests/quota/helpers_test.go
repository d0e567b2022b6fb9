// Package quota_test runs the driver against memlog's quota mode (memlog.Config.Quotas: AWS's
// documented Kinesis rates), on the fake time of testing/synctest bubbles, so a minute of
// traffic takes seconds: several consumer groups sharing one shard's read quota, and a fleet of
// instances starting at once against the control plane's rates. Figures are logged (t.Logf);
// only behaviour is asserted: every record delivered, in per-key order, no error to the
// application, bounded counts.
package quota_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/watermill-kinesis/watermill-kinesis/pkg/kinesis"
)

// logs counts the driver's log lines by level and message, keeping an example of each, so a
// test can assert that nothing reached ERROR (an error the application sees in its logs) and
// show what was logged. QUOTA_TRACE=1 prints every line with its fake time.
type logs struct {
	mu     sync.Mutex
	start  time.Time
	counts map[string]int    // "LEVEL msg"
	first  map[string]string // an example of each, with its fields
}

func newLogs() *logs {
	return &logs{start: time.Now(), counts: map[string]int{}, first: map[string]string{}}
}

// logger is one instance's logger, its fields added to every line.
func (l *logs) logger(fields watermill.LogFields) *logger { return &logger{l: l, fields: fields} }

func (l *logs) add(level, msg string, err error, f watermill.LogFields) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := level + " " + msg
	if l.counts[k] == 0 {
		l.first[k] = fmt.Sprintf("%.2fs %v err=%v", time.Since(l.start).Seconds(), f, err)
	}
	l.counts[k]++
	if os.Getenv("QUOTA_TRACE") != "" {
		fmt.Printf("%8.3fs %s %s %v err=%v\n", time.Since(l.start).Seconds(), level, msg, f, err)
	}
}

// at lists the lines logged at level (or above, for "WARN": WARN and ERROR), with counts.
func (l *logs) at(levels ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, n := range l.counts {
		for _, lv := range levels {
			if strings.HasPrefix(k, lv+" ") {
				out = append(out, fmt.Sprintf("%d× %s (first: %s)", n, k, l.first[k]))
			}
		}
	}
	sort.Strings(out)
	return out
}

// count is how many lines of level start with prefix.
func (l *logs) count(level, prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, c := range l.counts {
		if strings.HasPrefix(k, level+" "+prefix) {
			n += c
		}
	}
	return n
}

type logger struct {
	l      *logs
	fields watermill.LogFields
}

var _ kinesis.WarnLogger = (*logger)(nil)

func (g *logger) Error(msg string, err error, f watermill.LogFields) {
	g.l.add("ERROR", msg, err, g.fields.Add(f))
}
func (g *logger) Warn(msg string, err error, f watermill.LogFields) {
	g.l.add("WARN", msg, err, g.fields.Add(f))
}
func (g *logger) Info(msg string, f watermill.LogFields) { g.l.add("INFO", msg, nil, g.fields.Add(f)) }
func (g *logger) Debug(msg string, f watermill.LogFields) {
	g.l.add("DEBUG", msg, nil, g.fields.Add(f))
}
func (g *logger) Trace(string, watermill.LogFields) {}
func (g *logger) With(f watermill.LogFields) watermill.LoggerAdapter {
	return &logger{l: g.l, fields: g.fields.Add(f)}
}

// percentile is the p-th percentile (0..100) of ds, which it sorts.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i]
}
