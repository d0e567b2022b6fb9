// Package wire is what a Kinesis record looks like on the wire and how it turns into what a
// reader delivers: the binary envelope (package envelope), KPL aggregation (package kpl), and
// user records, the unit a reader delivers and checkpoints (a Kinesis record, or one user
// record of a KPL aggregate, with its position "sequence:sub").
//
// It is pure: no goroutine, no clock, no I/O. It may import only the AWS SDK's types and its
// own subpackages; every layer above may import it.
package wire
