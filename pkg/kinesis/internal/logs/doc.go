// Package logs holds the one logging rule the layers below pkg/kinesis share: an expected
// fencing or retry event is a WARN, on a logger that has that level, else an INFO marked as a
// warning. It owns no state and imports nothing of this module.
package logs
