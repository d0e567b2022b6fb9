// Package admin is what an operator runs against a consumer group, beside the driver that runs
// the group (package kinesis), as franz-go's kadm is beside kgo: InspectLeases shows who holds
// each shard, where the group stands and whether its owners are alive; ResetGroup moves the
// group's position (to TRIM_HORIZON, LATEST, a time, or one shard's sequence number), live,
// through the lease protocol. Command kinesis-leases is a command line over both.
//
// What it owns: those two operations and their reports. What it may not touch: the group's
// coordinators and readers, which it never calls; it reads and writes leases only through
// lease.Store calls every store has (List, Create, Take, Checkpoint, Release, RequestHandoff,
// and NotifyMember of lease.Membership), so that a running group obeys it by the rules it
// already follows. It uses package kinesis's public API and, below it, internal/awscall (one
// retry layer, error classes), internal/group (which shards count as finished) and
// internal/wire (checkpoint positions).
package admin

import (
	"reflect"
	"time"
)

// defaultRequestTimeout bounds each call to Kinesis and the lease store, as the driver's
// RequestTimeout does by default.
const defaultRequestTimeout = 10 * time.Second

// setDefault sets a zero field to value.
func setDefault[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

// isNil: v is nil, or an interface holding a nil pointer, map, slice, func or channel (a typed
// nil client would panic at its first call).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
