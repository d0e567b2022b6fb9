// Package shard is one shard's reader: the goroutine that owns a shard's iterator (or its
// SubscribeToShard subscription, with enhanced fan-out), its in-flight window and watermark,
// and, in a consumer group, its lease: renewal, pause, checkpoints, handoff and release.
//
// What it owns: everything in a Reader belongs to the reader's goroutine (Run), except what
// its methods say is safe from other goroutines (Health, MarkLost, RequestHandoff, Stop).
// decide, the choice of what to do next, is a pure function of the reader's view and the
// clock, table-tested without I/O.
//
// How it talks upward: only through what New is given. A Config (read-only, built once by
// pkg/kinesis), Links (the subscription's output channel, the exit channel with its quit
// signal, the subscription's context and the reader count) and a
// Metrics sink. A reader sends each message on Links.Out, its one exit report on Links.Exits
// unless Links.Quit is closed, and closes nothing of its subscription's.
//
// What it may not touch: the coordinator's state (the reader table, the lease listing,
// membership), which is package group's, and the public configuration types, which are
// pkg/kinesis's. It imports awscall, logs, wire and lease, and nothing
// above it: group and pkg/kinesis import it, never the reverse.
package shard
